//! The delay schedule's two halves: an inbox that delayed adds append to, and the schedule that
//! only the timer (the queue's background thread) sorts and fires.
//!
//! A delayed add decides what it does at the call, under the item's shard lock (a no-op if the
//! item is queued, "after its `done`" if it is in flight, …); only when the item must wait does it
//! append an entry `(deadline, entry number, item)` to the inbox and record that entry number in
//! the item's slot. The timer moves the inbox into its [`Delays`] when it wakes, and fires an entry
//! only if the item's slot still names that entry: an entry made stale meanwhile (the item was
//! added now, processed, re-scheduled) is dropped. An earlier attempt scheduled the *decision*
//! later, which let a queued item run twice; here only the sorting is deferred.
//!
//! The timer publishes the deadline it plans to wake at ([`must_wake`](Timer::must_wake)), and a
//! delayed add signals it only for an earlier deadline: while adds stream in, the timer is not
//! woken once per add. After publishing its plan the timer looks at the earliest deadline in the
//! inbox ([`has_entry_before`](Timer::has_entry_before)) and goes round again if one is earlier.
//! The inbox's mutex orders the two sides: an entry appended before that look is seen by it; an
//! entry appended after it was appended after the plan was published, so its add compares its
//! deadline with that plan and signals if it is earlier. Either way no entry waits past its
//! deadline for a timer that sleeps on.
//!
//! Workers help with the firing: a worker that finds nothing ready, once the planned deadline has
//! come, fires the due entries of the schedule itself if the timer does not hold it
//! ([`plan_due`](Timer::plan_due), [`try_schedule`](Timer::try_schedule)), so due items do not
//! wait for the timer thread to get a core. Workers never move the inbox nor publish a plan: the
//! argument above is the timer's alone, and a worker's firing only makes the timer's next round
//! find less to do.

use super::delays::{Delays, Entry};
use super::tick::Tick;
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::{Mutex, MutexGuard};
use crossbeam_utils::CachePadded;

/// What delayed adds append to.
#[derive(Debug)]
struct Inbox<T> {
    entries: Vec<Entry<T>>,
    /// The earliest deadline in `entries`.
    earliest: Option<Tick>,
    /// The last entry number given (wrapping, see [`Entry::seq`]).
    next_seq: u32,
}

/// The schedule and what the timer thread keeps with it.
#[derive(Debug)]
pub(crate) struct Schedule<T> {
    pub(crate) delays: Delays<T>,
    /// The inbox's previous buffer, swapped in at the next drain (no allocation per drain).
    spare: Vec<Entry<T>>,
}

impl<T> Schedule<T> {
    /// Gives back the spare buffer's room if it is much larger than the schedule needs (after a
    /// compaction: a burst of stale entries grew it).
    pub(crate) fn shrink_spare(&mut self) {
        let (n, _) = self.delays.footprint();
        if self.spare.capacity() > 2 * n + 64 {
            self.spare = Vec::new();
        }
    }
}

/// The inbox and the schedule of one queue.
///
/// Each of the three shared parts sits on its own cache line: the inbox is locked by every delayed
/// add, the schedule is locked and changed by the timer for every entry it fires, and the plan is
/// read by every delayed add and written by the timer once per round. Unpadded, the timer's
/// firing kept taking the inbox's line away from the producer: in q4queue's profile, the inbox's
/// lock and unlock were nearly all of `schedule`'s time on the producer's thread.
#[derive(Debug)]
pub(crate) struct Timer<T> {
    inbox: CachePadded<Mutex<Inbox<T>>>,
    schedule: CachePadded<Mutex<Schedule<T>>>,
    /// The tick at which the timer plans to wake; `u64::MAX` when it has nothing planned.
    planned: CachePadded<AtomicU64>,
}

impl<T> Timer<T> {
    pub(crate) fn new() -> Self {
        Self {
            inbox: CachePadded::new(Mutex::new(Inbox {
                entries: Vec::new(),
                earliest: None,
                next_seq: 0,
            })),
            schedule: CachePadded::new(Mutex::new(Schedule {
                delays: Delays::new(),
                spare: Vec::new(),
            })),
            planned: CachePadded::new(AtomicU64::new(u64::MAX)),
        }
    }

    /// Appends an entry for `item` at `at`; returns its entry number (for the item's slot).
    pub(crate) fn schedule(&self, item: T, at: Tick) -> u32 {
        let mut inbox = self.inbox.lock();
        inbox.next_seq = inbox.next_seq.wrapping_add(1);
        let seq = inbox.next_seq;
        inbox.entries.push(Entry { at, seq, item });
        if inbox.earliest.is_none_or(|e| at < e) {
            inbox.earliest = Some(at);
        }
        seq
    }

