//! `Queue`: the deduplicating work queue (client-go's `workqueue.Interface`).

mod delays;
mod get_async;
pub(crate) mod state;
mod waiters;

pub use get_async::GetAsync;

use crate::config::QueueConfig;
use crate::error::NotProcessing;
use crate::metrics::QueueMetrics;
use crate::signal::Signal;
use crate::sync::atomic::{AtomicUsize, Ordering};
use crate::sync::{wait_timeout, Condvar, Mutex, MutexGuard};
use kcache_core::Clock;
use state::{Added, Finished, State};
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Instant;
use waiters::Waiters;

/// A work queue with client-go's "stingy" semantics.
///
/// - An item added while it is queued is not queued twice; the first add fixes its place (FIFO).
/// - An item is never handed to two workers at once. Added while a worker processes it, it is
///   queued again exactly once, when that worker calls [`done`](Queue::done).
/// - After [`shut_down`](Queue::shut_down), adds are refused (they return `false`), [`get`](Queue::get)
///   still hands out what is queued and then returns `None`.
///
/// `Queue` is a cheap handle: clones share one queue. Items need `Clone + Eq + Hash`; use cheap
/// keys (`u64`, `Arc<str>`, `kcache_core::ObjectKey`), as the queue keeps one copy in its index and
/// one in its FIFO.
///
/// # Examples
/// ```
/// use kcache_workqueue::Queue;
///
/// let queue = Queue::new();
/// queue.add("a");
/// queue.add("b");
/// queue.add("a"); // already queued: no-op
/// assert_eq!(queue.len(), 2);
///
/// let item = queue.get().unwrap();
/// assert_eq!(item, "a");
/// queue.add("a"); // in flight: queued again at done
/// assert_eq!(queue.len(), 1);
/// queue.done(&item)?;
/// assert_eq!(queue.len(), 2);
///
/// queue.shut_down();
/// assert!(!queue.add("c"));
/// assert_eq!(queue.get(), Some("b"));
/// # Ok::<(), kcache_workqueue::NotProcessing>(())
/// ```
pub struct Queue<T> {
    pub(crate) shared: Arc<Shared<T>>,
}

/// What all handles of one queue share.
pub(crate) struct Shared<T> {
    inner: Mutex<Inner<T>>,
    /// Blocking `get` callers wait here.
    ready: Condvar,
    /// `shut_down_with_drain` waits here.
    drained: Condvar,
    /// The number of ready items as last seen under the lock (or 1 after shutdown), read without
    /// the lock by workers that spin briefly before they block.
    ready_hint: AtomicUsize,
    /// Wakes the background thread (delay timer and metrics ticker), if any.
    pub(crate) signal: Arc<Signal>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) metrics: Option<QueueMetrics>,
}

pub(crate) struct Inner<T> {
    pub(crate) st: State<T>,
    /// Threads blocked in `get`.
    sleeping: usize,
    /// Tasks parked in `get_async`.
    waiters: Waiters,
}

