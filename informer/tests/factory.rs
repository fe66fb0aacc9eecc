//! InformerFactory: sharing, start, waiting for sync (including informers obtained after start,
//! the client-go trap kubernetes#92777), shutdown.

mod common;

use common::{source, synced, Informer, Pod, WAIT};
use kcache_core::{FakeClock, Object, ResourceVersion};
use kcache_informer::{FactoryError, InformerFactory, InformerOptions, SharedIndexInformer};
use kcache_memory::{MemorySource, SetResourceVersion};
use kcache_reflector::{FaultInjector, FaultPlan};
use std::sync::Arc;
use std::time::Duration;

fn new_informer(clock: &FakeClock, src: &MemorySource<Pod>, name: &str) -> Informer {
    SharedIndexInformer::with_options(
        src.clone(),
        InformerOptions::new()
            .name(name)
            .clock(Arc::new(clock.clone())),
    )
}

/// Another object type, to show the type is part of the factory's key.
#[derive(Clone, Debug)]
struct Node {
    name: String,
    rv: ResourceVersion,
}

impl Object for Node {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        self.rv.clone()
    }
}

impl SetResourceVersion for Node {
    fn set_resource_version(&mut self, rv: ResourceVersion) {
        self.rv = rv;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_asks_for_the_same_name_and_type_share_one_informer() {
    let (clock, src) = source();
    let factory = InformerFactory::new();
    let mut built = 0;
    let a = factory
        .informer_for("memory/pods", || {
            built += 1;
            new_informer(&clock, &src, "pods")
        })
        .unwrap();
    let b = factory
        .informer_for("memory/pods", || {
            built += 1;
            new_informer(&clock, &src, "pods")
        })
        .unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(built, 1, "only the first ask builds");

    let other_name = factory
        .informer_for("memory/other-pods", || new_informer(&clock, &src, "other"))
        .unwrap();
    assert!(!Arc::ptr_eq(&a, &other_name));
    let nodes_src = MemorySource::<Node>::with_clock(clock.clone());
    let nodes = factory
        .informer_for("memory/pods", || {
            SharedIndexInformer::new(nodes_src.clone(), Duration::ZERO)
        })
        .unwrap();
    assert_eq!(
        nodes.name(),
        "informer",
        "same name, other type: another informer"
    );
    assert_eq!(factory.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_starts_only_the_informers_not_yet_started() {
    let (clock, src) = source();
    src.create(Pod::new("a", 1)).unwrap();
    let factory = InformerFactory::new();
    let a = factory
        .informer_for("a", || new_informer(&clock, &src, "a"))
        .unwrap();
    assert_eq!(factory.not_started(), ["a"]);
    assert_eq!(factory.start(), Ok(1));
    assert_eq!(factory.start(), Ok(0), "a second start starts nothing");
    synced(&a).await;
    let b = factory
        .informer_for("b", || new_informer(&clock, &src, "b"))
        .unwrap();
    assert_eq!(factory.not_started(), ["b"]);
    assert_eq!(factory.start(), Ok(1));
    synced(&b).await;
    assert!(factory.not_started().is_empty());
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_cache_sync_covers_informers_obtained_after_start() {
    let (clock, src) = source();
    src.create(Pod::new("a", 1)).unwrap();
    let factory = InformerFactory::new();
    let early = factory
        .informer_for("early", || new_informer(&clock, &src, "early"))
        .unwrap();
    factory.start().unwrap();
    // client-go's trap: this one is obtained after Start.
    let late = factory
        .informer_for("late", || new_informer(&clock, &src, "late"))
        .unwrap();
    assert!(!late.has_synced());
    let r = tokio::time::timeout(WAIT, factory.wait_for_cache_sync()).await;
    assert_eq!(r, Ok(Ok(())));
    assert!(early.has_synced());
    assert!(
        late.has_synced(),
        "the late informer was started and waited for"
    );
    assert_eq!(late.indexer().len(), 1);
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_that_stopped_before_syncing_is_named_in_the_error() {
    let (clock, src) = source();
    // Every list fails, so it can never sync.
    let failing = FaultInjector::with_clock(
        src.clone(),
        FaultPlan {
            list_error: 1.0,
            ..FaultPlan::default()
        },
        Arc::new(clock.clone()),
    );
    let factory = InformerFactory::new();
    let used = factory
        .informer_for("used-elsewhere", || {
            // Lists, not streams (the memory source's default), so every attempt fails.
            SharedIndexInformer::with_options(
                failing,
                InformerOptions::new()
                    .clock(Arc::new(clock.clone()))
                    .streaming_initial_list(false),
            )
        })
        .unwrap();
    // Someone ran and stopped it outside the factory: it can never sync under the factory.
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = {
        let used = used.clone();
        tokio::spawn(async move {
            used.run(async {
                let _ = rx.await;
            })
            .await
        })
    };
    tx.send(()).unwrap();
    assert!(matches!(
        tokio::time::timeout(WAIT, task).await,
        Ok(Ok(Ok(())))
    ));
    assert!(!used.has_synced());
    let r = tokio::time::timeout(WAIT, factory.wait_for_cache_sync()).await;
    assert_eq!(
        r,
        Ok(Err(FactoryError::NotSynced {
            name: "used-elsewhere".into()
        }))
    );
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_every_informer_and_refuses_more() {
    let (clock, src) = source();
    let factory = InformerFactory::new();
    let a = factory
        .informer_for("a", || new_informer(&clock, &src, "a"))
        .unwrap();
    let b = factory
        .informer_for("b", || new_informer(&clock, &src, "b"))
        .unwrap();
    factory.wait_for_cache_sync().await.unwrap();
    tokio::time::timeout(WAIT, factory.shutdown())
        .await
        .unwrap();
    assert!(
        a.is_stopped() && b.is_stopped(),
        "shutdown waits for every informer"
    );
    assert_eq!(factory.start(), Err(FactoryError::ShutDown));
    assert!(matches!(
        factory.informer_for("c", || new_informer(&clock, &src, "c")),
        Err(FactoryError::ShutDown)
    ));
    tokio::time::timeout(WAIT, factory.shutdown())
        .await
        .unwrap(); // idempotent
}

#[test]
fn start_outside_a_runtime_is_a_typed_error_unless_given_one() {
    let (clock, src) = source();
    let factory = InformerFactory::new();
    factory
        .informer_for("a", || new_informer(&clock, &src, "a"))
        .unwrap();
    assert_eq!(factory.start(), Err(FactoryError::NoRuntime));

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let factory = InformerFactory::with_runtime(runtime.handle().clone());
    let a = factory
        .informer_for("a", || new_informer(&clock, &src, "a"))
        .unwrap();
    assert_eq!(factory.start(), Ok(1), "started from a plain thread");
    runtime.block_on(async {
        synced(&a).await;
        factory.shutdown().await;
    });
}

#[test]
fn factory_errors_are_send_sync_static() {
    fn assert_error<E: std::error::Error + Send + Sync + 'static>() {}
    assert_error::<FactoryError>();
}

/// `/readyz` over a factory: not ready (naming the informer that has not synced) until every
/// informer obtained so far has its first list in the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sync_check_names_the_informers_not_synced_until_all_are() {
    use kcache_core::health::HealthChecks;
    use kcache_informer::NotSyncedError;
    let (clock, src) = source();
    src.create(Pod::new("web", 1)).unwrap();
    let failing = FaultInjector::with_clock(
        src.clone(),
        FaultPlan {
            list_error: 1.0,
            ..FaultPlan::default()
        },
        Arc::new(clock.clone()),
    );
    let faults = failing.handle();
    let factory = InformerFactory::new();
    let pods = factory
        .informer_for("pods", || new_informer(&clock, &src, "pods"))
        .unwrap();
    let flaky = factory
        .informer_for("flaky-pods", || {
            SharedIndexInformer::with_options(
                failing,
                // Lists, not streams (the memory source's default), so the failing lists
                // keep it unsynced.
                InformerOptions::new()
                    .name("flaky")
                    .clock(Arc::new(clock.clone()))
                    .streaming_initial_list(false),
            )
        })
        .unwrap();
    let readyz = HealthChecks::new().with(factory.sync_check());
    let report = readyz.check();
    assert!(!report.is_ok());
    let error = report.get("informer-sync").and_then(|r| r.error());
    let error = error.and_then(|e| e.downcast_ref::<NotSyncedError>());
    assert_eq!(
        error.map(|e| e.unsynced.clone()),
        Some(vec!["pods".to_owned(), "flaky-pods".to_owned()]),
        "before start, neither has synced"
    );

    factory.start().unwrap();
    synced(&pods).await;
    assert_eq!(factory.sync_check().unsynced(), ["flaky-pods"]);
    assert_eq!(
        readyz.check().to_string(),
        "[-]informer-sync failed: not synced yet: flaky-pods\ncheck failed\n"
    );

    faults.heal();
    let mut rounds = 0;
    while !flaky.has_synced() {
        rounds += 1;
        assert!(rounds < 2000, "the healed informer never synced");
        clock.advance(Duration::from_millis(100));
        tokio::task::yield_now().await;
        // A bounded moment for the informer's tasks on the other worker thread.
        let _ = tokio::time::timeout(Duration::from_millis(2), std::future::pending::<()>()).await;
    }
    let report = readyz.check();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.to_string(), "[+]informer-sync ok\ncheck passed\n");
    factory.shutdown().await;
}
