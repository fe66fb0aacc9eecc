//! `ControllerHandle`: a running controller, its counters and its graceful shutdown.

use super::health::WorkersCheck;
use super::queue::ControllerQueue;
use super::worker::{Core, Gate, GateState};
use super::Remover;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What a controller has done so far (a snapshot of its counters).
///
/// The counters are read one after another while workers run, like any metrics scrape: a
/// reconcile that is finishing may be counted in `successes` (or `errors`, `panics`) and not yet
/// in `reconciles`. Once the workers have stopped (the stats [`shutdown`] returns), `reconciles`
/// equals `successes + errors + panics`.
///
/// [`shutdown`]: ControllerHandle::shutdown
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ControllerStats {
    /// Reconcile calls that returned or panicked.
    pub reconciles: u64,
    /// Calls that returned `Ok`.
    pub successes: u64,
    /// Calls that returned `Err`.
    pub errors: u64,
    /// Calls that panicked (caught; handled like errors).
    pub panics: u64,
    /// Successful calls that asked for [`Action::RequeueAfter`](super::Action::RequeueAfter).
    pub requeues_after: u64,
    /// Successful calls that asked for [`Action::Requeue`](super::Action::Requeue) (requeued
    /// through the rate limiter).
    pub requeues: u64,
    /// Rounds of the periodic resync
    /// ([`ControllerBuilder::resync_period`](super::ControllerBuilder::resync_period)).
    pub resyncs: u64,
    /// Failed calls retried through the rate limiter.
    pub retries: u64,
    /// Keys forgotten after failing more than `max_retries` times in a row.
    pub dropped: u64,
    /// Keys a worker took while this process did not lead (with
    /// [`ControllerBuilder::leader_election`](super::ControllerBuilder::leader_election)) and put
    /// back untouched (or dropped, during shutdown).
    pub handed_back: u64,
    /// Keys not reconciled because the caches had not yet shown the writes of their last
    /// reconcile, and requeued through the rate limiter (KEP-5647's `stale_sync_skips_total`;
    /// with [`ControllerBuilder::consistency_store`](super::ControllerBuilder::consistency_store)).
    pub stale_sync_skips: u64,
}

/// One counter.
#[derive(Debug, Default)]
pub(crate) struct Count(AtomicU64);

