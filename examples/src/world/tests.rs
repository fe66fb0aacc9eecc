//! The reconcile's contract, scripted on a fake clock.

use super::*;
use kcache_core::FakeClock;
use kcache_indexer::Indexers;
use kcache_informer::InformerOptions;
use kcache_memory::MemorySource;
use kcache_reflector::FaultPlan;

/// The pod source as the chaos user meets it while the pod cache is blind: every pod the
/// controller creates is deleted by someone else right after, before any informer could see it.
#[derive(Clone)]
struct KilledAtOnce(MemorySource<Pod>);

impl Source<Pod> for KilledAtOnce {
    type ListWatcher = MemorySource<Pod>;

    fn list_watcher(&self) -> Self::ListWatcher {
        self.0.clone()
    }
    async fn create(&self, pod: Pod) -> Result<ResourceVersion, String> {
        let name = pod.name.clone();
        let created = Source::create(&self.0, pod).await?;
        Source::delete(&self.0, &key(&name)?).await?;
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

fn lw<T>(source: MemorySource<T>, clock: &FakeClock) -> FaultInjector<MemorySource<T>> {
    FaultInjector::with_clock(source, FaultPlan::default(), Arc::new(clock.clone()))
}

/// Traced from a `--chaos` run that never converged: the pod informer's watch was cut and its
/// reflector backed off (the pod cache blind); meanwhile the set's reconcile created its two
/// pods and the chaos user killed both. The relist found neither, so no pod event came, and the
/// reconcile's read-your-writes wait was satisfied by the relist's newer version. A reconcile
/// that then returns `Done` leaves the set without pods for good; it must look again and
/// requeue.
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
    let ctx = Arc::new(Ctx::<MemorySource<ReplicaSet>, KilledAtOnce>::new(
        sets.clone(),
        pods.clone(),
        KilledAtOnce(pods_src.clone()),
        Arc::new(clock.clone()),
    ));
    let set_key = key("rs-00016").unwrap();
    let reconciling = tokio::spawn(reconcile(ctx.clone(), set_key.clone()));
    // Both pods were created and killed; the reconcile now waits for the pod cache.
    while ctx.stats.pods_created.load(Relaxed) < 2 || !pods_src.is_empty() {
        tokio::task::yield_now().await;
    }

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
    let action = reconciling.await.unwrap();
    assert_eq!(
        action,
        Ok(Action::Requeue),
        "the set still has 0 of its 2 pods once the writes reached the cache"
    );
    assert_eq!(ctx.stats.unsettled.load(Relaxed), 1);

    // The requeued reconcile, with the cache caught up, creates them again (and they stay).
    let ctx = Arc::new(Ctx::<MemorySource<ReplicaSet>, MemorySource<Pod>>::new(
        sets.clone(),
        pods.clone(),
        pods_src.clone(),
        Arc::new(clock.clone()),
    ));
    assert_eq!(reconcile(ctx, set_key).await, Ok(Action::Done));
    assert_eq!(pods_src.len(), 2);

    stop.send_replace(true);
    drop(stopped);
    assert!(sets_run.await.unwrap().is_ok());
    assert!(pods_run.await.unwrap().is_ok());
}
