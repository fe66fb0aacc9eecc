//! Work queues for controllers and job systems: client-go's `util/workqueue` in Rust.
//!
//! Pick the queue by what your workers need:
//!
//! - [`Queue`]: a deduplicating FIFO. An item is never handed to two workers at once; an item added
//!   while queued is not queued twice; an item added while being processed is queued again once,
//!   at [`done`](Queue::done).
//! - [`DelayingQueue`]: a [`Queue`] plus [`add_after`](DelayingQueue::add_after) /
//!   [`add_at`](DelayingQueue::add_at), with one timer thread per queue.
//! - [`RateLimitingQueue`]: a [`DelayingQueue`] plus
//!   [`add_rate_limited`](RateLimitingQueue::add_rate_limited), [`forget`](RateLimitingQueue::forget)
//!   and [`num_requeues`](RateLimitingQueue::num_requeues), driven by a [`RateLimiter`]:
//!   [`ItemExponentialFailureRateLimiter`], [`ItemFastSlowRateLimiter`], [`BucketRateLimiter`],
//!   [`MaxOfRateLimiter`], [`WithMaxWaitRateLimiter`], and client-go's
//!   [`default_controller_rate_limiter`].
//!
//! Workers block in [`get`](Queue::get) or await [`get_async`](Queue::get_async). Time goes through
//! a [`Clock`](kcache_core::Clock) given in the [`QueueConfig`], so tests drive delays with a
//! [`FakeClock`](kcache_core::FakeClock) instead of sleeping. Metrics use client-go's names
//! (`workqueue_depth`, `workqueue_adds_total`, …) through a [`MetricsProvider`]; feature
//! `prometheus` adds [`PrometheusMetricsProvider`](metrics::PrometheusMetricsProvider).
//!
//! Where kcache differs from client-go (each covered by a test): an item waiting for its delay and
//! added now is processed once, not twice; [`shut_down_with_drain`](Queue::shut_down_with_drain)
//! waits for queued as well as in-flight items; [`done`](Queue::done) of an item that is not being
//! processed is rejected ([`NotProcessing`]) instead of queueing a duplicate; the bucket limiter's
//! delay is capped.
//!
//! # Examples
//! Two workers retry failing jobs through the default controller rate limiter:
//! ```
//! use kcache_workqueue::{default_controller_rate_limiter, RateLimitingQueue};
//! use std::collections::HashMap;
//! use std::sync::{Arc, Mutex};
//!
//! let queue = RateLimitingQueue::new(default_controller_rate_limiter());
//! let attempts = Arc::new(Mutex::new(HashMap::<u32, u32>::new()));
//! for job in 0..10 {
//!     queue.add(job);
//! }
//! let workers: Vec<_> = (0..2)
//!     .map(|_| {
//!         let (queue, attempts) = (queue.clone(), attempts.clone());
//!         std::thread::spawn(move || {
//!             while let Some(job) = queue.get() {
//!                 let tries = {
//!                     let mut a = attempts.lock().unwrap();
//!                     let n = a.entry(job).or_default();
//!                     *n += 1;
//!                     *n
//!                 };
//!                 if job % 3 == 0 && tries < 3 {
//!                     queue.add_rate_limited(job); // fails twice, then succeeds
//!                 } else {
//!                     queue.forget(&job);
//!                 }
//!                 queue.done(&job).unwrap();
//!                 if attempts.lock().unwrap().values().filter(|&&n| n >= 1).count() == 10
//!                     && queue.len() == 0 && queue.waiting_len() == 0 && queue.in_flight() == 0
//!                 {
//!                     queue.shut_down();
//!                 }
//!             }
//!         })
//!     })
//!     .collect();
//! for w in workers {
//!     w.join().unwrap();
//! }
//! let attempts = attempts.lock().unwrap();
//! assert_eq!(attempts[&3], 3);
//! assert_eq!(attempts[&4], 1);
//! ```

mod background;
mod config;
mod delaying;
mod error;
#[doc(hidden)]
pub mod fuzz;
pub mod metrics;
mod queue;
mod rate_limiter;
mod rate_limiting;
mod signal;
mod sync;

pub use config::QueueConfig;
pub use delaying::DelayingQueue;
pub use error::NotProcessing;
pub use metrics::{MetricsProvider, NoopMetricsProvider};
pub use queue::{GetAsync, Queue};
pub use rate_limiter::{
    default_controller_rate_limiter, default_controller_rate_limiter_with_clock,
    default_item_based_rate_limiter, BucketRateLimiter, ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter, MaxOfRateLimiter, RateLimiter, WithMaxWaitRateLimiter,
};
pub use rate_limiting::RateLimitingQueue;
