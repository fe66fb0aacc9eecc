//! Model checking for proptest and cargo-fuzz: [`run`] drives a real queue with a list of [`Op`]s
//! and compares it with a plain `VecDeque` + `HashMap` model after every step.
//!
//! The queue is built without its background thread and time is a [`FakeClock`]; where the timer
//! thread would move due items, [`run`] calls the thread's own loop body once, right after the
//! clock moves. Everything is single-threaded and deterministic, so a failing input replays
//! exactly. Each input runs four times: on the plain queue and on the priority queue's ranked
//! store, each without metrics and with a counting metrics provider whose `workqueue_depth` gauge
//! (and on the priority queue, the depth gauge of each priority) must match the model too. On the
//! plain queue every priority is 0, and the model is client-go's FIFO.

use crate::config::QueueConfig;
use crate::metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric,
};
use crate::queue::shared::Scheduled;
use crate::queue::slots::{Slot, Then};
use crate::queue::{GetAsync, Queue};
use kcache_core::{saturating_add, Clock, FakeClock};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// How many distinct items the ops talk about: few, so that they collide often.
pub const KEYS: u8 = 8;

/// One step of a model run. Keys are taken modulo [`KEYS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, arbitrary::Arbitrary)]
pub enum Op {
    /// `add(key)`.
    Add(u8),
    /// `get()` (or `try_get()` when `get` would block).
    Get,
    /// One poll of `get_async()`, then the future is dropped.
    GetAsync,
    /// `done(key)`, for any key (usually one that is not in flight: must be rejected).
    Done(u8),
    /// `done` of the n-th item in flight (modulo how many there are).
    DoneInFlight(u8),
    /// `add_after(key, ms)`.
    AddAfter(u8, u16),
    /// `add_after(key, Duration::MAX)`.
    AddAfterForever(u8),
    /// Moves the clock forward by `ms` and lets the timer fire.
    Advance(u16),
    /// `shut_down()`.
    ShutDown,
    /// `shut_down_with_drain()` (only its non-blocking part when it would wait).
    ShutDownWithDrain,
    /// Polls a new `get_async()` future and, if it is pending, keeps it parked across later steps.
    Park,
    /// Polls the n-th parked future again (modulo how many there are).
    Repoll(u8),
    /// Drops the n-th parked future (a cancelled `get_async`).
    Unpark(u8),
    /// `add_with_priority(key, priority)`, priority `p % 4 - 1` (so -1..=2).
    AddWithPriority(u8, u8),
    /// `add_after_with_priority(key, ms, priority)`, priority as in `AddWithPriority`.
    AddAfterWithPriority(u8, u16, u8),
    /// Compares the queue's next live deadline with the model's. Delayed adds wait in an inbox
    /// until the timer (or this check) sorts them, so between checks entries pile up there, stale
    /// ones included.
    PeekDeadline,
}

/// Runs `ops` against a real queue and the model, panicking at the first divergence.
pub fn run(ops: &[Op]) {
    for ranked in [false, true] {
        Runner::new(false, ranked).run(ops);
        Runner::new(true, ranked).run(ops);
    }
}

fn priority_of(p: u8) -> i32 {
    i32::from(p % 4) - 1
}

/// What the model expects `done` to do with an item in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ThenModel {
    Nothing,
    Requeue(i32),
    Wait(Instant, i32),
}

/// A ready item: key, priority, and the order in which it became ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReadyItem {
    key: u8,
    priority: i32,
    seq: u64,
}

/// The reference model: client-go's dirty/processing sets, spelled out with plain collections,
/// plus priorities (all 0 on the plain queue).
#[derive(Debug, Default)]
struct Model {
    ready: Vec<ReadyItem>,
    ready_seq: u64,
    handoffs: u64,
    /// In-flight items in the order they were handed out.
    processing: Vec<(u8, ThenModel)>,
    /// Waiting items: deadline, push order (ties in deadline fire in push order) and priority.
    waiting: HashMap<u8, (Instant, u64, i32)>,
    seq: u64,
    shutting_down: bool,
    draining: bool,
}

