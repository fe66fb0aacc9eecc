//! `ItemFastSlowRateLimiter`: a few quick retries, then slow ones.

use super::failures::FailureCounts;
use super::RateLimiter;
use std::fmt;
use std::hash::Hash;
use std::time::Duration;

/// Retries an item quickly a few times, then slowly (client-go's `ItemFastSlowRateLimiter`).
///
/// [`when`](RateLimiter::when) counts the failure first, then returns `fast` while the item's count
/// is at most `max_fast_attempts`, and `slow` after that. [`forget`](RateLimiter::forget) drops the
/// item's entry; [`num_requeues`](RateLimiter::num_requeues) is the failure count.
///
/// # Examples
/// ```
/// use kcache_workqueue::{ItemFastSlowRateLimiter, RateLimiter};
/// use std::time::Duration;
///
/// let (fast, slow) = (Duration::from_millis(5), Duration::from_secs(10));
/// let limiter = ItemFastSlowRateLimiter::new(fast, slow, 2);
/// assert_eq!(limiter.when(&"job"), fast);
/// assert_eq!(limiter.when(&"job"), fast);
/// assert_eq!(limiter.when(&"job"), slow);
/// assert_eq!(limiter.num_requeues(&"job"), 3);
/// ```
#[doc(alias = "TypedItemFastSlowRateLimiter")]
pub struct ItemFastSlowRateLimiter<T> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: usize,
    failures: FailureCounts<T>,
}

impl<T: Clone + Eq + Hash> ItemFastSlowRateLimiter<T> {
    /// A limiter that waits `fast` for an item's first `max_fast_attempts` retries, then `slow`.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: usize) -> Self {
        Self {
            fast,
            slow,
            max_fast_attempts,
            failures: FailureCounts::new(),
        }
    }

    /// How many items have a failure history (were retried and not forgotten since).
    pub fn tracked_items(&self) -> usize {
        self.failures.len()
    }
}

impl<T: Clone + Eq + Hash + Send> RateLimiter<T> for ItemFastSlowRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let count = self.failures.record(item).saturating_add(1);
        if count <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }

    fn forget(&self, item: &T) {
        self.failures.forget(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.failures.get(item)
    }
}

impl<T> fmt::Debug for ItemFastSlowRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemFastSlowRateLimiter")
            .field("fast", &self.fast)
            .field("slow", &self.slow)
            .field("max_fast_attempts", &self.max_fast_attempts)
            .finish_non_exhaustive()
    }
}
