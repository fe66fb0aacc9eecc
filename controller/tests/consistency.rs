//! The consistency store (KEP-5647's staleness mitigation): a key whose last reconcile wrote
//! objects is not reconciled again until the informers show those writes.
//!
//! The double-create it prevents, deterministically: a ReplicaSet-like reconcile creates the
//! pods a set lacks; the pods' watch events are held back (a gate on the pod source's watch);
//! the key is reconciled again before they arrive. Without the store the second reconcile sees
//! no pods and creates a second set of them; with it, the key is skipped until the pod cache has
//! caught up, then reconciled once more and creates nothing. Delays run on a FakeClock.

#[path = "../../informer/tests/common/mod.rs"]
mod common;

use common::{synced, Pod, WAIT};
use futures::StreamExt;
use kcache_controller::{
    Action, ConsistencyError, ConsistencyStore, Controller, ControllerHandle, ControllerStats,
};
use kcache_core::{FakeClock, ObjectKey, ResourceVersion};
use kcache_informer::{InformerOptions, SharedIndexInformer};
use kcache_memory::{MemoryConfig, MemorySource};
use kcache_reflector::{ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream};
use kcache_workqueue::metrics::CounterMetric;
use kcache_workqueue::ItemExponentialFailureRateLimiter;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// A source whose watch events wait while the gate is closed (a slow watch: the writes are in
/// the store, their events not yet in the cache).
#[derive(Clone)]
struct Gated {
    inner: MemorySource<Pod>,
    open: watch::Sender<bool>,
}

impl Gated {
    fn new(inner: MemorySource<Pod>) -> Self {
        Self {
            inner,
            open: watch::Sender::new(true),
        }
    }

    fn set_open(&self, open: bool) {
        self.open.send_replace(open);
    }
}

impl ListWatcher<Pod> for Gated {
    type Error = <MemorySource<Pod> as ListWatcher<Pod>>::Error;

    async fn list(&self, opts: &ListOptions) -> Result<ListPage<Pod>, Self::Error> {
        self.inner.list(opts).await
    }

    async fn watch(
        &self,
        opts: &WatchOptions,
    ) -> Result<WatchStream<Pod, Self::Error>, Self::Error> {
        let events = self.inner.watch(opts).await?;
        let open = self.open.subscribe();
        Ok(events
            .then(move |event| {
                let mut open = open.clone();
                async move {
                    let _ = open.wait_for(|o| *o).await;
                    event
                }
            })
            .boxed())
    }
}

fn key(s: &str) -> ObjectKey {
    ObjectKey::new(s).expect("a valid key")
}

/// The owner of a pod "s-3" is the set "s".
fn owner(pod: &Pod) -> Vec<ObjectKey> {
    match pod.name.split_once('-') {
        Some((set, _)) => vec![ObjectKey::namespaced(&pod.ns, set).expect("a valid key")],
        None => Vec::new(),
    }
}

