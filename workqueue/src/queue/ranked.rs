//! The priority queue's ready items: highest priority first, first-come first within a priority,
//! and a guaranteed share of hand-offs for the oldest item (no starvation).
//!
//! Each ready item has a rank `(priority, entry number)`; the entry number is given when the item
//! becomes ready, and kept when a later add raises its priority, so "first add" orders the items
//! of one priority. Every [`SHARE`]-th hand-off takes the item with the smallest entry number (the
//! one ready the longest) whatever its priority; the others take the highest rank.
//!
//! # The bound
//! Say an item becomes ready while `n` items are ready. Every item that becomes ready after it has
//! a larger entry number, so at most `n` items are ever older than it while it waits; each
//! "oldest" hand-off takes one of them or the item itself, and one hand-off in [`SHARE`] is an
//! "oldest" one. So the item is handed out within `SHARE × (n + 1)` hand-offs of becoming ready,
//! whatever is added meanwhile and at whatever priority.
//!
//! Everything is under one mutex (the rank index needs it: a raise moves an item between
//! positions); the count of ready items is mirrored in an atomic that workers read without the
//! lock, as they read the lock-free FIFO's emptiness (see `ready.rs`).

use crate::metrics::{GaugeMetric, MetricsProvider};
use crate::sync::atomic::{AtomicUsize, Ordering};
use crate::sync::Mutex;
use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Arc;

/// One hand-off in this many goes to the item ready the longest.
pub(crate) const SHARE: u64 = 8;

/// Where the per-priority depth gauges come from.
pub(crate) struct DepthGauges {
    pub(crate) provider: Arc<dyn MetricsProvider>,
    pub(crate) name: String,
    made: HashMap<i32, Arc<dyn GaugeMetric>>,
}

impl DepthGauges {
    pub(crate) fn new(provider: Arc<dyn MetricsProvider>, name: String) -> Self {
        Self {
            provider,
            name,
            made: HashMap::new(),
        }
    }

    fn of(&mut self, priority: i32) -> &Arc<dyn GaugeMetric> {
        let (provider, name) = (&self.provider, &self.name);
        self.made
            .entry(priority)
            .or_insert_with(|| provider.new_priority_depth_metric(name, priority))
    }
}

struct Inner<T> {
    by_rank: BTreeMap<(Reverse<i32>, u64), T>,
    /// Entry number to priority, oldest first.
    by_age: BTreeMap<u64, i32>,
    index: HashMap<T, (i32, u64), foldhash::fast::RandomState>,
    /// Ready items per priority (none left at zero).
    depth: BTreeMap<i32, usize>,
    next_seq: u64,
    handoffs: u64,
    gauges: Option<DepthGauges>,
}

impl<T> Inner<T> {
    fn count(&mut self, priority: i32, up: bool) {
        let n = self.depth.entry(priority).or_insert(0);
        if up {
            *n += 1;
        } else {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.depth.remove(&priority);
            }
        }
        if let Some(g) = &mut self.gauges {
            let gauge = g.of(priority);
            if up {
                gauge.inc();
            } else {
                gauge.dec();
            }
        }
    }
}

/// The ranked ready items. See the module docs.
pub(crate) struct Ranked<T> {
    inner: Mutex<Inner<T>>,
    len: AtomicUsize,
}

impl<T: Clone + Eq + Hash> Ranked<T> {
    pub(crate) fn new(gauges: Option<DepthGauges>) -> Self {
        Self {
            inner: Mutex::new(Inner {
                by_rank: BTreeMap::new(),
                by_age: BTreeMap::new(),
                index: HashMap::default(),
                depth: BTreeMap::new(),
                next_seq: 0,
                handoffs: 0,
                gauges,
            }),
            len: AtomicUsize::new(0),
        }
    }

    /// Makes `item` ready at `priority` (the caller knows it is not ready yet).
    pub(crate) fn push(&self, item: T, priority: i32) {
        let mut g = self.inner.lock();
        g.next_seq += 1;
        let seq = g.next_seq;
        g.index.insert(item.clone(), (priority, seq));
        g.by_rank.insert((Reverse(priority), seq), item);
        g.by_age.insert(seq, priority);
        g.count(priority, true);
        self.len.fetch_add(1, Ordering::SeqCst);
    }

