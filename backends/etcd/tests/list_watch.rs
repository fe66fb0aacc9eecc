//! kcache-etcd's list, watch and writer against a real etcd (`KCACHE_ETCD_ENDPOINTS`; skipped,
//! with a message, when it is not set). Each test has its own prefix, so they share one server.

mod common;

use common::*;
use futures::StreamExt;
use kcache_core::{FakeClock, ObjectKey, ResourceVersion};
use kcache_etcd::{EtcdError, EtcdListWatcher, EtcdObjects};
use kcache_reflector::{
    BackendError, Bookmark, ErrorKind, ListOptions, ListWatcher, ResourceVersionMatch, WatchEvent,
    WatchOptions, WatchStream,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

type Lw = EtcdListWatcher<Item>;
type Stream = WatchStream<Item, EtcdError>;

const T: Duration = Duration::from_secs(20);

async fn setup(test: &str) -> Option<(Lw, EtcdObjects<Item>, String)> {
    let endpoint = endpoints(test)?;
    let client = connect(&endpoint).await;
    let prefix = unique_prefix(test);
    let lw = Lw::new(client, &prefix);
    let writer = EtcdObjects::for_list_watcher(&lw);
    Some((lw, writer, prefix))
}

fn rv(s: &str) -> ResourceVersion {
    ResourceVersion::from(s)
}

fn rev_of(rv: &ResourceVersion) -> i64 {
    rv.as_str()
        .parse()
        .unwrap_or_else(|_| panic!("not a revision: {rv:?}"))
}

async fn next(stream: &mut Stream) -> Result<WatchEvent<Item>, EtcdError> {
    match within(T, "next watch item", stream.next()).await {
        Some(item) => item,
        None => panic!("the watch ended"),
    }
}

/// The next item that is not a bookmark.
async fn next_change(stream: &mut Stream) -> Result<WatchEvent<Item>, EtcdError> {
    loop {
        match next(stream).await {
            Ok(WatchEvent::Bookmark(_)) => continue,
            other => return other,
        }
    }
}

fn watch_from(rv: &ResourceVersion) -> WatchOptions {
    WatchOptions {
        resource_version: rv.clone(),
        ..WatchOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_is_consistent_at_one_revision_while_writes_happen() {
    let Some((lw, _writer, prefix)) = setup("pagination").await else {
        return;
    };
    let client = lw.client().clone();
    within(
        Duration::from_secs(60),
        "writing 10,000 keys",
        put_all(&client, &prefix, items(10_000, 1), 4),
    )
    .await;

    // Keep writing (updates of listed keys and new keys) while the list pages through.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (client, prefix, stop) = (client.clone(), prefix.clone(), stop.clone());
        tokio::spawn(async move {
            let mut round = 2;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut batch = items(100, round);
                batch.push(item("ns", &format!("new-{round:06}"), round));
                put_all(&client, &prefix, batch, 1).await;
                round += 1;
            }
            round
        })
    };

    let mut opts = ListOptions {
        limit: Some(500),
        ..ListOptions::default()
    };
    let mut pages = 0;
    let mut listed = BTreeMap::new();
    let mut list_rv: Option<ResourceVersion> = None;
    loop {
        let page = within(T, "list page", lw.list(&opts))
            .await
            .expect("list page");
        pages += 1;
        assert!(page.items.len() <= 500);
        match &list_rv {
            None => list_rv = Some(page.resource_version.clone()),
            Some(first) => assert_eq!(*first, page.resource_version, "every page at one revision"),
        }
        for it in &page.items {
            listed.insert(
                format!("{}/{}", it.namespace, it.name),
                (it.value, it.rv.as_str().to_owned()),
            );
        }
        match page.continue_token {
            Some(t) => opts.continue_token = Some(t),
            None => break,
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = within(T, "writer to stop", writer)
        .await
        .expect("writer task");
    assert!(rounds > 2, "writes happened during the list");

    let list_rv = list_rv.expect("a page");
    let (raw, _) = raw_state(&client, &prefix, Some(rev_of(&list_rv))).await;
    assert!(pages >= 20, "10,000 keys in pages of 500: {pages} pages");
    assert!(listed.len() >= 10_000);
    assert_eq!(
        listed,
        expected(&raw),
        "the paged list is the state at its revision"
    );

    // An unpaged list is read in internal pages at one revision too.
    let all = within(T, "unpaged list", lw.list(&ListOptions::default()))
        .await
        .expect("list");
    assert!(all.continue_token.is_none());
    let (raw, _) = raw_state(&client, &prefix, Some(rev_of(&all.resource_version))).await;
    assert_eq!(all.items.len(), raw.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_at_a_revision_and_classifies_bad_versions() {
    let Some((lw, writer, _prefix)) = setup("list_rv").await else {
        return;
    };
    let a1 = writer.create(&item("ns", "a", 1)).await.expect("create");
    let mut a2 = a1.clone();
    a2.value = 2;
    let a2 = writer.update(&a2).await.expect("update");
    writer
        .create(&item("", "b", 3))
        .await
        .expect("create cluster-scoped");

    // At the first revision: the old value, and b did not exist.
    let old = lw
        .list(&ListOptions {
            resource_version: a1.rv.clone(),
            ..ListOptions::default()
        })
        .await
        .expect("list at a revision");
    assert_eq!(old.resource_version, a1.rv);
    assert_eq!(old.items.len(), 1);
    assert_eq!((old.items[0].value, &old.items[0].rv), (1, &a1.rv));

    // "" and "0": now.
    for v in ["", "0"] {
        let now = lw
            .list(&ListOptions {
                resource_version: rv(v),
                ..ListOptions::default()
            })
            .await
            .expect("list now");
        assert_eq!(now.items.len(), 2);
        assert!(rev_of(&now.resource_version) > rev_of(&a2.rv));
        let a = now.items.iter().find(|i| i.name == "a").expect("a listed");
        assert_eq!((a.value, &a.rv), (2, &a2.rv));
    }

    // NotOlderThan an old revision: now.
    let nol = lw
        .list(&ListOptions {
            resource_version: a1.rv.clone(),
            resource_version_match: Some(ResourceVersionMatch::NotOlderThan),
            ..ListOptions::default()
        })
        .await
        .expect("list not older than");
    assert_eq!(nol.items.len(), 2);

    // A future revision: TooLargeResourceVersion, whatever the match.
    let future = rv(&(rev_of(&nol.resource_version) + 1000).to_string());
    for m in [
        None,
        Some(ResourceVersionMatch::Exact),
        Some(ResourceVersionMatch::NotOlderThan),
    ] {
        let err = lw
            .list(&ListOptions {
                resource_version: future.clone(),
                resource_version_match: m,
                ..ListOptions::default()
            })
            .await
            .expect_err("a future revision fails");
        assert_eq!(
            err.kind(),
            ErrorKind::TooLargeResourceVersion,
            "{m:?}: {err}"
        );
    }

    // Not a revision, not our token: Other.
    let err = lw
        .list(&ListOptions {
            resource_version: rv("abc"),
            ..ListOptions::default()
        })
        .await
        .expect_err("bad version");
    assert!(matches!(err, EtcdError::InvalidResourceVersion(_)));
    assert_eq!(err.kind(), ErrorKind::Other);
    let err = lw
        .list(&ListOptions {
            continue_token: Some("12:2f".into()),
            limit: Some(10),
            ..ListOptions::default()
        })
        .await
        .expect_err("foreign token");
    assert!(matches!(err, EtcdError::InvalidContinueToken(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_adds_updates_and_deletes_after_a_revision() {
    let Some((lw, writer, _prefix)) = setup("watch").await else {
        return;
    };
    let before = writer
        .create(&item("ns", "early", 0))
        .await
        .expect("create");
    let mut w = lw.watch(&watch_from(&before.rv)).await.expect("watch");

    let a = writer.create(&item("ns", "a", 1)).await.expect("create");
    let mut a2 = a.clone();
    a2.value = 2;
    let a2 = writer.update(&a2).await.expect("update");
    let del_rv = writer
        .delete(&ObjectKey::namespaced("ns", "a").expect("key"))
        .await
        .expect("delete");

    match next_change(&mut w).await {
        Ok(WatchEvent::Added(o)) => assert_eq!((o.value, &o.rv), (1, &a.rv)),
        other => panic!("expected Added, got {other:?}"),
    }
    match next_change(&mut w).await {
        Ok(WatchEvent::Modified(o)) => assert_eq!((o.value, &o.rv), (2, &a2.rv)),
        other => panic!("expected Modified, got {other:?}"),
    }
    match next_change(&mut w).await {
        // The last state, stamped with the deletion's revision.
        Ok(WatchEvent::Deleted(o)) => assert_eq!((o.value, &o.rv), (2, &del_rv)),
        other => panic!("expected Deleted, got {other:?}"),
    }

    // A watch from the first revision replays the same history.
    let mut replay = lw
        .watch(&watch_from(&before.rv))
        .await
        .expect("watch again");
    for want in ["Added", "Modified", "Deleted"] {
        let got = match next_change(&mut replay).await {
            Ok(WatchEvent::Added(_)) => "Added",
            Ok(WatchEvent::Modified(_)) => "Modified",
            Ok(WatchEvent::Deleted(_)) => "Deleted",
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(got, want);
    }

    // A future revision is too large; a bad one is Other.
    let future = rv(&(rev_of(&del_rv) + 1000).to_string());
    let err = lw
        .watch(&watch_from(&future))
        .await
        .err()
        .expect("future watch fails");
    assert_eq!(err.kind(), ErrorKind::TooLargeResourceVersion, "{err}");
    let err = lw
        .watch(&watch_from(&rv("x1")))
        .await
        .err()
        .expect("bad version fails");
    assert_eq!(err.kind(), ErrorKind::Other);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_initial_events_streams_a_snapshot_then_the_changes() {
    let Some((lw, writer, _prefix)) = setup("initial_events").await else {
        return;
    };
    for i in 0..5 {
        writer
            .create(&item("ns", &format!("o{i}"), i))
            .await
            .expect("create");
    }
    let lw = lw.with_internal_page_size(2); // several internal pages, one revision
    let mut w = lw
        .watch(&WatchOptions {
            send_initial_events: true,
            allow_bookmarks: true,
            ..WatchOptions::default()
        })
        .await
        .expect("watch-list");
    let mut names = Vec::new();
    let end_rv = loop {
        match next(&mut w).await {
            Ok(WatchEvent::Added(o)) => names.push(o.name.clone()),
            Ok(WatchEvent::Bookmark(Bookmark {
                resource_version,
                initial_events_end: true,
            })) => break resource_version,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(names, ["o0", "o1", "o2", "o3", "o4"]);
    let late = writer.create(&item("ns", "late", 9)).await.expect("create");
    assert!(rev_of(&late.rv) > rev_of(&end_rv));
    match next_change(&mut w).await {
        Ok(WatchEvent::Added(o)) => assert_eq!(o.rv, late.rv),
        other => panic!("expected the late add, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_timeout_runs_on_the_clock_and_ends_cleanly() {
    let Some((lw, writer, _prefix)) = setup("timeout").await else {
        return;
    };
    let clock = FakeClock::new();
    let lw = lw.with_clock(Arc::new(clock.clone()));
    let a = writer.create(&item("ns", "a", 1)).await.expect("create");
    let mut w = lw
        .watch(&WatchOptions {
            resource_version: a.rv.clone(),
            timeout: Some(Duration::from_secs(300)),
            ..WatchOptions::default()
        })
        .await
        .expect("watch");
    let b = writer.create(&item("ns", "b", 2)).await.expect("create");
    match next_change(&mut w).await {
        Ok(WatchEvent::Added(o)) => assert_eq!(o.rv, b.rv),
        other => panic!("expected b, got {other:?}"),
    }
    clock.advance(Duration::from_secs(301));
    assert!(
        within(T, "end of the watch", w.next()).await.is_none(),
        "a clean end"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_creates_updates_with_optimistic_concurrency_and_deletes() {
    let Some((_lw, writer, _prefix)) = setup("writer").await else {
        return;
    };
    let a = writer.create(&item("ns", "a", 1)).await.expect("create");
    assert!(!a.rv.is_empty());
    let err = writer
        .create(&item("ns", "a", 5))
        .await
        .expect_err("exists");
    assert!(matches!(err, EtcdError::AlreadyExists { .. }), "{err}");

    let mut a2 = a.clone();
    a2.value = 2;
    let a2 = writer
        .update(&a2)
        .await
        .expect("update at the read version");
    assert!(rev_of(&a2.rv) > rev_of(&a.rv));
    // A stale version conflicts and reports the current one.
    let mut stale = a.clone();
    stale.value = 3;
    match writer.update(&stale).await {
        Err(EtcdError::Conflict { current, .. }) => assert_eq!(current, a2.rv),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let err = writer
        .update(&item("ns", "a", 4))
        .await
        .expect_err("no version");
    assert!(matches!(err, EtcdError::InvalidResourceVersion(_)));

    let key = ObjectKey::namespaced("ns", "a").expect("key");
    assert_eq!(
        writer.get(&key).await.expect("get").map(|o| o.value),
        Some(2)
    );
    let err = writer
        .delete_at(&key, &a.rv)
        .await
        .expect_err("stale delete");
    assert!(matches!(err, EtcdError::Conflict { .. }));
    writer
        .delete_at(&key, &a2.rv)
        .await
        .expect("delete at the version");
    assert!(writer.get(&key).await.expect("get").is_none());
    assert!(matches!(
        writer.delete(&key).await,
        Err(EtcdError::NotFound { .. })
    ));
    assert!(matches!(
        writer.update(&a2).await,
        Err(EtcdError::NotFound { .. })
    ));
    let p = writer.put(&item("ns", "a", 7)).await.expect("put");
    assert_eq!(p.value, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_values_are_skipped_and_reported_never_a_panic() {
    let Some((lw, writer, prefix)) = setup("malformed").await else {
        return;
    };
    let mut kv = lw.client().kv_client();
    let good = writer.create(&item("ns", "good", 1)).await.expect("create");
    kv.put(format!("{prefix}ns/bad"), "{not json", None)
        .await
        .expect("put");
    // Decodable, but stored under another key.
    kv.put(
        format!("{prefix}ns/elsewhere"),
        json(&item("ns", "other", 2)),
        None,
    )
    .await
    .expect("put");

    // The list leaves both out and the next watch reports them.
    let page = lw.list(&ListOptions::default()).await.expect("list");
    let names: Vec<_> = page.items.iter().map(|i| i.name.clone()).collect();
    assert_eq!(names, ["good"]);
    match lw.watch(&watch_from(&page.resource_version)).await {
        Err(EtcdError::Malformed(values)) => {
            let keys: Vec<_> = values.iter().map(|v| v.key.as_str()).collect();
            assert_eq!(keys, ["ns/bad", "ns/elsewhere"]);
        }
        other => panic!("expected the report, got {:?}", other.map(|_| "a stream")),
    }
    assert!(lw.take_skipped().is_empty(), "reported once");
    let mut w = lw
        .watch(&watch_from(&page.resource_version))
        .await
        .expect("watch");

    // A good object turning bad: its last good state is deleted, a bookmark passes the bad
    // revision, then the report; the stream ends.
    let bad_rv = kv
        .put(format!("{prefix}ns/good"), "\u{0}garbage", None)
        .await
        .expect("put");
    let bad_rev = bad_rv.header().map(|h| h.revision()).expect("header");
    match next_change(&mut w).await {
        Ok(WatchEvent::Deleted(o)) => {
            assert_eq!((o.name.as_str(), o.value), ("good", 1));
            assert_eq!(rev_of(&o.rv), bad_rev);
            assert_ne!(o.rv, good.rv);
        }
        other => panic!("expected the delete of the last good state, got {other:?}"),
    }
    match next(&mut w).await {
        Ok(WatchEvent::Bookmark(b)) => assert_eq!(rev_of(&b.resource_version), bad_rev),
        other => panic!("expected a bookmark at the bad revision, got {other:?}"),
    }
    match next(&mut w).await {
        Err(e @ EtcdError::Malformed(_)) => {
            assert_eq!(e.kind(), ErrorKind::Retry);
            assert!(e.to_string().contains("ns/good"), "{e}");
        }
        other => panic!("expected the report, got {other:?}"),
    }
    assert!(within(T, "end after the error", w.next()).await.is_none());

    // Re-watching from the bookmark goes on past the bad value.
    let mut w = lw
        .watch(&watch_from(&rv(&bad_rev.to_string())))
        .await
        .expect("re-watch");
    let fixed = writer.put(&item("ns", "good", 3)).await.expect("fix");
    match next_change(&mut w).await {
        Ok(WatchEvent::Modified(o)) => assert_eq!((o.value, &o.rv), (3, &fixed.rv)),
        other => panic!("expected the fixed value, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_current_revision_is_read_without_listing_and_counts_writes_outside_the_prefix() {
    let Some((lw, writer, prefix)) = setup("current_revision").await else {
        return;
    };
    let current = || async {
        within(T, "current revision", lw.current_resource_version())
            .await
            .expect("current revision")
            .expect("etcd can tell")
    };
    // The CI etcd is shared with the other tests, which write concurrently: the store's
    // revision is at least our last write's, and not past a revision read after it.
    let mut kv = lw.client().kv_client();
    let head = |kv: &mut etcd_client::KvClient| {
        let mut kv = kv.clone();
        async move {
            let got = kv.get("\0", None).await.expect("get");
            got.header().expect("a header").revision()
        }
    };
    let a = writer.create(&item("ns", "a", 1)).await.expect("create");
    let seen = rev_of(&current().await);
    assert!(
        seen >= rev_of(&a.rv) && seen <= head(&mut kv).await,
        "{seen} after {}",
        a.rv
    );
    // etcd's revision is the store's: a write under another prefix moves it too.
    let put = kv
        .put(format!("{prefix}-elsewhere/x"), "1", None)
        .await
        .expect("put");
    let elsewhere = put.header().expect("a header").revision();
    let seen = rev_of(&current().await);
    assert!(
        seen >= elsewhere && seen <= head(&mut kv).await,
        "{seen} after {elsewhere}"
    );
    assert!(elsewhere > rev_of(&a.rv));
}
