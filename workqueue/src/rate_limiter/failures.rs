//! Per-item failure counts shared by the per-item limiters: a sharded map, one lock per shard.
//!
//! Why a sharded `Mutex<HashMap>` and not `dashmap`: a timing run (release build; 1 and 2 threads,
//! 2M operations each, 3/4 `when` and 1/4 `forget`, over 100 and 10 000 string keys; medians of 3,
//! two runs, on a 2-core machine shared with other builds) put them within noise of each other:
//! 2 threads, 10 000 keys: dashmap 41.6 / 43.1 ns per operation, 16 shards 38.5 / 54.9 ns;
//! 2 threads, 100 keys: dashmap 35.1 / 36.7 ns, 16 shards 33.2 / 31.0 ns. The sharded map goes
//! through the crate's loom shim, so the model checker sees it, and costs no extra dependency.

use crate::sync::Mutex;
use crossbeam_utils::CachePadded;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

type Hasher = foldhash::fast::RandomState;

/// The shard picker's hasher. Under loom every execution of a model must take the same locks in
/// the same order, so the shard of an item must not depend on a random seed (as in `slots.rs`).
#[cfg(not(kcache_loom))]
type PickHasher = foldhash::fast::RandomState;
#[cfg(kcache_loom)]
type PickHasher = foldhash::fast::FixedState;

/// Sixteen shards: many more than the cores a controller's workers usually run on.
const SHARDS: usize = 16;

/// One shard, on its own cache line: the producer's `record` and a worker's `forget` of different
/// items must not write one line (unpadded, neighbouring shards shared lines).
type Shard<T> = CachePadded<Mutex<HashMap<T, usize, Hasher>>>;

pub(crate) struct FailureCounts<T> {
    /// Picks the shard; seeded independently of the shards' own hashers, so the keys of one shard
    /// still spread over its buckets.
    pick: PickHasher,
    shards: Box<[Shard<T>]>,
}

impl<T: Eq + Hash + Clone> FailureCounts<T> {
    pub(crate) fn new() -> Self {
        Self {
            pick: PickHasher::default(),
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::new(HashMap::with_hasher(Hasher::default()))))
                .collect(),
        }
    }

    fn shard(&self, item: &T) -> &Mutex<HashMap<T, usize, Hasher>> {
        // foldhash's fast hash is weak in its raw bits for runs of small integer keys (a shard
        // could stay empty), so mix once more (Fibonacci hashing) and take the top bits. SHARDS
        // is a power of two, so the shift keeps the index in range.
        let mixed = self.pick.hash_one(item).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let i = (mixed >> (64 - SHARDS.trailing_zeros())) as usize;
        &self.shards[i]
    }

    /// Counts one more failure of `item`; returns the count before this one. Saturates.
    pub(crate) fn record(&self, item: &T) -> usize {
        let mut shard = self.shard(item).lock();
        if let Some(n) = shard.get_mut(item) {
            let before = *n;
            *n = before.saturating_add(1);
            return before;
        }
        shard.insert(item.clone(), 1);
        0
    }

    /// The failures of `item` since it was last forgotten.
    pub(crate) fn get(&self, item: &T) -> usize {
        self.shard(item).lock().get(item).copied().unwrap_or(0)
    }

    /// Drops `item`'s entry.
    pub(crate) fn forget(&self, item: &T) {
        self.shard(item).lock().remove(item);
    }

    /// How many items have an entry.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_returns_the_count_before_and_forget_drops_the_entry() {
        let counts = FailureCounts::new();
        assert_eq!(counts.record(&"a"), 0);
        assert_eq!(counts.record(&"a"), 1);
        assert_eq!(counts.record(&"b"), 0);
        assert_eq!(
            (counts.get(&"a"), counts.get(&"b"), counts.len()),
            (2, 1, 2)
        );
        counts.forget(&"a");
        assert_eq!((counts.get(&"a"), counts.len()), (0, 1));
    }

    #[test]
    fn many_keys_spread_over_shards_and_are_all_counted() {
        let counts = FailureCounts::new();
        for i in 0..1000 {
            counts.record(&i);
        }
        assert_eq!(counts.len(), 1000);
        assert!(counts.shards.iter().all(|s| !s.lock().is_empty()));
    }
}
