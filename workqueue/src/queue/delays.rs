//! The delay schedule: entries ordered by deadline, then by entry number (the order in which
//! they were scheduled).
//!
//! Entries go into buckets of 2^16 ns (about 66 µs) of deadline, kept in a `BTreeMap` by bucket
//! number; a bucket is a plain `Vec`, sorted only when its earliest entry is asked for (then
//! descending, so the earliest is popped from the back). A push is a B-tree lookup among the few
//! hundred buckets that a spread of deadlines occupies plus a `Vec` push; firing walks contiguous
//! memory. A binary heap over all entries, which this replaced, spent most of the timer thread's
//! time in cache misses: each pop sifts through log2(n) levels of a heap megabytes large (q3:
//! 100,000 random deadlines within 50 ms, about 600 ns per pop on this machine, slower than the
//! deadlines came due).

use super::tick::Tick;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// One scheduled item. Entries may be stale; the state machine checks them against the item's slot.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    pub(crate) at: Tick,
    /// Entry number, given when the entry is scheduled: it tells one entry of an item from
    /// another with the same deadline, and orders equal deadlines. A `u32` (the slot stays 24
    /// bytes): numbers repeat after 2^32 entries, so two entries could only be confused if one
    /// item had two with the very same nanosecond deadline 4 billion entries apart, the older
    /// still held (stale entries are compacted away long before, see `compact.rs`); equal
    /// deadlines 4 billion entries apart may come out in either order.
    pub(crate) seq: u32,
    pub(crate) item: T,
}

impl<T> Entry<T> {
    fn key(&self) -> (Tick, u32) {
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

/// log2 of a bucket's width in nanoseconds.
const BUCKET_SHIFT: u32 = 16;

/// The entries of one bucket; `sorted` when they are in descending order.
#[derive(Debug)]
struct Bucket<T> {
    entries: Vec<Entry<T>>,
    sorted: bool,
}

/// Scheduled entries, earliest first (equal deadlines by entry number).
#[derive(Debug)]
pub(crate) struct Delays<T> {
    buckets: BTreeMap<u64, Bucket<T>>,
}

impl<T> Delays<T> {
    pub(crate) fn new() -> Self {
        Self {
            buckets: BTreeMap::new(),
        }
    }

    fn bucket_of(at: Tick) -> u64 {
        at.0 >> BUCKET_SHIFT
    }

    /// Adds `entry`.
    pub(crate) fn push(&mut self, entry: Entry<T>) {
        let b = self
            .buckets
            .entry(Self::bucket_of(entry.at))
            .or_insert(Bucket {
                entries: Vec::new(),
                sorted: true,
            });
        if b.sorted && b.entries.last().is_some_and(|min| entry > *min) {
            b.sorted = false;
        }
        b.entries.push(entry);
    }

    /// The earliest bucket, sorted.
    fn first(&mut self) -> Option<&mut Bucket<T>> {
        let b = self.buckets.first_entry()?.into_mut();
        if !b.sorted {
            b.entries.sort_unstable_by(|x, y| y.cmp(x));
            b.sorted = true;
        }
        Some(b)
    }

    /// The earliest entry.
    pub(crate) fn peek(&mut self) -> Option<&Entry<T>> {
        self.first().and_then(|b| b.entries.last())
    }

    /// Removes and returns the earliest entry.
    pub(crate) fn pop(&mut self) -> Option<Entry<T>> {
        let mut first = self.buckets.first_entry()?;
        let b = first.get_mut();
        if !b.sorted {
            b.entries.sort_unstable_by(|x, y| y.cmp(x));
            b.sorted = true;
        }
        let e = b.entries.pop();
        if b.entries.is_empty() {
            first.remove();
        }
        e
    }

    /// Drops every entry.
    pub(crate) fn clear(&mut self) {
        self.buckets.clear();
    }

    /// Keeps only the entries `live` says yes to (in their order); returns how many it dropped.
    /// Buckets left empty go, and a bucket left with far more room than entries shrinks.
    pub(crate) fn retain(&mut self, mut live: impl FnMut(&Entry<T>) -> bool) -> usize {
        let mut dropped = 0;
        self.buckets.retain(|_, b| {
            let before = b.entries.len();
            b.entries.retain(&mut live);
            dropped += before - b.entries.len();
            if b.entries.capacity() > 2 * b.entries.len() + 16 {
                b.entries.shrink_to_fit();
            }
            !b.entries.is_empty()
        });
        dropped
    }

    /// How many entries there are, and how many the buckets have room for (tests of the
    /// schedule's memory).
    pub(crate) fn footprint(&self) -> (usize, usize) {
        self.buckets.values().fold((0, 0), |(n, cap), b| {
            (n + b.entries.len(), cap + b.entries.capacity())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_out_earliest_first_whatever_lane_they_took() {
        let ms = |n: u64| Tick(n * 1_000_000);
        let mut d = Delays::new();
        for (i, at) in [5, 7, 7, 3, 9, 1, 8, 8, 2].into_iter().enumerate() {
            d.push(entry(i, ms(at), i as u32));
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

    fn entry<T>(item: T, at: Tick, seq: u32) -> Entry<T> {
        Entry { at, seq, item }
    }

    #[test]
    fn an_earlier_entry_pushed_into_a_sorted_bucket_comes_out_first() {
        let ns = Tick;
        let mut d = Delays::new();
        d.push(entry('a', ns(10), 1));
        d.push(entry('b', ns(20), 2));
        assert_eq!(d.peek().map(|e| e.item), Some('a'));
        d.push(entry('c', ns(5), 3));
        d.push(entry('d', ns(15), 4));
        let mut out = Vec::new();
        while let Some(e) = d.pop() {
            out.push(e.item);
        }
        assert_eq!(out, ['c', 'a', 'd', 'b']);
        assert!(d.peek().is_none());
    }

    #[test]
    fn equal_deadlines_come_out_by_entry_number_whatever_order_they_arrive_in() {
        let at = Tick(1_000_000);
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
