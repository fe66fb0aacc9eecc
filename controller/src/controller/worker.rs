//! The workers: the start gate (opened once every cache has synced), the worker loops (threads
//! and tasks), and what happens to a key after its reconcile.

use super::handle::Counters;
use super::health::{Running, WorkerStates};
use super::resync::{self, Resync};
use super::Action;
use crate::consistency::{ConsistencyStore, Freshness};
use crate::shard::{ShardClaim, ShardGate, Start};
use futures::future::{select, Either};
use futures::FutureExt;
use kcache_core::{Clock, ObjectKey};
use kcache_informer::{wait_for_cache_sync, HasSynced};
use kcache_leaderelection::LeaderGate;
use kcache_workqueue::metrics::CounterMetric;
use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::Arc;
use std::thread::JoinHandle;
use tokio::sync::watch;

/// What the workers of one controller share.
pub(crate) struct Core {
    pub(crate) name: Arc<str>,
    pub(crate) queue: super::queue::ControllerQueue,
    pub(crate) max_retries: Option<usize>,
    pub(crate) counters: Counters,
    /// The election the workers follow, if any: they take keys only while it says we lead.
    pub(crate) leader: Option<Arc<dyn LeaderGate>>,
    /// The periodic resync of the watched keys.
    pub(crate) resync: Resync,
    /// The writes of past reconciles the caches must show before a key is reconciled again.
    pub(crate) consistency: Option<ConsistencyStore>,
    /// `stale_sync_skips_total`, if the builder was given one.
    pub(crate) stale_sync_skips_metric: Option<Arc<dyn CounterMetric>>,
    /// The shard the workers follow, if any: they reconcile only keys it lets them start.
    pub(crate) shard: Option<ShardGate>,
    /// The controller's clock (how long a reconcile has been running, for the health check).
    pub(crate) clock: Arc<dyn Clock>,
    /// Which workers run, and which reconcile each is in.
    pub(crate) workers: WorkerStates,
}

/// Whether the workers may start: `Waiting` for the caches, `Open` once they synced, `Closed` if
/// the controller stopped (or a cache stopped) first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GateState {
    Waiting,
    Open,
    Closed,
}

/// The start gate, shared by the sync waiter (which opens or closes it) and the workers.
#[derive(Clone)]
pub(crate) struct Gate(Arc<watch::Sender<GateState>>);

impl Gate {
    pub(crate) fn new() -> Self {
        Self(Arc::new(watch::Sender::new(GateState::Waiting)))
    }

    /// Opens the gate unless it was closed.
    fn open(&self) {
        self.0.send_if_modified(|s| {
            let changed = *s == GateState::Waiting;
            if changed {
                *s = GateState::Open;
            }
            changed
        });
    }

    /// Closes the gate unless it was opened.
    pub(crate) fn close(&self) {
        self.0.send_if_modified(|s| {
            let changed = *s == GateState::Waiting;
            if changed {
                *s = GateState::Closed;
            }
            changed
        });
    }

    pub(crate) fn state(&self) -> GateState {
        *self.0.borrow()
    }

    /// Waits until the gate is open (`true`) or closed (`false`).
    pub(crate) async fn decided(&self) -> bool {
        let mut rx = self.0.subscribe();
        let decided = rx.wait_for(|s| *s != GateState::Waiting).await;
        matches!(decided.as_deref(), Ok(GateState::Open))
    }
}

/// Waits for every cache, or for the stop signal; then opens or closes the gate, and once open
/// runs the periodic resync until the stop signal.
pub(crate) async fn sync_task(
    core: Arc<Core>,
    synced: Vec<Arc<dyn HasSynced>>,
    gate: Gate,
    mut stop: watch::Receiver<bool>,
) {
    let items: Vec<&dyn HasSynced> = synced.iter().map(|s| s.as_ref()).collect();
    let outcome = {
        let synced = pin!(wait_for_cache_sync(&items));
        let stopped = pin!(stop.wait_for(|s| *s));
        match select(synced, stopped).await {
            Either::Left((synced, _)) => Some(synced),
            Either::Right(_) => None,
        }
    };
    match outcome {
        Some(true) => {
            tracing::info!(controller = %core.name, "caches synced, starting workers");
            let schedule = core.resync.start();
            gate.open();
            if let Some(schedule) = schedule {
                resync::run(&core, &core.resync, schedule, &mut stop).await;
            }
        }
        Some(false) => {
            tracing::error!(controller = %core.name, "a watched informer stopped before it synced; the workers will not start");
            gate.close();
        }
        None => gate.close(),
    }
}

