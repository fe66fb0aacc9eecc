//! Keeping the delay schedule's memory bounded by the items waiting, not by the calls made.
//!
//! An entry of the schedule goes stale when its item stops waiting for it without it firing: the
//! item was added now (`add` of a waiting item), or moved to an earlier deadline (a new entry).
//! The timer drops stale entries when it reaches them, but an entry far in the future is reached
//! late: a key cycling `add_after(2 h)`, `add`, `get`, `done` left one entry per cycle, and the
//! timer, which wakes only for an earlier deadline, never even moved them out of its inbox.
//!
//! So the stale entries are counted ([`Shared::stale`]), and the add that makes one stale while
//! they outnumber the items waiting by more than [`SLACK`] compacts the schedule: it drains the
//! inbox into the schedule and keeps only the live entries (each checked under its item's shard
//! lock, as the timer does). The schedule then never holds more than `2 × waiting + SLACK`
//! entries (one live entry per waiting item, and at most `waiting + SLACK` stale ones; a
//! compaction that runs on another thread lets a few more in meanwhile). A compaction scans at
//! most twice as many entries as it drops, so its cost per stale entry is constant.
//!
//! Lock order is the timer's (schedule, then a shard): the compacting add has released its own
//! shard lock first. A compaction can move an entry from the inbox into the schedule after the
//! timer published its plan and looked at the inbox (see `timer.rs`); it therefore signals the
//! timer, which plans again.

use super::delays::Entry;
use super::shared::Shared;
use super::slots::Slot;
use crate::sync::atomic::Ordering;
use std::hash::Hash;

/// How many more stale entries than waiting items the schedule may hold before an add compacts
/// it. Small, so that the fuzz model (eight keys) reaches compactions; the cost per stale entry
/// does not depend on it.
pub(crate) const SLACK: usize = 16;

impl<T: Clone + Eq + Hash + Send + 'static> Shared<T> {
    /// An entry just went stale (under its item's shard lock). Returns whether the caller must
    /// [`compact_schedule`](Shared::compact_schedule) once it has released that lock.
    pub(crate) fn went_stale(&self) -> bool {
        let stale = self.stale.fetch_add(1, Ordering::AcqRel) + 1;
        stale > self.waiting() + SLACK
    }

    /// `n` stale entries left the schedule.
    pub(crate) fn stale_dropped(&self, n: usize) {
        if n > 0 {
            self.stale.fetch_sub(n, Ordering::AcqRel);
        }
    }

    /// Whether `e` is the entry its item waits for.
    pub(crate) fn is_live(&self, e: &Entry<T>) -> bool {
        matches!(
            self.slots.lock(&e.item).get(&e.item),
            Some(&Slot::Waiting { at, seq, .. }) if (at, seq) == (e.at, e.seq)
        )
    }

    /// Drops every stale entry from the inbox and the schedule (called with no shard lock held).
    pub(crate) fn compact_schedule(&self) {
        let mut schedule = self.timer.drain();
        let dropped = schedule.delays.retain(|e| self.is_live(e));
        schedule.shrink_spare();
        drop(schedule);
        self.stale_dropped(dropped);
        self.signal.set();
    }
}

#[cfg(test)]
mod tests {
    use crate::{DelayingQueue, QueueConfig};
    use kcache_core::FakeClock;
    use std::sync::Arc;
    use std::time::Duration;

    fn queue() -> DelayingQueue<u64> {
        DelayingQueue::with_config(QueueConfig::new().clock(Arc::new(FakeClock::new())))
    }

    #[test]
    fn a_key_cycling_through_a_long_delay_and_an_add_keeps_the_schedule_small() {
        let q = queue();
        let mut peak = 0;
        for i in 0..1_000_000u32 {
            assert!(q.add_after(7, Duration::from_secs(7_200)));
            assert!(q.add(7));
            assert_eq!(q.try_get(), Some(7));
            q.done(&7).unwrap();
            if i % 1_000 == 0 {
                peak = peak.max(q.shared.timer.footprint().0);
            }
        }
        let (entries, _) = q.shared.timer.footprint();
        peak = peak.max(entries);
        assert!(peak <= 64, "the schedule held {peak} entries for one key");
        assert_eq!(q.waiting_len(), 0);
    }

    #[test]
    fn a_key_moved_earlier_again_and_again_keeps_the_schedule_small() {
        let q = queue();
        for i in 0..100_000u64 {
            assert!(q.add_after(7, Duration::from_secs(1_000_000 - i)));
        }
        let (entries, _) = q.shared.timer.footprint();
        assert!(
            entries <= 2 + super::SLACK,
            "{entries} entries for one waiting key"
        );
        assert_eq!(q.waiting_len(), 1);
    }

    #[test]
    fn entries_live_and_stale_are_bounded_by_twice_the_waiting_items_plus_the_slack() {
        let q = queue();
        for k in 0..1_000u64 {
            q.add_after(k, Duration::from_secs(3_600));
        }
        // Half of them are added now (stale entries), the other half stay.
        for round in 0..100u64 {
            for k in (0..1_000u64).filter(|k| k % 2 == 0) {
                q.add(k);
                assert_eq!(q.try_get(), Some(k));
                q.done(&k).unwrap();
                q.add_after(k, Duration::from_secs(3_600 + round));
            }
        }
        let (entries, _) = q.shared.timer.footprint();
        assert!(entries <= 2 * q.waiting_len() + super::SLACK, "{entries}");
        assert_eq!(q.waiting_len(), 1_000);
    }

    #[test]
    fn a_shut_down_gives_the_schedules_memory_back() {
        let q = queue();
        for k in 0..100_000u64 {
            q.add_after(k, Duration::from_secs(3_600));
        }
        assert!(q.shared.timer.footprint().1 >= 100_000);
        q.shut_down();
        assert_eq!(q.shared.timer.footprint(), (0, 0));
        assert_eq!(q.shared.slots.capacity(), 0);
    }
}
