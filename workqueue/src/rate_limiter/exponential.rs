//! Placeholder: being written.
use super::RateLimiter;
use std::marker::PhantomData;
use std::time::Duration;
/// Exponential per-item limiter (being written).
#[derive(Debug)]
pub struct ItemExponentialFailureRateLimiter<T> { base: Duration, _t: PhantomData<fn(T)> }
impl<T> ItemExponentialFailureRateLimiter<T> {
    /// New.
    pub fn new(base: Duration, _max: Duration) -> Self { Self { base, _t: PhantomData } }
}
impl<T> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, _: &T) -> Duration { self.base }
    fn forget(&self, _: &T) {}
    fn num_requeues(&self, _: &T) -> usize { 0 }
}
