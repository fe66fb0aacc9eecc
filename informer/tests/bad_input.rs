//! Hostile input and bad configuration at the informer level: user code that panics (index
//! functions, transforms, a watch-error handler, the source itself), settings that make no
//! sense, a run that ends in any way. Each case asserts the typed error or the documented
//! behaviour; every wait is bounded, so a hang fails instead of stalling CI.

mod common;

use common::{applied, run, source, synced, Informer, Pod, WAIT};
use kcache_core::{FakeClock, Object};
use kcache_indexer::Indexers;
use kcache_informer::{
    HandlerFuncs, InformerError, InformerOptions, ResourceVersionError, SharedIndexInformer,
};
use kcache_memory::MemorySource;
use kcache_reflector::{
    BackoffConfig, ConfigError, ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn informer_with(
    clock: &FakeClock,
    source: &MemorySource<Pod>,
    options: InformerOptions<Pod>,
) -> Arc<Informer> {
    Arc::new(SharedIndexInformer::with_options(
        source.clone(),
        options.name("pods").clock(Arc::new(clock.clone())),
    ))
}

fn cached(inf: &Informer) -> Vec<String> {
    let mut names: Vec<String> = inf
        .indexer()
        .list()
        .iter()
        .map(|p| p.name.clone())
        .collect();
    names.sort();
    names
}

/// Asserts the informer is stopped for good: every waiter released with an error, nothing
/// accepted any more.
async fn assert_stopped_for_good(inf: &Informer, was_synced: bool) {
    assert!(inf.is_stopped());
    let synced = tokio::time::timeout(WAIT, inf.wait_for_cache_sync()).await;
    assert_eq!(synced, Ok(was_synced), "wait_for_cache_sync is released");
    let rv = tokio::time::timeout(WAIT, inf.wait_for_resource_version(&"99".into())).await;
    assert!(
        matches!(rv, Ok(Err(ResourceVersionError::Stopped))),
        "{rv:?}"
    );
    assert!(matches!(
        inf.add_event_handler(HandlerFuncs::new()),
        Err(InformerError::Stopped)
    ));
    let again = tokio::time::timeout(WAIT, inf.run(async {})).await;
    assert!(
        matches!(again, Ok(Err(InformerError::AlreadyStarted))),
        "{again:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_function_that_panics_on_a_watch_update_refuses_only_that_object() {
    let (clock, source) = source();
    source.create(Pod::new("a", 1)).unwrap();
    let inf = informer_with(
        &clock,
        &source,
        InformerOptions::new().indexers(Indexers::new().with("by-value", |p: &Pod| {
            assert!(p.value != 13, "index function refuses 13");
            Ok(vec![p.value.to_string()])
        })),
    );
    let running = run(&inf);
    synced(&inf).await;
    source.create(Pod::new("boom", 13)).unwrap();
    let b = source.create(Pod::new("b", 2)).unwrap();
    applied(&inf, &b.resource_version()).await;
    assert_eq!(cached(&inf), ["a", "b"]);
    assert!(!inf.is_stopped());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transform_that_panics_refuses_its_object_and_reports_it_through_the_hook() {
    let (clock, source) = source();
    source.create(Pod::new("a", 1)).unwrap();
    let inf = informer_with(&clock, &source, InformerOptions::new());
    inf.set_transform(|p: Arc<Pod>| {
        assert!(p.value != 13, "transform refuses 13");
        Ok::<_, std::convert::Infallible>(p)
    })
    .unwrap();
    let errors = Arc::new(Mutex::new(Vec::new()));
    let e = errors.clone();
    inf.set_watch_error_handler(move |err| {
        let source = std::error::Error::source(err).map(|s| s.to_string());
        e.lock().unwrap().push(format!("{err}: {source:?}"));
    })
    .unwrap();
    let running = run(&inf);
    synced(&inf).await;
    source.create(Pod::new("boom", 13)).unwrap();
    let b = source.create(Pod::new("b", 2)).unwrap();
    applied(&inf, &b.resource_version()).await;
    assert_eq!(cached(&inf), ["a", "b"]);
    let errors = errors.lock().unwrap().clone();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("store add failed"), "{errors:?}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_watch_error_handler_is_contained() {
    let (clock, source) = source();
    let inf = informer_with(&clock, &source, InformerOptions::new());
    inf.set_transform(|p: Arc<Pod>| {
        if p.value == 13 {
            return Err("no 13s");
        }
        Ok(p)
    })
    .unwrap();
    inf.set_watch_error_handler(|_| panic!("the hook panics"))
        .unwrap();
    let running = run(&inf);
    synced(&inf).await;
    source.create(Pod::new("bad", 13)).unwrap();
    let b = source.create(Pod::new("b", 2)).unwrap();
    applied(&inf, &b.resource_version()).await;
    assert_eq!(cached(&inf), ["b"]);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nonsensical_backoff_in_the_options_is_refused_and_leaves_the_informer_stopped() {
    let (clock, source) = source();
    let backoff = BackoffConfig {
        factor: f64::INFINITY,
        ..BackoffConfig::default()
    };
    let inf = informer_with(&clock, &source, InformerOptions::new().backoff(backoff));
    let r = tokio::time::timeout(WAIT, inf.run(std::future::pending())).await;
    assert!(
        matches!(
            r,
            Ok(Err(InformerError::Config(ConfigError::BackoffFactor(_))))
        ),
        "{r:?}"
    );
    assert_stopped_for_good(&inf, false).await;
}

/// A source whose `list` panics.
struct PanickingSource;

impl ListWatcher<Pod> for PanickingSource {
    type Error = kcache_memory::MemoryError;

    async fn list(&self, _: &ListOptions) -> Result<ListPage<Pod>, Self::Error> {
        panic!("the source panics")
    }

    async fn watch(&self, _: &WatchOptions) -> Result<WatchStream<Pod, Self::Error>, Self::Error> {
        panic!("the source panics")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_that_ends_run_leaves_the_informer_stopped_with_waiters_released() {
    let inf: SharedIndexInformer<Pod, PanickingSource> = SharedIndexInformer::with_options(
        PanickingSource,
        InformerOptions::new().clock(Arc::new(FakeClock::new())),
    );
    let inf = Arc::new(inf);
    let waiter = {
        let inf = inf.clone();
        tokio::spawn(async move { inf.wait_for_cache_sync().await })
    };
    let r = tokio::time::timeout(WAIT, inf.run(std::future::pending())).await;
    assert!(
        matches!(&r, Ok(Err(InformerError::Panicked(m))) if m == "the source panics"),
        "{r:?}"
    );
    let released = tokio::time::timeout(WAIT, waiter).await.unwrap().unwrap();
    assert!(!released, "a waiter for the sync is released with false");
    assert!(inf.is_stopped());
    let synced = tokio::time::timeout(WAIT, inf.wait_for_cache_sync()).await;
    assert_eq!(synced, Ok(false));
    assert!(matches!(
        inf.add_event_handler(HandlerFuncs::new()),
        Err(InformerError::Stopped)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_run_future_leaves_the_informer_stopped() {
    let (clock, source) = source();
    source.create(Pod::new("a", 1)).unwrap();
    let inf = informer_with(&clock, &source, InformerOptions::new());
    let running = {
        let inf = inf.clone();
        tokio::spawn(async move { inf.run(std::future::pending()).await })
    };
    synced(&inf).await;
    running.abort();
    let _ = tokio::time::timeout(WAIT, running)
        .await
        .expect("the task ends");
    assert_stopped_for_good(&inf, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_object_the_transform_refuses_is_left_out_and_the_rest_syncs() {
    let (clock, source) = source();
    source.create(Pod::new("a", 1)).unwrap();
    source.create(Pod::new("poison", 13)).unwrap();
    source.create(Pod::new("b", 2)).unwrap();
    let inf = informer_with(&clock, &source, InformerOptions::new());
    inf.set_transform(|p: Arc<Pod>| {
        if p.value == 13 {
            return Err("cannot transform 13");
        }
        Ok(p)
    })
    .unwrap();
    let errors = Arc::new(Mutex::new(Vec::new()));
    let e = errors.clone();
    inf.set_watch_error_handler(move |err| {
        let source = std::error::Error::source(err).map(|s| s.to_string());
        e.lock()
            .unwrap()
            .push(format!("{err}: {}", source.unwrap_or_default()));
    })
    .unwrap();
    let running = run(&inf);
    synced(&inf).await;
    assert_eq!(cached(&inf), ["a", "b"]);
    assert_eq!(
        *errors.lock().unwrap(),
        ["store replace failed: the replace left out 1 listed object(s) it could not take"]
    );
    // The informer watches on: a later change arrives.
    let c = source.create(Pod::new("c", 3)).unwrap();
    applied(&inf, &c.resource_version()).await;
    assert_eq!(cached(&inf), ["a", "b", "c"]);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_resource_version_takes_decimals_of_any_length_and_nothing_else() {
    let (clock, source) = source();
    let a = source.create(Pod::new("a", 1)).unwrap();
    let inf = informer_with(&clock, &source, InformerOptions::new());
    let running = run(&inf);
    synced(&inf).await;
    applied(&inf, &a.resource_version()).await;
    for bad in ["+3", "-1", "", " 3", "3 ", "1e3", "0x10", "abc"] {
        let r = tokio::time::timeout(WAIT, inf.wait_for_resource_version(&bad.into())).await;
        assert!(
            matches!(r, Ok(Err(ResourceVersionError::NotNumeric(_)))),
            "{bad:?}: {r:?}"
        );
    }
    // Reached: a smaller version, with leading zeros too.
    for reached in ["0", "00", "0001"] {
        let r = tokio::time::timeout(WAIT, inf.wait_for_resource_version(&reached.into())).await;
        assert!(matches!(r, Ok(Ok(()))), "{reached:?}: {r:?}");
    }
    // Bigger than u64: valid, not reached yet (the wait goes on until the informer stops).
    let huge = "184467440737095516160000";
    let waiter = {
        let inf = inf.clone();
        tokio::spawn(async move { inf.wait_for_resource_version(&huge.into()).await })
    };
    running.stop().await;
    let r = tokio::time::timeout(WAIT, waiter).await.unwrap().unwrap();
    assert_eq!(r, Err(ResourceVersionError::Stopped));
}

/// The documented rule for RV-unchanged updates (the crate docs' "syncing" flag): in an
/// informer without resync, every handler receives each relist's unchanged objects as updates
/// with equal versions, as in client-go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_resync_every_handler_receives_a_relists_unchanged_objects() {
    use kcache_reflector::{ErrorKind, FaultInjector, FaultPlan};
    let (clock, source) = source();
    source.create(Pod::new("a", 1)).unwrap();
    // Every watch fails at once with an Other error: the reflector relists after each backoff.
    let plan = FaultPlan {
        watch_error: 1.0,
        error_kinds: vec![ErrorKind::Other],
        ..FaultPlan::default()
    };
    let faulty = FaultInjector::with_clock(source.clone(), plan, Arc::new(clock.clone()));
    let inf = Arc::new(SharedIndexInformer::with_options(
        faulty,
        InformerOptions::new().clock(Arc::new(clock.clone())),
    ));
    let rec = common::Recorder::new();
    inf.add_event_handler(rec.clone()).unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = {
        let inf = inf.clone();
        tokio::spawn(async move {
            inf.run(async {
                let _ = stop_rx.await;
            })
            .await
        })
    };
    rec.wait_for(1).await;
    for _ in 0..40 {
        if rec.len() >= 2 {
            break;
        }
        clock.advance(Duration::from_secs(2));
        let _ = tokio::time::timeout(Duration::from_millis(50), rec.wait_for_quiet(2)).await;
    }
    rec.wait_for(2).await;
    match &rec.events()[1] {
        kcache_informer::Event::Updated { old, new } => assert_eq!(old.rv, new.rv),
        other => panic!("expected an RV-unchanged update, got {other:?}"),
    }
    stop_tx.send(()).unwrap();
    let _ = tokio::time::timeout(WAIT, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_is_isolated_and_goes_on() {
    let (clock, source) = source();
    let inf = informer_with(&clock, &source, InformerOptions::new());
    let calls = Arc::new(tokio::sync::watch::Sender::new(Vec::<String>::new()));
    let c = calls.clone();
    let panicky = inf
        .add_event_handler(HandlerFuncs::new().add_func(move |p: &Arc<Pod>, _| {
            c.send_modify(|v| v.push(p.name.clone()));
            assert!(p.name != "boom", "the handler panics on boom");
        }))
        .unwrap();
    let rec = common::Recorder::new();
    inf.add_event_handler(rec.clone()).unwrap();
    let running = run(&inf);
    synced(&inf).await;
    for name in ["a", "boom", "b"] {
        source.create(Pod::new(name, 1)).unwrap();
    }
    rec.wait_for(3).await;
    let mut rx = calls.subscribe();
    let r = tokio::time::timeout(WAIT, rx.wait_for(|v| v.len() == 3)).await;
    assert!(
        r.is_ok(),
        "the panicking handler goes on: {:?}",
        *calls.borrow()
    );
    assert_eq!(*calls.borrow(), ["a", "boom", "b"]);
    assert!(!panicky.is_removed());
    assert!(!inf.is_stopped());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_coalescing_handler_holds_at_most_one_notification_per_key() {
    use kcache_informer::{BufferMode, HandlerOptions};
    let (clock, source) = source();
    let inf = informer_with(&clock, &source, InformerOptions::new());
    // The handler blocks in its first call until released.
    let gate = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let seen = Arc::new(tokio::sync::watch::Sender::new(
        std::collections::BTreeMap::<String, u32>::new(),
    ));
    let (g, s) = (gate.clone(), seen.clone());
    let record = move |p: &Arc<Pod>| {
        let (lock, cv) = &*g;
        let mut open = lock.lock().unwrap();
        while !*open {
            open = cv.wait(open).unwrap();
        }
        s.send_modify(|m| {
            m.insert(p.name.clone(), p.value);
        });
    };
    let record2 = record.clone();
    let reg = inf
        .add_event_handler_with_options(
            HandlerFuncs::new()
                .add_func(move |p: &Arc<Pod>, _| record(p))
                .update_func(move |_, p: &Arc<Pod>| record2(p)),
            HandlerOptions::new().buffer_mode(BufferMode::Coalescing),
        )
        .unwrap();
    let running = run(&inf);
    synced(&inf).await;
    let mut last = None;
    for i in 0..300u32 {
        let name = ["a", "b", "c"][(i % 3) as usize];
        let w = if i < 3 {
            source.create(Pod::new(name, i))
        } else {
            source.update(Pod::new(name, i))
        };
        last = Some(w.unwrap().resource_version());
    }
    applied(&inf, &last.unwrap()).await;
    // One call in progress (blocked), at most one pending notification per key.
    assert!(reg.pending() <= 3, "pending {}", reg.pending());
    {
        let (lock, cv) = &*gate;
        *lock.lock().unwrap() = true;
        cv.notify_all();
    }
    let want: std::collections::BTreeMap<String, u32> =
        [("a".into(), 297), ("b".into(), 298), ("c".into(), 299)].into();
    let mut rx = seen.subscribe();
    let _ = tokio::time::timeout(WAIT, rx.wait_for(|m| *m == want)).await;
    let got = seen.borrow().clone();
    assert_eq!(
        got, want,
        "the handler ends with the latest state of every key"
    );
    running.stop().await;
}
