//! `NaivePriorityQueue`: a priority queue as a first version would write it (controller-runtime's
//! shape without its extras): one `Mutex` around a `BTreeMap` ordered by (priority, add order),
//! client-go's dirty/processing rules, a `Condvar`; no guard against starvation.

use crate::api::{PriorityWorkQueue, WorkQueue};
use parking_lot::{Condvar, Mutex};
use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

/// Higher priority first, first add first within a priority; an item re-added while queued moves
/// up to the higher priority; re-added while processing, it is queued again at `done`.
///
/// # Examples
/// ```
/// use kcache_benches::api::{PriorityWorkQueue, WorkQueue};
/// use kcache_benches::naive::NaivePriorityQueue;
///
/// let q = NaivePriorityQueue::new();
/// q.add_with_priority(1, -100);
/// q.add_with_priority(2, 0);
/// assert_eq!(q.get(), Some(2));
/// assert!(q.done(&2));
/// q.shut_down();
/// assert_eq!(q.get(), Some(1));
/// assert_eq!(q.get(), None);
/// ```
pub struct NaivePriorityQueue<T> {
    shared: Arc<(Mutex<Inner<T>>, Condvar)>,
}

struct Inner<T> {
    ready: BTreeMap<(Reverse<i32>, u64), T>,
    /// Queued items: their key in `ready`.
    queued: HashMap<T, (i32, u64)>,
    /// Items in flight, and the priority they are re-added at (if they were).
    processing: HashMap<T, Option<i32>>,
    seq: u64,
    shutting_down: bool,
}

impl<T: Clone + Eq + Hash> Inner<T> {
    fn push(&mut self, item: T, priority: i32) {
        self.seq += 1;
        self.queued.insert(item.clone(), (priority, self.seq));
        self.ready.insert((Reverse(priority), self.seq), item);
    }
}

impl<T: Clone + Eq + Hash> NaivePriorityQueue<T> {
    /// An empty queue.
    pub fn new() -> Self {
        Self {
            shared: Arc::new((
                Mutex::new(Inner {
                    ready: BTreeMap::new(),
                    queued: HashMap::new(),
                    processing: HashMap::new(),
                    seq: 0,
                    shutting_down: false,
                }),
                Condvar::new(),
            )),
        }
    }
}

impl<T: Clone + Eq + Hash> Default for NaivePriorityQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for NaivePriorityQueue<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T> fmt::Debug for NaivePriorityQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NaivePriorityQueue").finish_non_exhaustive()
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> PriorityWorkQueue<T> for NaivePriorityQueue<T> {
    fn add_with_priority(&self, item: T, priority: i32) {
        let (lock, cond) = &*self.shared;
        let mut g = lock.lock();
        if g.shutting_down {
            return;
        }
        if let Some(again) = g.processing.get_mut(&item) {
            *again = Some(again.map_or(priority, |p| p.max(priority)));
            return;
        }
        match g.queued.get(&item).copied() {
            Some((old, seq)) if old < priority => {
                if let Some(it) = g.ready.remove(&(Reverse(old), seq)) {
                    g.ready.insert((Reverse(priority), seq), it);
                }
                g.queued.insert(item, (priority, seq));
            }
            Some(_) => {}
            None => {
                g.push(item, priority);
                cond.notify_one();
            }
        }
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<T> for NaivePriorityQueue<T> {
    fn add(&self, item: T) {
        self.add_with_priority(item, 0);
    }

    fn get(&self) -> Option<T> {
        let (lock, cond) = &*self.shared;
        let mut g = lock.lock();
        while g.ready.is_empty() && !g.shutting_down {
            cond.wait(&mut g);
        }
        let (_, item) = g.ready.pop_first()?;
        g.queued.remove(&item);
        g.processing.insert(item.clone(), None);
        Some(item)
    }

    fn done(&self, item: &T) -> bool {
        let (lock, cond) = &*self.shared;
        let mut g = lock.lock();
        match g.processing.remove(item) {
            Some(Some(priority)) => {
                g.push(item.clone(), priority);
                cond.notify_one();
                true
            }
            Some(None) => true,
            None => false,
        }
    }

    fn shut_down(&self) {
        let (lock, cond) = &*self.shared;
        lock.lock().shutting_down = true;
        cond.notify_all();
    }
}
