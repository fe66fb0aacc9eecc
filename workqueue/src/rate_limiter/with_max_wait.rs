//! Placeholder: being written.
/// Max-wait limiter (being written).
#[derive(Debug)]
pub struct WithMaxWaitRateLimiter;
