//! [`Controller`]: the canonical client-go controller loop as one component.

mod builder;
mod enqueue;
mod error;
mod handle;
mod health;
mod queue;
mod resync;
mod worker;

pub use builder::ControllerBuilder;
pub use error::ControllerError;
pub use handle::{ControllerHandle, ControllerStats};
pub use health::{WorkersCheck, WorkersError};
pub use queue::ControllerQueue;

use handle::Workers;
use kcache_core::ObjectKey;
use kcache_informer::HasSynced;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use worker::{Core, Gate};

/// What a successful reconcile asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Done: forget the key's retry history. It is reconciled again on its next event.
    Done,
    /// Done for now: forget the retry history and reconcile the key again after the delay
    /// (`add_after`; a zero delay requeues at once).
    RequeueAfter(Duration),
    /// Not done, without an error: reconcile the key again after the rate limiter's delay
    /// (`add_rate_limited`, so repeated requeues back off), as controller-runtime's
    /// `Result{Requeue: true}`. For a level-triggered reconcile that wrote, waited for its
    /// writes to reach the cache, and still finds the world different from its wish. Counted in
    /// [`ControllerStats::requeues`], never in `errors`, and never dropped by `max_retries`.
    Requeue,
}

/// A removal of one of the controller's event handlers.
pub(crate) type Remover = Box<dyn Fn() + Send + Sync>;

/// Informers feeding keys into a rate-limited queue, reconciled by N workers: client-go's
/// controller pattern (`sample-controller`) as a component. Build one with
/// [`Controller::builder`], then start its workers with [`run`](Controller::run) (threads) or
/// [`run_async`](Controller::run_async) (tokio tasks).
///
/// Informers map their events to keys, which go into a [`ControllerQueue`] (a priority queue:
/// initial-list and resync keys at low priority); once every watched
/// cache has synced, N workers take keys one at a time and call your `reconcile(key)`:
///
/// - `Ok(Action::Done)`: the key's retry history is forgotten.
/// - `Ok(Action::RequeueAfter(d))`: forgotten too, and the key comes back after `d`.
/// - `Err(e)` (or a panic, which is caught): the key is retried after the rate limiter's delay
///   (`add_rate_limited`); with [`max_retries`](ControllerBuilder::max_retries), a key that failed
///   that many times in a row is forgotten and dropped, reported through `tracing` and counted in
///   [`ControllerStats::dropped`].
///
/// A key is never reconciled by two workers at once, bursts of events for one key coalesce, and
/// reconcile reads the latest state from the informers' caches (level-triggered), as in
/// client-go's `sample-controller`. Shutdown drains: the handlers stop feeding the queue, queued
/// keys are still reconciled and calls in progress finish.
///
/// Workers are threads ([`Controller::run`], a blocking reconcile function) or tokio tasks
/// ([`Controller::run_async`], an async one). The queue's metrics carry the controller's name as
/// their `name` label ([`ControllerBuilder::metrics`]).
///
/// The event handlers are registered by [`ControllerBuilder::build`]: keys start accumulating in
/// the queue from then on, whether or not the workers run yet.
///
/// # Leader election
/// With [`ControllerBuilder::leader_election`], replicas of a controller share the work's single
/// writer: workers take keys only while this process leads (a
/// [`LeaderStatus`](kcache_leaderelection::LeaderStatus) of a `kcache-leaderelection` elector, or
/// any [`LeaderGate`](kcache_leaderelection::LeaderGate)). The informers and event handlers run
/// either way (warm standby: the cache is current and the queue holds every key when leadership
/// comes, no relist needed). When the lease is lost:
///
/// - no reconcile *starts* after the renew deadline: a worker checks the election right before
///   each call, on the election's clock, and a key it took while not leading goes back to the
///   queue untouched ([`ControllerStats::handed_back`]);
/// - a reconcile already *in progress* runs to completion (a thread cannot be interrupted
///   safely, and abandoning an async one halfway leaves the same half-done state); a reconcile
///   that writes should be idempotent anyway, and may check
///   [`LeaderStatus::is_leader`](kcache_leaderelection::LeaderStatus::is_leader) before it
///   writes;
/// - the workers wait (no polling) until this process leads again, then carry on with the queue.
///
/// Shutting down while not leading reconciles nothing: queued keys are dropped.
///
/// # Examples
/// ```
/// use kcache_core::{ObjectKey, Object, ResourceVersion};
/// use kcache_controller::{Action, Controller};
/// use kcache_informer::SharedIndexInformer;
/// use kcache_memory::{MemorySource, SetResourceVersion};
/// use std::sync::{mpsc, Arc};
/// use std::time::Duration;
///
/// #[derive(Clone, Debug)]
/// struct Job { name: String, rv: ResourceVersion }
/// impl Object for Job {
///     fn namespace(&self) -> Option<&str> { Some("batch") }
///     fn name(&self) -> &str { &self.name }
///     fn resource_version(&self) -> ResourceVersion { self.rv.clone() }
/// }
/// impl SetResourceVersion for Job {
///     fn set_resource_version(&mut self, rv: ResourceVersion) { self.rv = rv; }
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = tokio::runtime::Runtime::new()?;
/// let source = MemorySource::<Job>::new();
/// source.create(Job { name: "nightly".into(), rv: ResourceVersion::default() })?;
/// let jobs = Arc::new(SharedIndexInformer::new(source.clone(), Duration::ZERO));
///
/// // Keys of jobs go to the queue; two worker threads reconcile them once the cache has synced.
/// let (tx, reconciled) = mpsc::channel();
/// let cache = jobs.indexer();
/// let controller = Controller::builder("jobs").workers(2).watches(&jobs).build()?;
/// let handle = controller.run(move |key: &ObjectKey| {
///     let exists = cache.get_by_key(key).is_some();
///     tx.send((key.to_string(), exists)).map_err(|_| "closed")?;
///     Ok::<_, &str>(Action::Done)
/// })?;
///
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let informer = jobs.clone();
/// let run = runtime.spawn(async move { informer.run(async { let _ = stopped.await; }).await });
///
/// assert_eq!(reconciled.recv_timeout(Duration::from_secs(20))?, ("batch/nightly".into(), true));
/// let stats = handle.shutdown(); // drains the queue, joins the workers
/// assert_eq!(stats.reconciles, 1);
/// let _ = stop.send(());
/// runtime.block_on(run)??;
/// # Ok(())
/// # }
/// ```
#[doc(alias = "sample-controller")]
pub struct Controller {
    pub(crate) core: Arc<Core>,
    pub(crate) workers: usize,
    pub(crate) synced: Vec<Arc<dyn HasSynced>>,
    pub(crate) removers: Vec<Remover>,
}