struct Counter(AtomicU64);
impl CounterMetric for Counter {
    fn inc(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// What a scenario ends with.
struct Outcome {
    pods: usize,
    stats: ControllerStats,
    metric: u64,
}

/// A running informer of any source; stop it with `stop().await`.
struct Running {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), kcache_informer::InformerError>>,
}

impl Running {
    fn spawn<L: ListWatcher<Pod>>(informer: &Arc<SharedIndexInformer<Pod, L>>) -> Self {
        let (stop, mut stopped) = watch::channel(false);
        let inf = informer.clone();
        let task = tokio::spawn(async move {
            inf.run(async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await
        });
        Self { stop, task }
    }

    async fn stop(self) {
        self.stop.send_replace(true);
        let r = tokio::time::timeout(WAIT, self.task).await;
        assert!(matches!(r, Ok(Ok(Ok(())))), "informer did not stop cleanly");
    }
}

/// Waits (bounded) until `informer`'s cache has applied `rv`.
async fn applied<L: ListWatcher<Pod>>(
    informer: &SharedIndexInformer<Pod, L>,
    rv: &ResourceVersion,
) {
    let r = tokio::time::timeout(WAIT, informer.wait_for_resource_version(rv)).await;
    assert!(matches!(r, Ok(Ok(()))), "cache did not reach {rv}: {r:?}");
}

async fn until(handle: &ControllerHandle, what: &str, pred: impl Fn(&ControllerStats) -> bool) {
    let r = tokio::time::timeout(WAIT, handle.wait_stats(pred)).await;
    assert!(r.is_ok(), "never: {what}: {:?}", handle.stats());
}

/// One set of 3 replicas; a reconcile creates the pods the cache does not show, records them
/// (with `mitigate`), and asks to be run again in 1 s.
async fn double_create_scenario(mitigate: bool, async_workers: bool) -> Outcome {
    let clock = FakeClock::new();
    let config = || MemoryConfig::new().with_clock(clock.clone());
    let sets_src = MemorySource::<Pod>::with_config(config());
    let pods_src = MemorySource::<Pod>::with_config(config());
    let gated = Gated::new(pods_src.clone());
    let options = |name: &str| {
        InformerOptions::new()
            .name(name)
            .clock(Arc::new(clock.clone()))
    };
    let sets = Arc::new(SharedIndexInformer::with_options(
        sets_src.clone(),
        options("sets"),
    ));
    let pods = Arc::new(SharedIndexInformer::with_options(
        gated.clone(),
        options("pods"),
    ));
    sets_src.create(Pod::new("s", 3)).expect("created");
    let (r1, r2) = (Running::spawn(&sets), Running::spawn(&pods));
    synced(&sets).await;
    let r = tokio::time::timeout(WAIT, pods.wait_for_cache_sync()).await;
    assert_eq!(r, Ok(true), "the pod informer syncs");
    // From now on the pods' events are late.
    gated.set_open(false);

    let consistency = ConsistencyStore::with_clock(Arc::new(clock.clone()));
    let pod_writes = consistency.tracker(&pods);
    let metric = Arc::new(Counter(AtomicU64::new(0)));
    let mut builder = Controller::builder("replicasets")
        .clock(Arc::new(clock.clone()))
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(100),
            Duration::from_secs(10),
        ))
        .watches(&sets)
        .owns(&pods, owner);
    if mitigate {
        builder = builder
            .consistency_store(&consistency)
            .stale_sync_skips_metric(metric.clone());
    }
    let controller = builder.build().expect("built");
    let (set_cache, pod_cache) = (sets.indexer(), pods.indexer());
    let (pods_src2, writes) = (pods_src.clone(), pod_writes.clone());
    let reconcile = Arc::new(move |k: &ObjectKey| {
        let Some(set) = set_cache.get_by_key(k) else {
            return Ok::<_, String>(Action::Done);
        };
        let prefix = format!("{}-", set.name);
        let have = pod_cache
            .list()
            .iter()
            .filter(|p| p.name.starts_with(&prefix))
            .count();
        let want = usize::try_from(set.value).map_err(|e| e.to_string())?;
        // Names never repeat (as generateName's): a second round creates new pods.
        let existing = pods_src2.len();
        for i in have..want {
            let pod = Pod::new(&format!("{}-{}", set.name, existing + i), 0);
            let created = pods_src2.create(pod).map_err(|e| e.to_string())?;
            writes.record(k, &created.rv).map_err(|e| e.to_string())?;
        }
        Ok(Action::RequeueAfter(Duration::from_secs(1)))
    });
    let handle = if async_workers {
        controller.run_async(move |k: ObjectKey| {
            let r = reconcile(&k);
            async move { r }
        })
    } else {
        controller.run(move |k: &ObjectKey| reconcile(k))
    }
    .expect("started");

    // The first reconcile creates the three pods; their events are held back.
    until(&handle, "the first reconcile", |s| s.reconciles >= 1).await;
    assert_eq!(pods_src.len(), 3);
    assert_eq!(pods.indexer().list().len(), 0, "the pod cache is behind");

    // The key comes back (its requeue) before the pods' events arrive.
    clock.advance(Duration::from_secs(1));
    until(&handle, "the requeued key is handled", |s| {
        s.reconciles >= 2 || s.stale_sync_skips >= 1
    })
    .await;

