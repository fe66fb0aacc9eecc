//! Placeholder: being written.
use super::RateLimiter;
use kcache_core::Clock;
use std::sync::Arc;
use std::time::Duration;
/// Bucket limiter (being written).
#[derive(Debug)]
pub struct BucketRateLimiter;
impl BucketRateLimiter {
    /// New.
    pub fn with_clock(_qps: u32, _burst: u32, _clock: Arc<dyn Clock>) -> Self { Self }
}
impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _: &T) -> Duration { Duration::ZERO }
    fn forget(&self, _: &T) {}
    fn num_requeues(&self, _: &T) -> usize { 0 }
}
