//! `WithMaxWaitRateLimiter`: caps another limiter's delay.

use super::RateLimiter;
use std::fmt;
use std::time::Duration;

/// Caps the delay of another limiter (client-go's `WithMaxWaitRateLimiter`).
///
/// [`when`](RateLimiter::when) asks the wrapped limiter (which records the retry as usual) and
/// returns at most `max_delay`; [`forget`](RateLimiter::forget) and
/// [`num_requeues`](RateLimiter::num_requeues) go to the wrapped limiter.
///
/// # Examples
/// ```
/// use kcache_workqueue::{ItemExponentialFailureRateLimiter, RateLimiter, WithMaxWaitRateLimiter};
/// use std::time::Duration;
///
/// let inner = ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(1000));
/// let limiter = WithMaxWaitRateLimiter::new(inner, Duration::from_secs(3));
/// let secs: Vec<_> = (0..4).map(|_| limiter.when(&"x").as_secs()).collect();
/// assert_eq!(secs, [1, 2, 3, 3]);
/// assert_eq!(limiter.num_requeues(&"x"), 4);
/// ```
#[doc(alias = "TypedWithMaxWaitRateLimiter")]
pub struct WithMaxWaitRateLimiter<T> {
    limiter: Box<dyn RateLimiter<T>>,
    max_delay: Duration,
}

impl<T> WithMaxWaitRateLimiter<T> {
    /// Wraps `limiter`, capping its delays at `max_delay`.
    pub fn new(limiter: impl RateLimiter<T> + 'static, max_delay: Duration) -> Self {
        Self {
            limiter: Box::new(limiter),
            max_delay,
        }
    }

    /// The cap.
    pub fn max_delay(&self) -> Duration {
        self.max_delay
    }
}

impl<T> RateLimiter<T> for WithMaxWaitRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiter.when(item).min(self.max_delay)
    }

    fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }
}

impl<T> fmt::Debug for WithMaxWaitRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithMaxWaitRateLimiter")
            .field("max_delay", &self.max_delay)
            .finish_non_exhaustive()
    }
}