    /// Raises the priority of the ready `item` to `priority` if that is higher; it keeps its
    /// entry number (its place among the items of its new priority is that of its first add).
    pub(crate) fn raise(&self, item: &T, priority: i32) {
        let mut g = self.inner.lock();
        let Some(&(old, seq)) = g.index.get(item) else {
            return;
        };
        if priority <= old {
            return;
        }
        if let Some(it) = g.by_rank.remove(&(Reverse(old), seq)) {
            g.by_rank.insert((Reverse(priority), seq), it);
        }
        g.by_age.insert(seq, priority);
        g.index.insert(item.clone(), (priority, seq));
        g.count(old, false);
        g.count(priority, true);
    }

    /// Hands out the next item: the item ready the longest on every [`SHARE`]-th hand-off, the
    /// highest ranked otherwise.
    pub(crate) fn pop(&self) -> Option<T> {
        let mut g = self.inner.lock();
        let key = if (g.handoffs + 1).is_multiple_of(SHARE) {
            let (&seq, &priority) = g.by_age.first_key_value()?;
            (Reverse(priority), seq)
        } else {
            *g.by_rank.first_key_value()?.0
        };
        let item = g.by_rank.remove(&key)?;
        g.handoffs += 1;
        g.by_age.remove(&key.1);
        g.index.remove(&item);
        g.count(key.0 .0, false);
        self.len.fetch_sub(1, Ordering::SeqCst);
        Some(item)
    }

    /// The priority `item` is ready at, if it is ready.
    pub(crate) fn priority_of(&self, item: &T) -> Option<i32> {
        self.inner.lock().index.get(item).map(|p| p.0)
    }

    /// Ready items per priority, highest priority first.
    pub(crate) fn depth_by_priority(&self) -> Vec<(i32, usize)> {
        self.inner
            .lock()
            .depth
            .iter()
            .rev()
            .map(|(p, n)| (*p, *n))
            .collect()
    }
}

impl<T> Ranked<T> {
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::SeqCst)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> std::fmt::Debug for Ranked<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ranked")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(r: &Ranked<u32>) -> Vec<u32> {
        std::iter::from_fn(|| r.pop()).collect()
    }

    #[test]
    fn higher_priority_first_then_first_come_within_a_priority() {
        let r = Ranked::new(None);
        for (item, p) in [(1, 0), (2, 5), (3, 0), (4, 5), (5, -1)] {
            r.push(item, p);
        }
        assert_eq!(drain(&r), [2, 4, 1, 3, 5]);
    }

    #[test]
    fn a_raise_keeps_the_place_of_the_first_add_and_never_lowers() {
        let r = Ranked::new(None);
        for (item, p) in [(1, 5), (2, 0), (3, 5)] {
            r.push(item, p);
        }
        r.raise(&2, 5); // older than 3: goes before it
        r.raise(&1, 0); // lower: no change
        assert_eq!(r.priority_of(&1), Some(5));
        assert_eq!(r.depth_by_priority(), [(5, 3)]);
        assert_eq!(drain(&r), [1, 2, 3]);
    }

    #[test]
    fn every_eighth_hand_off_goes_to_the_oldest_item() {
        let r = Ranked::new(None);
        r.push(1000, -100);
        let mut got = Vec::new();
        for i in 0..20 {
            r.push(i, 10);
            got.push(r.pop().unwrap());
        }
        // Hand-offs 1..7 take the fresh high-priority item; the 8th takes the old one.
        assert_eq!(got[7], 1000);
        assert!(got.iter().filter(|&&x| x == 1000).count() == 1);
    }

    #[test]
    fn an_item_is_handed_out_within_the_share_bound_under_any_high_priority_load() {
        let r = Ranked::new(None);
        for i in 0..50 {
            r.push(i, -100);
        }
        let low = 999;
        r.push(low, -100); // 50 items ready before it
        let bound = SHARE * (50 + 1);
        let mut next = 10_000;
        for handoff in 1..=bound {
            // Two high-priority adds per hand-off: the queue never runs out of them.
            r.push(next, 100);
            r.push(next + 1, 100);
            next += 2;
            if r.pop() == Some(low) {
                assert!(handoff <= bound);
                return;
            }
        }
        panic!("the low-priority item waited more than {bound} hand-offs");
    }
}
