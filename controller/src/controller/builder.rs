//! `ControllerBuilder`: what a controller watches and how it retries.

use super::enqueue::{EnqueueMapped, EnqueueOwn};
use super::handle::Counters;
use super::health::WorkerStates;
use super::queue::ControllerQueue;
use super::resync::{KeyLister, Resync, DEFAULT_RESYNC_PERIOD};
use super::worker::Core;
use super::{Controller, ControllerError, Remover};
use crate::consistency::ConsistencyStore;
use crate::shard::ShardGate;
use kcache_core::{Clock, Meta, ObjectKey, SystemClock};
use kcache_informer::SharedIndexInformer;
use kcache_informer::{HandlerOptions, HasSynced};
use kcache_leaderelection::LeaderGate;
use kcache_reflector::ListWatcher;
use kcache_workqueue::metrics::CounterMetric;
use kcache_workqueue::{
    default_controller_rate_limiter_with_clock, MetricsProvider, QueueConfig, RateLimiter,
};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// Registers one event handler on the controller's queue.
type Source =
    Box<dyn FnOnce(&ControllerQueue, &Arc<str>) -> Result<Registered, ControllerError> + Send>;

/// A registered handler: what to wait for, and how to remove it.
struct Registered {
    synced: Arc<dyn HasSynced>,
    remove: Remover,
}

/// Builds a [`Controller`]: its informers, workers, retries, rate limiter, metrics and clock.
///
/// # Examples
/// ```
/// use kcache_core::FakeClock;
/// use kcache_controller::Controller;
/// use kcache_workqueue::{ItemExponentialFailureRateLimiter, NoopMetricsProvider};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let controller = Controller::builder("replicasets")
///     .workers(4)
///     .max_retries(15)
///     .rate_limiter(ItemExponentialFailureRateLimiter::new(
///         Duration::from_millis(5),
///         Duration::from_secs(60),
///     ))
///     .metrics(Arc::new(NoopMetricsProvider))
///     .build()?;
/// assert_eq!(controller.name(), "replicasets");
/// # Ok::<(), kcache_controller::ControllerError>(())
/// ```
pub struct ControllerBuilder {
    name: String,
    workers: usize,
    max_retries: Option<usize>,
    limiter: Option<Box<dyn RateLimiter<ObjectKey>>>,
    metrics: Option<Arc<dyn MetricsProvider>>,
    clock: Arc<dyn Clock>,
    sources: Vec<Source>,
    synced: Vec<Arc<dyn HasSynced>>,
    leader: Option<Arc<dyn LeaderGate>>,
    resync_period: Duration,
    resync_listers: Vec<KeyLister>,
    consistency: Option<ConsistencyStore>,
    stale_sync_skips_metric: Option<Arc<dyn CounterMetric>>,
    priority_queue: bool,
    shard: Option<ShardGate>,
    /// The keys of the watched informers' caches, enqueued again when the shard gains keys.
    shard_listers: Vec<ShardLister>,
}

/// Lists the keys of one watched informer's cache, for the shard's re-enqueue.
type ShardLister = Arc<dyn Fn() -> Vec<ObjectKey> + Send + Sync>;

