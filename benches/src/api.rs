//! The small traits the workloads are written against, and their kcache implementations.
//!
//! Workloads are generic over these traits (static dispatch), so kcache, the [`naive`](crate::naive)
//! baselines and the [`floor`](crate::floor) run the very same driver code. Rate limiters use
//! kcache's own [`RateLimiter`] trait.

use kcache_workqueue::{DelayingQueue, PriorityQueue, Queue, RateLimiter, RateLimitingQueue};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

/// A work queue as the workloads use it: cheap to clone (clones share one queue).
pub trait WorkQueue<T>: Clone + Send + Sync + 'static {
    /// Adds `item` (deduplicated or not, depending on the implementation).
    fn add(&self, item: T);
    /// Blocks for the next item; `None` once shut down and drained.
    fn get(&self) -> Option<T>;
    /// Marks `item` processed; `false` if the queue rejected it (a bug in the workload or queue).
    fn done(&self, item: &T) -> bool;
    /// Stops the queue: queued items are still handed out, then `get` returns `None`.
    fn shut_down(&self);
}

/// A [`WorkQueue`] whose adds carry a priority (higher first); a queue without priorities
/// ignores it.
pub trait PriorityWorkQueue<T>: WorkQueue<T> {
    /// Adds `item` at `priority`.
    fn add_with_priority(&self, item: T, priority: i32);
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<T> for PriorityQueue<T> {
    fn add(&self, item: T) {
        Queue::add(self, item);
    }
    fn get(&self) -> Option<T> {
        Queue::get(self)
    }
    fn done(&self, item: &T) -> bool {
        Queue::done(self, item).is_ok()
    }
    fn shut_down(&self) {
        Queue::shut_down(self);
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> PriorityWorkQueue<T> for PriorityQueue<T> {
    fn add_with_priority(&self, item: T, priority: i32) {
        PriorityQueue::add_with_priority(self, item, priority);
    }
}

/// The plain queue: every item at one priority.
impl<T: Clone + Eq + Hash + Send + Sync + 'static> PriorityWorkQueue<T> for Queue<T> {
    fn add_with_priority(&self, item: T, _: i32) {
        Queue::add(self, item);
    }
}

/// A [`WorkQueue`] with delayed adds.
pub trait DelayQueue<T>: WorkQueue<T> {
    /// Adds `item` once `delay` has passed.
    fn add_after(&self, item: T, delay: Duration);
}

/// A [`DelayQueue`] with a rate limiter.
pub trait RetryQueue<T>: DelayQueue<T> {
    /// Adds `item` after the delay its limiter gives.
    fn add_rate_limited(&self, item: T);
    /// Clears `item`'s history in the limiter.
    fn forget(&self, item: &T);
    /// How often `item` was retried since it was last forgotten.
    fn num_requeues(&self, item: &T) -> usize;
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<T> for Queue<T> {
    fn add(&self, item: T) {
        Queue::add(self, item);
    }
    fn get(&self) -> Option<T> {
        Queue::get(self)
    }
    fn done(&self, item: &T) -> bool {
        Queue::done(self, item).is_ok()
    }
    fn shut_down(&self) {
        Queue::shut_down(self);
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<T> for DelayingQueue<T> {
    fn add(&self, item: T) {
        Queue::add(self, item);
    }
    fn get(&self) -> Option<T> {
        Queue::get(self)
    }
    fn done(&self, item: &T) -> bool {
        Queue::done(self, item).is_ok()
    }
    fn shut_down(&self) {
        Queue::shut_down(self);
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> DelayQueue<T> for DelayingQueue<T> {
    fn add_after(&self, item: T, delay: Duration) {
        DelayingQueue::add_after(self, item, delay);
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<T> for RateLimitingQueue<T> {
    fn add(&self, item: T) {
        Queue::add(self, item);
    }
    fn get(&self) -> Option<T> {
        Queue::get(self)
    }
    fn done(&self, item: &T) -> bool {
        Queue::done(self, item).is_ok()
    }
    fn shut_down(&self) {
        Queue::shut_down(self);
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> DelayQueue<T> for RateLimitingQueue<T> {
    fn add_after(&self, item: T, delay: Duration) {
        DelayingQueue::add_after(self, item, delay);
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> RetryQueue<T> for RateLimitingQueue<T> {
    fn add_rate_limited(&self, item: T) {
        RateLimitingQueue::add_rate_limited(self, item);
    }
    fn forget(&self, item: &T) {
        RateLimitingQueue::forget(self, item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        RateLimitingQueue::num_requeues(self, item)
    }
}

/// Any [`DelayQueue`] plus any [`RateLimiter`]: how the baselines make a [`RetryQueue`], the way
/// client-go composes its rate-limiting queue.
#[derive(Debug)]
pub struct Retrying<Q, L> {
    queue: Q,
    limiter: Arc<L>,
}

impl<Q, L> Retrying<Q, L> {
    /// `queue` retrying through `limiter`.
    pub fn new(queue: Q, limiter: L) -> Self {
        Self {
            queue,
            limiter: Arc::new(limiter),
        }
    }
}

impl<Q: Clone, L> Clone for Retrying<Q, L> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            limiter: self.limiter.clone(),
        }
    }
}

impl<T, Q: WorkQueue<T>, L: RateLimiter<T> + 'static> WorkQueue<T> for Retrying<Q, L> {
    fn add(&self, item: T) {
        self.queue.add(item);
    }
    fn get(&self) -> Option<T> {
        self.queue.get()
    }
    fn done(&self, item: &T) -> bool {
        self.queue.done(item)
    }
    fn shut_down(&self) {
        self.queue.shut_down();
    }
}

impl<T, Q: DelayQueue<T>, L: RateLimiter<T> + 'static> DelayQueue<T> for Retrying<Q, L> {
    fn add_after(&self, item: T, delay: Duration) {
        self.queue.add_after(item, delay);
    }
}

impl<T, Q: DelayQueue<T>, L: RateLimiter<T> + 'static> RetryQueue<T> for Retrying<Q, L> {
    fn add_rate_limited(&self, item: T) {
        let delay = self.limiter.when(&item);
        self.queue.add_after(item, delay);
    }
    fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }
}

/// An indexed object cache as the store workloads use it (i1): kcache's
/// [`Indexer`](kcache_indexer::Indexer) and the [`NaiveStore`](crate::naive::NaiveStore).
pub trait IndexedStore<T> {
    /// Adds `obj`.
    ///
    /// # Errors
    /// The store's error as a message.
    fn add(&self, obj: Arc<T>) -> Result<(), String>;
    /// Replaces the object with `obj`'s key by `obj`.
    ///
    /// # Errors
    /// The store's error as a message.
    fn update(&self, obj: Arc<T>) -> Result<(), String>;
    /// The objects whose index `name` has `value`.
    ///
    /// # Errors
    /// An unknown index, as a message.
    fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<T>>, String>;
    /// Every object.
    fn list(&self) -> Vec<Arc<T>>;
    /// Number of objects.
    fn len(&self) -> usize;
    /// Whether the store is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Send + Sync, M: kcache_core::Meta<T>> IndexedStore<T> for kcache_indexer::Indexer<T, M> {
    fn add(&self, obj: Arc<T>) -> Result<(), String> {
        kcache_indexer::Indexer::add(self, obj).map_err(|e| e.to_string())
    }
    fn update(&self, obj: Arc<T>) -> Result<(), String> {
        kcache_indexer::Indexer::update(self, obj).map_err(|e| e.to_string())
    }
    fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<T>>, String> {
        kcache_indexer::Indexer::by_index(self, name, value).map_err(|e| e.to_string())
    }
    fn list(&self) -> Vec<Arc<T>> {
        kcache_indexer::Indexer::list(self)
    }
    fn len(&self) -> usize {
        kcache_indexer::Indexer::len(self)
    }
}

impl<T> IndexedStore<T> for crate::naive::NaiveStore<T> {
    fn add(&self, obj: Arc<T>) -> Result<(), String> {
        crate::naive::NaiveStore::add(self, obj);
        Ok(())
    }
    fn update(&self, obj: Arc<T>) -> Result<(), String> {
        crate::naive::NaiveStore::update(self, obj);
        Ok(())
    }
    fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<T>>, String> {
        Ok(crate::naive::NaiveStore::by_index(self, name, value))
    }
    fn list(&self) -> Vec<Arc<T>> {
        crate::naive::NaiveStore::list(self)
    }
    fn len(&self) -> usize {
        crate::naive::NaiveStore::len(self)
    }
}
