//! Per-item state: where each item known to the queue is, in a sharded map.
//!
//! An item's [`Slot`] says whether it is queued (in the ready FIFO, exactly once), being processed
//! (and whether it was added again meanwhile: client-go's "dirty and processing"), or waiting for a
//! deadline. Idle items have no slot. Every change of an item's slot, and the FIFO push that goes
//! with it, happens under its shard's lock, so two threads never disagree about one item; threads
//! working on different shards never meet.
//!
//! # Why our own shards and not `dashmap`
//! The per-item transitions need exactly "lock the item's shard, look at and change its slot, push
//! to the ready FIFO, unlock": a `Mutex<HashMap>` per shard is that and nothing more, and the push
//! must happen under the same lock as the slot change (see `shared.rs`, shutdown), which `dashmap`'s
//! entry guards would also allow. What decides it is the model checker: `dashmap`'s `RwLock`
//! shards are its own atomics, invisible to loom, while these locks go through the crate's sync
//! shim, so the loom models explore the real map code (with a fixed shard picker under loom, so
//! every execution takes the same locks). The two were not timed against each other for this map;
//! the same comparison for the failure counts (`rate_limiter/failures.rs`) put them within noise
//! of each other on this kind of machine.

use super::tick::Tick;
use crate::sync::{Mutex, MutexGuard};
use crossbeam_utils::CachePadded;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::ops::{Deref, DerefMut};

type Hasher = foldhash::fast::RandomState;

/// The shard picker's hasher. Under loom every execution of a model must take the same locks in
/// the same order, so the shard of an item must not depend on a random seed.
#[cfg(not(kcache_loom))]
type PickHasher = foldhash::fast::RandomState;
#[cfg(kcache_loom)]
type PickHasher = foldhash::fast::FixedState;

/// One shard: items and their slots, and how many of them are in flight.
///
/// The count of items in flight lives here, under the shard lock that every transition into and
/// out of [`Slot::Processing`] takes anyway, and on the shard lock's own cache line: a single
/// counter for the whole queue was a cache line that every `get` and every `done` wrote, moving
/// between the workers' cores twice per item.
#[derive(Debug)]
pub(crate) struct Shard<T> {
    map: HashMap<T, Slot, Hasher>,
    /// Slots in [`Slot::Processing`].
    pub(crate) processing: usize,
}

impl<T> Deref for Shard<T> {
    type Target = HashMap<T, Slot, Hasher>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl<T> DerefMut for Shard<T> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.map
    }
}

/// Many more shards than the threads that add and work, so two of them rarely meet on one lock
/// (and each shard lock sits on its own cache line). Two under loom, to keep the models small
/// while still having more than one shard.
#[cfg(not(kcache_loom))]
const SHARDS: usize = 64;
#[cfg(kcache_loom)]
const SHARDS: usize = 2;

/// Where an item is.
///
/// Its times are [`Tick`]s (8 bytes each), so a slot takes 24 bytes: with a `u64` key, a map entry
/// is 32 bytes, and two of them share a cache line (with `Instant`s, a slot took 40 bytes and an
/// entry 48, often split across two lines). `since` and `started` are written only when metrics
/// are on (they are zero otherwise, and read only by metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// In the ready FIFO. `since` is the add that made it ready.
    Queued { since: Tick },
    /// Handed out by `get`, not yet `done`.
    Processing { started: Tick, then: Then },
    /// Waiting for its deadline `at` as the delay entry number `seq`; ready then at `priority`
    /// (the priority queue's; 0 in the plain queue).
    Waiting { at: Tick, seq: u32, priority: i32 },
}

/// What happens to an item in flight when its `done` comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// Forget it.
    Nothing,
    /// It was added again while processing: queue it (dirty), at `priority`.
    Requeue { since: Tick, priority: i32 },
    /// It was added with a delay while processing: wait until `at` (or queue it if past), then
    /// be ready at `priority`.
    Wait { at: Tick, priority: i32 },
}

/// The sharded map of slots.
pub(crate) struct Slots<T> {
    /// Picks the shard; seeded independently of the shards' own hashers.
    pick: PickHasher,
    shards: Box<[CachePadded<Mutex<Shard<T>>>]>,
}

impl<T: Eq + Hash> Slots<T> {
    pub(crate) fn new() -> Self {
        Self {
            pick: PickHasher::default(),
            shards: (0..SHARDS)
                .map(|_| {
                    CachePadded::new(Mutex::new(Shard {
                        map: HashMap::with_hasher(Hasher::default()),
                        processing: 0,
                    }))
                })
                .collect(),
        }
    }

    /// Locks the shard of `item`.
    pub(crate) fn lock(&self, item: &T) -> MutexGuard<'_, Shard<T>> {
        // foldhash's fast hash is weak in its raw bits for runs of small integer keys, so mix once
        // more (Fibonacci hashing) and take the top bits; SHARDS is a power of two.
        let mixed = self.pick.hash_one(item).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let i = (mixed >> (64 - SHARDS.trailing_zeros())) as usize;
        self.shards[i].lock()
    }

    /// The room allocated in every shard (tests of the queue's memory).
    #[allow(dead_code, reason = "used by tests")]
    pub(crate) fn capacity(&self) -> usize {
        self.shards.iter().map(|s| s.lock().capacity()).sum()
    }

    /// Locks every shard in turn, calling `f` on each.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&mut Shard<T>)) {
        for s in self.shards.iter() {
            f(&mut s.lock());
        }
    }

    /// The number of shards ([`is_empty_at`](Slots::is_empty_at) takes `0..count()`).
    pub(crate) fn count(&self) -> usize {
        self.shards.len()
    }

    /// Whether shard `i` holds no item (locks it).
    pub(crate) fn is_empty_at(&self, i: usize) -> bool {
        self.shards.get(i).is_none_or(|s| s.lock().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_integer_keys_spread_over_every_shard() {
        let slots = Slots::new();
        for i in 0..1000u64 {
            slots.lock(&i).insert(i, Slot::Queued { since: Tick(0) });
        }
        let mut sizes = Vec::new();
        slots.for_each(|s| sizes.push(s.len()));
        assert_eq!(sizes.iter().sum::<usize>(), 1000);
        assert!(sizes.iter().all(|&n| n > 0), "{sizes:?}");
    }

    #[test]
    fn a_slot_takes_24_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 24);
    }
}
