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
//! - [`PriorityQueue`]: a rate-limiting queue whose ready items go by priority (higher first,
//!   first-come within a priority), where an item moves up when re-added with a higher priority
//!   and no item starves: one hand-off in eight goes to the item ready the longest.
//!
//! Workers block in [`get`](Queue::get) or await [`get_async`](Queue::get_async). Time goes through
//! a [`Clock`](kcache_core::Clock) given in the [`QueueConfig`], so tests drive delays with a
//! [`FakeClock`](kcache_core::FakeClock) instead of sleeping. Metrics use client-go's names
//! (`workqueue_depth`, `workqueue_adds_total`, …) through a [`MetricsProvider`]; feature
//! `prometheus` adds `metrics::PrometheusMetricsProvider`, on the `prometheus-client` crate.
//!
//! Where kcache differs from client-go (each covered by a test): an item waiting for its delay and
//! added now is processed once, not twice; [`shut_down_with_drain`](Queue::shut_down_with_drain)
//! waits for queued as well as in-flight items; [`done`](Queue::done) of an item that is not being
//! processed is rejected ([`NotProcessing`]) instead of queueing a duplicate; the bucket limiter's
//! delay is capped. All of kcache's differences from client-go are on one page,
//! [`kcache_core::docs::client_go_differences`]; the name map is
//! [`kcache_core::docs::client_go_names`].
//!
//! # Examples
//! Two workers retry failing jobs through the default controller rate limiter:
//! ```
//! use kcache_workqueue::{default_controller_rate_limiter, RateLimitingQueue};
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::sync::Arc;
//!
//! let queue = RateLimitingQueue::new(default_controller_rate_limiter());
//! for job in 0..10u32 {
//!     queue.add(job);
//! }
//! let finished = Arc::new(AtomicU32::new(0));
//! let workers: Vec<_> = (0..2)
//!     .map(|_| {
//!         let (queue, finished) = (queue.clone(), finished.clone());
//!         std::thread::spawn(move || {
//!             while let Some(job) = queue.get() {
//!                 // Jobs divisible by 3 fail twice before they succeed.
//!                 if job % 3 == 0 && queue.num_requeues(&job) < 2 {
//!                     queue.add_rate_limited(job);
//!                 } else {
//!                     queue.forget(&job);
//!                     if finished.fetch_add(1, Ordering::SeqCst) + 1 == 10 {
//!                         queue.shut_down();
//!                     }
//!                 }
//!                 queue.done(&job).unwrap();
//!             }
//!         })
//!     })
//!     .collect();
//! for w in workers {
//!     w.join().unwrap();
//! }
//! assert_eq!(finished.load(Ordering::SeqCst), 10);
//! ```

mod background;
mod config;
mod delaying;
mod error;
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub mod fuzz;
pub mod metrics;
mod priority;
mod queue;
mod rate_limiter;
mod rate_limiting;
mod signal;
mod sync;

pub use config::QueueConfig;
pub use delaying::DelayingQueue;
pub use error::NotProcessing;
pub use metrics::{MetricsProvider, NoopMetricsProvider};
pub use priority::PriorityQueue;
pub use queue::{GetAsync, Queue};
pub use rate_limiter::{
    default_controller_rate_limiter, default_controller_rate_limiter_with_clock,
    default_item_based_rate_limiter, BucketRateLimiter, ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter, MaxOfRateLimiter, RateLimiter, WithMaxWaitRateLimiter,
};
pub use rate_limiting::RateLimitingQueue;

/// This crate's README.md, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
