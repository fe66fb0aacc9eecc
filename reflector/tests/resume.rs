//! A reflector resumed from a version (a store restored from a snapshot) watches from it without
//! listing, and lists at once, without backing off, when the source says the version is gone.

mod common;

use common::*;
use kcache_core::{FakeClock, ResourceVersion};
use kcache_memory::{MemoryConfig, MemorySource};
use kcache_reflector::{ErrorKind, ListWatcher, Reflector, WatchEvent};
use std::collections::BTreeMap;
use std::sync::Arc;

fn setup() -> (Arc<Scripted>, MapStore, FakeClock) {
    (
        Arc::new(Scripted::default()),
        MapStore::default(),
        FakeClock::new(),
    )
}

#[tokio::test(flavor = "current_thread")]
async fn a_resumed_reflector_watches_from_its_version_and_never_lists() {
    let (lw, store, clock) = setup();
    store.map.lock().unwrap().insert(
        kcache_core::ObjectKey::namespaced("ns", "a").unwrap(),
        pod("a", "7"),
    );
    let tx = lw.watch_channel();
    let r = Reflector::builder(lw.clone(), store.clone())
        .clock(Arc::new(clock))
        .resume_from(ResourceVersion::from("10"))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    for ev in [
        WatchEvent::Added(pod("b", "11")),
        WatchEvent::Modified(pod("a", "12")),
        WatchEvent::Deleted(pod("b", "13")),
    ] {
        tx.unbounded_send(Ok(ev)).unwrap();
    }
    eventually("the missed changes applied", || {
        handle.last_sync_resource_version().as_str() == "13"
    })
    .await;
    handle.stop();
    task.await.unwrap();
    assert_eq!(lw.watch_rvs(), ["10"]);
    assert!(lw.list_rvs().is_empty(), "no list: {:?}", lw.list_rvs());
    assert_eq!(store.calls(), ["add b", "update a", "delete b"]);
    assert_eq!(
        store.snapshot().into_iter().collect::<Vec<_>>(),
        [("ns/a".to_owned(), "12".to_owned())]
    );
}