impl ControllerBuilder {
    /// One worker, unlimited retries, client-go's default controller rate limiter (per key 5 ms
    /// doubling to 1000 s, at most 10 retries/s overall with a burst of 100), no metrics, the
    /// system clock, a resync every 10 hours (+ up to 10 % jitter), nothing watched.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            workers: 1,
            max_retries: None,
            limiter: None,
            metrics: None,
            clock: Arc::new(SystemClock),
            sources: Vec::new(),
            synced: Vec::new(),
            leader: None,
            resync_period: DEFAULT_RESYNC_PERIOD,
            resync_listers: Vec::new(),
            consistency: None,
            stale_sync_skips_metric: None,
            priority_queue: true,
            shard: None,
            shard_listers: Vec::new(),
        }
    }

    /// Whether the queue is kcache's [`PriorityQueue`](kcache_workqueue::PriorityQueue) (the
    /// default): keys from an informer's initial list and from the resync go in at low priority,
    /// keys of watched changes at normal priority, so a real change is reconciled before a
    /// restart's or a resync's replay (controller-runtime's default). `false` keeps the plain
    /// rate-limiting queue, FIFO for every key. See [`ControllerQueue`].
    #[doc(alias = "UsePriorityQueue")]
    #[must_use]
    pub fn priority_queue(mut self, on: bool) -> Self {
        self.priority_queue = on;
        self
    }

    /// How many keys are reconciled at once (default 1; zero is refused by `build`).
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// Drops a key (forget, report, count in [`ControllerStats::dropped`](super::ControllerStats))
    /// once its reconcile failed `max` times in a row after retries; by default keys are retried
    /// for ever. `max_retries(0)` never retries.
    #[must_use]
    pub fn max_retries(mut self, max: usize) -> Self {
        self.max_retries = Some(max);
        self
    }

    /// The rate limiter deciding when a failed key is retried (default: client-go's
    /// `DefaultControllerRateLimiter` on the builder's clock).
    #[must_use]
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<ObjectKey> + 'static) -> Self {
        self.limiter = Some(Box::new(limiter));
        self
    }

    /// The queue's metrics provider; the controller's name is the metrics' `name` label
    /// (`workqueue_depth{name="…"}`, …).
    #[must_use]
    pub fn metrics(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.metrics = Some(provider);
        self
    }

    /// The clock of the queue's delays and of the default rate limiter (a
    /// [`FakeClock`](kcache_core::FakeClock) in tests; a limiter passed to
    /// [`rate_limiter`](Self::rate_limiter) keeps its own clock).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How often every key of the watched informers ([`watches`](Self::watches); not those of
    /// [`owns`](Self::owns)) goes back into the queue; `Duration::ZERO` turns the resync off.
    ///
    /// Default: on, every 10 hours, as controller-runtime's `SyncPeriod` (kube-controller-manager
    /// resyncs every 12 to 24 hours). A level-triggered controller reconciles a key when an
    /// event names it; a change that no event named (a write made and undone while a cache was
    /// blind after a watch error, an event mapping that missed an owner) would otherwise stay
    /// unreconciled until the key's next event, which may never come. The resync is the
    /// backstop: one queue add per key and period, deduplicated against keys already queued.
    /// Each round waits the period plus a jitter of up to 10 %, drawn anew, on the builder's
    /// [`clock`](Self::clock), and starts only once the workers were let go (every cache
    /// synced). A resync is not a substitute for a correct reconcile: with a period of hours, a
    /// key that a reconcile left wrong stays wrong that long; have it return
    /// [`Action::Requeue`](super::Action::Requeue) instead.
    #[doc(alias = "resync")]
    #[doc(alias = "SyncPeriod")]
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = period;
        self
    }

    /// Reconciles the objects of `informer` themselves: every add, update and delete enqueues
    /// the object's key (a deletion's key comes from the notification, tombstones included). The
    /// workers wait until this handler has received the informer's initial list.
    #[must_use]
    pub fn watches<T, L, M>(mut self, informer: &Arc<SharedIndexInformer<T, L, M>>) -> Self
    where
        T: Send + Sync + 'static,
        L: ListWatcher<T>,
        M: Meta<T>,
    {
        let cache = informer.indexer();
        self.resync_listers
            .push(Box::new(move || cache.list_keys()));
        let shard_cache = informer.indexer();
        self.shard_listers
            .push(Arc::new(move || shard_cache.list_keys()));
        let informer = informer.clone();
        let source: Source = Box::new(move |queue, controller| {
            let handler = EnqueueOwn::<M> {
                queue: queue.clone(),
                controller: controller.clone(),
                _meta: PhantomData,
            };
            register(&informer, handler, controller)
        });
        self.sources.push(source);
        self
    }

    /// Reconciles the keys `map` gives for the objects of `informer`: typically the owner of a
    /// child object (`|pod| vec![pod.owner.clone()]`), but any mapping works. An update enqueues
    /// the keys of both the old and the new state; a deletion maps the last known state (a
    /// tombstone without one enqueues nothing and is reported with `tracing::warn!`). The workers
    /// wait until this handler has received the informer's initial list.
    #[doc(alias = "watches_with")]
    #[must_use]
    pub fn owns<T, L, M, F>(mut self, informer: &Arc<SharedIndexInformer<T, L, M>>, map: F) -> Self
    where
        T: Send + Sync + 'static,
        L: ListWatcher<T>,
        M: Meta<T>,
        F: Fn(&T) -> Vec<ObjectKey> + Send + Sync + 'static,
    {
        let map = Arc::new(map);
        // A sharded controller that gains keys enqueues the owners of every cached child too:
        // an owner deleted while another replica owned its key has no entry of its own in any
        // watched cache, and its children would otherwise wait for the next event or resync.
        let (cache, shard_map) = (informer.indexer(), map.clone());
        self.shard_listers.push(Arc::new(move || {
            cache.list().iter().flat_map(|o| shard_map(o)).collect()
        }));
        let informer = informer.clone();
        let source: Source = Box::new(move |queue, controller| {
            let handler = EnqueueMapped {
                queue: queue.clone(),
                controller: controller.clone(),
                map,
            };
            register(&informer, handler, controller)
        });
        self.sources.push(source);
        self
    }

    /// Also waits for `synced` before the workers start: an informer the reconcile function only
    /// reads from, say.
    #[must_use]
    pub fn wait_for(mut self, synced: Arc<dyn HasSynced>) -> Self {
        self.synced.push(synced);
        self
    }

    /// Runs the workers only while `leader` says this process leads: typically the
    /// [`status`](kcache_leaderelection::LeaderElector::status) of a `kcache-leaderelection`
    /// elector running beside the controller. See [`Controller`]'s "Leader election" for what
    /// happens when leadership is lost and regained.
    ///
    /// # Examples
    /// ```
    /// use kcache_controller::Controller;
    /// use kcache_leaderelection::{InProcessLock, LeaderElectionConfig, LeaderElector};
    ///
    /// let elector = LeaderElector::new(InProcessLock::new("replica-a"), LeaderElectionConfig::new())?;
    /// let controller = Controller::builder("replicasets")
    ///     .leader_election(elector.status())
    ///     .build()?;
    /// // tokio::spawn(async move { elector.run(stop).await }); controller.run(reconcile)?; ...
    /// # let _ = controller;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn leader_election(mut self, leader: impl LeaderGate) -> Self {
        self.leader = Some(Arc::new(leader));
        self
    }

    /// Holds a key back while the caches have not shown the writes its last reconcile recorded
    /// in `store` (KEP-5647's staleness mitigation; see [`ConsistencyStore`]): such a key is
    /// requeued through the rate limiter instead of reconciled, and counted in
    /// [`ControllerStats::stale_sync_skips`](super::ControllerStats::stale_sync_skips).
    #[must_use]
    pub fn consistency_store(mut self, store: &ConsistencyStore) -> Self {
        self.consistency = Some(store.clone());
        self
    }

    /// A counter to increment for each key held back by the
    /// [`consistency_store`](Self::consistency_store) (export it as `stale_sync_skips_total`,
    /// kube-controller-manager's name).
    #[must_use]
    pub fn stale_sync_skips_metric(mut self, counter: Arc<dyn CounterMetric>) -> Self {
        self.stale_sync_skips_metric = Some(counter);
        self
    }

    /// Reconciles only the keys `shard` lets this replica start: keys other replicas own are
    /// skipped ([`ShardStats::skipped_not_owned`](crate::shard::ShardStats)), keys in the middle
    /// of a handover come back after the shard's retry period, and when the shard gains keys
    /// (a member left, a handover finished) the keys it owns are enqueued again: those of every
    /// watched cache, and those [`owns`](Self::owns)' mappings give for every cached child (an
    /// owner deleted while another replica owned its key is in no cache, but its children are). Keys from [`owns`](Self::owns) are checked after the mapping, so a child
    /// object's event goes to the replica of its owner. See [`crate::shard`].
    ///
    /// Drive the [`Shard`](crate::shard::Shard) the gate came from with its `run` beside the
    /// controller.
    #[must_use]
    pub fn shard(mut self, gate: ShardGate) -> Self {
        self.shard = Some(gate);
        self
    }

    /// Creates the queue and registers the event handlers: from now on events become keys in the
    /// queue. Start the workers with [`Controller::run`] or [`Controller::run_async`].
    ///
    /// # Errors
    /// [`ControllerError::NoWorkers`] for zero workers; [`ControllerError::Register`] if an
    /// informer refuses the handler (the ones already registered are removed again).
    pub fn build(self) -> Result<Controller, ControllerError> {
        if self.workers == 0 {
            return Err(ControllerError::NoWorkers);
        }
        let name: Arc<str> = Arc::from(self.name.as_str());
        let mut config = QueueConfig::new()
            .name(self.name.clone())
            .clock(self.clock.clone());
        if let Some(provider) = self.metrics {
            config = config.metrics_provider(provider);
        }
        let resync = Resync {
            period: self.resync_period,
            clock: self.clock.clone(),
            listers: self.resync_listers,
        };
        let clock = self.clock.clone();
        let limiter = self
            .limiter
            .unwrap_or_else(|| Box::new(default_controller_rate_limiter_with_clock(self.clock)));
        let queue = ControllerQueue::new(self.priority_queue, limiter, config);
        let mut synced = Vec::with_capacity(self.sources.len() + self.synced.len());
        let mut removers: Vec<Remover> = Vec::with_capacity(self.sources.len());
        for source in self.sources {
            match source(&queue, &name) {
                Ok(r) => {
                    synced.push(r.synced);
                    removers.push(r.remove);
                }
                Err(e) => {
                    for remove in &removers {
                        remove();
                    }
                    queue.shut_down();
                    return Err(e);
                }
            }
        }
        synced.extend(self.synced);
        if let Some(gate) = &self.shard {
            let (queue, listers, g) = (queue.clone(), self.shard_listers, gate.clone());
            gate.on_change(move || {
                for list in &listers {
                    for key in list() {
                        if g.owns(key.as_ref()) {
                            queue.add(key);
                        }
                    }
                }
            });
        }
        Ok(Controller {
            core: Arc::new(Core {
                name,
                queue,
                max_retries: self.max_retries,
                counters: Counters::default(),
                leader: self.leader,
                resync,
                consistency: self.consistency,
                stale_sync_skips_metric: self.stale_sync_skips_metric,
                shard: self.shard,
                clock,
                workers: WorkerStates::new(self.workers),
            }),
            workers: self.workers,
            synced,
            removers,
        })
    }
}

fn register<T, L, M>(
    informer: &SharedIndexInformer<T, L, M>,
    handler: impl kcache_informer::ResourceEventHandler<T>,
    controller: &str,
) -> Result<Registered, ControllerError>
where
    T: Send + Sync + 'static,
    L: ListWatcher<T>,
    M: Meta<T>,
{
    let options = HandlerOptions::new().name(format!("{controller}-{}", informer.name()));
    let registration = informer
        .add_event_handler_with_options(handler, options)
        .map_err(|source| ControllerError::Register {
            informer: informer.name().to_owned(),
            source,
        })?;
    let remove = registration.clone();
    Ok(Registered {
        synced: Arc::new(registration),
        remove: Box::new(move || {
            remove.remove();
        }),
    })
}

impl fmt::Debug for ControllerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerBuilder")
            .field("name", &self.name)
            .field("workers", &self.workers)
            .field("max_retries", &self.max_retries)
            .field("watched", &self.sources.len())
            .field("leader_election", &self.leader)
            .field("resync_period", &self.resync_period)
            .field("consistency", &self.consistency)
            .finish_non_exhaustive()
    }
}
