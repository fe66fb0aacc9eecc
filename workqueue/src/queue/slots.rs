//! Per-item state: where each item known to the queue is, in a sharded map.
//!
//! An item's [`Slot`] says whether it is queued (in the ready FIFO, exactly once), being processed
//! (and whether it was added again meanwhile: client-go's "dirty and processing"), or waiting for a
//! deadline. Idle items have no slot. Every change of an item's slot, and the FIFO push that goes
//! with it, happens under its shard's lock, so two threads never disagree about one item; threads
//! working on different shards never meet.
//!
//! # Tickets: a `get` that takes no lock
//! Every push to the plain FIFO gets a ticket from its shard (under the shard lock): the shard's
//! push count, with the shard's index in the low bits. The queued slot keeps it. A worker that
//! pops `(item, ticket)` does not lock the shard nor look the item up: it raises the shard's
//! `taken` mark to the ticket ([`Slots::mark_taken`], one atomic maximum). A slot `Queued` under
//! a ticket at or below the mark is in flight; whoever next holds the shard lock and looks at
//! that slot first [`settle`](Slot::settle)s it into `Processing` (nothing else changes: `done`
//! and a re-add then work on it as before). This is sound because one shard's pushes are made
//! under its lock in ticket order, so the FIFO hands them out in that order: a mark at `t` means
//! every ticket of that shard up to `t` has left the FIFO. A mark raised by one worker past a
//! ticket another worker has popped but not yet marked counts that item in flight a moment early,
//! while it is on its way to that worker, which is what it is.
//!
//! Before, `get` locked the shard and rewrote the slot: a second lock and a second look-up per
//! item on the workers' side, each a cache line last written by the producer's core. A queue with
//! metrics (whose `get` records the item's wait and start) or with priorities (whose store hands
//! out no tickets) still takes the lock.
//!
//! The shard's `processing` counts the gets that took the lock, minus every `done`; the items in
//! flight are that plus the tickets taken ([`Slots::in_flight`]). A shard gives out 2^58 tickets
//! (centuries at any rate a queue reaches) before its count would wrap.
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
use crate::sync::atomic::{AtomicU64, Ordering};
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

/// One shard: items and their slots, its ticket count, and how many gets locked it.
///
/// The counts live here, under the shard lock that every transition takes anyway, and on the
/// shard lock's own cache line: a single counter for the whole queue was a cache line that every
/// `get` and every `done` wrote, moving between the workers' cores twice per item.
#[derive(Debug)]
pub(crate) struct Shard<T> {
    map: HashMap<T, Slot, Hasher>,
    /// Gets that took this lock (and made a slot `Processing`), minus every `done` here.
    pub(crate) processing: isize,
    /// The ticket the next push gets.
    next_ticket: u64,
}

impl<T> Shard<T> {
    /// The map and the ticket counter, borrowed apart (a push made while holding an entry of
    /// the map takes a ticket).
    pub(crate) fn split(&mut self) -> (&mut HashMap<T, Slot, Hasher>, Tickets<'_>) {
        (&mut self.map, Tickets(&mut self.next_ticket))
    }
}

/// A shard's ticket counter (see [`Shard::split`]).
pub(crate) struct Tickets<'a>(&'a mut u64);

impl Tickets<'_> {
    /// The ticket of the push about to be made. Tickets are consecutive per shard: the items in
    /// flight are counted by them.
    pub(crate) fn next(&mut self) -> u64 {
        let t = *self.0;
        *self.0 = t.wrapping_add(1 << SHARD_BITS);
        t
    }
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

/// A shard and its `taken` mark, which workers raise without the lock; the two share a cache
/// line, which `done` locks right after its `get` raised the mark.
struct Cell<T> {
    /// The highest ticket a lock-free `get` took from this shard.
    taken: AtomicU64,
    shard: Mutex<Shard<T>>,
}

/// A locked shard, with its `taken` mark at hand.
pub(crate) struct Locked<'a, T> {
    shard: MutexGuard<'a, Shard<T>>,
    taken: &'a AtomicU64,
}

impl<'a, T> Locked<'a, T> {
    /// The shard's `taken` mark (for [`Slot::settle`]), as a reference that outlives borrows of
    /// the shard itself (an entry of its map).
    pub(crate) fn taken(&self) -> &'a AtomicU64 {
        self.taken
    }

    /// The slot of `item`, settled.
    pub(crate) fn slot_mut(&mut self, item: &T) -> Option<&mut Slot>
    where
        T: Eq + Hash,
    {
        let taken = self.taken;
        let slot = self.shard.get_mut(item)?;
        slot.settle(taken);
        Some(slot)
    }
}

impl<T> Deref for Locked<'_, T> {
    type Target = Shard<T>;
    fn deref(&self) -> &Shard<T> {
        &self.shard
    }
}

impl<T> DerefMut for Locked<'_, T> {
    fn deref_mut(&mut self) -> &mut Shard<T> {
        &mut self.shard
    }
}