    /// Whether the inbox holds an entry due before `next` (any entry, if `next` is `None`).
    pub(crate) fn has_entry_before(&self, next: Option<Tick>) -> bool {
        let earliest = self.inbox.lock().earliest;
        earliest.is_some_and(|e| next.is_none_or(|n| e < n))
    }

    /// Whether a new deadline `at` is earlier than the timer's planned wake-up (the caller then
    /// signals the timer).
    pub(crate) fn must_wake(&self, at: Tick) -> bool {
        at.0 < self.planned.load(Ordering::SeqCst)
    }

    /// The tick the timer plans to wake at, if any: once it has come, entries of the schedule
    /// may be due, and a worker with nothing to do may fire them
    /// ([`try_schedule`](Timer::try_schedule)). One load.
    pub(crate) fn planned(&self) -> Option<Tick> {
        let planned = self.planned.load(Ordering::Acquire);
        (planned != u64::MAX).then_some(Tick(planned))
    }

    /// The schedule without the inbox, unless someone (the timer) holds it. Entries still in the
    /// inbox stay there: moving them is the timer's (see the module docs: the timer's look at the
    /// inbox after it published its plan must see every entry that came before).
    pub(crate) fn try_schedule(&self) -> Option<MutexGuard<'_, Schedule<T>>> {
        self.schedule.try_lock()
    }

    /// Publishes the deadline the timer will sleep until; then it checks
    /// [`has_entry_before`](Timer::has_entry_before).
    pub(crate) fn plan(&self, next: Option<Tick>) {
        let at = next.map_or(u64::MAX, |at| at.0);
        self.planned.store(at, Ordering::SeqCst);
    }

    /// The schedule, with the inbox moved into it.
    pub(crate) fn drain(&self) -> MutexGuard<'_, Schedule<T>> {
        let mut s = self.schedule.lock();
        let mut spare = std::mem::take(&mut s.spare);
        {
            let mut inbox = self.inbox.lock();
            std::mem::swap(&mut spare, &mut inbox.entries);
            inbox.earliest = None;
        }
        for e in spare.drain(..) {
            s.delays.push(e);
        }
        s.spare = spare;
        s
    }

    /// Entries held (inbox and schedule, stale ones included) and the room allocated for them
    /// (tests of the schedule's memory).
    #[allow(dead_code, reason = "used by tests and the fuzz model")]
    pub(crate) fn footprint(&self) -> (usize, usize) {
        let s = self.schedule.lock();
        let (n, cap) = s.delays.footprint();
        let inbox = self.inbox.lock();
        (
            n + inbox.entries.len(),
            cap + s.spare.capacity() + inbox.entries.capacity(),
        )
    }

    /// Drops every entry (shutdown).
    /// Its memory goes back to the allocator.
    pub(crate) fn clear(&self) {
        let mut s = self.schedule.lock();
        s.delays.clear();
        s.spare = Vec::new();
        let mut inbox = self.inbox.lock();
        inbox.entries = Vec::new();
        inbox.earliest = None;
    }
}

#[cfg(test)]
mod tests {
    use crate::queue::Queue;
    use crate::QueueConfig;
    use kcache_core::{Clock, FakeClock};
    use std::sync::Arc;
    use std::time::Duration;

    /// A queue with no timer thread: the test runs the timer's rounds itself.
    fn queue(clock: &FakeClock) -> Queue<u32> {
        Queue::build(QueueConfig::new().clock(Arc::new(clock.clone())))
    }

    fn timer_round(q: &Queue<u32>) {
        let weak = Arc::downgrade(&q.shared);
        assert!(crate::background::tick(&weak, &mut None).is_some());
    }

    #[test]
    fn a_worker_fires_what_is_due_while_the_timer_has_not_woken() {
        let clock = FakeClock::new();
        let q = queue(&clock);
        let now = clock.now();
        for (item, ms) in [(1, 10), (2, 20), (3, 30)] {
            crate::delaying::add_at_from(&q.shared, item, now + Duration::from_millis(ms), now, 0);
        }
        // The timer moves the inbox into its schedule and plans to wake at 10 ms.
        timer_round(&q);
        assert_eq!(q.try_get(), None);
        // 20 ms pass and the timer has not run: a worker fires the two due items, in order.
        clock.advance(Duration::from_millis(20));
        assert_eq!(q.try_get(), Some(1));
        assert_eq!(q.try_get(), Some(2));
        assert_eq!(q.try_get(), None);
        assert_eq!(q.shared.waiting(), 1);
        // The timer's next round finds nothing more due and plans for the last one.
        timer_round(&q);
        clock.advance(Duration::from_millis(10));
        assert_eq!(q.try_get(), Some(3));
        for i in 1..=3 {
            q.done(&i).unwrap();
        }
    }

