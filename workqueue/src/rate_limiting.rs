//! `RateLimitingQueue`: a delaying queue that retries items through a rate limiter.

use crate::config::QueueConfig;
use crate::delaying::DelayingQueue;
use crate::rate_limiter::RateLimiter;
use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::sync::Arc;

/// A [`DelayingQueue`] whose failed items are retried after a delay chosen by a [`RateLimiter`]
/// (client-go's `RateLimitingInterface`). It derefs to [`DelayingQueue`] (and on to
/// [`Queue`](crate::Queue)).
///
/// The canonical worker loop: `get`, process, then on success [`forget`](RateLimitingQueue::forget)
/// (clears the item's failure history) and on failure
/// [`add_rate_limited`](RateLimitingQueue::add_rate_limited); in both cases `done`.
///
/// # Examples
/// ```
/// use kcache_workqueue::{default_controller_rate_limiter, RateLimitingQueue};
///
/// let queue = RateLimitingQueue::new(default_controller_rate_limiter());
/// queue.add("default/web".to_string());
/// let key = queue.get().unwrap();
/// let failed = true;
/// if failed {
///     queue.add_rate_limited(key.clone()); // back in 5 ms, then 10 ms, 20 ms, …
/// } else {
///     queue.forget(&key);
/// }
/// queue.done(&key)?;
/// assert_eq!(queue.num_requeues(&key), 1);
/// # Ok::<(), kcache_workqueue::NotProcessing>(())
/// ```
pub struct RateLimitingQueue<T> {
    delaying: DelayingQueue<T>,
    limiter: Arc<dyn RateLimiter<T>>,
}

impl<T: Clone + Eq + Hash + Send + 'static> RateLimitingQueue<T> {
    /// A rate-limiting queue with no name, no metrics and the system clock.
    pub fn new(limiter: impl RateLimiter<T> + 'static) -> Self {
        Self::with_config(limiter, QueueConfig::new())
    }

    /// A rate-limiting queue built from `config`. The limiter keeps its own clock: give it the same
    /// fake clock in tests.
    pub fn with_config(limiter: impl RateLimiter<T> + 'static, config: QueueConfig) -> Self {
        Self {
            delaying: DelayingQueue::with_config(config),
            limiter: Arc::new(limiter),
        }
    }

    /// Adds `item` after the delay the limiter gives (which records the retry). Returns `false`
    /// only when refused because the queue is shutting down (the retry is still recorded).
    pub fn add_rate_limited(&self, item: T) -> bool {
        let delay = self.limiter.when(&item);
        self.delaying.add_after(item, delay)
    }

    /// Clears `item`'s retry history in the limiter. It does not touch the queue: the item still
    /// needs its `done`.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` was retried since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }

    /// The delaying queue under this one.
    pub fn delaying_queue(&self) -> &DelayingQueue<T> {
        &self.delaying
    }
}

impl<T> Deref for RateLimitingQueue<T> {
    type Target = DelayingQueue<T>;
    fn deref(&self) -> &DelayingQueue<T> {
        &self.delaying
    }
}

impl<T> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            delaying: self.delaying.clone(),
            limiter: self.limiter.clone(),
        }
    }
}

impl<T> fmt::Debug for RateLimitingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingQueue").finish_non_exhaustive()
    }
}
