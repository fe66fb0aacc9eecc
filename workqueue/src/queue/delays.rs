//! The delay schedule: entries ordered by deadline, with an O(1) lane for the common case of
//! deadlines that arrive in order (the same retry delay added over time).
//!
//! Entries that are not earlier than the last one in the lane are appended to the lane (a
//! `VecDeque` sorted by construction); others go to a binary heap. The earliest entry is the
//! smaller of the two fronts. A workload whose deadlines only grow never touches the heap.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

/// One scheduled item. Entries may be stale; the state machine checks them against the item's slot.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    pub(crate) at: Instant,
    /// Push order: unique per entry, so it also tells one entry of an item from another with the
    /// same deadline.
    pub(crate) seq: u64,
    pub(crate) item: T,
}

impl<T> Entry<T> {
    fn key(&self) -> (Instant, u64) {
        (self.at, self.seq)
    }
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// Scheduled entries, earliest first (ties in insertion order).
#[derive(Debug)]
pub(crate) struct Delays<T> {
    lane: VecDeque<Entry<T>>,
    heap: BinaryHeap<Reverse<Entry<T>>>,
    seq: u64,
}

impl<T> Delays<T> {
    pub(crate) fn new() -> Self {
        Self {
            lane: VecDeque::new(),
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }

    /// Schedules `item` at `at`; `true` if it is now the earliest entry, and the entry's number.
    pub(crate) fn push(&mut self, item: T, at: Instant) -> (bool, u64) {
        let earliest = self.peek().is_none_or(|e| at < e.at);
        self.seq += 1;
        let entry = Entry {
            at,
            seq: self.seq,
            item,
        };
        if self.lane.back().is_none_or(|last| at >= last.at) {
            self.lane.push_back(entry);
        } else {
            self.heap.push(Reverse(entry));
        }
        (earliest, self.seq)
    }

    /// The earliest entry.
    pub(crate) fn peek(&self) -> Option<&Entry<T>> {
        match (self.lane.front(), self.heap.peek()) {
            (Some(l), Some(Reverse(h))) => Some(if h < l { h } else { l }),
            (l, h) => l.or(h.map(|Reverse(h)| h)),
        }
    }

    /// Removes and returns the earliest entry.
    pub(crate) fn pop(&mut self) -> Option<Entry<T>> {
        let from_heap = match (self.lane.front(), self.heap.peek()) {
            (Some(l), Some(Reverse(h))) => h < l,
            (None, Some(_)) => true,
            _ => false,
        };
        if from_heap {
            self.heap.pop().map(|Reverse(e)| e)
        } else {
            self.lane.pop_front()
        }
    }

    /// Drops every entry.
    pub(crate) fn clear(&mut self) {
        self.lane.clear();
        self.heap.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn entries_come_out_earliest_first_whatever_lane_they_took() {
        let t0 = kcache_core::FakeClock::new();
        let base = kcache_core::Clock::now(&t0);
        let ms = |n: u64| base + Duration::from_millis(n);
        let mut d = Delays::new();
        for (i, at) in [5, 7, 7, 3, 9, 1, 8, 8, 2].into_iter().enumerate() {
            d.push(i, ms(at));
        }
        let mut out = Vec::new();
        while let Some(e) = d.pop() {
            out.push((e.at, e.item));
        }
        let expected: Vec<_> = [
            (1, 5),
            (2, 8),
            (3, 3),
            (5, 0),
            (7, 1),
            (7, 2),
            (8, 6),
            (8, 7),
            (9, 4),
        ]
        .into_iter()
        .map(|(at, i)| (ms(at), i))
        .collect();
        assert_eq!(out, expected);
    }

    #[test]
    fn push_reports_whether_the_entry_is_now_the_earliest() {
        let base = kcache_core::Clock::now(&kcache_core::FakeClock::new());
        let mut d = Delays::new();
        assert!(d.push('a', base + Duration::from_millis(10)).0);
        assert!(!d.push('b', base + Duration::from_millis(20)).0);
        assert!(!d.push('c', base + Duration::from_millis(10)).0);
        assert!(d.push('d', base + Duration::from_millis(5)).0);
        assert_eq!(d.peek().map(|e| e.item), Some('d'));
    }
}