    /// A metrics provider that keeps only the `workqueue_delayed_depth` gauge's last value.
    #[derive(Default)]
    struct DelayedDepth(std::sync::Mutex<f64>);

    impl crate::metrics::SettableGaugeMetric for DelayedDepth {
        fn set(&self, value: f64) {
            *self.0.lock().unwrap_or_else(|e| e.into_inner()) = value;
        }
    }

    struct Ignore;

    impl crate::metrics::GaugeMetric for Ignore {
        fn inc(&self) {}
        fn dec(&self) {}
    }
    impl crate::metrics::CounterMetric for Ignore {
        fn inc(&self) {}
    }
    impl crate::metrics::HistogramMetric for Ignore {
        fn observe(&self, _: f64) {}
    }
    impl crate::metrics::SettableGaugeMetric for Ignore {
        fn set(&self, _: f64) {}
    }

    struct Provider(Arc<DelayedDepth>);

    impl crate::metrics::MetricsProvider for Provider {
        fn new_depth_metric(&self, _: &str) -> Arc<dyn crate::metrics::GaugeMetric> {
            Arc::new(Ignore)
        }
        fn new_adds_metric(&self, _: &str) -> Arc<dyn crate::metrics::CounterMetric> {
            Arc::new(Ignore)
        }
        fn new_latency_metric(&self, _: &str) -> Arc<dyn crate::metrics::HistogramMetric> {
            Arc::new(Ignore)
        }
        fn new_work_duration_metric(&self, _: &str) -> Arc<dyn crate::metrics::HistogramMetric> {
            Arc::new(Ignore)
        }
        fn new_unfinished_work_seconds_metric(
            &self,
            _: &str,
        ) -> Arc<dyn crate::metrics::SettableGaugeMetric> {
            Arc::new(Ignore)
        }
        fn new_longest_running_processor_seconds_metric(
            &self,
            _: &str,
        ) -> Arc<dyn crate::metrics::SettableGaugeMetric> {
            Arc::new(Ignore)
        }
        fn new_retries_metric(&self, _: &str) -> Arc<dyn crate::metrics::CounterMetric> {
            Arc::new(Ignore)
        }
        fn new_delayed_depth_metric(
            &self,
            _: &str,
        ) -> Arc<dyn crate::metrics::SettableGaugeMetric> {
            self.0.clone()
        }
    }

    #[test]
    fn a_worker_that_fires_updates_the_delayed_depth_gauge() {
        let clock = FakeClock::new();
        let gauge = Arc::new(DelayedDepth::default());
        let q: Queue<u32> = Queue::build(
            QueueConfig::new()
                .name("q")
                .clock(Arc::new(clock.clone()))
                .metrics_provider(Arc::new(Provider(gauge.clone()))),
        );
        let now = clock.now();
        for (item, ms) in [(1, 10), (2, 20)] {
            crate::delaying::add_at_from(&q.shared, item, now + Duration::from_millis(ms), now, 0);
            q.shared
                .after_schedule(q.shared.epoch.tick(now + Duration::from_millis(ms)));
        }
        timer_round(&q);
        let depth = || *gauge.0.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(depth(), 2.0);
        // The timer does not run again: the worker fires the first item, and the gauge follows.
        clock.advance(Duration::from_millis(10));
        assert_eq!(q.try_get(), Some(1));
        assert_eq!(depth(), 1.0);
        q.done(&1).unwrap();
    }

    #[test]
    fn a_worker_fires_nothing_before_the_plan_or_from_the_inbox() {
        let clock = FakeClock::new();
        let q = queue(&clock);
        let now = clock.now();
        crate::delaying::add_at_from(&q.shared, 1, now + Duration::from_millis(10), now, 0);
        // Still in the inbox, nothing planned: the timer's to move.
        clock.advance(Duration::from_millis(10));
        assert_eq!(q.try_get(), None);
        timer_round(&q);
        assert_eq!(q.try_get(), Some(1));
        q.done(&1).unwrap();
        // An item added now with a deadline before the timer's plan stays for the timer too.
        let now = clock.now();
        crate::delaying::add_at_from(&q.shared, 2, now + Duration::from_millis(50), now, 0);
        timer_round(&q);
        crate::delaying::add_at_from(&q.shared, 3, now + Duration::from_millis(5), now, 0);
        clock.advance(Duration::from_millis(5));
        assert_eq!(q.try_get(), None);
        timer_round(&q);
        assert_eq!(q.try_get(), Some(3));
        q.done(&3).unwrap();
    }
}
