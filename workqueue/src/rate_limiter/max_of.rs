//! Placeholder: being written.
use super::RateLimiter;
use std::time::Duration;
/// Max-of limiter (being written).
pub struct MaxOfRateLimiter<T> { limiters: Vec<Box<dyn RateLimiter<T>>> }
impl<T> MaxOfRateLimiter<T> {
    /// New.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self { Self { limiters } }
}
impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration { self.limiters.iter().map(|l| l.when(item)).max().unwrap_or_default() }
    fn forget(&self, item: &T) { self.limiters.iter().for_each(|l| l.forget(item)) }
    fn num_requeues(&self, item: &T) -> usize { self.limiters.iter().map(|l| l.num_requeues(item)).max().unwrap_or_default() }
}
