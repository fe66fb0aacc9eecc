//! The async driver end to end over a scripted backend: stop, hook, last synced version, resync
//! and backoff on a `FakeClock` (no real sleeps).

mod common;

use common::{eventually, pod, settle, MapStore, Scripted};
use kcache_core::{Clock, FakeClock};
use kcache_reflector::{Bookmark, ErrorKind, Reflector, ReflectorError, WatchEvent};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn setup() -> (Arc<Scripted>, MapStore, FakeClock) {
    (
        Arc::new(Scripted::default()),
        MapStore::default(),
        FakeClock::new(),
    )
}

#[tokio::test(flavor = "current_thread")]
async fn stop_before_run_returns_without_listing() {
    let (lw, store, clock) = setup();
    let r = Reflector::builder(lw.clone(), store)
        .clock(Arc::new(clock))
        .build();
    r.handle().stop();
    r.run().await;
    assert!(lw.list_rvs().is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn stop_while_watching_returns_promptly_and_keeps_the_store() {
    let (lw, store, clock) = setup();
    lw.list_ok(vec![pod("a", "1")], "5", None);
    let tx = lw.watch_channel();
    let r = Reflector::builder(lw.clone(), store.clone())
        .clock(Arc::new(clock))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    tx.unbounded_send(Ok(WatchEvent::Added(pod("b", "6"))))
        .unwrap();
    eventually("b applied", || {
        handle.last_sync_resource_version().as_str() == "6"
    })
    .await;
    handle.stop();
    task.await.unwrap();
    assert!(tx.is_closed(), "the watch stream was dropped");
    assert_eq!(store.snapshot().len(), 2);
}

#[tokio::test(flavor = "current_thread")]
async fn run_until_returns_when_the_shutdown_future_completes() {
    let (lw, store, clock) = setup();
    lw.list_ok(vec![], "5", None);
    let r = Reflector::builder(lw.clone(), store)
        .clock(Arc::new(clock))
        .build();
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let task = tokio::spawn(r.run_until(async move {
        let _ = rx.await;
    }));
    eventually("watching", || lw.watch_rvs().len() == 1).await;
    tx.send(()).unwrap();
    task.await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn errors_reach_the_hook_and_backoff_waits_on_the_clock() {
    let (lw, store, clock) = setup();
    lw.list_err(ErrorKind::Other);
    lw.list_ok(vec![pod("a", "1")], "5", None);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let r = Reflector::builder(lw.clone(), store.clone())
        .clock(Arc::new(clock.clone()))
        .seed(3)
        .on_watch_error(move |e| s.lock().unwrap().push(matches!(e, ReflectorError::List(_))))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("first list", || lw.list_rvs().len() == 1).await;
    assert_eq!(*seen.lock().unwrap(), [true]);
    clock.advance(Duration::from_millis(799));
    settle().await;
    assert_eq!(lw.list_rvs().len(), 1, "no relist before 800 ms");
    clock.advance(Duration::from_millis(801));
    eventually("relist after backoff", || lw.list_rvs().len() == 2).await;
    eventually("synced", || {
        handle.last_sync_resource_version().as_str() == "5"
    })
    .await;
    assert_eq!(lw.list_rvs(), ["0", "0"]);
    handle.stop();
    task.await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn the_resync_timer_calls_store_resync_only_when_should_resync_says_so() {
    let (lw, store, clock) = setup();
    lw.list_ok(vec![], "5", None);
    let allow = Arc::new(Mutex::new(false));
    let a = allow.clone();
    let r = Reflector::builder(lw.clone(), store.clone())
        .clock(Arc::new(clock.clone()))
        .resync_period(Duration::from_secs(10))
        .should_resync(move || *a.lock().unwrap())
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("watching", || lw.watch_rvs().len() == 1).await;
    clock.advance(Duration::from_secs(10));
    settle().await;
    assert!(!store.calls().iter().any(|c| c == "resync"));
    *allow.lock().unwrap() = true;
    clock.advance(Duration::from_secs(10));
    eventually("resync", || store.calls().iter().any(|c| c == "resync")).await;
    assert_eq!(lw.watch_rvs().len(), 1, "a resync does not touch the watch");
    handle.stop();
    task.await.unwrap();
}

/// client-go's resync timer runs beside the watch: a tick that is due when the watch ends is
/// not thrown away by the relist that follows.
#[tokio::test(flavor = "current_thread")]
async fn a_resync_due_as_the_watch_fails_runs_before_the_relist() {
    let (lw, store, clock) = setup();
    lw.list_ok(vec![pod("a", "5")], "5", None);
    lw.list_ok(vec![pod("a", "5")], "5", None);
    let tx = lw.watch_channel();
    let r = Reflector::builder(lw.clone(), store.clone())
        .clock(Arc::new(clock.clone()))
        .resync_period(Duration::from_secs(10))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("watching", || lw.watch_rvs().len() == 1).await;
    settle().await;
    // The error and the tick are both ready when the reflector's task next runs.
    tx.unbounded_send(Err(common::TestError(ErrorKind::Other)))
        .unwrap();
    clock.advance(Duration::from_secs(10));
    settle().await;
    clock.advance(Duration::from_secs(2));
    eventually("relisted", || lw.list_rvs().len() == 2).await;
    eventually("replaced", || {
        store
            .calls()
            .iter()
            .filter(|c| c.starts_with("replace"))
            .count()
            == 2
    })
    .await;
    assert_eq!(
        store.calls(),
        ["replace 1 @5", "resync", "replace 1 @5"],
        "the tick runs before the relist"
    );
    handle.stop();
    task.await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn a_streaming_initial_list_replaces_the_store_once_and_keeps_watching() {
    let (lw, store, clock) = setup();
    let tx = lw.watch_channel();
    let r = Reflector::builder(lw.clone(), store.clone())
        .clock(Arc::new(clock))
        .streaming_initial_list(true)
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    for (n, rv) in [("a", "1"), ("b", "2")] {
        tx.unbounded_send(Ok(WatchEvent::Added(pod(n, rv))))
            .unwrap();
    }
    let end = Bookmark {
        resource_version: "3".into(),
        initial_events_end: true,
    };
    tx.unbounded_send(Ok(WatchEvent::Bookmark(end))).unwrap();
    tx.unbounded_send(Ok(WatchEvent::Deleted(pod("a", "4"))))
        .unwrap();
    eventually("delete applied", || {
        handle.last_sync_resource_version().as_str() == "4"
    })
    .await;
    assert_eq!(store.calls(), ["replace 2 @3", "delete a"]);
    assert!(lw.list_rvs().is_empty(), "no list call");
    handle.stop();
    task.await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn a_store_that_refuses_replace_is_retried_after_backoff() {
    let (lw, store, clock) = setup();
    store.fail_next.lock().unwrap().push_back("replace");
    lw.list_ok(vec![pod("a", "1")], "5", None);
    lw.list_ok(vec![pod("a", "1")], "6", None);
    let r = Reflector::builder(lw.clone(), store.clone())
        .clock(Arc::new(clock.clone()))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("first list", || lw.list_rvs().len() == 1).await;
    assert_eq!(handle.last_sync_resource_version().as_str(), "");
    clock.advance(Duration::from_secs(2));
    eventually("synced", || {
        handle.last_sync_resource_version().as_str() == "6"
    })
    .await;
    assert_eq!(
        lw.list_rvs(),
        ["0", "0"],
        "the failed list never counted as synced"
    );
    handle.stop();
    task.await.unwrap();
    let _ = clock.now();
}

#[tokio::test(flavor = "current_thread")]
async fn an_indexer_that_refuses_one_listed_object_keeps_the_rest_and_the_watch_goes_on() {
    use kcache_indexer::{Indexer, Indexers, StoreError};
    let (lw, _, clock) = setup();
    let bad = Arc::new(common::Pod {
        value: 13,
        ..(*pod("bad", "2")).clone()
    });
    lw.list_ok(vec![pod("a", "1"), bad, pod("b", "3")], "5", None);
    let tx = lw.watch_channel();
    // An index function that fails on one object, every time: a relist would fail the same way.
    let cache: Indexer<common::Pod> = Indexer::with_indexers(Indexers::new().with(
        "value",
        |p: &common::Pod| match p.value {
            13 => Err("unlucky".into()),
            v => Ok(vec![v.to_string()]),
        },
    ));
    let refused = Arc::new(Mutex::new(Vec::new()));
    let r_ = refused.clone();
    // The reflector writes through one handle, the test reads through another.
    let r = Reflector::builder(lw.clone(), cache.clone())
        .clock(Arc::new(clock))
        .on_watch_error(move |e| {
            if let ReflectorError::Store {
                source: StoreError::Refused { refused },
                ..
            } = e
            {
                r_.lock().unwrap().push(refused.len());
            }
        })
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    tx.unbounded_send(Ok(WatchEvent::Added(pod("c", "6"))))
        .unwrap();
    eventually("the watch applied c", || cache.get_by_key("ns/c").is_some()).await;
    assert!(cache.get_by_key("ns/a").is_some() && cache.get_by_key("ns/b").is_some());
    assert!(cache.get_by_key("ns/bad").is_none());
    assert_eq!(*refused.lock().unwrap(), [1], "reported once");
    assert_eq!(lw.list_rvs().len(), 1, "no relist");
    handle.stop();
    task.await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn a_watch_stream_that_is_always_ready_still_lets_the_rest_of_the_task_run() {
    let (lw, store, clock) = setup();
    lw.list_ok(vec![], "1", None);
    const EVENTS: usize = 2_000;
    lw.watch_events(
        (0..EVENTS)
            .map(|i| {
                Ok(WatchEvent::Added(pod(
                    &format!("p{i}"),
                    &(i + 2).to_string(),
                )))
            })
            .collect(),
    );
    let r = Reflector::builder(lw.clone(), store.clone())
        .clock(Arc::new(clock))
        .build();
    let handle = r.handle();
    // A sibling future in the same task (as an informer's pop loop is): it records how far the
    // store got each time it is polled, and stops the reflector once every event is in.
    let mut seen = Vec::new();
    let sibling = futures::future::poll_fn(|_| {
        let n = store.snapshot().len();
        seen.push(n);
        if n == EVENTS {
            handle.stop();
        }
        std::task::Poll::<()>::Pending
    });
    let reflector = std::pin::pin!(r.run());
    let sibling = std::pin::pin!(sibling);
    futures::future::select(reflector, sibling).await;
    let partial = seen.iter().filter(|&&n| n > 0 && n < EVENTS).count();
    // The reflector yields at least every 256 events (its FAST_STREAK).
    assert!(
        partial >= EVENTS / 256 / 2,
        "the sibling ran only {partial} times while the events went in: {seen:?}"
    );
}