pub(crate) fn spawn_sync_thread(
    core: &Arc<Core>,
    synced: Vec<Arc<dyn HasSynced>>,
    gate: &Gate,
    stop: &watch::Sender<bool>,
) -> std::io::Result<JoinHandle<()>> {
    let task = sync_task(core.clone(), synced, gate.clone(), stop.subscribe());
    // A runtime of its own with a timer: the resync waits on the clock (tokio's timer for the
    // system clock) in a thread that no tokio runtime drives.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    std::thread::Builder::new()
        .name(format!("{}-sync", core.name))
        .spawn(move || runtime.block_on(task))
}

pub(crate) fn spawn_worker_thread<F, E>(
    core: &Arc<Core>,
    index: usize,
    gate: &Gate,
    stop: &watch::Sender<bool>,
    reconcile: Arc<F>,
) -> std::io::Result<JoinHandle<()>>
where
    F: Fn(&ObjectKey) -> Result<Action, E> + Send + Sync + 'static,
    E: fmt::Display,
{
    let (core, gate, mut stop) = (core.clone(), gate.clone(), stop.subscribe());
    let running = Running::new(&core);
    std::thread::Builder::new()
        .name(format!("{}-worker-{index}", core.name))
        .spawn(move || {
            let _running = running;
            if !futures::executor::block_on(gate.decided()) {
                return;
            }
            loop {
                futures::executor::block_on(core.wait_to_lead(&mut stop));
                let Some(key) = core.queue.get() else { break };
                if !core.may_work() {
                    core.hand_back(&key);
                    continue;
                }
                let Ok(claim) = core.claim(&key) else {
                    continue;
                };
                if core.skip_if_stale(&key) {
                    continue;
                }
                let busy = core.workers.busy(index, &key, core.clock.now());
                let outcome = catch_unwind(AssertUnwindSafe(|| reconcile(&key)));
                drop(busy);
                core.finish(&key, outcome);
                drop(claim);
            }
        })
}

/// A worker task; `running` (made before the task is spawned) counts it as running until the
/// task ends or is dropped.
pub(crate) async fn worker_task<F, Fut, E>(
    core: Arc<Core>,
    index: usize,
    running: Running,
    gate: Gate,
    mut stop: watch::Receiver<bool>,
    reconcile: Arc<F>,
) where
    F: Fn(ObjectKey) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: fmt::Display + Send + 'static,
{
    let _running = running;
    if !gate.decided().await {
        return;
    }
    loop {
        core.wait_to_lead(&mut stop).await;
        let Some(key) = core.queue.get_async().await else {
            break;
        };
        if !core.may_work() {
            core.hand_back(&key);
            continue;
        }
        let Ok(claim) = core.claim(&key) else {
            continue;
        };
        if core.skip_if_stale(&key) {
            continue;
        }
        // The call itself runs inside the caught future, so a panic before its first await is
        // caught too.
        let call = async { reconcile(key.clone()).await };
        let busy = core.workers.busy(index, &key, core.clock.now());
        let outcome = AssertUnwindSafe(call).catch_unwind().await;
        drop(busy);
        core.finish(&key, outcome);
        drop(claim);
    }
}

impl Core {
    /// Whether a worker may reconcile now: always without an election, else only while leading
    /// (judged on the election's clock at this moment, so never past the renew deadline).
    fn may_work(&self) -> bool {
        self.leader.as_ref().is_none_or(|l| l.is_leader())
    }

    /// Waits until this process leads, or the controller is stopping (then the workers go on, to
    /// hand back whatever is queued until the queue says it is shut down). Returns at once
    /// without an election. If the election is over for good, waits for the stop.
    async fn wait_to_lead(&self, stop: &mut watch::Receiver<bool>) {
        let Some(leader) = &self.leader else { return };
        if leader.is_leader() || *stop.borrow() {
            return;
        }
        let leading = pin!(leader.wait_leading());
        let stopped = pin!(async {
            let _ = stop.wait_for(|s| *s).await;
        });
        if let Either::Left((false, stopped)) = select(leading, stopped).await {
            stopped.await;
        }
    }

