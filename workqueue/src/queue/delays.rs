//! The delay schedule: entries ordered by deadline, with an O(1) lane for the common case of
//! deadlines that arrive in order (the same retry delay added over time).
//!
//! Entries are ordered by deadline, then by entry number (the order in which they were scheduled).
//! Entries that are not before the last one in the lane are appended to the lane (a `VecDeque`
//! sorted by construction); others go to a binary heap. The earliest entry is the smaller of the
//! two fronts. A workload whose deadlines only grow never touches the heap.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

/// One scheduled item. Entries may be stale; the state machine checks them against the item's slot.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    pub(crate) at: Instant,
    /// Entry number, given when the entry is scheduled: unique per entry, so it also tells one
    /// entry of an item from another with the same deadline, and orders equal deadlines.
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

/// Scheduled entries, earliest first (equal deadlines by entry number).
#[derive(Debug)]
pub(crate) struct Delays<T> {
    lane: VecDeque<Entry<T>>,
    heap: BinaryHeap<Reverse<Entry<T>>>,
}

impl<T> Delays<T> {
    pub(crate) fn new() -> Self {
        Self {
            lane: VecDeque::new(),
            heap: BinaryHeap::new(),
        }
    }

    /// Adds `entry`; `true` if it is now the earliest entry.
    pub(crate) fn push(&mut self, entry: Entry<T>) -> bool {
        let earliest = self.peek().is_none_or(|e| entry < *e);
        if self.lane.back().is_none_or(|last| entry >= *last) {
            self.lane.push_back(entry);
        } else {
            self.heap.push(Reverse(entry));
        }
        earliest
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
            d.push(entry(i, ms(at), i as u64));
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

    fn entry<T>(item: T, at: Instant, seq: u64) -> Entry<T> {
        Entry { at, seq, item }
    }

    #[test]
    fn push_reports_whether_the_entry_is_now_the_earliest() {
        let base = kcache_core::Clock::now(&kcache_core::FakeClock::new());
        let mut d = Delays::new();
        assert!(d.push(entry('a', base + Duration::from_millis(10), 1)));
        assert!(!d.push(entry('b', base + Duration::from_millis(20), 2)));
        assert!(!d.push(entry('c', base + Duration::from_millis(10), 3)));
        assert!(d.push(entry('d', base + Duration::from_millis(5), 4)));
        assert_eq!(d.peek().map(|e| e.item), Some('d'));
    }

    #[test]
    fn equal_deadlines_come_out_by_entry_number_whatever_order_they_arrive_in() {
        let at = kcache_core::Clock::now(&kcache_core::FakeClock::new()) + Duration::from_millis(1);
        let mut d = Delays::new();
        for seq in [2, 1, 4, 3] {
            d.push(entry(seq, at, seq));
        }
        let mut out = Vec::new();
        while let Some(e) = d.pop() {
            out.push(e.item);
        }
        assert_eq!(out, [1, 2, 3, 4]);
    }
}