impl<T: Clone + Eq + Hash + Send + 'static> Queue<T> {
    /// A queue with no name, no metrics and the system clock.
    pub fn new() -> Self {
        Self::with_config(QueueConfig::new())
    }

    /// A queue built from `config`. A named queue with a metrics provider starts one background
    /// thread that refreshes the unfinished-work gauges every 500 ms until shutdown.
    pub fn with_config(config: QueueConfig) -> Self {
        let queue = Self::build(config);
        if queue.shared.metrics.is_some() {
            crate::background::spawn(&queue.shared);
        }
        queue
    }

    /// A queue without any background thread (the delaying queue starts its own).
    pub(crate) fn build(config: QueueConfig) -> Self {
        let metrics = match (&config.name, &config.metrics_provider) {
            (Some(name), Some(p)) => Some(QueueMetrics::new(p.as_ref(), name)),
            _ => None,
        };
        Self {
            shared: Arc::new(Shared {
                inner: Mutex::new(Inner {
                    st: State::new(),
                    sleeping: 0,
                    waiters: Waiters::new(),
                }),
                ready: Condvar::new(),
                drained: Condvar::new(),
                ready_hint: AtomicUsize::new(0),
                signal: Signal::new(),
                clock: config.clock,
                metrics,
            }),
        }
    }

    /// Adds `item`, unless it is already pending. Returns `false` only when the queue is shutting
    /// down and the item was refused; a deduplicated add counts as accepted.
    pub fn add(&self, item: T) -> bool {
        let now = self.shared.metrics_now();
        let mut g = self.shared.lock();
        let (outcome, leftover) = g.st.insert(item, now);
        let accepted = self.shared.after_add(g, outcome);
        drop(leftover); // after the lock is released
        accepted
    }

    /// Hands out the oldest queued item, blocking while the queue is empty. Returns `None` once the
    /// queue is shutting down and nothing is queued (during a drain, even while other items are
    /// still in flight). Every item it returns must be given back with [`done`](Queue::done).
    ///
    /// # Blocking
    /// Blocks the calling thread; use [`get_async`](Queue::get_async) in async code.
    pub fn get(&self) -> Option<T> {
        let mut g = self.shared.lock();
        let mut spun = false;
        loop {
            if let Some(item) = self.shared.take(&mut g) {
                return Some(item);
            }
            if g.st.is_shutting_down() {
                return None;
            }
            if !spun && SPIN {
                // A producer is often about to add: waiting a few hundred nanoseconds here is far
                // cheaper than a futex sleep and wake-up, for this thread and for the producer.
                spun = true;
                drop(g);
                self.shared.spin_until_hint();
                g = self.shared.lock();
                continue;
            }
            g.sleeping += 1;
            wait_timeout(&self.shared.ready, &mut g, None);
            g.sleeping -= 1;
        }
    }

    /// The async form of [`get`](Queue::get): parks the task (no thread, no polling) until an item
    /// is ready or the queue is shut down and empty.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future before it completes takes no item, and a wake-up it
    /// received is passed on to another waiter.
    pub fn get_async(&self) -> GetAsync<'_, T> {
        GetAsync::new(self)
    }

    /// Non-blocking [`get`](Queue::get): `None` when nothing is queued right now.
    pub fn try_get(&self) -> Option<T> {
        let mut g = self.shared.lock();
        self.shared.take(&mut g)
    }

    /// Marks `item` as processed. If it was added again meanwhile, it is queued again now.
    ///
    /// # Errors
    /// [`NotProcessing`] if `item` is not being processed (never handed out, or `done` twice);
    /// nothing changes then (client-go would push a duplicate queue entry).
    pub fn done(&self, item: &T) -> Result<(), NotProcessing> {
        let now = self.shared.metrics_now();
        let mut g = self.shared.lock();
        let clock = &self.shared.clock;
        let outcome =
            g.st.done(item, || now.unwrap_or_else(|| clock.now()), now.is_some());
        self.shared.after_done(g, outcome, now)
    }

    /// The number of items ready to be handed out (not in flight, not waiting for a delay).
    pub fn len(&self) -> usize {
        self.shared.lock().st.len()
    }

    /// Whether no item is ready to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops the queue: later adds are refused, items waiting for a delay are dropped, waiting
    /// workers wake up; queued items are still handed out, then `get` returns `None`. Idempotent.
    /// It ends a [`shut_down_with_drain`](Queue::shut_down_with_drain) that is still waiting.
    pub fn shut_down(&self) {
        self.shared.shut_down(false);
    }

    /// Stops the queue like [`shut_down`](Queue::shut_down), then waits until every queued item
    /// has been handed out and every item in flight is done.
    ///
    /// # Blocking
    /// Blocks until the drain completes or a concurrent [`shut_down`](Queue::shut_down) ends it;
    /// if workers stop calling `done`, it waits for ever.
    pub fn shut_down_with_drain(&self) {
        self.shared.shut_down(true);
        let mut g = self.shared.lock();
        while g.st.is_draining() && !g.st.is_drained() {
            wait_timeout(&self.shared.drained, &mut g, None);
        }
    }

    /// Whether the queue is shutting down.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.lock().st.is_shutting_down()
    }

    /// The number of items handed out and not yet done.
    pub fn in_flight(&self) -> usize {
        self.shared.lock().st.in_flight()
    }
}

/// Whether idle workers spin briefly before blocking (never under loom, which explores every step).
const SPIN: bool = cfg!(not(kcache_loom));