impl Model {
    fn then_of(&mut self, key: u8) -> Option<&mut ThenModel> {
        self.processing
            .iter_mut()
            .find(|(k, _)| *k == key)
            .map(|(_, t)| t)
    }

    fn wait(&mut self, key: u8, at: Instant, priority: i32) {
        self.seq += 1;
        self.waiting.insert(key, (at, self.seq, priority));
    }

    fn ready_mut(&mut self, key: u8) -> Option<&mut ReadyItem> {
        self.ready.iter_mut().find(|r| r.key == key)
    }

    fn is_ready(&self, key: u8) -> bool {
        self.ready.iter().any(|r| r.key == key)
    }

    fn push(&mut self, key: u8, priority: i32) {
        self.ready_seq += 1;
        self.ready.push(ReadyItem {
            key,
            priority,
            seq: self.ready_seq,
        });
    }

    fn add(&mut self, key: u8, priority: i32) -> bool {
        if self.shutting_down {
            return false;
        }
        if let Some(r) = self.ready_mut(key) {
            r.priority = r.priority.max(priority);
            return true;
        }
        if let Some(then) = self.then_of(key) {
            *then = match *then {
                ThenModel::Nothing => ThenModel::Requeue(priority),
                ThenModel::Requeue(p) | ThenModel::Wait(_, p) => {
                    ThenModel::Requeue(p.max(priority))
                }
            };
            return true;
        }
        let priority = match self.waiting.remove(&key) {
            Some((_, _, p)) => p.max(priority),
            None => priority,
        };
        self.push(key, priority);
        true
    }

    fn add_at(&mut self, key: u8, at: Instant, now: Instant, priority: i32) -> bool {
        if self.shutting_down {
            return false;
        }
        if at <= now {
            return self.add(key, priority);
        }
        if let Some(r) = self.ready_mut(key) {
            r.priority = r.priority.max(priority);
            return true;
        }
        if let Some(then) = self.then_of(key) {
            *then = match *then {
                ThenModel::Nothing => ThenModel::Wait(at, priority),
                ThenModel::Requeue(p) => ThenModel::Requeue(p.max(priority)),
                ThenModel::Wait(old, p) => ThenModel::Wait(old.min(at), p.max(priority)),
            };
            return true;
        }
        match self.waiting.get_mut(&key) {
            Some((old, _, p)) if *old <= at => *p = (*p).max(priority),
            Some(&mut (_, _, p)) => self.wait(key, at, p.max(priority)),
            None => self.wait(key, at, priority),
        }
        true
    }

    /// The next hand-off: the oldest ready item on every `SHARE`-th, else the highest priority
    /// (oldest first among equals). On the plain queue (all priorities 0) both are the oldest.
    fn get(&mut self) -> Option<u8> {
        let oldest_turn = (self.handoffs + 1).is_multiple_of(crate::queue::ranked::SHARE);
        let pos = (0..self.ready.len()).min_by_key(|&i| {
            let r = self.ready[i];
            if oldest_turn {
                (0, r.seq)
            } else {
                (-i64::from(r.priority), r.seq)
            }
        })?;
        self.handoffs += 1;
        let key = self.ready.remove(pos).key;
        self.processing.push((key, ThenModel::Nothing));
        Some(key)
    }

    fn done(&mut self, key: u8, now: Instant) -> bool {
        let Some(pos) = self.processing.iter().position(|(k, _)| *k == key) else {
            return false;
        };
        let (_, then) = self.processing.remove(pos);
        match then {
            ThenModel::Requeue(p) => self.push(key, p),
            ThenModel::Wait(at, p) if !self.shutting_down => {
                if at <= now {
                    self.push(key, p);
                } else {
                    self.wait(key, at, p);
                }
            }
            ThenModel::Nothing | ThenModel::Wait(..) => {}
        }
        true
    }

