//! `NaiveQueue`: client-go's `workqueue.Typed` over a `Mutex` and a `Condvar`.

use crate::api::WorkQueue;
use parking_lot::{Condvar, Mutex};
use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

/// client-go's deduplicating queue, ported line by line: every add that queues an item signals
/// the condition variable.
///
/// # Examples
/// ```
/// use kcache_benches::api::WorkQueue;
/// use kcache_benches::naive::NaiveQueue;
///
/// let q = NaiveQueue::new();
/// q.add(1);
/// q.add(1);
/// assert_eq!(q.len(), 1);
/// assert_eq!(q.get(), Some(1));
/// q.add(1); // in flight: queued again at done
/// assert!(q.done(&1));
/// q.shut_down();
/// assert_eq!(q.get(), Some(1));
/// assert_eq!(q.get(), None);
/// ```
pub struct NaiveQueue<T> {
    shared: Arc<Shared<T>>,
}

struct Shared<T> {
    inner: Mutex<Inner<T>>,
    cond: Condvar,
}

struct Inner<T> {
    queue: VecDeque<T>,
    dirty: HashSet<T>,
    processing: HashSet<T>,
    shutting_down: bool,
}

impl<T: Clone + Eq + Hash> NaiveQueue<T> {
    /// An empty queue.
    pub fn new() -> Self {
        Self {
            shared: Arc::new(Shared {
                inner: Mutex::new(Inner {
                    queue: VecDeque::new(),
                    dirty: HashSet::new(),
                    processing: HashSet::new(),
                    shutting_down: false,
                }),
                cond: Condvar::new(),
            }),
        }
    }

    /// The number of queued items.
    pub fn len(&self) -> usize {
        self.shared.inner.lock().queue.len()
    }

    /// Whether no item is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the queue is shutting down.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.inner.lock().shutting_down
    }
}

impl<T: Clone + Eq + Hash> Default for NaiveQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for NaiveQueue<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T> fmt::Debug for NaiveQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NaiveQueue").finish_non_exhaustive()
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<T> for NaiveQueue<T> {
    fn add(&self, item: T) {
        let mut g = self.shared.inner.lock();
        if g.shutting_down || g.dirty.contains(&item) {
            return;
        }
        g.dirty.insert(item.clone());
        if g.processing.contains(&item) {
            return;
        }
        g.queue.push_back(item);
        self.shared.cond.notify_one();
    }

    fn get(&self) -> Option<T> {
        let mut g = self.shared.inner.lock();
        while g.queue.is_empty() && !g.shutting_down {
            self.shared.cond.wait(&mut g);
        }
        let item = g.queue.pop_front()?;
        g.processing.insert(item.clone());
        g.dirty.remove(&item);
        Some(item)
    }

    fn done(&self, item: &T) -> bool {
        let mut g = self.shared.inner.lock();
        let was_processing = g.processing.remove(item);
        if g.dirty.contains(item) {
            g.queue.push_back(item.clone());
            self.shared.cond.notify_one();
        }
        was_processing
    }

    fn shut_down(&self) {
        self.shared.inner.lock().shutting_down = true;
        self.shared.cond.notify_all();
    }
}