impl Count {
    pub(crate) fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The counters behind [`ControllerStats`] (plain statistics: std atomics, not part of any
/// synchronization), and a notification after each finished reconcile.
#[derive(Debug)]
pub(crate) struct Counters {
    pub(crate) reconciles: Count,
    pub(crate) successes: Count,
    pub(crate) errors: Count,
    pub(crate) panics: Count,
    pub(crate) requeues_after: Count,
    pub(crate) requeues: Count,
    pub(crate) resyncs: Count,
    pub(crate) retries: Count,
    pub(crate) dropped: Count,
    pub(crate) handed_back: Count,
    pub(crate) stale_sync_skips: Count,
    finished: watch::Sender<()>,
}

impl Default for Counters {
    fn default() -> Self {
        Self {
            reconciles: Count::default(),
            successes: Count::default(),
            errors: Count::default(),
            panics: Count::default(),
            requeues_after: Count::default(),
            requeues: Count::default(),
            resyncs: Count::default(),
            retries: Count::default(),
            dropped: Count::default(),
            handed_back: Count::default(),
            stale_sync_skips: Count::default(),
            finished: watch::Sender::new(()),
        }
    }
}

impl Counters {
    /// Counts a finished reconcile (after its key was requeued, forgotten and done) and wakes
    /// the waiters of [`ControllerHandle::wait_stats`].
    pub(crate) fn finished(&self) {
        self.reconciles.inc();
        self.finished.send_replace(());
    }

    /// Wakes the waiters of [`ControllerHandle::wait_stats`] after a counter other than a
    /// finished reconcile moved.
    pub(crate) fn notify(&self) {
        self.finished.send_replace(());
    }

    fn snapshot(&self) -> ControllerStats {
        ControllerStats {
            reconciles: self.reconciles.get(),
            successes: self.successes.get(),
            errors: self.errors.get(),
            panics: self.panics.get(),
            requeues_after: self.requeues_after.get(),
            requeues: self.requeues.get(),
            resyncs: self.resyncs.get(),
            retries: self.retries.get(),
            dropped: self.dropped.get(),
            handed_back: self.handed_back.get(),
            stale_sync_skips: self.stale_sync_skips.get(),
        }
    }
}

/// The stop signal of a controller's sync waiter.
pub(crate) fn stop_channel() -> watch::Sender<bool> {
    watch::Sender::new(false)
}

/// A controller's workers and sync waiter.
pub(crate) enum Workers {
    Threads {
        sync: std::thread::JoinHandle<()>,
        threads: Vec<std::thread::JoinHandle<()>>,
    },
    Tasks {
        sync: tokio::task::JoinHandle<()>,
        tasks: Vec<tokio::task::JoinHandle<()>>,
    },
}

/// A running [`Controller`](super::Controller): its counters, its queue, and its shutdown.
///
/// Stop it with [`shutdown`](Self::shutdown) (blocking) or
/// [`shutdown_async`](Self::shutdown_async). Dropping the handle stops the controller without
/// waiting: its handlers are removed and its queue shut down, so the workers finish the queued
/// keys and exit on their own.
pub struct ControllerHandle {
    core: Arc<Core>,
    gate: Gate,
    stop: watch::Sender<bool>,
    removers: Vec<Remover>,
    workers: Option<Workers>,
}

impl ControllerHandle {
    pub(crate) fn new(
        core: Arc<Core>,
        gate: Gate,
        stop: watch::Sender<bool>,
        removers: Vec<Remover>,
        workers: Workers,
    ) -> Self {
        Self {
            core,
            gate,
            stop,
            removers,
            workers: Some(workers),
        }
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// The controller's queue (to add keys by hand, or to look at its length).
    pub fn queue(&self) -> &ControllerQueue {
        &self.core.queue
    }

    /// The counters so far.
    pub fn stats(&self) -> ControllerStats {
        self.core.counters.snapshot()
    }

    /// Resolves with the counters once `pred` holds for them (checked after every finished
    /// reconcile; no polling). For tests and progress displays.
    pub async fn wait_stats(&self, pred: impl Fn(&ControllerStats) -> bool) -> ControllerStats {
        let mut rx = self.core.counters.finished.subscribe();
        loop {
            rx.borrow_and_update();
            let stats = self.stats();
            if pred(&stats) {
                return stats;
            }
            if rx.changed().await.is_err() {
                return self.stats();
            }
        }
    }

    /// Whether every watched cache has synced and the workers have been let go.
    pub fn workers_started(&self) -> bool {
        self.gate.state() == GateState::Open
    }

    /// Resolves to `true` once the workers have been let go, `false` if the controller stopped
    /// (or a watched informer stopped) before every cache synced. No polling.
    pub async fn wait_workers_started(&self) -> bool {
        self.gate.decided().await
    }

    /// A liveness check of this controller for `/healthz`: it fails once a worker has left,
    /// the controller is shutting down, or a worker has been inside one reconcile for longer than
    /// `limit` (see [`WorkersCheck`]). It stays valid after the handle is gone (it then reports
    /// the shutdown).
    pub fn workers_check(&self, limit: Duration) -> WorkersCheck {
        WorkersCheck::new(self.core.clone(), limit)
    }

    /// Stops feeding the queue (the event handlers are removed) and ends the wait for sync.
    fn begin_stop(&mut self) {
        self.stop.send_replace(true);
        for remove in self.removers.drain(..) {
            remove();
        }
    }

    /// Stops the controller gracefully and returns its final counters: the event handlers are
    /// removed, the queue is shut down with a drain (`shut_down_with_drain`: queued keys are
    /// still reconciled, calls in progress finish; keys waiting for a delay are dropped, failed
    /// reconciles are no longer retried), then every worker is joined. If the workers never
    /// started (the caches had not synced), the queued keys are dropped instead.
    ///
    /// # Blocking
    /// Blocks until the drain is over; do not call it from a reconcile function (it would wait
    /// for itself) or on a tokio worker thread (use [`shutdown_async`](Self::shutdown_async)).
    pub fn shutdown(mut self) -> ControllerStats {
        self.begin_stop();
        let started = futures::executor::block_on(self.gate.decided());
        if started {
            self.core.queue.shut_down_with_drain();
        } else {
            self.core.queue.shut_down();
        }
        match self.workers.take() {
            Some(Workers::Threads { sync, threads }) => {
                join_thread(&self.core.name, sync);
                for t in threads {
                    join_thread(&self.core.name, t);
                }
            }
            Some(Workers::Tasks { sync, tasks }) => {
                futures::executor::block_on(async {
                    let _ = sync.await;
                    for t in tasks {
                        let _ = t.await;
                    }
                });
            }
            None => {}
        }
        tracing::info!(controller = %self.core.name, "controller stopped");
        self.stats()
    }

    /// The async form of [`shutdown`](Self::shutdown), with the same drain. Task workers are
    /// awaited (the queue is shut down and they take every queued key before they exit, which is
    /// the drain); thread workers are joined on tokio's blocking pool (inside a tokio runtime) or
    /// on the calling thread (elsewhere).
    pub async fn shutdown_async(mut self) -> ControllerStats {
        self.begin_stop();
        match self.workers.take() {
            Some(Workers::Tasks { sync, tasks }) => {
                self.gate.decided().await;
                self.core.queue.shut_down();
                let _ = sync.await;
                for t in tasks {
                    let _ = t.await;
                }
                tracing::info!(controller = %self.core.name, "controller stopped");
                self.stats()
            }
            Some(threads) => {
                self.workers = Some(threads);
                match tokio::runtime::Handle::try_current() {
                    Ok(rt) => {
                        let core = self.core.clone();
                        match rt.spawn_blocking(move || self.shutdown()).await {
                            Ok(stats) => stats,
                            Err(_) => core.counters.snapshot(),
                        }
                    }
                    Err(_) => self.shutdown(),
                }
            }
            None => self.stats(),
        }
    }
}

fn join_thread(name: &str, thread: std::thread::JoinHandle<()>) {
    if thread.join().is_err() {
        tracing::error!(controller = %name, "a controller thread panicked");
    }
}

impl Drop for ControllerHandle {
    fn drop(&mut self) {
        if self.workers.is_some() {
            self.begin_stop();
            self.core.queue.shut_down();
        }
    }
}

impl fmt::Debug for ControllerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerHandle")
            .field("name", &self.core.name)
            .field("workers_started", &self.workers_started())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}