    fn fire_due(&mut self, now: Instant) {
        let mut due: Vec<(Instant, u64, u8, i32)> = self
            .waiting
            .iter()
            .filter(|(_, (at, _, _))| *at <= now)
            .map(|(k, (at, seq, p))| (*at, *seq, *k, *p))
            .collect();
        due.sort();
        for (_, _, key, p) in due {
            self.waiting.remove(&key);
            self.push(key, p);
        }
    }

    fn shut_down(&mut self, drain: bool) {
        if self.shutting_down {
            if !drain {
                self.draining = false;
            }
            return;
        }
        self.shutting_down = true;
        self.draining = drain;
        self.waiting.clear();
    }

    fn is_drained(&self) -> bool {
        self.ready.is_empty() && self.processing.is_empty()
    }
}

struct Runner {
    queue: Queue<u8>,
    /// Whether the queue is the priority queue's (ranked store); otherwise every priority is 0.
    ranked: bool,
    clock: FakeClock,
    depth: Option<Arc<Depth>>,
    /// The per-priority depth gauges the provider made (priority queue with metrics).
    priority_depths: Arc<Mutex<HashMap<i32, Arc<Depth>>>>,
    model: Model,
    /// Drives the background loop body by hand.
    next_metrics: Option<Instant>,
}

impl Runner {
    fn new(metrics: bool, ranked: bool) -> Self {
        let clock = FakeClock::new();
        let mut config = QueueConfig::new().clock(Arc::new(clock.clone()));
        let depth = metrics.then(|| Arc::new(Depth::default()));
        let priority_depths = Arc::new(Mutex::new(HashMap::new()));
        if let Some(depth) = &depth {
            config = config
                .name("model")
                .metrics_provider(Arc::new(Counting(depth.clone(), priority_depths.clone())));
        }
        // No background thread: `advance` runs its loop body itself.
        let queue = Queue::build_with(config, ranked);
        Self {
            queue,
            ranked,
            clock,
            depth,
            priority_depths,
            model: Model::default(),
            next_metrics: None,
        }
    }

    fn run(mut self, ops: &[Op]) {
        let queue = self.queue.clone();
        let mut parked = Vec::new();
        for (step, op) in ops.iter().enumerate() {
            self.step(*op, step, &queue, &mut parked);
            self.check(step, op, &parked);
        }
    }

    /// What a poll of `get_async` must return, taking the model's item if one is ready.
    fn expected_poll(&mut self) -> Poll<Option<u8>> {
        match self.model.get() {
            Some(k) => Poll::Ready(Some(k)),
            None if self.model.shutting_down => Poll::Ready(None),
            None => Poll::Pending,
        }
    }

