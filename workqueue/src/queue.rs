//! `Queue`: the deduplicating work queue (client-go's `workqueue.Interface`).
//!
//! # Design: a hot path off any global lock
//! Each item's state (queued, in flight, in flight and added again, waiting for a delay) lives in
//! a sharded map ([`slots`]); the items ready to be handed out go through a lock-free FIFO
//! ([`ready`]); delayed adds append to an inbox that the timer thread sorts and fires, helped by
//! idle workers ([`timer`]). An add takes only its item's shard lock; a worker pops without a
//! lock and marks the item in flight by its ticket, one atomic maximum on its shard's line, with
//! no look-up (see [`slots`]); its `done` locks the shard. Idle workers spin briefly, then sleep;
//! producers read one word that says whether anyone sleeps, and wake only sleepers.
//!
//! # Ordering
//! Items are handed out in the order they became ready: the order of their pushes to the FIFO,
//! each done under the item's shard lock by the add that made it ready (or by `done`, or by the
//! timer). Adds ordered by happens-before (one producer, or producers that synchronize) keep their
//! order, exactly as client-go's; adds racing on different threads have no order to keep, as in
//! client-go, where the mutex picks one. One item is never queued twice, so "FIFO by first add"
//! holds per item.

pub(crate) mod compact;
mod delays;
mod fifo;
mod get_async;
pub(crate) mod ranked;
mod ready;
pub(crate) mod shared;
pub(crate) mod slots;
pub(crate) mod tick;
mod timer;
mod waiters;

pub use get_async::GetAsync;

use crate::config::QueueConfig;
use crate::error::NotProcessing;
use crate::metrics::QueueMetrics;
use ready::Store;
pub(crate) use shared::Shared;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

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
        Self::build_with(config, false)
    }

    /// A queue without any background thread; with `ranked`, its ready items go by priority
    /// (the priority queue's store, with a depth gauge per priority when metrics are on).
    pub(crate) fn build_with(config: QueueConfig, ranked: bool) -> Self {
        let metrics = match (&config.name, &config.metrics_provider) {
            (Some(name), Some(p)) => Some(QueueMetrics::new(p.as_ref(), name)),
            _ => None,
        };
        let store = if ranked {
            let gauges = match (&config.name, &config.metrics_provider) {
                (Some(name), Some(p)) => Some(ranked::DepthGauges::new(p.clone(), name.clone())),
                _ => None,
            };
            Store::Ranked(ranked::Ranked::new(gauges))
        } else {
            Store::Fifo(fifo::Fifo::new())
        };
        Self {
            shared: Arc::new(Shared::new(config.clock, metrics, store)),
        }
    }

    /// Adds `item`, unless it is already pending. Returns `false` only when the queue is shutting
    /// down and the item was refused; a deduplicated add counts as accepted.
    pub fn add(&self, item: T) -> bool {
        self.shared.add(item)
    }

    /// Hands out the oldest queued item, blocking while the queue is empty. Returns `None` once the
    /// queue is shutting down and nothing is queued (during a drain, even while other items are
    /// still in flight). Every item it returns must be given back with [`done`](Queue::done).
    ///
    /// # Blocking
    /// Blocks the calling thread; use [`get_async`](Queue::get_async) in async code. An idle
    /// worker first spins for a few microseconds (yielding its core), then sleeps until an add
    /// wakes it; adds wake only workers that sleep.
    pub fn get(&self) -> Option<T> {
        let shared = &self.shared;
        loop {
            if let Some(item) = shared.try_take() {
                return Some(item);
            }
            if shared.ready.is_closed_and_empty() {
                return None;
            }
            if SPIN && spin_until(|| shared.ready.has_news()) {
                continue;
            }
            if !shared.ready.sleep() {
                return None;
            }
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
        self.shared.try_take()
    }

    /// Marks `item` as processed. If it was added again meanwhile, it is queued again now.
    ///
    /// # Errors
    /// [`NotProcessing`] if `item` is not being processed (never handed out, or `done` twice);
    /// nothing changes then (client-go would push a duplicate queue entry).
    pub fn done(&self, item: &T) -> Result<(), NotProcessing> {
        self.shared.done(item)
    }

    /// The number of items ready to be handed out (not in flight, not waiting for a delay).
    pub fn len(&self) -> usize {
        self.shared.ready.len()
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
        self.shared.wait_drained();
    }

    /// Whether the queue is shutting down.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.is_shutting_down()
    }

    /// The number of items handed out and not yet done.
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight()
    }
}

/// Whether idle workers spin briefly before blocking (never under loom, which explores every step).
const SPIN: bool = cfg!(not(kcache_loom));

/// Spins, then yields, for a short while until `news` says an item may be there. Yielding lets a
/// producer that shares this core run; a few microseconds of this are far cheaper than a futex
/// sleep and wake-up, for this thread and for the producer that would have to wake it.
fn spin_until(news: impl Fn() -> bool) -> bool {
    for round in 0..16u32 {
        if news() {
            return true;
        }
        if round < 6 {
            for _ in 0..(1u32 << round) {
                std::hint::spin_loop();
            }
        } else {
            crate::sync::thread::yield_now();
        }
    }
    news()
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