    /// Asks the shard, if any, whether `key` may be reconciled here now. A key another replica
    /// owns is forgotten and marked done (its owner reconciles it); a key not yet startable
    /// (a handover in progress) comes back after the shard's retry period. The claim is held
    /// until the reconcile finished.
    fn claim(&self, key: &ObjectKey) -> Result<Option<ShardClaim>, ()> {
        let Some(shard) = &self.shard else {
            return Ok(None);
        };
        match shard.start(key.as_ref()) {
            Ok(claim) => return Ok(Some(claim)),
            Err(Start::Blocked) => {
                self.queue.add_after(key.clone(), shard.retry_period());
            }
            Err(_) => self.queue.forget(key),
        }
        if self.queue.done(key).is_err() {
            tracing::error!(controller = %self.name, %key, "key was not being processed");
        }
        Err(())
    }

    /// A key taken while not leading goes back to the queue untouched (its retry history too);
    /// once the queue is shutting down it is dropped instead.
    fn hand_back(&self, key: &ObjectKey) {
        self.counters.handed_back.inc();
        // Added while processing: the queue hands it out again after `done`.
        let _ = self.queue.add(key.clone());
        if self.queue.done(key).is_err() {
            tracing::error!(controller = %self.name, %key, "key was not being processed");
        }
    }

    /// KEP-5647: a key whose recorded writes the caches have not shown yet is not reconciled;
    /// it goes back through the rate limiter, as after an error. Returns whether it was skipped
    /// (and is done).
    fn skip_if_stale(&self, key: &ObjectKey) -> bool {
        let Some(store) = &self.consistency else {
            return false;
        };
        if store.check(key) == Freshness::Ready {
            return false;
        }
        self.counters.stale_sync_skips.inc();
        if let Some(metric) = &self.stale_sync_skips_metric {
            metric.inc();
        }
        tracing::debug!(controller = %self.name, %key, "the caches have not shown this key's last writes yet; requeued");
        self.queue.add_rate_limited(key.clone());
        if self.queue.done(key).is_err() {
            tracing::error!(controller = %self.name, %key, "key was not being processed");
        }
        self.counters.notify();
        true
    }

    /// Applies a reconcile's outcome to the queue, marks the key done, then counts the call (so
    /// a waiter on the counters sees the queue already updated).
    pub(crate) fn finish<E: fmt::Display>(
        &self,
        key: &ObjectKey,
        outcome: Result<Result<Action, E>, Box<dyn Any + Send>>,
    ) {
        let c = &self.counters;
        match outcome {
            Ok(Ok(Action::Done)) => {
                c.successes.inc();
                self.queue.forget(key);
            }
            Ok(Ok(Action::RequeueAfter(delay))) => {
                c.successes.inc();
                c.requeues_after.inc();
                self.queue.forget(key);
                self.queue.add_after(key.clone(), delay);
            }
            Ok(Ok(Action::Requeue)) => {
                c.successes.inc();
                c.requeues.inc();
                self.queue.add_rate_limited(key.clone());
            }
            Ok(Err(error)) => {
                c.errors.inc();
                self.retry(key, &error);
            }
            Err(panic) => {
                c.panics.inc();
                self.retry(key, &PanicMessage(panic.as_ref()));
            }
        }
        if self.queue.done(key).is_err() {
            // Unreachable: the key came from `get` and is done exactly once.
            tracing::error!(controller = %self.name, %key, "key was not being processed");
        }
        c.finished();
    }

    /// Retries `key` through the rate limiter, or drops it after `max_retries`.
    fn retry(&self, key: &ObjectKey, error: &dyn fmt::Display) {
        let retries = self.queue.num_requeues(key);
        match self.max_retries {
            Some(max) if retries >= max => {
                self.counters.dropped.inc();
                self.queue.forget(key);
                tracing::error!(controller = %self.name, %key, retries, %error, "reconcile failed; dropping the key after too many retries");
            }
            _ => {
                self.counters.retries.inc();
                tracing::warn!(controller = %self.name, %key, retries, %error, "reconcile failed; retrying with backoff");
                self.queue.add_rate_limited(key.clone());
            }
        }
    }
}

/// A caught panic's payload, displayed as its message when it has one.
struct PanicMessage<'a>(&'a (dyn Any + Send));

impl fmt::Display for PanicMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(s) = self.0.downcast_ref::<&str>() {
            write!(f, "reconcile panicked: {s}")
        } else if let Some(s) = self.0.downcast_ref::<String>() {
            write!(f, "reconcile panicked: {s}")
        } else {
            f.write_str("reconcile panicked")
        }
    }
}