    fn step<'q>(
        &mut self,
        op: Op,
        step: usize,
        handle: &'q Queue<u8>,
        parked: &mut Vec<Parked<'q>>,
    ) {
        match op {
            Op::Park => {
                let want = self.expected_poll();
                let mut p = Parked {
                    fut: handle.get_async(),
                    woken: Arc::new(Flag::default()),
                };
                let got = p.poll();
                assert_eq!(got, want, "step {step}: park");
                if got.is_pending() {
                    parked.push(p);
                }
                return;
            }
            Op::Repoll(n) => {
                if parked.is_empty() {
                    return;
                }
                let i = usize::from(n) % parked.len();
                let want = self.expected_poll();
                let got = parked[i].poll();
                assert_eq!(got, want, "step {step}: repoll");
                if got.is_ready() {
                    parked.remove(i);
                }
                return;
            }
            Op::Unpark(n) => {
                if !parked.is_empty() {
                    parked.remove(usize::from(n) % parked.len());
                }
                return;
            }
            _ => {}
        }
        let queue = &self.queue;
        let model = &mut self.model;
        match op {
            Op::Add(k) => {
                let k = k % KEYS;
                assert_eq!(
                    queue.add(k),
                    model.add(k, 0),
                    "step {step}: add({k}) accepted"
                );
            }
            Op::AddWithPriority(k, p) => {
                let k = k % KEYS;
                let p = if self.ranked { priority_of(p) } else { 0 };
                assert_eq!(
                    queue.shared.add_with_priority(k, p),
                    model.add(k, p),
                    "step {step}: add_with_priority({k}, {p}) accepted"
                );
            }
            Op::Get => {
                let want = model.get();
                // `get` blocks only when nothing is ready and the queue is running; the check
                // after the previous step proved the queue agrees with the model on both.
                let got = if want.is_some() || model.shutting_down {
                    queue.get()
                } else {
                    queue.try_get()
                };
                assert_eq!(got, want, "step {step}: get");
            }
            Op::GetAsync => {
                let want = model.get();
                let mut fut = queue.get_async();
                let mut cx = Context::from_waker(Waker::noop());
                let got = Pin::new(&mut fut).poll(&mut cx);
                let expected = match want {
                    Some(k) => Poll::Ready(Some(k)),
                    None if model.shutting_down => Poll::Ready(None),
                    None => Poll::Pending,
                };
                assert_eq!(got, expected, "step {step}: get_async");
            }
            Op::Done(k) => {
                let k = k % KEYS;
                let now = self.clock.now();
                let want = model.done(k, now);
                assert_eq!(
                    queue.done(&k).is_ok(),
                    want,
                    "step {step}: done({k}) accepted"
                );
            }
            Op::DoneInFlight(n) => {
                if model.processing.is_empty() {
                    return;
                }
                let k = model.processing[usize::from(n) % model.processing.len()].0;
                let now = self.clock.now();
                assert!(model.done(k, now));
                assert_eq!(
                    queue.done(&k),
                    Ok(()),
                    "step {step}: done({k}) of an item in flight"
                );
            }
            Op::AddAfter(k, ms) => {
                self.add_after(k % KEYS, Duration::from_millis(ms.into()), 0, step)
            }
            Op::AddAfterWithPriority(k, ms, p) => {
                let p = if self.ranked { priority_of(p) } else { 0 };
                self.add_after(k % KEYS, Duration::from_millis(ms.into()), p, step)
            }
            Op::AddAfterForever(k) => self.add_after(k % KEYS, Duration::MAX, 0, step),
            Op::Advance(ms) => {
                self.clock.advance(Duration::from_millis(ms.into()));
                let now = self.clock.now();
                if !model.shutting_down {
                    model.fire_due(now);
                }
                let weak = Arc::downgrade(&queue.shared);
                let next = crate::background::tick(&weak, &mut self.next_metrics);
                assert_eq!(
                    next.is_none(),
                    model.shutting_down,
                    "step {step}: timer loop exits"
                );
            }
            Op::ShutDown => {
                model.shut_down(false);
                queue.shut_down();
            }
            Op::ShutDownWithDrain => {
                model.shut_down(true);
                if model.draining && !model.is_drained() {
                    // The public call would wait for workers this run does not have.
                    queue.shared.shut_down(true);
                } else {
                    queue.shut_down_with_drain();
                }
            }
            Op::PeekDeadline => {
                let epoch = queue.shared.epoch;
                let earliest = model.waiting.values().map(|w| epoch.tick(w.0)).min();
                assert_eq!(
                    queue.shared.next_deadline(),
                    earliest,
                    "step {step}: next deadline; model {model:?}"
                );
            }
            Op::Park | Op::Repoll(_) | Op::Unpark(_) => {}
        }
    }

    /// What `DelayingQueue::add_after` (`PriorityQueue::add_after_with_priority`) does, on a
    /// queue without the timer thread.
    fn add_after(&mut self, k: u8, delay: Duration, priority: i32, step: usize) {
        let shared = &self.queue.shared;
        let now = self.clock.now();
        let at = saturating_add(now, delay);
        let want = self.model.add_at(k, at, now, priority);
        let got = match shared.add_at(k, shared.epoch.tick(at), shared.epoch.tick(now), priority) {
            Scheduled::Refused => false,
            Scheduled::Accepted => true,
            Scheduled::Waiting { at } => {
                shared.after_schedule(at);
                true
            }
        };
        assert_eq!(got, want, "step {step}: add_after({k}, {delay:?}) accepted");
    }

    fn check(&self, step: usize, op: &Op, parked: &[Parked<'_>]) {
        let model = &self.model;
        let queue = &self.queue;
        // Formatted only when an assertion fails.
        let ctx = Ctx { step, op, model };
        assert_eq!(queue.len(), model.ready.len(), "len {ctx}");
        assert_eq!(queue.in_flight(), model.processing.len(), "in_flight {ctx}");
        assert_eq!(
            queue.is_shutting_down(),
            model.shutting_down,
            "is_shutting_down {ctx}"
        );
        let shared = &queue.shared;
        assert_eq!(shared.waiting(), model.waiting.len(), "waiting {ctx}");
        assert_eq!(shared.is_draining(), model.draining, "draining {ctx}");
        // The schedule's memory is bounded by the items waiting, not by the calls made: every
        // entry is an item's live one or counted stale, and stale ones never pile up past the
        // compaction threshold.
        let (entries, _) = shared.timer.footprint();
        let stale = shared.stale.load(Ordering::SeqCst);
        assert_eq!(
            entries,
            model.waiting.len() + stale,
            "schedule entries {ctx}"
        );
        assert!(
            stale <= model.waiting.len() + crate::queue::compact::SLACK,
            "{stale} stale entries {ctx}"
        );
        // The ready FIFO cannot be walked without popping it; its order is checked by every `get`
        // (against the model's front) and its length above.
        for k in 0..KEYS {
            let slot = shared.slot(&k);
            let then = model
                .processing
                .iter()
                .find(|(p, _)| *p == k)
                .map(|(_, t)| *t);
            match (slot, then) {
                (Some(Slot::Processing { then, .. }), Some(want)) => {
                    let got = match then {
                        Then::Nothing => ThenModel::Nothing,
                        Then::Requeue { priority, .. } => ThenModel::Requeue(priority),
                        Then::Wait { at, priority } => {
                            ThenModel::Wait(shared.epoch.instant(at), priority)
                        }
                    };
                    assert_eq!(got, want, "slot of {k} {ctx}");
                }
                (Some(Slot::Queued { .. }), None) => {
                    let want = model.ready.iter().find(|r| r.key == k).map(|r| r.priority);
                    assert!(want.is_some(), "{k} queued {ctx}");
                    if let Some(ranked) = shared.ready.ranked() {
                        assert_eq!(ranked.priority_of(&k), want, "priority of {k} {ctx}");
                    }
                }
                (Some(Slot::Waiting { at, priority, .. }), None) => {
                    assert_eq!(
                        model.waiting.get(&k).map(|w| (shared.epoch.tick(w.0), w.2)),
                        Some((at, priority)),
                        "{k} waiting {ctx}"
                    )
                }
                (None, None) => assert!(
                    !model.is_ready(k) && !model.waiting.contains_key(&k),
                    "{k} unknown {ctx}"
                ),
                (slot, then) => panic!("slot of {k} is {slot:?}, model in flight {then:?} {ctx}"),
            }
        }
        // No lost wake-up: with an item ready, some parked task was woken for it (each ready
        // push wakes one registered sleeper, a cancelled woken task passes its wake-up on); after
        // shutdown, every parked task was woken.
        if !parked.is_empty() {
            let woken = parked
                .iter()
                .filter(|p| p.woken.0.load(Ordering::SeqCst))
                .count();
            if model.shutting_down {
                assert_eq!(woken, parked.len(), "parked tasks woken at shutdown {ctx}");
            } else if !model.ready.is_empty() {
                assert!(woken > 0, "no parked task woken for a ready item {ctx}");
            }
        }
        if let Some(depth) = &self.depth {
            // client-go's depth: items marked dirty and not yet handed out, which includes items
            // re-added (without delay) while in flight.
            let dirty_in_flight = model
                .processing
                .iter()
                .filter(|(_, t)| matches!(t, ThenModel::Requeue(_)))
                .count();
            let want = (model.ready.len() + dirty_in_flight) as i64;
            assert_eq!(
                depth.0.load(Ordering::SeqCst),
                want,
                "workqueue_depth {ctx}"
            );
            // The priority queue's depth per priority: its ready items at each priority.
            if self.ranked {
                let gauges = self
                    .priority_depths
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                for p in -1..=2 {
                    let want = model.ready.iter().filter(|r| r.priority == p).count() as i64;
                    let got = gauges.get(&p).map_or(0, |g| g.0.load(Ordering::SeqCst));
                    assert_eq!(got, want, "depth at priority {p} {ctx}");
                }
            }
        }
        if let Some(ranked) = shared.ready.ranked() {
            let mut want: Vec<(i32, usize)> = Vec::new();
            for p in (-1..=2).rev() {
                let n = model.ready.iter().filter(|r| r.priority == p).count();
                if n > 0 {
                    want.push((p, n));
                }
            }
            assert_eq!(ranked.depth_by_priority(), want, "depth by priority {ctx}");
        }
    }
}

