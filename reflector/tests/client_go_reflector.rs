//! Ports of the behaviour checked by client-go's `tools/cache/reflector_test.go`
//! (kubernetes/client-go), rewritten in our words over a scripted backend and a `FakeClock`.
//! Go's fake watcher becomes a channel-fed stream; Go's `ListAndWatch` return values become what the
//! reflector asks of the backend next. Type-assertion tests (expected type, GVK) have no Rust
//! counterpart: the type system does that job.

mod common;

use common::{eventually, pod, settle, MapStore, Scripted, TestError};
use kcache_core::FakeClock;
use kcache_reflector::{
    Bookmark, ErrorKind, Reflector, ReflectorError, ReflectorHandle, WatchEvent,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Errors = Arc<Mutex<Vec<String>>>;

struct Rig {
    lw: Arc<Scripted>,
    store: MapStore,
    clock: FakeClock,
    errors: Errors,
}

impl Rig {
    fn new() -> Self {
        Self {
            lw: Arc::new(Scripted::default()),
            store: MapStore::default(),
            clock: FakeClock::new(),
            errors: Errors::default(),
        }
    }

    fn start(&self, resync: Duration) -> (ReflectorHandle, tokio::task::JoinHandle<()>) {
        let errors = self.errors.clone();
        let r = Reflector::builder(self.lw.clone(), self.store.clone())
            .clock(Arc::new(self.clock.clone()))
            .resync_period(resync)
            .seed(11)
            .on_watch_error(move |e| errors.lock().unwrap().push(describe(e)))
            .build();
        let handle = r.handle();
        (handle, tokio::spawn(r.run()))
    }

    fn errors(&self) -> Vec<String> {
        self.errors.lock().unwrap().clone()
    }
}

fn describe(e: &ReflectorError<TestError, common::StoreError>) -> String {
    match e {
        ReflectorError::List(e) => format!("list {:?}", e.0),
        ReflectorError::WatchOpen(e) => format!("watch-open {:?}", e.0),
        ReflectorError::Watch(e) => format!("watch {:?}", e.0),
        ReflectorError::VeryShortWatch { .. } => "very-short".into(),
        other => other.to_string(),
    }
}

// TestCloseWatchChannelOnError: an error event ends the watch and its stream is released.
#[tokio::test(flavor = "current_thread")]
async fn an_error_on_the_watch_closes_the_watch_stream() {
    let rig = Rig::new();
    rig.lw.list_ok(vec![], "1", None);
    let tx = rig.lw.watch_channel();
    let (handle, task) = rig.start(Duration::ZERO);
    eventually("watching", || rig.lw.watch_rvs().len() == 1).await;
    tx.unbounded_send(Err(TestError(ErrorKind::Other))).unwrap();
    eventually("stream dropped", || tx.is_closed()).await;
    assert_eq!(rig.errors(), ["watch Other"]);
    handle.stop();
    task.await.unwrap();
}

// TestRunUntil: stopping a running reflector closes its watch and returns.
#[tokio::test(flavor = "current_thread")]
async fn stopping_a_running_reflector_closes_the_watch_and_returns() {
    let rig = Rig::new();
    rig.lw.list_ok(vec![], "1", None);
    let tx = rig.lw.watch_channel();
    let (handle, task) = rig.start(Duration::ZERO);
    tx.unbounded_send(Ok(WatchEvent::Added(pod("bar", "2"))))
        .unwrap();
    eventually("event applied", || {
        handle.last_sync_resource_version().as_str() == "2"
    })
    .await;
    handle.stop();
    task.await.unwrap();
    assert!(tx.is_closed());
}

// TestReflectorWatchStoppedBefore / TestReflectorStopWatch: stopped before it starts, the reflector
// calls neither list nor watch.
#[tokio::test(flavor = "current_thread")]
async fn a_reflector_stopped_before_it_runs_never_lists_or_watches() {
    let rig = Rig::new();
    let (handle, task) = {
        let r = Reflector::builder(rig.lw.clone(), rig.store.clone())
            .clock(Arc::new(rig.clock.clone()))
            .build();
        let h = r.handle();
        h.stop();
        (h, tokio::spawn(r.run()))
    };
    task.await.unwrap();
    assert!(handle.is_stopped());
    assert!(rig.lw.list_rvs().is_empty() && rig.lw.watch_rvs().is_empty());
}

// TestReflectorWatchHandler: delete, modify and add events reach the store; the last synced version
// is the version of the last event.
#[tokio::test(flavor = "current_thread")]
async fn watch_events_update_the_store_and_the_last_synced_version() {
    let rig = Rig::new();
    rig.lw
        .list_ok(vec![pod("foo", "1"), pod("bar", "1")], "1", None);
    let tx = rig.lw.watch_channel();
    let (handle, task) = rig.start(Duration::ZERO);
    tx.unbounded_send(Ok(WatchEvent::Deleted(pod("foo", "20"))))
        .unwrap();
    tx.unbounded_send(Ok(WatchEvent::Modified(pod("bar", "55"))))
        .unwrap();
    tx.unbounded_send(Ok(WatchEvent::Added(pod("baz", "32"))))
        .unwrap();
    eventually("all applied", || {
        handle.last_sync_resource_version().as_str() == "32"
    })
    .await;
    let want: Vec<(String, String)> = vec![
        ("ns/bar".into(), "55".into()),
        ("ns/baz".into(), "32".into()),
    ];
    assert_eq!(rig.store.snapshot().into_iter().collect::<Vec<_>>(), want);
    handle.stop();
    task.await.unwrap();
}

// TestReflectorListAndWatch: the first watch starts at the list's version; after a clean close the
// next watch starts at the last event's version, without a new list.
#[tokio::test(flavor = "current_thread")]
async fn each_new_watch_starts_at_the_last_version_seen() {
    let rig = Rig::new();
    rig.lw.list_ok(vec![], "1", None);
    rig.lw.watch_events(vec![
        Ok(WatchEvent::Added(pod("foo", "2"))),
        Ok(WatchEvent::Added(pod("bar", "3"))),
    ]);
    rig.lw.watch_events(vec![
        Ok(WatchEvent::Added(pod("baz", "4"))),
        Ok(WatchEvent::Modified(pod("foo", "5"))),
    ]);
    let (handle, task) = rig.start(Duration::ZERO);
    eventually("third watch", || rig.lw.watch_rvs().len() == 3).await;
    assert_eq!(rig.lw.watch_rvs(), ["1", "3", "5"]);
    assert_eq!(rig.lw.list_rvs(), ["0"]);
    assert_eq!(rig.store.snapshot().len(), 3);
    handle.stop();
    task.await.unwrap();
}

// TestReflectorListAndWatchWithErrors: list and watch failures lead to a relist after backoff; the
// store ends up with the state of the last successful list plus later events.
#[tokio::test(flavor = "current_thread")]
async fn list_and_watch_failures_relist_and_the_store_ends_correct() {
    let rig = Rig::new();
    rig.lw.list_err(ErrorKind::Other);
    rig.lw
        .list_ok(vec![pod("foo", "1"), pod("bar", "1")], "1", None);
    rig.lw.watch_err(ErrorKind::Other);
    rig.lw.list_ok(vec![pod("foo", "1")], "4", None);
    let tx = rig.lw.watch_channel();
    let (handle, task) = rig.start(Duration::ZERO);
    for n in 1..=3 {
        eventually("next list", || rig.lw.list_rvs().len() == n).await;
        rig.clock.advance(Duration::from_secs(60));
    }
    tx.unbounded_send(Ok(WatchEvent::Added(pod("qux", "5"))))
        .unwrap();
    eventually("event applied", || {
        handle.last_sync_resource_version().as_str() == "5"
    })
    .await;
    assert_eq!(rig.lw.list_rvs(), ["0", "0", "1"]);
    assert_eq!(rig.errors(), ["list Other", "watch-open Other"]);
    let keys: Vec<String> = rig.store.snapshot().into_keys().collect();
    assert_eq!(keys, ["ns/foo", "ns/qux"]);
    handle.stop();
    task.await.unwrap();
}

// TestReflectorListAndWatchInitConnBackoff / TestBackoffOnTooManyRequests: throttling and refused
// connections back off and retry the watch without relisting.
#[tokio::test(flavor = "current_thread")]
async fn throttled_watches_back_off_and_retry_without_relisting() {
    let rig = Rig::new();
    rig.lw.list_ok(vec![], "1", None);
    for _ in 0..3 {
        rig.lw.watch_err(ErrorKind::Retry);
    }
    let (handle, task) = rig.start(Duration::ZERO);
    eventually("first watch", || rig.lw.watch_rvs().len() == 1).await;
    for n in 2..=4 {
        settle().await;
        assert_eq!(rig.lw.watch_rvs().len(), n - 1, "waits for the backoff");
        rig.clock.advance(Duration::from_secs(60));
        eventually("retried watch", || rig.lw.watch_rvs().len() == n).await;
    }
    assert_eq!(rig.lw.list_rvs(), ["0"]);
    assert_eq!(rig.lw.watch_rvs(), ["1", "1", "1", "1"]);
    handle.stop();
    task.await.unwrap();
}

// TestReflectorResync: the resync timer calls the store's resync; a failing resync ends the watch
// and the reflector relists.
#[tokio::test(flavor = "current_thread")]
async fn a_failing_resync_ends_the_watch_and_relists() {
    let rig = Rig::new();
    rig.lw.list_ok(vec![], "1", None);
    rig.lw.list_ok(vec![], "1", None);
    rig.store.fail_next.lock().unwrap().push_back("resync");
    let (handle, task) = rig.start(Duration::from_millis(50));
    eventually("watching", || rig.lw.watch_rvs().len() == 1).await;
    rig.clock.advance(Duration::from_millis(50));
    eventually("resync failed", || rig.errors().len() == 1).await;
    assert_eq!(rig.errors(), ["store resync failed"]);
    rig.clock.advance(Duration::from_secs(2));
    eventually("relisted", || rig.lw.list_rvs().len() == 2).await;
    assert_eq!(rig.lw.list_rvs(), ["0", "1"]);
    handle.stop();
    task.await.unwrap();
}

// TestReflectorWatchListPageSize: lists are paged, each page continues the previous one.
#[tokio::test(flavor = "current_thread")]
async fn lists_are_fetched_page_by_page() {
    let rig = Rig::new();
    rig.lw
        .list_ok(vec![pod("a", "1"), pod("b", "1")], "10", Some("c1"));
    rig.lw
        .list_ok(vec![pod("c", "1"), pod("d", "1")], "10", Some("c2"));
    rig.lw.list_ok(vec![pod("e", "1")], "10", None);
    let (handle, task) = rig.start(Duration::ZERO);
    eventually("watching", || rig.lw.watch_rvs().len() == 1).await;
    let calls = rig.lw.list_calls.lock().unwrap().clone();
    let tokens: Vec<Option<String>> = calls.iter().map(|c| c.continue_token.clone()).collect();
    assert_eq!(tokens, [None, Some("c1".into()), Some("c2".into())]);
    assert!(calls.iter().all(|c| c.limit == Some(500)));
    assert_eq!(rig.store.calls(), ["replace 5 @10"]);
    assert_eq!(rig.lw.watch_rvs(), ["10"]);
    handle.stop();
    task.await.unwrap();
}

// TestReflectorFullListIfExpired: an expired continue token gives way to one full list.
#[tokio::test(flavor = "current_thread")]
async fn an_expired_continue_token_falls_back_to_a_full_list() {
    let rig = Rig::new();
    rig.lw.list_ok(vec![pod("a", "1")], "10", Some("c1"));
    rig.lw.list_err(ErrorKind::Expired);
    rig.lw
        .list_ok(vec![pod("a", "1"), pod("b", "11")], "11", None);
    let (handle, task) = rig.start(Duration::ZERO);
    eventually("watching", || rig.lw.watch_rvs().len() == 1).await;
    let calls = rig.lw.list_calls.lock().unwrap().clone();
    assert_eq!(calls[2].limit, None);
    assert_eq!(calls[2].continue_token, None);
    assert_eq!(
        calls[2].resource_version.as_str(),
        "0",
        "the full list asks for the version the paged list asked for"
    );
    assert_eq!(rig.store.calls(), ["replace 2 @11"]);
    handle.stop();
    task.await.unwrap();
}

// The pager's FullListIfExpired, on a relist at a known version: the full list asks for that
// version again (a watch cache can serve it), not for the most recent state.
#[tokio::test(flavor = "current_thread")]
async fn full_list_if_expired_asks_for_the_originally_requested_version() {
    let rig = Rig::new();
    rig.lw.list_ok(vec![pod("a", "1")], "10", None);
    rig.lw.watch_err(ErrorKind::Other);
    rig.lw.list_ok(vec![pod("a", "1")], "12", Some("c1"));
    rig.lw.list_err(ErrorKind::Expired);
    rig.lw
        .list_ok(vec![pod("a", "1"), pod("b", "11")], "12", None);
    let errors = rig.errors.clone();
    let r = Reflector::builder(rig.lw.clone(), rig.store.clone())
        .clock(Arc::new(rig.clock.clone()))
        .page_size(1)
        .on_watch_error(move |e| errors.lock().unwrap().push(e.to_string()))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("first watch", || rig.lw.watch_rvs().len() == 1).await;
    rig.clock.advance(Duration::from_secs(2));
    eventually("watching again", || rig.lw.watch_rvs().len() == 2).await;
    let calls = rig.lw.list_calls.lock().unwrap().clone();
    let asked: Vec<(&str, Option<u32>, Option<&str>)> = calls
        .iter()
        .map(|c| {
            (
                c.resource_version.as_str(),
                c.limit,
                c.continue_token.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        asked,
        [
            ("0", Some(1), None),
            ("10", Some(1), None),
            ("", Some(1), Some("c1")),
            ("10", None, None),
        ]
    );
    assert_eq!(rig.store.calls(), ["replace 1 @10", "replace 2 @12"]);
    handle.stop();
    task.await.unwrap();
}

/// Starts a reflector with no page size set, lets it list (`first`: the pages of the RV "0"
/// list), fail its watch and relist; returns the relist's requests as (version, limit).
async fn relist_requests(first: &[Option<&str>]) -> Vec<(String, Option<u32>)> {
    let rig = Rig::new();
    for next in first {
        rig.lw.list_ok(vec![pod("a", "1")], "10", *next);
    }
    rig.lw.watch_err(ErrorKind::Other);
    rig.lw.list_ok(vec![pod("a", "1")], "12", None);
    let (handle, task) = rig.start(Duration::ZERO);
    eventually("first watch", || rig.lw.watch_rvs().len() == 1).await;
    rig.clock.advance(Duration::from_secs(2));
    eventually("watching again", || rig.lw.watch_rvs().len() == 2).await;
    let calls = rig.lw.list_calls.lock().unwrap().clone();
    handle.stop();
    task.await.unwrap();
    assert!(calls[..first.len()]
        .iter()
        .all(|c| c.limit == Some(kcache_reflector::DEFAULT_PAGE_SIZE)));
    calls[first.len()..]
        .iter()
        .map(|c| (c.resource_version.to_string(), c.limit))
        .collect()
}

// TestReflectorNotPaginatingNotConsistentReads: with no page size set, a relist at a known
// version is not paged, so a watch cache can serve it.
#[tokio::test(flavor = "current_thread")]
async fn not_paginating_not_consistent_reads() {
    let relist = relist_requests(&[None]).await;
    assert_eq!(relist, [("10".to_owned(), None)]);
}

// TestReflectorPaginatingNonConsistentReadsIfWatchCacheDisabled: an RV "0" list that came back
// in pages shows the source has no watch cache; relists keep paging.
#[tokio::test(flavor = "current_thread")]
async fn paginating_non_consistent_reads_if_watch_cache_disabled() {
    let relist = relist_requests(&[Some("c1"), None]).await;
    assert_eq!(
        relist,
        [("10".to_owned(), Some(kcache_reflector::DEFAULT_PAGE_SIZE))]
    );
}

// TestReflectorFullListIfTooLarge / TestReflectorExpiredExactResourceVersion: an Expired or
// too-large answer to a list at a version is retried at once as a list from "".
#[tokio::test(flavor = "current_thread")]
async fn expired_or_too_large_lists_are_retried_from_the_empty_version() {
    for kind in [ErrorKind::Expired, ErrorKind::TooLargeResourceVersion] {
        let rig = Rig::new();
        rig.lw.list_err(kind);
        rig.lw.list_ok(vec![], "7", None);
        let (handle, task) = rig.start(Duration::ZERO);
        eventually("watching", || rig.lw.watch_rvs().len() == 1).await;
        assert_eq!(rig.lw.list_rvs(), ["0", ""], "{kind:?}");
        handle.stop();
        task.await.unwrap();
    }
}

// TestReflectorResyncWithResourceVersion-style: after an Expired watch, the relist asks for the
// last synced version first (served from a cache), not "".
#[tokio::test(flavor = "current_thread")]
async fn an_expired_watch_relists_from_the_last_synced_version() {
    let rig = Rig::new();
    rig.lw.list_ok(vec![], "10", None);
    rig.lw.watch_events(vec![
        Ok(WatchEvent::Added(pod("a", "12"))),
        Err(TestError(ErrorKind::Expired)),
    ]);
    rig.lw.list_ok(vec![], "15", None);
    let (handle, task) = rig.start(Duration::ZERO);
    eventually("first watch", || rig.lw.watch_rvs().len() == 1).await;
    rig.clock.advance(Duration::from_secs(2));
    eventually("second watch", || rig.lw.watch_rvs().len() == 2).await;
    assert_eq!(rig.lw.list_rvs(), ["0", "12"]);
    assert_eq!(rig.lw.watch_rvs(), ["10", "15"]);
    handle.stop();
    task.await.unwrap();
}

// TestReflectorHandleWatchResultChanClosedBefore: a watch that closes at once without events is a
// very short watch: reported, then a relist after backoff.
#[tokio::test(flavor = "current_thread")]
async fn a_watch_closed_at_once_is_a_very_short_watch() {
    let rig = Rig::new();
    rig.lw.list_ok(vec![], "1", None);
    rig.lw.watch_events(vec![]);
    let (handle, task) = rig.start(Duration::ZERO);
    eventually("reported", || !rig.errors().is_empty()).await;
    assert_eq!(rig.errors(), ["very-short"]);
    handle.stop();
    task.await.unwrap();
}

// TestReflectorListAndWatch "UseWatchList enabled": a streaming list fills the store with one
// replace at the end bookmark's version; later events dedupe by key.
#[tokio::test(flavor = "current_thread")]
async fn a_watch_list_fills_the_store_with_one_replace() {
    let rig = Rig::new();
    let end = Bookmark {
        resource_version: "1".into(),
        initial_events_end: true,
    };
    rig.lw.watch_events(vec![
        Ok(WatchEvent::Added(pod("foo", "1"))),
        Ok(WatchEvent::Bookmark(end)),
        Ok(WatchEvent::Modified(pod("foo", "2"))),
        Ok(WatchEvent::Added(pod("bar", "3"))),
    ]);
    let r = Reflector::builder(rig.lw.clone(), rig.store.clone())
        .clock(Arc::new(rig.clock.clone()))
        .streaming_initial_list(true)
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("second watch", || rig.lw.watch_rvs().len() == 2).await;
    let opts = rig.lw.watch_calls.lock().unwrap().clone();
    assert!(opts[0].send_initial_events && opts[0].allow_bookmarks);
    assert_eq!(opts[0].resource_version.as_str(), "");
    assert!(!opts[1].send_initial_events);
    assert_eq!(opts[1].resource_version.as_str(), "3");
    assert_eq!(rig.store.calls(), ["replace 1 @1", "update foo", "add bar"]);
    assert!(rig.lw.list_rvs().is_empty());
    handle.stop();
    task.await.unwrap();
}

// client-go accepts a list without a resource version and watches from "": a source without
// versions (a plain REST or SQL source) lists once and then watches, with no error.
#[tokio::test(flavor = "current_thread")]
async fn a_list_without_a_resource_version_is_accepted() {
    let rig = Rig::new();
    rig.lw.list_ok(vec![pod("a", "")], "", None);
    let tx = rig.lw.watch_channel();
    let (handle, task) = rig.start(Duration::ZERO);
    eventually("watching", || rig.lw.watch_rvs().len() == 1).await;
    tx.unbounded_send(Ok(WatchEvent::Added(pod("b", ""))))
        .unwrap();
    eventually("applied", || rig.store.calls().len() == 2).await;
    settle().await;
    assert_eq!(rig.store.calls(), ["replace 1 @", "add b"]);
    assert_eq!(rig.errors(), Vec::<String>::new());
    assert_eq!(rig.lw.list_rvs(), ["0"]);
    assert_eq!(rig.lw.watch_rvs(), [""]);
    assert_eq!(handle.last_sync_resource_version().as_str(), "");
    handle.stop();
    task.await.unwrap();
}

// client-go's watch handler skips an object it cannot understand and keeps watching: one poison
// object must not turn into a relist loop.
#[tokio::test(flavor = "current_thread")]
async fn an_unreadable_watch_object_is_skipped_and_the_watch_goes_on() {
    let rig = Rig::new();
    rig.lw.list_ok(vec![pod("a", "1")], "1", None);
    let tx = rig.lw.watch_channel();
    let (handle, task) = rig.start(Duration::ZERO);
    eventually("watching", || rig.lw.watch_rvs().len() == 1).await;
    tx.unbounded_send(Ok(WatchEvent::Added(pod("", "2"))))
        .unwrap();
    tx.unbounded_send(Ok(WatchEvent::Added(pod("b", "3"))))
        .unwrap();
    eventually("applied", || rig.store.calls().len() == 2).await;
    settle().await;
    assert_eq!(rig.store.calls(), ["replace 1 @1", "add b"]);
    assert_eq!(rig.errors(), ["bad input from the backend"]);
    assert_eq!(rig.lw.list_rvs(), ["0"], "no relist");
    assert_eq!(rig.lw.watch_rvs(), ["1"], "the same watch goes on");
    assert_eq!(handle.last_sync_resource_version().as_str(), "3");
    handle.stop();
    task.await.unwrap();
}

// kubernetes PR #136583: a watch started at "" or "0" opens with synthetic Added events in no
// version order; the reflector records no version from them, only from the first other event.
#[tokio::test(flavor = "current_thread")]
async fn a_watch_from_zero_records_no_version_until_its_first_non_added_event() {
    let rig = Rig::new();
    rig.lw.list_ok(vec![], "0", None);
    let tx = rig.lw.watch_channel();
    let (handle, task) = rig.start(Duration::ZERO);
    eventually("watching", || rig.lw.watch_rvs().len() == 1).await;
    assert_eq!(rig.lw.watch_rvs(), ["0"]);
    tx.unbounded_send(Ok(WatchEvent::Added(pod("a", "7"))))
        .unwrap();
    tx.unbounded_send(Ok(WatchEvent::Added(pod("b", "3"))))
        .unwrap();
    eventually("applied", || rig.store.calls().len() == 3).await;
    settle().await;
    assert_eq!(handle.last_sync_resource_version().as_str(), "0");
    let b = Bookmark {
        resource_version: "12".into(),
        initial_events_end: false,
    };
    tx.unbounded_send(Ok(WatchEvent::Bookmark(b))).unwrap();
    eventually("bookmark", || rig.store.calls().len() == 4).await;
    settle().await;
    assert_eq!(handle.last_sync_resource_version().as_str(), "12");
    handle.stop();
    task.await.unwrap();
}

// client-go's watch-list: Modified and Deleted events among the initial events are applied to
// the temporary store; one replace at the end bookmark, at its version; no list.
#[tokio::test(flavor = "current_thread")]
async fn watch_list_applies_modified_and_deleted_initial_events() {
    let rig = Rig::new();
    let end = Bookmark {
        resource_version: "5".into(),
        initial_events_end: true,
    };
    rig.lw.watch_events(vec![
        Ok(WatchEvent::Added(pod("a", "1"))),
        Ok(WatchEvent::Added(pod("b", "2"))),
        Ok(WatchEvent::Deleted(pod("a", "3"))),
        Ok(WatchEvent::Modified(pod("b", "4"))),
        Ok(WatchEvent::Bookmark(end)),
    ]);
    let errors = rig.errors.clone();
    let r = Reflector::builder(rig.lw.clone(), rig.store.clone())
        .clock(Arc::new(rig.clock.clone()))
        .streaming_initial_list(true)
        .on_watch_error(move |e| errors.lock().unwrap().push(describe(e)))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("replaced", || !rig.store.calls().is_empty()).await;
    settle().await;
    assert_eq!(rig.store.calls()[0], "replace 1 @5");
    assert_eq!(
        rig.store.snapshot().get("ns/b").map(String::as_str),
        Some("4")
    );
    assert!(rig.lw.list_rvs().is_empty(), "no fallback list");
    assert!(
        rig.errors().iter().all(|e| !e.contains("bad input")),
        "{:?}",
        rig.errors()
    );
    assert_eq!(handle.last_sync_resource_version().as_str(), "5");
    handle.stop();
    task.await.unwrap();
}

// client-go's watch-list loops until the end bookmark: a stream that closes early is followed
// by a new watch-list (from "" for the first sync), not by a list at "0".
#[tokio::test(flavor = "current_thread")]
async fn watch_list_closed_before_the_end_bookmark_starts_a_new_watch_list() {
    let rig = Rig::new();
    rig.lw
        .watch_events(vec![Ok(WatchEvent::Added(pod("a", "1")))]);
    let end = Bookmark {
        resource_version: "5".into(),
        initial_events_end: true,
    };
    rig.lw.watch_events(vec![
        Ok(WatchEvent::Added(pod("a", "1"))),
        Ok(WatchEvent::Added(pod("b", "2"))),
        Ok(WatchEvent::Bookmark(end)),
    ]);
    let errors = rig.errors.clone();
    let r = Reflector::builder(rig.lw.clone(), rig.store.clone())
        .clock(Arc::new(rig.clock.clone()))
        .streaming_initial_list(true)
        .on_watch_error(move |e| errors.lock().unwrap().push(describe(e)))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("replaced", || !rig.store.calls().is_empty()).await;
    settle().await;
    assert_eq!(rig.store.calls()[0], "replace 2 @5");
    assert!(rig.lw.list_rvs().is_empty(), "no list");
    let calls = rig.lw.watch_calls.lock().unwrap().clone();
    assert!(calls[..2]
        .iter()
        .all(|w| w.send_initial_events && w.resource_version.is_empty()));
    assert_eq!(
        rig.errors()[0],
        "streaming list closed before the end of its initial events"
    );
    handle.stop();
    task.await.unwrap();
}
