//! Tests that run an etcd of their own (`KCACHE_ETCD_BIN`; skipped, with a message, when it is
//! not set), because they compact it, kill it or need its flags: compaction in both shapes and
//! while a reflector is behind, SIGKILL and restart mid-watch, progress notifications as bookmarks.

mod common;

use common::*;
use etcd_client::{Client, CompactionOptions};
use futures::StreamExt;
use kcache_core::{Clock, ResourceVersion, SystemClock};
use kcache_etcd::{EtcdError, EtcdListWatcher};
use kcache_reflector::{
    BackendError, ErrorKind, ListOptions, ListPage, ListWatcher, Reflector, WatchEvent,
    WatchOptions, WatchStream,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

type Lw = EtcdListWatcher<Item>;

const T: Duration = Duration::from_secs(30);

async fn compact_now(client: &Client) -> i64 {
    let mut c = client.clone();
    let rev = c
        .get("x", None)
        .await
        .expect("get")
        .header()
        .map(|h| h.revision())
        .expect("header");
    c.compact(rev, Some(CompactionOptions::new().with_physical()))
        .await
        .expect("compact");
    rev
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_shows_as_expired_in_both_shapes() {
    let Some(bin) = etcd_bin("compaction_shapes") else {
        return;
    };
    let etcd = OwnEtcd::start(bin, &[]).await;
    let client = connect(&etcd.endpoint()).await;
    let prefix = unique_prefix("compaction_shapes");
    let first = put_all(&client, &prefix, items(10, 1), 1).await;
    put_all(&client, &prefix, items(10, 2), 1).await;
    put_all(&client, &prefix, items(10, 3), 1).await;
    // Compaction at revision R keeps R: the watch below starts at `first + 1` < R.
    compact_now(&client).await;
    let lw = Lw::new(client.clone(), &prefix);
    let old = ResourceVersion::from(first.to_string());

    // A range at a compacted revision: "required revision has been compacted".
    let err = lw
        .list(&ListOptions {
            resource_version: old.clone(),
            ..ListOptions::default()
        })
        .await
        .expect_err("list at a compacted revision fails");
    assert!(matches!(err, EtcdError::Compacted { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::Expired);

    // A watch from a compacted revision: etcd 3.4 creates it, then cancels it with
    // compact_revision set; either `watch` or the first item says Expired.
    let opts = WatchOptions {
        resource_version: old,
        ..WatchOptions::default()
    };
    let err = match within(T, "watch", lw.watch(&opts)).await {
        Err(e) => e,
        Ok(mut s) => match within(T, "first item", s.next()).await {
            Some(Err(e)) => e,
            other => panic!("expected the compaction error, got {other:?}"),
        },
    };
    assert!(
        matches!(
            err,
            EtcdError::Compacted {
                compact_revision: Some(_),
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::Expired);
}

/// A list-watcher whose current watch can be cut (it ends with a Retry error) and whose next
/// watch can be held back: to put a reflector behind.
#[derive(Clone)]
struct Gate {
    inner: Lw,
    held: Arc<AtomicBool>,
    cut: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Gate {
    fn new(inner: Lw) -> Self {
        Self {
            inner,
            held: Arc::default(),
            cut: Arc::new(tokio::sync::watch::channel(0).0),
        }
    }
    fn cut_and_hold(&self) {
        self.held.store(true, Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }
    fn release(&self) {
        self.held.store(false, Ordering::SeqCst);
    }
}

impl ListWatcher<Item> for Gate {
    type Error = EtcdError;

    async fn list(&self, opts: &ListOptions) -> Result<ListPage<Item>, EtcdError> {
        self.inner.list(opts).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchStream<Item, EtcdError>, EtcdError> {
        while self.held.load(Ordering::SeqCst) {
            SystemClock.sleep_async(Duration::from_millis(20)).await;
        }
        let mut cut = self.cut.subscribe();
        cut.mark_unchanged();
        let inner = self.inner.watch(opts).await?;
        Ok(Box::pin(futures::stream::unfold(
            (inner, Some(cut)),
            |(mut s, cut)| async move {
                let mut cut = cut?;
                tokio::select! {
                    item = s.next() => item.map(|i| (i, (s, Some(cut)))),
                    _ = cut.changed() => Some((Err(EtcdError::WatchEnded), (s, None))),
                }
            },
        )))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_while_the_reflector_is_behind_relists_and_converges() {
    let Some(bin) = etcd_bin("compaction_behind") else {
        return;
    };
    let etcd = OwnEtcd::start(bin, &[]).await;
    let client = connect(&etcd.endpoint()).await;
    let prefix = unique_prefix("compaction_behind");
    put_all(&client, &prefix, items(1_000, 1), 2).await;

    let gate = Gate::new(Lw::new(client.clone(), &prefix));
    let store = TestStore::default();
    let reports = Reports::default();
    let reflector = Reflector::builder(gate.clone(), store.clone())
        .backoff(quick_backoff())
        .on_watch_error(reports.hook())
        .build();
    let handle = reflector.handle();
    tokio::spawn(reflector.run());
    converge(&store, &client, &prefix, T).await;
    assert_eq!(store.replaces(), 1);

    // The reflector falls behind: its watch is cut and the next one held while etcd moves on and
    // compacts the history it would need.
    gate.cut_and_hold();
    wait_for(T, "the cut to reach the hook", || {
        reports.any(ErrorKind::Retry, "ended unexpectedly")
    })
    .await;
    put_all(&client, &prefix, items(600, 2), 2).await;
    let mut kv = client.kv_client();
    for i in 600..700 {
        kv.delete(format!("{prefix}ns/item-{i:06}"), None)
            .await
            .expect("delete");
    }
    put_all(
        &client,
        &prefix,
        (0..50).map(|i| item("late", &format!("n{i}"), 3)).collect(),
        1,
    )
    .await;
    compact_now(&client).await;
    gate.release();

    converge(&store, &client, &prefix, T).await;
    assert!(
        reports.any(ErrorKind::Expired, "compacted"),
        "{:?}",
        reports.all()
    );
    assert!(store.replaces() >= 2, "relisted");
    assert_eq!(store.len(), 1_000 - 100 + 50);
    handle.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_killed_and_restarted_mid_watch_loses_no_update() {
    let Some(bin) = etcd_bin("kill_restart") else {
        return;
    };
    let mut etcd = OwnEtcd::start(bin, &[]).await;
    let client = connect(&etcd.endpoint()).await;
    let prefix = unique_prefix("kill_restart");
    put_all(&client, &prefix, items(1_000, 1), 2).await;

    let store = TestStore::default();
    let reports = Reports::default();
    let reflector = Reflector::builder(Lw::new(client.clone(), &prefix), store.clone())
        .backoff(quick_backoff())
        .on_watch_error(reports.hook())
        .build();
    let handle = reflector.handle();
    tokio::spawn(reflector.run());
    converge(&store, &client, &prefix, T).await;

    // Acknowledged writes right before the kill; the reflector may not have seen them yet.
    let acked = put_all(&client, &prefix, items(1_000, 2), 4).await;
    etcd.kill();
    SystemClock.sleep_async(Duration::from_secs(1)).await;
    etcd.restart().await;
    // More writes after the restart, on the same client (it reconnects).
    let mut after = acked;
    for attempt in 0.. {
        match tokio::time::timeout(T, async { put_all_fallible(&client, &prefix, 3).await }).await {
            Ok(Ok(rev)) => {
                after = rev;
                break;
            }
            _ if attempt < 50 => SystemClock.sleep_async(Duration::from_millis(200)).await,
            other => panic!("writes after the restart keep failing: {other:?}"),
        }
    }
    assert!(after > acked);

    converge(&store, &client, &prefix, T).await;
    let (raw, _) = raw_state(&client, &prefix, None).await;
    assert!(
        expected(&raw).values().filter(|(v, _)| *v >= 2).count() >= 1_000,
        "every acknowledged write survived the kill"
    );
    assert!(
        reports.any(ErrorKind::Retry, ""),
        "the broken connection was reported: {:?}",
        reports.all()
    );
    eprintln!("kill/restart: reports {:?}", reports.all());
    handle.stop();
}

/// Updates item-000000..100 to value 3 in one transaction.
async fn put_all_fallible(
    client: &Client,
    prefix: &str,
    value: u64,
) -> Result<i64, etcd_client::Error> {
    let ops: Vec<_> = items(100, value)
        .iter()
        .map(|it| etcd_client::TxnOp::put(format!("{prefix}ns/{}", it.name), json(it), None))
        .collect();
    let resp = client
        .kv_client()
        .txn(etcd_client::Txn::new().and_then(ops))
        .await?;
    Ok(resp.header().map(|h| h.revision()).unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_become_bookmarks() {
    let Some(bin) = etcd_bin("bookmarks") else {
        return;
    };
    let etcd = OwnEtcd::start(
        bin,
        &["--experimental-watch-progress-notify-interval", "200ms"],
    )
    .await;
    let client = connect(&etcd.endpoint()).await;
    let prefix = unique_prefix("bookmarks");
    let lw = Lw::new(client.clone(), &prefix);
    let rev = put_all(&client, &prefix, items(3, 1), 1).await;
    let mut w = lw
        .watch(&WatchOptions {
            resource_version: ResourceVersion::from(rev.to_string()),
            allow_bookmarks: true,
            ..WatchOptions::default()
        })
        .await
        .expect("watch");
    // Writes elsewhere move etcd's revision; the idle watcher learns it through a bookmark.
    let other = put_all(&client, &unique_prefix("bookmarks-other"), items(1, 1), 1).await;
    let clock = SystemClock;
    let deadline = clock.now() + T;
    loop {
        assert!(clock.now() < deadline, "no bookmark at the latest revision");
        match within(T, "a bookmark", w.next()).await {
            Some(Ok(WatchEvent::Bookmark(b))) => {
                let at: i64 = b.resource_version.as_str().parse().expect("decimal");
                assert!(!b.initial_events_end);
                if at >= other {
                    break;
                }
            }
            other => panic!("expected only bookmarks, got {other:?}"),
        }
    }
}
