//! `FloorLimiter`: one locked map of failure counts.

use kcache_workqueue::RateLimiter;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::Duration;

type Map = HashMap<u64, u32, foldhash::fast::FixedState>;

/// Exponential per-item backoff over `u64` items, `base * 2^failures` capped at `max`, as cheaply
/// as a shared limiter can keep it: a `parking_lot` `Mutex` around a foldhash `HashMap<u64, u32>`.
///
/// # Examples
/// ```
/// use kcache_benches::floor::FloorLimiter;
/// use kcache_workqueue::RateLimiter;
/// use std::time::Duration;
///
/// let l = FloorLimiter::new(Duration::from_millis(1), Duration::from_millis(3));
/// assert_eq!(l.when(&7), Duration::from_millis(1));
/// assert_eq!(l.when(&7), Duration::from_millis(2));
/// assert_eq!(l.when(&7), Duration::from_millis(3));
/// l.forget(&7);
/// assert_eq!((l.num_requeues(&7), l.tracked()), (0, 0));
/// ```
#[derive(Debug)]
pub struct FloorLimiter {
    failures: Mutex<Map>,
    base: Duration,
    max: Duration,
}

impl FloorLimiter {
    /// Backoff from `base` doubling up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            failures: Mutex::new(Map::default()),
            base,
            max,
        }
    }

    /// How many items have a failure history.
    pub fn tracked(&self) -> usize {
        self.failures.lock().len()
    }
}

impl RateLimiter<u64> for FloorLimiter {
    fn when(&self, item: &u64) -> Duration {
        let exp = {
            let mut failures = self.failures.lock();
            let n = failures.entry(*item).or_insert(0);
            *n += 1;
            *n - 1
        };
        match 1u32.checked_shl(exp) {
            Some(factor) => self.base.saturating_mul(factor).min(self.max),
            None => self.max,
        }
    }

    fn forget(&self, item: &u64) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &u64) -> usize {
        self.failures.lock().get(item).map_or(0, |&n| n as usize)
    }
}