/// Many more shards than the threads that add and work, so two of them rarely meet on one lock
/// (and each shard lock sits on its own cache line). Two under loom, to keep the models small
/// while still having more than one shard.
#[cfg(not(kcache_loom))]
const SHARDS: usize = 64;
#[cfg(kcache_loom)]
const SHARDS: usize = 2;

/// A ticket's low bits: its shard.
const SHARD_BITS: u32 = SHARDS.trailing_zeros();

/// Where an item is.
///
/// Its times are [`Tick`]s (8 bytes each), so a slot takes 24 bytes: with a `u64` key, a map entry
/// is 32 bytes, and two of them share a cache line (with `Instant`s, a slot took 40 bytes and an
/// entry 48, often split across two lines). `since` and `started` are written only when metrics
/// are on (they are zero otherwise, and read only by metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// In the ready FIFO under `ticket` (0: no ticket, the priority store's), or taken from it
    /// by a `get` that has not settled it yet (see the module docs). `since` is the add that
    /// made it ready.
    Queued { since: Tick, ticket: u64 },
    /// Handed out by `get`, not yet `done`.
    Processing { started: Tick, then: Then },
    /// Waiting for its deadline `at` as the delay entry number `seq`; ready then at `priority`
    /// (the priority queue's; 0 in the plain queue).
    Waiting { at: Tick, seq: u32, priority: i32 },
}

impl Slot {
    /// Makes explicit what a lock-free `get` left implicit: a slot queued under a ticket at or
    /// below the shard's `taken` mark is in flight (with nothing to do at its `done` yet: every
    /// re-add settles it first). Called by every lock holder before it looks at a slot.
    pub(crate) fn settle(&mut self, taken: &AtomicU64) {
        if let Slot::Queued { ticket, .. } = *self {
            if ticket != 0 && ticket <= taken.load(Ordering::Acquire) {
                *self = Slot::Processing {
                    started: Tick(0),
                    then: Then::Nothing,
                };
            }
        }
    }
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
    shards: Box<[CachePadded<Cell<T>>]>,
}

impl<T: Eq + Hash> Slots<T> {
    pub(crate) fn new() -> Self {
        Self {
            pick: PickHasher::default(),
            shards: (0..SHARDS as u64)
                .map(|index| {
                    CachePadded::new(Cell {
                        taken: AtomicU64::new(0),
                        shard: Mutex::new(Shard {
                            map: HashMap::with_hasher(Hasher::default()),
                            processing: 0,
                            // Ticket 0 is "none": counts start at 1.
                            next_ticket: (1 << SHARD_BITS) | index,
                        }),
                    })
                })
                .collect(),
        }
    }

    /// Locks the shard of `item`.
    pub(crate) fn lock(&self, item: &T) -> Locked<'_, T> {
        // foldhash's fast hash is weak in its raw bits for runs of small integer keys, so mix once
        // more (Fibonacci hashing) and take the top bits; SHARDS is a power of two.
        let mixed = self.pick.hash_one(item).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let cell = &self.shards[(mixed >> (64 - SHARD_BITS)) as usize];
        Locked {
            shard: cell.shard.lock(),
            taken: &cell.taken,
        }
    }

    /// A lock-free `get` took the item pushed under `ticket`: raises its shard's mark.
    pub(crate) fn mark_taken(&self, ticket: u64) {
        let shard = (ticket & ((1 << SHARD_BITS) - 1)) as usize;
        if let Some(cell) = self.shards.get(shard) {
            cell.taken.fetch_max(ticket, Ordering::AcqRel);
        }
    }

    /// Items in flight: per shard, the gets that locked it and the tickets taken, minus the
    /// dones (locks every shard in turn).
    pub(crate) fn in_flight(&self) -> usize {
        let mut n: i64 = 0;
        for cell in self.shards.iter() {
            let shard = cell.shard.lock();
            let taken = (cell.taken.load(Ordering::Acquire) >> SHARD_BITS) as i64;
            n += taken + shard.processing as i64;
        }
        usize::try_from(n).unwrap_or(0)
    }

    /// The room allocated in every shard (tests of the queue's memory).
    #[allow(dead_code, reason = "used by tests")]
    pub(crate) fn capacity(&self) -> usize {
        self.shards.iter().map(|s| s.shard.lock().capacity()).sum()
    }

    /// Locks every shard in turn, calling `f` on each (its slots as they are stored: not
    /// settled).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&mut Shard<T>)) {
        for s in self.shards.iter() {
            f(&mut s.shard.lock());
        }
    }

    /// The number of shards ([`is_empty_at`](Slots::is_empty_at) takes `0..count()`).
    pub(crate) fn count(&self) -> usize {
        self.shards.len()
    }

    /// Whether shard `i` holds no item (locks it).
    pub(crate) fn is_empty_at(&self, i: usize) -> bool {
        self.shards.get(i).is_none_or(|s| s.shard.lock().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_integer_keys_spread_over_every_shard() {
        let slots = Slots::new();
        for i in 0..1000u64 {
            slots.lock(&i).insert(
                i,
                Slot::Queued {
                    since: Tick(0),
                    ticket: 0,
                },
            );
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
