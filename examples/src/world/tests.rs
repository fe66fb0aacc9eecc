//! The reconcile's contract, scripted on a fake clock.

use super::*;
use kcache_controller::ConsistencyStore;
use kcache_core::FakeClock;
use kcache_indexer::Indexers;
use kcache_informer::InformerOptions;
use kcache_memory::MemorySource;
use kcache_reflector::FaultPlan;
use std::time::Duration;

/// The pod source as the chaos user meets it while the pod cache is blind: while `kill` is set,
/// every pod the controller creates is deleted by someone else right after, before any informer
/// could see it.
#[derive(Clone)]
struct KilledAtOnce(MemorySource<Pod>, Arc<std::sync::atomic::AtomicBool>);

impl Source<Pod> for KilledAtOnce {
    type ListWatcher = MemorySource<Pod>;

    fn list_watcher(&self) -> Self::ListWatcher {
        self.0.clone()
    }
    async fn create(&self, pod: Pod) -> Result<ResourceVersion, String> {
        let name = pod.name.clone();
        let created = Source::create(&self.0, pod).await?;
        if self.1.load(Relaxed) {
            Source::delete(&self.0, &key(&name)?).await?;
        }
        Ok(created)
    }
    async fn update(&self, pod: Pod) -> Result<ResourceVersion, String> {
        Source::update(&self.0, pod).await
    }
    async fn delete(&self, key: &ObjectKey) -> Result<Option<ResourceVersion>, String> {
        Source::delete(&self.0, key).await
    }
    async fn get(&self, key: &ObjectKey) -> Result<Option<Arc<Pod>>, String> {
        Source::get(&self.0, key).await
    }
    async fn list(&self) -> Result<Vec<Arc<Pod>>, String> {
        Source::list(&self.0).await
    }
}

fn lw<T>(
    source: MemorySource<T>,
    clock: &FakeClock,
) -> CountingLists<FaultInjector<MemorySource<T>>> {
    CountingLists::new(FaultInjector::with_clock(
        source,
        FaultPlan::default(),
        Arc::new(clock.clone()),
    ))
    .0
}

/// Waits (bounded, by polling the store, on a multi-thread runtime) until the consistency store
/// lets `key` through.
async fn ready(store: &ConsistencyStore, key: &ObjectKey) {
    let wait = async {
        while !store.is_ready(key) {
            tokio::task::yield_now().await;
        }
    };
    assert!(
        tokio::time::timeout(Duration::from_secs(20), wait)
            .await
            .is_ok(),
        "the pod cache never showed the writes of {key}"
    );
}

