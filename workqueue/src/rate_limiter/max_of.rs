//! `MaxOfRateLimiter`: the strictest of several limiters.

use super::RateLimiter;
use std::fmt;
use std::time::Duration;

/// Combines limiters by taking the longest delay (client-go's `MaxOfRateLimiter`).
///
/// [`when`](RateLimiter::when) asks **every** limiter, so each records the retry (a per-item
/// failure counted, a bucket token taken), and returns the largest delay;
/// [`num_requeues`](RateLimiter::num_requeues) is the largest count;
/// [`forget`](RateLimiter::forget) goes to every limiter. With no limiters the delay is zero.
///
/// # Examples
/// Per-item backoff that never retries faster than an overall budget allows, as
/// [`default_controller_rate_limiter`](crate::default_controller_rate_limiter) builds it:
/// ```
/// use kcache_workqueue::{BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, RateLimiter};
/// use std::time::Duration;
///
/// let limiter: MaxOfRateLimiter<&str> = MaxOfRateLimiter::new(vec![
///     Box::new(ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(60))),
///     Box::new(BucketRateLimiter::new(10.0, 100)),
/// ]);
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5)); // the bucket still has tokens
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(10));
/// ```
#[doc(alias = "TypedMaxOfRateLimiter")]
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// A limiter giving the longest delay of `limiters`.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self { limiters }
    }

    /// Adds `limiter` to the ones asked.
    pub fn with(mut self, limiter: impl RateLimiter<T> + 'static) -> Self {
        self.limiters.push(Box::new(limiter));
        self
    }

    /// How many limiters are combined.
    pub fn len(&self) -> usize {
        self.limiters.len()
    }

    /// Whether no limiter is combined (every delay is then zero).
    pub fn is_empty(&self) -> bool {
        self.limiters.is_empty()
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        // Not `Iterator::max` over a lazy map alone: every limiter must be asked, and `fold` over
        // all of them makes that explicit.
        self.limiters
            .iter()
            .fold(Duration::ZERO, |longest, l| longest.max(l.when(item)))
    }

    fn forget(&self, item: &T) {
        for l in &self.limiters {
            l.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

impl<T> fmt::Debug for MaxOfRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaxOfRateLimiter")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}
