//! Placeholder: being written.
/// Fast/slow limiter (being written).
#[derive(Debug)]
pub struct ItemFastSlowRateLimiter;