impl<T: Clone + Eq + Hash + Send + 'static> Shared<T> {
    /// Spins, then yields, for a short while until the ready hint says an item may be there.
    fn spin_until_hint(&self) {
        for round in 0..16u32 {
            if self.ready_hint.load(Ordering::Relaxed) != 0 {
                return;
            }
            if round < 6 {
                for _ in 0..(1u32 << round) {
                    std::hint::spin_loop();
                }
            } else {
                crate::sync::thread::yield_now();
            }
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        self.inner.lock()
    }

    /// The time for metrics timestamps, read only when metrics are on.
    pub(crate) fn metrics_now(&self) -> Option<Instant> {
        self.metrics.as_ref().map(|_| self.clock.now())
    }

    fn take(&self, g: &mut MutexGuard<'_, Inner<T>>) -> Option<T> {
        let now = self.metrics_now();
        let (item, since) = g.st.get(now)?;
        self.ready_hint.store(g.st.len(), Ordering::Relaxed);
        if let Some(m) = &self.metrics {
            m.depth.dec();
            if let (Some(now), Some(since)) = (now, since) {
                m.latency
                    .observe(now.saturating_duration_since(since).as_secs_f64());
            }
        }
        Some(item)
    }

    /// Wakes whoever must learn of an add's outcome, after releasing the lock.
    pub(crate) fn after_add(&self, mut g: MutexGuard<'_, Inner<T>>, outcome: Added) -> bool {
        match outcome {
            Added::Refused => return false,
            Added::Deduplicated | Added::DeferredDelay => return true,
            Added::Pushed | Added::Deferred => {
                if let Some(m) = &self.metrics {
                    m.depth.inc();
                    m.adds.inc();
                }
                if outcome == Added::Pushed {
                    self.wake(&mut g, 1);
                }
            }
            Added::Delayed { earliest } => {
                if earliest {
                    self.signal.set();
                }
            }
        }
        true
    }

    fn after_done(
        &self,
        mut g: MutexGuard<'_, Inner<T>>,
        outcome: Finished,
        now: Option<Instant>,
    ) -> Result<(), NotProcessing> {
        let started = match outcome {
            Finished::NotProcessing => return Err(NotProcessing),
            Finished::Removed { started, idle } => {
                if idle && g.st.is_draining() && g.st.is_drained() {
                    self.drained.notify_all();
                }
                started
            }
            Finished::Requeued { started, newly } => {
                if let (Some(m), true) = (&self.metrics, newly) {
                    m.depth.inc();
                    m.adds.inc();
                }
                self.wake(&mut g, 1);
                started
            }
            Finished::Delayed { started, earliest } => {
                if earliest {
                    self.signal.set();
                }
                started
            }
        };
        drop(g);
        if let (Some(m), Some(now), Some(started)) = (&self.metrics, now, started) {
            m.work_duration
                .observe(now.saturating_duration_since(started).as_secs_f64());
        }
        Ok(())
    }

    /// Wakes up to `n` waiters (blocked threads first, then parked tasks).
    pub(crate) fn wake(&self, g: &mut MutexGuard<'_, Inner<T>>, n: usize) {
        self.ready_hint.store(g.st.len(), Ordering::Relaxed);
        let threads = n.min(g.sleeping);
        for _ in 0..threads {
            self.ready.notify_one();
        }
        for _ in threads..n {
            if !g.waiters.wake_one() {
                break;
            }
        }
    }

    pub(crate) fn shut_down(&self, drain: bool) {
        let mut g = self.lock();
        if g.st.is_shutting_down() && drain {
            // A drain requested after a plain shutdown has nothing to wait for.
            return;
        }
        if g.st.is_shutting_down() {
            g.st.stop_draining();
        } else {
            g.st.shut_down(drain);
        }
        if let Some(m) = &self.metrics {
            m.delayed_depth.set(0.0);
        }
        self.ready_hint.store(1, Ordering::Relaxed);
        self.ready.notify_all();
        self.drained.notify_all();
        g.waiters.wake_all();
        drop(g);
        self.signal.set();
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // Let a background thread (holding only a weak handle) notice and exit.
        self.signal.set();
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> Default for Queue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T> fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue").finish_non_exhaustive()
    }
}