async fn lists_at_once_when(gone: impl FnOnce(&Scripted)) {
    let (lw, store, clock) = setup();
    gone(&lw);
    lw.list_ok(vec![pod("a", "20")], "25", None);
    let _tx = lw.watch_channel();
    let r = Reflector::builder(lw.clone(), store.clone())
        .clock(Arc::new(clock)) // never advanced: a backoff would wait forever
        .resume_from(ResourceVersion::from("10"))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("relisted", || {
        handle.last_sync_resource_version().as_str() == "25"
    })
    .await;
    handle.stop();
    task.await.unwrap();
    assert_eq!(lw.watch_rvs(), ["10", "25"]);
    assert_eq!(
        lw.list_rvs(),
        [""],
        "the most recent state, not the gone version"
    );
    assert_eq!(store.calls(), ["replace 1 @25"]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_resumed_reflector_lists_at_once_when_the_watch_cannot_open_at_an_expired_version() {
    lists_at_once_when(|lw| lw.watch_err(ErrorKind::Expired)).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_resumed_reflector_lists_at_once_when_its_watch_reports_the_version_expired() {
    lists_at_once_when(|lw| lw.watch_events(vec![Err(TestError(ErrorKind::Expired))])).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_resumed_reflector_lists_at_once_when_its_version_is_newer_than_the_source() {
    lists_at_once_when(|lw| lw.watch_err(ErrorKind::TooLargeResourceVersion)).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_transient_error_of_a_resumed_watch_retries_the_watch_without_listing() {
    let (lw, store, clock) = setup();
    lw.watch_err(ErrorKind::Retry);
    let tx = lw.watch_channel();
    let clock = Arc::new(clock);
    let r = Reflector::builder(lw.clone(), store.clone())
        .clock(clock.clone())
        .resume_from(ResourceVersion::from("10"))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("the first watch failed", || lw.watch_rvs().len() == 1).await;
    settle().await;
    clock.advance(std::time::Duration::from_secs(120));
    tx.unbounded_send(Ok(WatchEvent::Added(pod("b", "11"))))
        .unwrap();
    eventually("b applied", || {
        handle.last_sync_resource_version().as_str() == "11"
    })
    .await;
    handle.stop();
    task.await.unwrap();
    assert_eq!(lw.watch_rvs(), ["10", "10"]);
    assert!(lw.list_rvs().is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn an_empty_resume_version_lists_as_usual() {
    let (lw, store, clock) = setup();
    lw.list_ok(vec![], "5", None);
    let r = Reflector::builder(lw.clone(), store.clone())
        .clock(Arc::new(clock))
        .resume_from(ResourceVersion::default())
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("listed", || {
        handle.last_sync_resource_version().as_str() == "5"
    })
    .await;
    handle.stop();
    task.await.unwrap();
    assert_eq!(lw.list_rvs(), ["0"]);
}

/// Resumes over the memory source after `changes` writes made while "down" (a history of 8
/// events); returns the store's calls and how many lists were made.
async fn resume_over_memory(
    changes: u32,
) -> (Vec<String>, usize, BTreeMap<String, String>, String) {
    let clock = FakeClock::new();
    let source: MemorySource<Pod> = MemorySource::with_config(
        MemoryConfig::new()
            .with_clock(clock.clone())
            .with_history_window(8),
    );
    let mk = |name: &str, value: u64| Pod {
        ns: "ns".into(),
        name: name.into(),
        rv: ResourceVersion::default(),
        value,
    };
    let store = MapStore::default();
    for name in ["a", "b", "c"] {
        let stored = source.create(mk(name, 0)).unwrap();
        store.map.lock().unwrap().insert(
            kcache_core::ObjectKey::namespaced("ns", name).unwrap(),
            stored,
        );
    }
    let snapshot_rv = source.resource_version();
    // While down: c deleted, d created, a updated `changes - 2` times.
    source.delete("ns/c").unwrap();
    source.create(mk("d", 1)).unwrap();
    for v in 0..changes.saturating_sub(2) {
        source.update(mk("a", u64::from(v) + 1)).unwrap();
    }
    let head = source.resource_version();
    let lists = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = {
        let (lists, source) = (lists.clone(), source.clone());
        let watch_source = source.clone();
        kcache_reflector::ListWatch::new(
            move |opts: kcache_reflector::ListOptions| {
                lists.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let source = source.clone();
                async move { source.list(&opts).await }
            },
            move |opts: kcache_reflector::WatchOptions| {
                let source = watch_source.clone();
                async move { source.watch(&opts).await }
            },
        )
    };
    let r = Reflector::builder(counted, store.clone())
        .clock(Arc::new(clock))
        .resume_from(snapshot_rv)
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("caught up", || handle.last_sync_resource_version() == head).await;
    handle.stop();
    task.await.unwrap();
    let n = lists.load(std::sync::atomic::Ordering::SeqCst);
    (store.calls(), n, store.snapshot(), head.to_string())
}

#[tokio::test(flavor = "current_thread")]
async fn over_the_memory_source_a_resume_within_the_history_gets_the_missed_changes_as_events() {
    let (calls, lists, state, _) = resume_over_memory(4).await;
    assert_eq!(lists, 0);
    assert_eq!(calls, ["delete c", "add d", "update a", "update a"]);
    assert_eq!(state.keys().collect::<Vec<_>>(), ["ns/a", "ns/b", "ns/d"]);
}

#[tokio::test(flavor = "current_thread")]
async fn over_the_memory_source_a_resume_past_the_history_relists() {
    let (calls, lists, state, head) = resume_over_memory(20).await;
    assert_eq!(lists, 1);
    assert_eq!(calls, [format!("replace 3 @{head}")]);
    assert_eq!(state.keys().collect::<Vec<_>>(), ["ns/a", "ns/b", "ns/d"]);
}
