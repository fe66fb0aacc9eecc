//! What all handles of one queue share, and every transition of an item's slot.
//!
//! The rules (client-go's, and the differences the crate docs list) in one place; each transition
//! takes the item's shard lock only, and a plain queue's `get` not even that (it leaves the slot
//! to be settled by the next lock holder). See [`slots`](super::slots) for the states,
//! [`ready`](super::ready) for the hand-off to workers and [`timer`](super::timer) for delays.
//!
//! # Shutdown
//! `shut_down` sets `closing`, then locks every shard once. An add that saw `closing` unset did
//! its whole transition, ready push included, under its shard lock, so once the sweep has passed
//! every shard, every accepted add is in the ready FIFO; only then is the ready queue closed (a
//! worker returns `None` when it sees "closed", then an empty FIFO). The sweep also drops the items
//! waiting for a delay.
//!
//! # In flight and drain
//! Nothing counts the items in flight across the queue: each shard counts its own (its tickets
//! taken and, under its lock, the gets that locked it and the dones; see [`slots`](super::slots)),
//! and [`in_flight`](Shared::in_flight) adds them up. A drain
//! needs no count either: every item ready, on its way from the ready queue to a worker, or in
//! flight has a slot, so once the shutdown's sweep has dropped the waiting items, "nothing ready
//! and nothing in flight" is "every shard is empty". After that sweep no add is accepted and no
//! item starts waiting, so a shard seen empty stays empty: the drain looks at each shard in turn,
//! waiting on the first one that is not empty, and never looks back. A `done` that empties a slot
//! while the drain flag is set wakes the drain to look again.

use super::ready::{Ready, Store};
use super::slots::{Slot, Slots, Then};
use super::tick::{Epoch, Tick};
use super::timer::{Schedule, Timer};
use crate::error::NotProcessing;
use crate::metrics::QueueMetrics;
use crate::signal::Signal;
use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::{Mutex, MutexGuard};
use crossbeam_utils::CachePadded;
use kcache_core::Clock;
use std::collections::hash_map::Entry;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Instant;

/// What all handles of one queue share.
pub(crate) struct Shared<T> {
    pub(crate) slots: Slots<T>,
    pub(crate) ready: Ready<T>,
    pub(crate) timer: Timer<T>,
    /// Set by `shut_down`, read under shard locks.
    closing: AtomicBool,
    /// Set while `shut_down_with_drain` waits (read by every `done` that empties a slot).
    draining: AtomicBool,
    /// How many times an item started waiting for a delay (a slot became `Waiting`), and how many
    /// times one stopped (a `Waiting` slot became `Queued`, or was dropped by the shutdown). Items
    /// waiting now are the difference. Two counters and not one: the first is written by the
    /// producers (`add_at`) and workers (`done`), the second mostly by the timer as it fires. One
    /// counter written on every delayed add and every firing was a cache line moving between the
    /// producer's core and the timer's for every item (and it shared its line with `closing` and
    /// `clock`, which every add reads). Each is changed only under the shard lock of the item it
    /// counts, so a worker that got an item never sees it still counted as waiting (see
    /// [`waiting`](Shared::waiting)).
    started_waiting: CachePadded<AtomicUsize>,
    stopped_waiting: CachePadded<AtomicUsize>,
    /// Entries in the delay schedule that no longer fire (their item was added now, or moved to
    /// an earlier deadline): counted up under the item's shard lock when the entry goes stale,
    /// down when the timer or a compaction drops it. It keeps the schedule's size bounded by the
    /// items waiting (see [`compact`](super::compact)).
    pub(crate) stale: CachePadded<AtomicUsize>,
    /// Serializes `shut_down` calls.
    life: Mutex<()>,
    /// Wakes the background thread (delay timer and metrics ticker), if any.
    pub(crate) signal: Arc<Signal>,
    pub(crate) clock: Arc<dyn Clock>,
    /// What the queue's ticks count from (see [`tick`](super::tick)).
    pub(crate) epoch: Epoch,
    pub(crate) metrics: Option<QueueMetrics>,
    /// Whether `get` takes its item by ticket, without the shard lock (see `slots.rs`): a plain
    /// FIFO without metrics (metrics record the item's wait and start under the lock).
    lock_free_get: bool,
}

/// What a delayed add did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheduled {
    /// Refused: the queue is shutting down.
    Refused,
    /// Accepted; nothing else to tell.
    Accepted,
    /// The item waits for `at`.
    Waiting { at: Tick },
}

