//! `NaiveLimiter`: client-go's `ItemExponentialFailureRateLimiter`.

use kcache_workqueue::RateLimiter;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Exponential per-item backoff, `base * 2^failures` capped at `max`, as client-go computes it: a
/// std `Mutex` around a std `HashMap` of failure counts.
///
/// # Examples
/// ```
/// use kcache_benches::naive::NaiveLimiter;
/// use kcache_workqueue::RateLimiter;
/// use std::time::Duration;
///
/// let l = NaiveLimiter::new(Duration::from_millis(1), Duration::from_millis(3));
/// assert_eq!(l.when(&7), Duration::from_millis(1));
/// assert_eq!(l.when(&7), Duration::from_millis(2));
/// assert_eq!(l.when(&7), Duration::from_millis(3));
/// assert_eq!(l.num_requeues(&7), 3);
/// l.forget(&7);
/// assert_eq!(l.num_requeues(&7), 0);
/// ```
#[derive(Debug)]
pub struct NaiveLimiter<T> {
    failures: Mutex<HashMap<T, u32>>,
    base: Duration,
    max: Duration,
}

impl<T> NaiveLimiter<T> {
    /// Backoff from `base` doubling up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            failures: Mutex::new(HashMap::new()),
            base,
            max,
        }
    }

    /// How many items have a failure history.
    pub fn tracked(&self) -> usize {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl<T: Clone + Eq + Hash + Send> RateLimiter<T> for NaiveLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let n = failures.entry(item.clone()).or_insert(0);
        let exp = *n;
        *n += 1;
        // client-go: backoff := float64(base.Nanoseconds()) * math.Pow(2, float64(exp)).
        let backoff = self.base.as_nanos() as f64 * 2f64.powi(exp as i32);
        if backoff > self.max.as_nanos() as f64 {
            return self.max;
        }
        Duration::from_nanos(backoff as u64)
    }

    fn forget(&self, item: &T) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        let failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        failures.get(item).map_or(0, |&n| n as usize)
    }
}
