//! `FloorDedupQueue`: a crossbeam channel behind a sharded set of the items queued.

use super::FloorQueue;
use crate::api::WorkQueue;
use parking_lot::Mutex;
use std::collections::HashSet;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

type Set<T> = HashSet<T, foldhash::fast::RandomState>;

/// Shards of the set: as many as kcache's queue has, for the same reason (threads rarely meet on
/// one lock).
const SHARDS: usize = 64;

/// The least a deduplicating queue does: one set insert per add (the item is sent to a
/// [`FloorQueue`] only if it was not in the set) and one removal per hand-out, each under the
/// lock of the item's shard (64 shards, each `Mutex` on its own cache line, foldhash). No
/// in-flight state: an item added while a worker holds it is queued again at once (client-go
/// would wait for `done`), and `done` does nothing.
///
/// # Examples
/// ```
/// use kcache_benches::api::WorkQueue;
/// use kcache_benches::floor::FloorDedupQueue;
///
/// let q = FloorDedupQueue::new(1);
/// q.add(1);
/// q.add(1); // queued: deduplicated
/// q.add(2);
/// q.shut_down();
/// assert_eq!((q.get(), q.get(), q.get()), (Some(1), Some(2), None));
/// ```
pub struct FloorDedupQueue<T> {
    ready: FloorQueue<T>,
    queued: Arc<Queued<T>>,
}

struct Queued<T> {
    pick: foldhash::fast::RandomState,
    shards: Box<[crossbeam_utils::CachePadded<Mutex<Set<T>>>]>,
}

impl<T: Hash> Queued<T> {
    fn shard(&self, item: &T) -> &Mutex<Set<T>> {
        // The top bits of a Fibonacci mix, as kcache's shard picker does.
        let mixed = self.pick.hash_one(item).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        &self.shards[(mixed >> (64 - SHARDS.trailing_zeros())) as usize]
    }
}

impl<T> FloorDedupQueue<T> {
    /// A queue whose shutdown stops `workers` workers.
    pub fn new(workers: usize) -> Self {
        Self {
            ready: FloorQueue::new(workers),
            queued: Arc::new(Queued {
                pick: foldhash::fast::RandomState::default(),
                shards: (0..SHARDS)
                    .map(|_| crossbeam_utils::CachePadded::new(Mutex::new(Set::default())))
                    .collect(),
            }),
        }
    }
}

impl<T> Clone for FloorDedupQueue<T> {
    fn clone(&self) -> Self {
        Self {
            ready: self.ready.clone(),
            queued: self.queued.clone(),
        }
    }
}

impl<T> fmt::Debug for FloorDedupQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FloorDedupQueue").finish_non_exhaustive()
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> WorkQueue<T> for FloorDedupQueue<T> {
    fn add(&self, item: T) {
        // The send happens under the shard lock, as kcache's push does: a removal of the same item
        // (a worker taking it) cannot come between the insert and the send.
        let mut shard = self.queued.shard(&item).lock();
        if shard.insert(item.clone()) {
            self.ready.add(item);
        }
    }
    fn get(&self) -> Option<T> {
        let item = self.ready.get()?;
        self.queued.shard(&item).lock().remove(&item);
        Some(item)
    }
    fn done(&self, _: &T) -> bool {
        true
    }
    fn shut_down(&self) {
        self.ready.shut_down();
    }
}