/// A `get_async` future kept pending across steps, and whether its waker was called.
struct Parked<'q> {
    fut: GetAsync<'q, u8>,
    woken: Arc<Flag>,
}

impl Parked<'_> {
    /// Polls once with a waker that sets `woken` (cleared first).
    fn poll(&mut self) -> Poll<Option<u8>> {
        self.woken.0.store(false, Ordering::SeqCst);
        let waker = Waker::from(self.woken.clone());
        Pin::new(&mut self.fut).poll(&mut Context::from_waker(&waker))
    }
}

/// Set when its waker is woken.
#[derive(Debug, Default)]
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Where a check failed: the step, its op and the model after it.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    step: usize,
    op: &'a Op,
    model: &'a Model,
}

impl std::fmt::Display for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "after step {} ({:?}); model {:?}",
            self.step, self.op, self.model
        )
    }
}

/// The `workqueue_depth` gauge of a [`Counting`] provider.
#[derive(Debug, Default)]
struct Depth(AtomicI64);

impl GaugeMetric for Depth {
    fn inc(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn dec(&self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A metrics provider that only keeps the depth gauges.
struct Counting(Arc<Depth>, Arc<Mutex<HashMap<i32, Arc<Depth>>>>);

struct Ignore;

impl CounterMetric for Ignore {
    fn inc(&self) {}
}
impl HistogramMetric for Ignore {
    fn observe(&self, _: f64) {}
}
impl SettableGaugeMetric for Ignore {
    fn set(&self, _: f64) {}
}

impl MetricsProvider for Counting {
    fn new_depth_metric(&self, _: &str) -> Arc<dyn GaugeMetric> {
        self.0.clone()
    }
    fn new_adds_metric(&self, _: &str) -> Arc<dyn CounterMetric> {
        Arc::new(Ignore)
    }
    fn new_latency_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(Ignore)
    }
    fn new_work_duration_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(Ignore)
    }
    fn new_unfinished_work_seconds_metric(&self, _: &str) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(Ignore)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        _: &str,
    ) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(Ignore)
    }
    fn new_retries_metric(&self, _: &str) -> Arc<dyn CounterMetric> {
        Arc::new(Ignore)
    }
    fn new_priority_depth_metric(&self, _: &str, priority: i32) -> Arc<dyn GaugeMetric> {
        let mut made = self.1.lock().unwrap_or_else(|e| e.into_inner());
        made.entry(priority).or_default().clone()
    }
}