impl<T: Clone + Eq + Hash + Send + 'static> Shared<T> {
    pub(crate) fn new(
        clock: Arc<dyn Clock>,
        metrics: Option<QueueMetrics>,
        store: Store<T>,
    ) -> Self {
        let epoch = Epoch::new(clock.now());
        let ready = Ready::new(store);
        Self {
            slots: Slots::new(),
            lock_free_get: metrics.is_none() && ready.has_tickets(),
            ready,
            timer: Timer::new(),
            closing: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            started_waiting: CachePadded::new(AtomicUsize::new(0)),
            stopped_waiting: CachePadded::new(AtomicUsize::new(0)),
            stale: CachePadded::new(AtomicUsize::new(0)),
            life: Mutex::new(()),
            signal: Signal::new(),
            clock,
            epoch,
            metrics,
        }
    }

    /// The time for metrics timestamps, read only when metrics are on.
    pub(crate) fn metrics_now(&self) -> Option<Tick> {
        self.metrics.as_ref().map(|_| self.now())
    }

    /// The clock's time now, as a tick.
    pub(crate) fn now(&self) -> Tick {
        self.epoch.tick(self.clock.now())
    }

    /// Whether `shut_down` has run (or is running).
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Whether a drain is being waited for.
    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Items handed out and not yet done (locks every shard in turn).
    pub(crate) fn in_flight(&self) -> usize {
        self.slots.in_flight()
    }

    /// Items waiting for a delay.
    ///
    /// The stops are read first: an item's stop is counted (under its shard lock) after its start,
    /// so every stop this read sees has its start in the read that follows, and the difference
    /// never counts an item twice as stopped, nor goes below zero.
    pub(crate) fn waiting(&self) -> usize {
        let stopped = self.stopped_waiting.load(Ordering::Acquire);
        let started = self.started_waiting.load(Ordering::Acquire);
        started.wrapping_sub(stopped)
    }

    /// One more item waits for a delay (under its shard lock).
    pub(crate) fn start_waiting(&self) {
        self.started_waiting.fetch_add(1, Ordering::AcqRel);
    }

    /// `n` items stopped waiting (each under its shard lock).
    fn stop_waiting(&self, n: usize) {
        self.stopped_waiting.fetch_add(n, Ordering::AcqRel);
    }

    /// Makes `item` ready now, unless it is pending already. `false` only when refused.
    pub(crate) fn add(&self, item: T) -> bool {
        self.add_with_priority(item, 0)
    }

    /// Makes `item` ready now at `priority` (ignored by the plain FIFO), unless it is pending
    /// already; a pending item's priority is raised to `priority` if that is higher, never
    /// lowered. `false` only when refused.
    pub(crate) fn add_with_priority(&self, item: T, priority: i32) -> bool {
        let now = self.metrics_now();
        let mut shard = self.slots.lock(&item);
        if self.closing.load(Ordering::Acquire) {
            drop(shard);
            return false;
        }
        let mut compact = false;
        let taken = shard.taken();
        let (map, mut tickets) = shard.split();
        // One lookup (the entry) for the new item, the common case.
        let (wake, counted) = match map.entry(item) {
            Entry::Vacant(v) => {
                let ticket = tickets.next();
                let wake = self.ready.push(v.key().clone(), priority, ticket);
                v.insert(Slot::Queued {
                    since: now.unwrap_or_default(),
                    ticket,
                });
                (wake, true)
            }
            Entry::Occupied(mut o) => {
                let slot = o.get_mut();
                slot.settle(taken);
                match slot {
                    Slot::Queued { .. } => {
                        self.ready.raise(o.key(), priority);
                        (false, false)
                    }
                    Slot::Processing { then, .. } => match then {
                        Then::Requeue { priority: p, .. } => {
                            *p = (*p).max(priority);
                            (false, false)
                        }
                        Then::Nothing => {
                            *then = Then::Requeue {
                                since: now.unwrap_or_default(),
                                priority,
                            };
                            (false, true)
                        }
                        Then::Wait { priority: p, .. } => {
                            let priority = priority.max(*p);
                            *then = Then::Requeue {
                                since: now.unwrap_or_default(),
                                priority,
                            };
                            (false, true)
                        }
                    },
                    Slot::Waiting { priority: p, .. } => {
                        // Ready now; its delay entry goes stale (deduplicated against the ready
                        // queue).
                        let priority = priority.max(*p);
                        let ticket = tickets.next();
                        *slot = Slot::Queued {
                            since: now.unwrap_or_default(),
                            ticket,
                        };
                        self.stop_waiting(1);
                        compact = self.went_stale();
                        (self.ready.push(o.key().clone(), priority, ticket), true)
                    }
                }
            }
        };
        drop(shard);
        self.after_push(wake, counted);
        if compact {
            self.compact_schedule();
        }
        true
    }

    /// Makes `item` ready at `at` (at `priority`); a deadline not after `now` is an immediate
    /// add. A pending deadline only moves earlier, a pending priority only up.
    pub(crate) fn add_at(&self, item: T, at: Tick, now: Tick, priority: i32) -> Scheduled {
        if at <= now {
            return if self.add_with_priority(item, priority) {
                Scheduled::Accepted
            } else {
                Scheduled::Refused
            };
        }
        let mut shard = self.slots.lock(&item);
        if self.closing.load(Ordering::Acquire) {
            drop(shard);
            return Scheduled::Refused;
        }
        // One lookup (the entry), as in `add_with_priority`: a new item is the common case.
        let taken = shard.taken();
        let mut o = match shard.entry(item) {
            Entry::Vacant(v) => {
                let seq = self.timer.schedule(v.key().clone(), at);
                v.insert(Slot::Waiting { at, seq, priority });
                self.start_waiting();
                drop(shard);
                return Scheduled::Waiting { at };
            }
            Entry::Occupied(o) => o,
        };
        o.get_mut().settle(taken);
        let raised = match o.get_mut() {
            Slot::Queued { .. } => {
                self.ready.raise(o.key(), priority);
                return Scheduled::Accepted;
            }
            Slot::Processing { then, .. } => {
                match then {
                    Then::Requeue { priority: p, .. } => *p = (*p).max(priority),
                    Then::Wait {
                        at: old,
                        priority: p,
                    } => {
                        *p = (*p).max(priority);
                        if at < *old {
                            *old = at;
                        }
                    }
                    Then::Nothing => *then = Then::Wait { at, priority },
                }
                return Scheduled::Accepted;
            }
            Slot::Waiting {
                at: old,
                priority: p,
                ..
            } => {
                *p = (*p).max(priority);
                if *old <= at {
                    return Scheduled::Accepted;
                }
                *p
            }
        };
        // A waiting item moves to an earlier deadline: a new entry, and the old one goes stale.
        let seq = self.timer.schedule(o.key().clone(), at);
        o.insert(Slot::Waiting {
            at,
            seq,
            priority: raised,
        });
        if self.went_stale() {
            drop(shard);
            self.compact_schedule();
            return Scheduled::Waiting { at };
        }
        drop(shard);
        Scheduled::Waiting { at }
    }

    /// After a delayed entry was scheduled: wake the timer if it plans to wake later.
    pub(crate) fn after_schedule(&self, at: Tick) {
        if let Some(m) = &self.metrics {
            m.delayed_depth.set(self.waiting() as f64);
        }
        if self.timer.must_wake(at) {
            self.signal.set();
        }
    }

    /// After an item became ready (`wake`: a sleeper was registered) or newly pending
    /// (`counted`: metrics count it as an add).
    fn after_push(&self, wake: bool, counted: bool) {
        if let (Some(m), true) = (&self.metrics, counted) {
            m.depth.inc();
            m.adds.inc();
        }
        if wake {
            self.ready.wake_one();
        }
    }

    /// Takes a ready item if there is one, and marks it in flight.
    pub(crate) fn try_take(&self) -> Option<T> {
        // No "is it empty?" look first: the FIFO's emptiness check reads its tail, the line the
        // producer writes on every push, while a pop from a queue that is not empty reads only
        // the head. On its way from the ready queue to this worker, the item keeps its `Queued`
        // slot, so a drain sees it in its shard.
        let (item, ticket) = match self.ready.pop() {
            Some(popped) => popped,
            None if self.help_fire() > 0 => self.ready.pop()?,
            None => return None,
        };
        if self.lock_free_get {
            // The slot stays as it is; its ticket is now taken (see `slots.rs`).
            self.slots.mark_taken(ticket);
            return Some(item);
        }
        let now = self.metrics_now();
        let since = {
            let mut shard = self.slots.lock(&item);
            let (since, counted) = match shard.get_mut(&item) {
                Some(slot) => {
                    let (since, was_processing) = match *slot {
                        Slot::Queued { since, .. } => (Some(since), false),
                        Slot::Processing { .. } => (None, true),
                        Slot::Waiting { .. } => (None, false),
                    };
                    *slot = Slot::Processing {
                        started: now.unwrap_or_default(),
                        then: Then::Nothing,
                    };
                    (since, !was_processing)
                }
                None => (None, false),
            };
            if counted {
                shard.processing += 1;
            }
            since
        };
        if let Some(m) = &self.metrics {
            m.depth.dec();
            if let (Some(now), Some(since)) = (now, since) {
                m.latency.observe(now.since(since).as_secs_f64());
            }
        }
        Some(item)
    }

    /// Marks `item` processed; requeues or schedules it if it was added again meanwhile.
    pub(crate) fn done(&self, item: &T) -> Result<(), NotProcessing> {
        let now = self.metrics_now();
        let mut shard = self.slots.lock(item);
        // One lookup: the slot changes in place (no second lookup, and no clone of the key to
        // insert it again: for an `Arc` key, that clone and the drop of the duplicate key were two
        // atomic writes to a reference count that every thread adding that key also writes).
        let taken = shard.taken();
        let (map, mut tickets) = shard.split();
        let Some(slot) = map.get_mut(item) else {
            return Err(NotProcessing);
        };
        slot.settle(taken);
        let Slot::Processing { started, then } = *slot else {
            return Err(NotProcessing);
        };
        let (mut wake, mut counted, mut scheduled, mut emptied) = (false, false, None, false);
        match then {
            Then::Requeue { since, priority } => {
                let ticket = tickets.next();
                *slot = Slot::Queued { since, ticket };
                wake = self.ready.push(item.clone(), priority, ticket);
            }
            Then::Wait { at, priority } if !self.closing.load(Ordering::Acquire) => {
                let t = now.unwrap_or_else(|| self.now());
                if at <= t {
                    let ticket = tickets.next();
                    *slot = Slot::Queued { since: t, ticket };
                    wake = self.ready.push(item.clone(), priority, ticket);
                    counted = true;
                } else {
                    let seq = self.timer.schedule(item.clone(), at);
                    *slot = Slot::Waiting { at, seq, priority };
                    self.start_waiting();
                    scheduled = Some(at);
                }
            }
            // Nothing to do, or a delayed re-add whose schedule went away with the shutdown.
            Then::Nothing | Then::Wait { .. } => {
                map.remove(item);
                emptied = true;
            }
        }
        shard.processing -= 1;
        drop(shard);
        if emptied && self.is_draining() {
            self.ready.notify_drained();
        }
        self.after_push(wake, counted);
        if let Some(at) = scheduled {
            self.after_schedule(at);
        }
        if let (Some(m), Some(now)) = (&self.metrics, now) {
            m.work_duration.observe(now.since(started).as_secs_f64());
        }
        Ok(())
    }

    /// Moves every live entry due at `now` to the ready queue; returns how many.
    pub(crate) fn fire_due(&self, now: Instant) -> usize {
        self.fire_from(self.timer.drain(), self.epoch.tick(now))
    }

    /// A worker that found nothing ready fires the entries of the schedule that are due, if the
    /// timer's plan says some may be and the timer is not at it: the items come out on time even
    /// while the timer thread waits for a core (on a busy machine it can wait for milliseconds,
    /// and everything due meanwhile would wait with it). The timer still does everything else
    /// (the inbox, the plan), and fires what no worker did. Returns how many items it fired.
    pub(crate) fn help_fire(&self) -> usize {
        if self.timer.planned().is_none_or(|p| p > self.now()) {
            return 0;
        }
        let Some(schedule) = self.timer.try_schedule() else {
            return 0;
        };
        // The time is read again under the lock: an entry fires only when it is due.
        self.fire_from(schedule, self.now())
    }

    /// Fires the live entries of `schedule` due at `now` (see [`fire_due`](Shared::fire_due)).
    fn fire_from(&self, mut schedule: MutexGuard<'_, Schedule<T>>, now: Tick) -> usize {
        // The metrics' timestamp of the items fired (unused, and zero, without metrics).
        let since = now;
        let (mut fired, mut dropped) = (0, 0);
        while schedule.delays.peek().is_some_and(|e| e.at <= now) {
            let Some(e) = schedule.delays.pop() else {
                break;
            };
            let mut shard = self.slots.lock(&e.item);
            let (map, mut tickets) = shard.split();
            // Only a waiting slot matters here, and a waiting slot needs no settling.
            if let Some(slot) = map.get_mut(&e.item) {
                if let Slot::Waiting { at, seq, priority } = *slot {
                    if (at, seq) != (e.at, e.seq) {
                        dropped += 1;
                        continue;
                    }
                    let ticket = tickets.next();
                    *slot = Slot::Queued { since, ticket };
                    self.stop_waiting(1);
                    self.ready.push_batched(e.item, priority, ticket);
                    fired += 1;
                    continue;
                }
            }
            dropped += 1;
        }
        drop(schedule);
        self.stale_dropped(dropped);
        // One fence for the whole batch; a sleeper per item fired, at most.
        let wake = if fired == 0 {
            0
        } else {
            fired.min(self.ready.sleepers_after_batch())
        };
        if let Some(m) = &self.metrics {
            for _ in 0..fired {
                m.depth.inc();
                m.adds.inc();
            }
            // Whoever fired (the timer, or a worker that found nothing ready) updates the gauge:
            // a worker's firing is not followed by the timer's refresh.
            if fired > 0 {
                m.delayed_depth.set(self.waiting() as f64);
            }
        }
        for _ in 0..wake {
            self.ready.wake_one();
        }
        fired
    }

    /// The earliest live deadline (dropping stale entries on the way).
    pub(crate) fn next_deadline(&self) -> Option<Tick> {
        let mut schedule = self.timer.drain();
        let mut next = None;
        let mut dropped = 0;
        while let Some(e) = schedule.delays.peek() {
            if self.is_live(e) {
                next = Some(e.at);
                break;
            }
            schedule.delays.pop();
            dropped += 1;
        }
        drop(schedule);
        self.stale_dropped(dropped);
        next
    }

    /// Start times of the items in flight (for the unfinished-work metrics).
    pub(crate) fn processing_starts(&self) -> Vec<Tick> {
        let mut starts = Vec::new();
        self.slots.for_each(|shard| {
            starts.extend(shard.values().filter_map(|s| match s {
                Slot::Processing { started, .. } => Some(*started),
                _ => None,
            }))
        });
        starts
    }

    /// The slot of `item` (tests and the fuzz model).
    #[allow(dead_code, reason = "used by tests and the fuzz model")]
    pub(crate) fn slot(&self, item: &T) -> Option<Slot> {
        self.slots.lock(item).slot_mut(item).map(|s| *s)
    }

    /// Starts shutting down (see the module docs); with `drain`, `shut_down_with_drain` then waits
    /// for [`wait_drained`](Shared::wait_drained). A plain shutdown after a drain began ends the drain.
    pub(crate) fn shut_down(&self, drain: bool) {
        let _life = self.life.lock();
        if self.closing.load(Ordering::Acquire) {
            if !drain {
                // A later plain shutdown stops a drain that is still waiting.
                self.draining.store(false, Ordering::Release);
                self.ready.notify_drained();
            }
            return;
        }
        self.closing.store(true, Ordering::Release);
        if drain {
            self.draining.store(true, Ordering::Release);
        }
        // Every shard, even when `waiting` reads zero: an add that has not seen `closing` yet may
        // be making an item wait in a shard the sweep has not reached.
        let mut dropped = 0;
        self.slots.for_each(|shard| {
            shard.retain(|_, s| {
                let keep = !matches!(s, Slot::Waiting { .. });
                dropped += usize::from(!keep);
                keep
            });
            // The room of the dropped items goes back to the allocator.
            shard.shrink_to_fit();
        });
        // After the sweep, the shards hold no waiting item, so `waiting` reads zero; no add gets
        // past `closing` any more, so the schedule and its stale count go for good.
        self.stop_waiting(dropped);
        self.timer.clear();
        self.stale.store(0, Ordering::Release);
        if let Some(m) = &self.metrics {
            m.delayed_depth.set(0.0);
        }
        self.ready.close();
        self.signal.set();
    }

    /// Waits until a drain is complete (nothing ready, nothing in flight: every shard empty) or
    /// no longer wanted. Called after `shut_down(true)`, so after a sweep: shards only empty from
    /// then on, and the shards already seen empty are not looked at again (see the module docs).
    pub(crate) fn wait_drained(&self) {
        let mut seen_empty = 0;
        self.ready.wait_drained(|| {
            if !self.is_draining() {
                return true;
            }
            while seen_empty < self.slots.count() && self.slots.is_empty_at(seen_empty) {
                seen_empty += 1;
            }
            seen_empty == self.slots.count()
        });
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // Let a background thread (holding only a weak handle) notice and exit.
        self.signal.set();
    }
}