/// Traced from a `--chaos` run that never converged: the pod informer's watch was cut and its
/// reflector backed off (the pod cache blind); meanwhile the set's reconcile created its two
/// pods and the chaos user killed both. The relist found neither, so no pod event came, and the
/// consistency store was satisfied by the relist's newer version. A reconcile that returned
/// `Done` after writing would leave the set without pods for good; it requeues, and the
/// follow-up looks again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_undone_while_the_cache_was_blind_requeue_the_key() {
    let clock = FakeClock::new();
    let sets_src = MemorySource::<ReplicaSet>::with_clock(clock.clone());
    let pods_src = MemorySource::<Pod>::with_clock(clock.clone());
    sets_src
        .create(ReplicaSet {
            name: "rs-00016".into(),
            replicas: 2,
            rv: ResourceVersion::default(),
        })
        .unwrap();
    let sets = Arc::new(SharedIndexInformer::with_options(
        lw(sets_src.clone(), &clock),
        InformerOptions::new().name("replicasets"),
    ));
    let indexers = Indexers::new().with(OWNER_INDEX, |p: &Pod| Ok(vec![p.owner.clone()]));
    let pods = Arc::new(SharedIndexInformer::with_options(
        lw(pods_src.clone(), &clock),
        InformerOptions::new().name("pods").indexers(indexers),
    ));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let sets_run = {
        let (sets, mut stopped) = (sets.clone(), stopped.clone());
        tokio::spawn(async move {
            sets.run(async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await
        })
    };
    assert!(sets.wait_for_cache_sync().await);

    // The pod informer is blind: it has not listed yet when the reconcile writes.
    let kill = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let store = ConsistencyStore::with_clock(Arc::new(clock.clone()));
    let ctx = Arc::new(Ctx::<MemorySource<ReplicaSet>, KilledAtOnce>::new(
        sets.clone(),
        pods.clone(),
        KilledAtOnce(pods_src.clone(), kill.clone()),
        Arc::new(clock.clone()),
        &store,
    ));
    let set_key = key("rs-00016").unwrap();
    assert_eq!(
        reconcile(ctx.clone(), set_key.clone()).await,
        Ok(Action::Requeue),
        "a reconcile that wrote looks again"
    );
    assert_eq!(ctx.stats.pods_created.load(Relaxed), 2);
    assert!(pods_src.is_empty(), "both pods were killed");
    assert!(
        !store.is_ready(&set_key),
        "held back until the cache shows the writes"
    );

    // The cache recovers with a list that holds neither pod: no event names the set.
    let pods_run = {
        let (pods, mut stopped) = (pods.clone(), stopped.clone());
        tokio::spawn(async move {
            pods.run(async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await
        })
    };
    ready(&store, &set_key).await;
    kill.store(false, Relaxed);
    assert_eq!(
        reconcile(ctx.clone(), set_key.clone()).await,
        Ok(Action::Requeue),
        "the follow-up finds 0 of 2 pods and creates them again"
    );
    assert_eq!(ctx.stats.unsettled.load(Relaxed), 1);
    ready(&store, &set_key).await;
    assert_eq!(reconcile(ctx.clone(), set_key).await, Ok(Action::Done));
    assert_eq!(pods_src.len(), 2, "and they stay");
    assert_eq!(ctx.stats.pods_created.load(Relaxed), 4);

    stop.send_replace(true);
    drop(stopped);
    assert!(sets_run.await.unwrap().is_ok());
    assert!(pods_run.await.unwrap().is_ok());
}

/// A pod source whose watch events wait while the gate is closed: the writes are in the source,
/// their events not yet in the pod cache.
#[derive(Clone)]
struct SlowWatch {
    pods: MemorySource<Pod>,
    open: Arc<tokio::sync::watch::Sender<bool>>,
}

impl kcache_reflector::ListWatcher<Pod> for SlowWatch {
    type Error = <MemorySource<Pod> as kcache_reflector::ListWatcher<Pod>>::Error;

    async fn list(
        &self,
        opts: &kcache_reflector::ListOptions,
    ) -> Result<kcache_reflector::ListPage<Pod>, Self::Error> {
        kcache_reflector::ListWatcher::list(&self.pods, opts).await
    }

    async fn watch(
        &self,
        opts: &kcache_reflector::WatchOptions,
    ) -> Result<kcache_reflector::WatchStream<Pod, Self::Error>, Self::Error> {
        use futures::StreamExt;
        let events = kcache_reflector::ListWatcher::watch(&self.pods, opts).await?;
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

impl Source<Pod> for SlowWatch {
    type ListWatcher = SlowWatch;

    fn list_watcher(&self) -> Self::ListWatcher {
        self.clone()
    }
    async fn create(&self, pod: Pod) -> Result<ResourceVersion, String> {
        Source::create(&self.pods, pod).await
    }
    async fn update(&self, pod: Pod) -> Result<ResourceVersion, String> {
        Source::update(&self.pods, pod).await
    }
    async fn delete(&self, key: &ObjectKey) -> Result<Option<ResourceVersion>, String> {
        Source::delete(&self.pods, key).await
    }
    async fn get(&self, key: &ObjectKey) -> Result<Option<Arc<Pod>>, String> {
        Source::get(&self.pods, key).await
    }
    async fn list(&self) -> Result<Vec<Arc<Pod>>, String> {
        Source::list(&self.pods).await
    }
}

/// `f`, bounded.
async fn within<F: std::future::Future>(f: F) -> Result<F::Output, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(20), f).await
}

/// The demo's controller over a set of 2 replicas whose pods' watch events are late: the first
/// reconcile creates the 2 pods and requeues; the key comes back before their events reach the
/// pod cache. Returns the reconcile stats and the controller's once that second round was handled.
async fn requeue_before_the_pod_events(mitigate: bool) -> (u64, u64, u64) {
    let clock = FakeClock::new();
    let sets_src = MemorySource::<ReplicaSet>::with_clock(clock.clone());
    let pods_src = MemorySource::<Pod>::with_clock(clock.clone());
    let slow = SlowWatch {
        pods: pods_src.clone(),
        open: Arc::new(tokio::sync::watch::Sender::new(true)),
    };
    sets_src
        .create(ReplicaSet {
            name: "rs-00001".into(),
            replicas: 2,
            rv: ResourceVersion::default(),
        })
        .unwrap();
    let sets = Arc::new(SharedIndexInformer::with_options(
        lw(sets_src.clone(), &clock),
        InformerOptions::new().name("replicasets"),
    ));
    let indexers = Indexers::new().with(OWNER_INDEX, |p: &Pod| Ok(vec![p.owner.clone()]));
    let pods = Arc::new(SharedIndexInformer::with_options(
        CountingLists::new(FaultInjector::with_clock(
            slow.clone(),
            FaultPlan::default(),
            Arc::new(clock.clone()),
        ))
        .0,
        InformerOptions::new().name("pods").indexers(indexers),
    ));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let runs = [
        tokio::spawn({
            let (sets, mut stopped) = (sets.clone(), stopped.clone());
            async move {
                sets.run(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await
            }
        }),
        tokio::spawn({
            let (pods, mut stopped) = (pods.clone(), stopped.clone());
            async move {
                pods.run(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await
            }
        }),
    ];
    assert!(sets.wait_for_cache_sync().await && pods.wait_for_cache_sync().await);
    slow.open.send_replace(false);

    let store = ConsistencyStore::with_clock(Arc::new(clock.clone()));
    let mut builder = kcache_controller::Controller::builder("replicaset-controller")
        .clock(Arc::new(clock.clone()))
        .rate_limiter(kcache_workqueue::ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(100),
            Duration::from_secs(10),
        ))
        .watches(&sets)
        .owns(&pods, |pod: &Pod| {
            ObjectKey::new(pod.owner.as_str())
                .ok()
                .into_iter()
                .collect()
        });
    if mitigate {
        builder = builder.consistency_store(&store);
    }
    let ctx = Arc::new(Ctx::<MemorySource<ReplicaSet>, SlowWatch>::new(
        sets.clone(),
        pods.clone(),
        slow.clone(),
        Arc::new(clock.clone()),
        &store,
    ));
    let c = ctx.clone();
    let handle = builder
        .build()
        .unwrap()
        .run_async(move |key| reconcile(c.clone(), key))
        .unwrap();
    assert!(within(handle.wait_stats(|s| s.reconciles >= 1))
        .await
        .is_ok());
    assert_eq!(ctx.stats.pods_created.load(Relaxed), 2);
    // The requeue comes due; the pods' events have not arrived.
    clock.advance(Duration::from_millis(100));
    let handled = within(handle.wait_stats(|s| s.reconciles >= 2 || s.stale_sync_skips >= 1));
    assert!(handled.await.is_ok(), "{:?}", handle.stats());
    let created = ctx.stats.pods_created.load(Relaxed);
    let skips = handle.stats().stale_sync_skips;

    // The events arrive and the world converges to the set's 2 pods either way.
    slow.open.send_replace(true);
    // Let the pod cache take the held-back events before time moves on: a clock advanced in a
    // tight loop would pass the store's max wait (30 s) before the informer's task ran, and the
    // worker would then rightly reconcile on the stale cache.
    let caught_up = async {
        while !store.is_ready(&key("rs-00001").unwrap()) {
            tokio::task::yield_now().await;
        }
    };
    assert!(
        within(caught_up).await.is_ok(),
        "the pod cache never showed the writes"
    );
    let converged = async {
        loop {
            clock.advance(Duration::from_secs(1));
            let stats = handle.stats();
            if pods_src.len() == 2
                && pods.indexer().list().len() == 2
                && store.is_ready(&key("rs-00001").unwrap())
                && stats.reconciles > 2
            {
                break;
            }
            tokio::task::yield_now().await;
        }
    };
    assert!(within(converged).await.is_ok(), "{:?}", handle.stats());
    handle.shutdown_async().await;
    stop.send_replace(true);
    drop(stopped);
    for run in runs {
        assert!(run.await.unwrap().is_ok());
    }
    (created, skips, ctx.stats.pods_created.load(Relaxed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_consistency_store_a_requeue_before_the_pod_events_creates_no_extra_pods() {
    let (created_by_then, skips, created) = requeue_before_the_pod_events(true).await;
    assert_eq!(created_by_then, 2, "the stale round was held back");
    assert!(skips >= 1);
    assert_eq!(created, 2, "no pod was ever created twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_consistency_store_the_same_requeue_creates_the_pods_twice() {
    let (created_by_then, skips, _) = requeue_before_the_pod_events(false).await;
    assert_eq!(created_by_then, 4, "the stale round created a second pair");
    assert_eq!(skips, 0);
}