    // The events arrive; the key is handled again once the cache has them.
    gated.set_open(true);
    let last = pods_src.len();
    let rv = pods_src.resource_version();
    applied(&pods, &rv).await;
    assert_eq!(pods.indexer().list().len(), last);
    for _ in 0..3 {
        let before = handle.stats().reconciles;
        clock.advance(Duration::from_secs(1));
        until(&handle, "another reconcile", |s| s.reconciles > before).await;
    }
    let stats = handle.shutdown_async().await;
    r1.stop().await;
    r2.stop().await;
    Outcome {
        pods: pods_src.len(),
        stats,
        metric: metric.0.load(Ordering::SeqCst),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_store_a_requeue_before_the_pod_events_creates_no_extra_pods() {
    for async_workers in [false, true] {
        let out = double_create_scenario(true, async_workers).await;
        assert_eq!(out.pods, 3, "exactly the set's replicas: {:?}", out.stats);
        assert!(out.stats.stale_sync_skips >= 1, "{:?}", out.stats);
        assert_eq!(out.metric, out.stats.stale_sync_skips);
        assert_eq!(out.stats.errors, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_store_the_same_schedule_creates_the_pods_twice() {
    for async_workers in [false, true] {
        let out = double_create_scenario(false, async_workers).await;
        assert_eq!(
            out.pods, 6,
            "the stale second reconcile duplicated the pods"
        );
        assert_eq!(out.stats.stale_sync_skips, 0);
    }
}

// ---------------------------------------------------------------------------------------------
// The store's own rules.

type Informer = SharedIndexInformer<Pod, Gated>;

/// A running pod informer behind a gate, its source, and a store on a fake clock.
async fn setup() -> (
    FakeClock,
    MemorySource<Pod>,
    Gated,
    Arc<Informer>,
    Running,
    ConsistencyStore,
) {
    let clock = FakeClock::new();
    let src = MemorySource::<Pod>::with_config(MemoryConfig::new().with_clock(clock.clone()));
    let gated = Gated::new(src.clone());
    let informer = Arc::new(SharedIndexInformer::with_options(
        gated.clone(),
        InformerOptions::new()
            .name("pods")
            .clock(Arc::new(clock.clone())),
    ));
    let running = Running::spawn(&informer);
    let r = tokio::time::timeout(WAIT, informer.wait_for_cache_sync()).await;
    assert_eq!(r, Ok(true));
    let store = ConsistencyStore::with_clock(Arc::new(clock.clone()));
    (clock, src, gated, informer, running, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_ready_once_the_cache_reached_every_recorded_write() {
    let (_clock, src, gated, informer, running, store) = setup().await;
    let writes = store.tracker(&informer);
    let k = key("default/s");
    gated.set_open(false);
    let a = src.create(Pod::new("s-1", 0)).expect("created");
    let b = src.create(Pod::new("s-2", 0)).expect("created");
    writes.record(&k, &a.rv).expect("recorded");
    writes.record(&k, &b.rv).expect("recorded");
    writes.record(&k, &b.rv).expect("a repeat is recorded once");
    assert!(!store.is_ready(&k));
    assert_eq!(store.pending(&k), 2);
    assert!(
        store.is_ready(&key("default/other")),
        "other keys are not held back"
    );
    gated.set_open(true);
    applied(&informer, &b.rv).await;
    assert!(store.is_ready(&k));
    assert_eq!(store.pending(&k), 0);
    // A write the cache already shows records nothing.
    writes.record(&k, &a.rv).expect("recorded");
    assert_eq!(store.pending(&k), 0);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_waits_at_most_the_max_wait_and_can_be_forgotten() {
    let (clock, src, gated, informer, running, store) = setup().await;
    let store = store.max_wait(Duration::from_secs(5));
    let writes = store.tracker(&informer);
    gated.set_open(false);
    let a = src.create(Pod::new("s-1", 0)).expect("created");
    let (k, j) = (key("default/s"), key("default/t"));
    writes.record(&k, &a.rv).expect("recorded");
    writes.record(&j, &a.rv).expect("recorded");
    clock.advance(Duration::from_millis(4999));
    assert!(!store.is_ready(&k));
    clock.advance(Duration::from_millis(1));
    assert!(store.is_ready(&k), "given up after the max wait");
    assert_eq!(store.pending(&k), 0);
    store.forget(&j);
    assert!(store.is_ready(&j));
    gated.set_open(true);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_the_informer_cannot_order_is_refused() {
    let (_clock, _src, _gated, informer, running, store) = setup().await;
    let writes = store.tracker(&informer);
    let err = writes
        .record(&key("default/s"), &ResourceVersion::from("abc"))
        .expect_err("not a decimal");
    assert!(matches!(err, ConsistencyError::Unordered { .. }));
    assert_eq!(store.pending(&key("default/s")), 0);
    running.stop().await;
}

#[test]
fn errors_are_send_sync_and_static() {
    fn check<E: std::error::Error + Send + Sync + 'static>() {}
    check::<ConsistencyError>();
}