impl Controller {
    /// A builder for a controller named `name` (the queue's metrics label and the prefix of its
    /// threads' and handlers' names).
    pub fn builder(name: impl Into<String>) -> ControllerBuilder {
        ControllerBuilder::new(name)
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// The controller's queue, to add keys by hand (a periodic sweep, an external trigger).
    pub fn queue(&self) -> &ControllerQueue {
        &self.core.queue
    }

    /// Starts the workers as threads calling the blocking `reconcile`. They wait until every
    /// watched cache has synced (without polling) before taking the first key; if a watched
    /// informer stops before it syncs, they never start (an error is logged).
    ///
    /// # Errors
    /// [`ControllerError::Spawn`] if a thread cannot start (nothing is left running then).
    pub fn run<F, E>(self, reconcile: F) -> Result<ControllerHandle, ControllerError>
    where
        F: Fn(&ObjectKey) -> Result<Action, E> + Send + Sync + 'static,
        E: fmt::Display,
    {
        let (gate, stop) = (Gate::new(), handle::stop_channel());
        let reconcile = Arc::new(reconcile);
        let mut threads = Vec::with_capacity(self.workers);
        let spawned = (|| {
            let sync = worker::spawn_sync_thread(&self.core, self.synced, &gate, &stop)?;
            for i in 0..self.workers {
                threads.push(worker::spawn_worker_thread(
                    &self.core,
                    i,
                    &gate,
                    &stop,
                    reconcile.clone(),
                )?);
            }
            Ok(sync)
        })();
        match spawned {
            Ok(sync) => Ok(ControllerHandle::new(
                self.core,
                gate,
                stop,
                self.removers,
                Workers::Threads { sync, threads },
            )),
            Err(e) => {
                gate.close();
                self.core.queue.shut_down();
                for t in threads {
                    let _ = t.join();
                }
                for remove in &self.removers {
                    remove();
                }
                Err(ControllerError::Spawn(e))
            }
        }
    }

    /// Starts the workers as tokio tasks awaiting the async `reconcile` (on the current
    /// runtime, so reconciles of different keys run in parallel on a multi-threaded runtime).
    /// They wait for every watched cache to sync, as with [`run`](Self::run).
    ///
    /// # Errors
    /// [`ControllerError::NoRuntime`] when called outside a tokio runtime.
    pub fn run_async<F, Fut, E>(self, reconcile: F) -> Result<ControllerHandle, ControllerError>
    where
        F: Fn(ObjectKey) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| ControllerError::NoRuntime)?;
        let (gate, stop) = (Gate::new(), handle::stop_channel());
        let reconcile = Arc::new(reconcile);
        let sync = runtime.spawn(worker::sync_task(
            self.core.clone(),
            self.synced,
            gate.clone(),
            stop.subscribe(),
        ));
        let tasks = (0..self.workers)
            .map(|index| {
                runtime.spawn(worker::worker_task(
                    self.core.clone(),
                    index,
                    health::Running::new(&self.core),
                    gate.clone(),
                    stop.subscribe(),
                    reconcile.clone(),
                ))
            })
            .collect();
        Ok(ControllerHandle::new(
            self.core,
            gate,
            stop,
            self.removers,
            Workers::Tasks { sync, tasks },
        ))
    }
}

impl fmt::Debug for Controller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.core.name)
            .field("workers", &self.workers)
            .field("watched", &self.synced.len())
            .finish_non_exhaustive()
    }
}
