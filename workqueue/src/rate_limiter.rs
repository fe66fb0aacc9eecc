//! Rate limiters: how long an item waits before it is retried.

mod bucket;
mod exponential;
mod failures;
mod fast_slow;
mod max_of;
mod with_max_wait;

pub use bucket::BucketRateLimiter;
pub use exponential::ItemExponentialFailureRateLimiter;
pub use fast_slow::ItemFastSlowRateLimiter;
pub use max_of::MaxOfRateLimiter;
pub use with_max_wait::WithMaxWaitRateLimiter;

use kcache_core::Clock;
use std::sync::Arc;
use std::time::Duration;

/// Decides how long an item waits before it is retried (client-go's `TypedRateLimiter`).
///
/// [`when`](RateLimiter::when) is asked once per retry and records it (a failure counted, a token
/// taken) before the wait; [`forget`](RateLimiter::forget) clears the item's history once it
/// succeeded; [`num_requeues`](RateLimiter::num_requeues) reports how often it was retried.
pub trait RateLimiter<T>: Send + Sync {
    /// The delay before the next retry of `item`; records the retry.
    fn when(&self, item: &T) -> Duration;
    /// Forgets `item`'s history (no-op for an unknown item).
    fn forget(&self, item: &T);
    /// How many times `item` was retried since it was last forgotten.
    fn num_requeues(&self, item: &T) -> usize;
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Arc<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item)
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Box<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item)
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

/// client-go's `DefaultTypedItemBasedRateLimiter`: exponential per item, 1 ms doubling to 1000 s.
pub fn default_item_based_rate_limiter<T>() -> ItemExponentialFailureRateLimiter<T>
where
    T: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
{
    ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1000))
}

/// client-go's `DefaultTypedControllerRateLimiter`: the maximum of an exponential per-item limiter
/// (5 ms doubling to 1000 s) and an overall token bucket (10 retries/s, burst 100, whose delay kcache
/// caps at 1000 s), on the system clock.
pub fn default_controller_rate_limiter<T>() -> MaxOfRateLimiter<T>
where
    T: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
{
    default_controller_rate_limiter_with_clock(Arc::new(kcache_core::SystemClock))
}

/// [`default_controller_rate_limiter`] on `clock` (a `FakeClock` in tests).
pub fn default_controller_rate_limiter_with_clock<T>(clock: Arc<dyn Clock>) -> MaxOfRateLimiter<T>
where
    T: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
{
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::with_clock(10.0, 100, clock)),
    ])
}
