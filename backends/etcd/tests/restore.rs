//! Warm restarts against an etcd of the test's own (`KCACHE_ETCD_BIN`; skipped, with a message,
//! when it is not set): an informer restored from a snapshot resumes its watch with no list call
//! while etcd still has the history, and reports synced only once it caught up with etcd's
//! store-wide revision as of the restore (through progress notifications, as the watched prefix
//! may stay quiet); after a compaction past the snapshot it relists and tells the vanished
//! objects as tombstones.

mod common;

use common::*;
use etcd_client::{Client, CompactionOptions, DeleteOptions};
use kcache_core::ResourceVersion;
use kcache_etcd::{EtcdError, EtcdListWatcher};
use kcache_informer::snapshot::{CodecError, RestoreOutcome, SnapshotCodec, SnapshotFile};
use kcache_informer::{HandlerFuncs, InformerOptions, SharedIndexInformer};
use kcache_reflector::{ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
/// etcd's progress notifications every 200 ms (10 minutes by default): a restored informer whose
/// prefix stays quiet learns from them that it has caught up.
const PROGRESS: &str = "--experimental-watch-progress-notify-interval=200ms";

/// etcd stamps versions into objects instead of storing them, so the test `Item` leaves its
/// version out of serde; a snapshot must keep it: its length, its text, then the JSON.
struct ItemCodec;

impl SnapshotCodec<Item> for ItemCodec {
    fn type_name(&self) -> &str {
        "etcd-test-item/v1"
    }
    fn encode(&self, it: &Item, out: &mut Vec<u8>) -> Result<(), CodecError> {
        let rv = it.rv.as_str().as_bytes();
        let len = u16::try_from(rv.len()).map_err(CodecError::new)?;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(rv);
        serde_json::to_writer(out, it).map_err(CodecError::new)
    }
    fn decode(&self, bytes: &[u8]) -> Result<Item, CodecError> {
        let (len, rest) = bytes
            .split_at_checked(2)
            .ok_or_else(|| CodecError::new("short"))?;
        let len = usize::from(u16::from_le_bytes([len[0], len[1]]));
        let (rv, json) = rest
            .split_at_checked(len)
            .ok_or_else(|| CodecError::new("short"))?;
        let mut it: Item = serde_json::from_slice(json).map_err(CodecError::new)?;
        it.rv = ResourceVersion::new(std::str::from_utf8(rv).map_err(CodecError::new)?);
        Ok(it)
    }
}

/// The etcd list-watcher, counting its list calls.
struct Counted {
    inner: EtcdListWatcher<Item>,
    lists: Arc<AtomicUsize>,
}

impl ListWatcher<Item> for Counted {
    type Error = EtcdError;
    async fn list(&self, opts: &ListOptions) -> Result<ListPage<Item>, EtcdError> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list(opts).await
    }
    async fn watch(&self, opts: &WatchOptions) -> Result<WatchStream<Item, EtcdError>, EtcdError> {
        self.inner.watch(opts).await
    }
    async fn current_resource_version(&self) -> Result<Option<ResourceVersion>, EtcdError> {
        self.inner.current_resource_version().await
    }
}

type Informer = SharedIndexInformer<Item, Counted>;

/// One life of the informer: its list counter and what its handler heard ("add k=v (initial)",
/// "update k a->b", "delete k (tombstone)").
struct Life {
    informer: Arc<Informer>,
    lists: Arc<AtomicUsize>,
    heard: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<Result<(), kcache_informer::InformerError>>,
}

fn start(client: &Client, prefix: &str, snapshot: Option<&std::path::Path>) -> Life {
    let lists = Arc::new(AtomicUsize::new(0));
    let lw = Counted {
        inner: EtcdListWatcher::new(client.clone(), prefix),
        lists: lists.clone(),
    };
    let mut options = InformerOptions::new().name("etcd-restore");
    if let Some(path) = snapshot {
        options = options.restore_from(SnapshotFile::new(path, ItemCodec));
    }
    let informer = Arc::new(SharedIndexInformer::with_options(lw, options));
    let heard = Arc::new(Mutex::new(Vec::new()));
    let push = |h: &Arc<Mutex<Vec<String>>>, line: String| {
        h.lock().unwrap_or_else(|p| p.into_inner()).push(line);
    };
    let (h1, h2, h3) = (heard.clone(), heard.clone(), heard.clone());
    informer
        .add_event_handler(
            HandlerFuncs::new()
                .add_func(move |it: &Arc<Item>, initial| {
                    let tag = if initial { " (initial)" } else { "" };
                    push(&h1, format!("add {}={}{tag}", it.name, it.value))
                })
                .update_func(move |old: &Arc<Item>, new: &Arc<Item>| {
                    push(
                        &h2,
                        format!("update {} {}->{}", new.name, old.value, new.value),
                    )
                })
                .delete_func(move |d| {
                    let tag = if d.is_final_state_unknown() {
                        " (tombstone)"
                    } else {
                        ""
                    };
                    let name = d.key().as_str().trim_start_matches("ns/").to_owned();
                    push(&h3, format!("delete {name}{tag}"))
                }),
        )
        .unwrap_or_else(|e| panic!("handler: {e}"));
    let task = {
        let informer = informer.clone();
        tokio::spawn(async move { informer.run(std::future::pending()).await })
    };
    Life {
        informer,
        lists,
        heard,
        task,
    }
}

impl Life {
    async fn synced(&self) {
        let synced = within(WAIT, "informer sync", self.informer.wait_for_cache_sync()).await;
        assert!(synced, "the informer stopped before it synced");
    }
    fn cache(&self) -> BTreeMap<String, (u64, String)> {
        self.informer
            .indexer()
            .list()
            .iter()
            .map(|it| {
                (
                    format!("{}/{}", it.namespace, it.name),
                    (it.value, it.rv.as_str().to_owned()),
                )
            })
            .collect()
    }
    fn lists(&self) -> usize {
        self.lists.load(Ordering::SeqCst)
    }
    fn heard(&self) -> Vec<String> {
        self.heard.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    async fn wait_heard(&self, n: usize) {
        wait_for(WAIT, "notifications", || self.heard().len() >= n).await;
    }
    async fn stop(self) {
        self.informer.stop_handle().stop();
        let r = within(WAIT, "informer stop", self.task).await;
        assert!(matches!(r, Ok(Ok(()))), "informer did not stop: {r:?}");
    }
}

/// The first life: a cold start over `prefix`, a snapshot into `path`, a stop. Returns the
/// snapshot's resource version.
async fn first_life(client: &Client, prefix: &str, path: &std::path::Path) -> ResourceVersion {
    let life = start(client, prefix, None);
    life.synced().await;
    assert_eq!(life.lists(), 1);
    let snapshots = life.informer.snapshots(SnapshotFile::new(path, ItemCodec));
    let stats = within(WAIT, "snapshot", snapshots.write_now())
        .await
        .unwrap_or_else(|e| panic!("snapshot: {e}"));
    assert_eq!(stats.objects, 5);
    life.stop().await;
    snapshots
        .file()
        .load_header()
        .unwrap_or_else(|e| panic!("snapshot header: {e}"))
        .resource_version
}

async fn put(client: &Client, prefix: &str, it: &Item) -> i64 {
    let key = format!("{prefix}{}/{}", it.namespace, it.name);
    let resp = client
        .kv_client()
        .put(key, json(it), None)
        .await
        .unwrap_or_else(|e| panic!("put: {e}"));
    resp.header().map(|h| h.revision()).unwrap_or(0)
}

async fn delete(client: &Client, prefix: &str, name: &str) {
    client
        .kv_client()
        .delete(format!("{prefix}ns/{name}"), None::<DeleteOptions>)
        .await
        .unwrap_or_else(|e| panic!("delete: {e}"));
}

fn snapshot_dir(tag: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("kcache-etcd-restore-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_within_etcds_history_resumes_the_watch_without_a_list() {
    let Some(bin) = etcd_bin("restore_within_history") else {
        return;
    };
    let etcd = OwnEtcd::start(bin, &[PROGRESS]).await;
    let client = connect(&etcd.endpoint()).await;
    let prefix = unique_prefix("restore_within_history");
    let dir = snapshot_dir("within");
    let path = dir.join("items.snap");
    put_all(&client, &prefix, items(5, 1), 1).await;
    let snapshot_rv = first_life(&client, &prefix, &path).await;

    // While the informer is down: an add, an update, a delete under its prefix, then writes
    // elsewhere, so etcd's revision moves past every event the prefix will ever send.
    put(&client, &prefix, &item("ns", "item-000005", 5)).await;
    put(&client, &prefix, &item("ns", "item-000000", 10)).await;
    delete(&client, &prefix, "item-000001").await;
    let elsewhere = unique_prefix("restore_elsewhere");
    let mut head = 0;
    for i in 0..20 {
        head = put(&client, &elsewhere, &item("ns", &format!("other-{i}"), 0)).await;
    }
    let (raw, _) = raw_state(&client, &prefix, None).await;
    let last_prefix_rev = raw.values().map(|(_, rev)| *rev).max().unwrap_or(0);
    assert!(last_prefix_rev < head, "the prefix is quiet at the head");

    let life = start(&client, &prefix, Some(&path));
    life.synced().await;
    // Synced means caught up: every missed change is in the cache.
    assert_eq!(life.cache(), expected(&raw));
    assert_eq!(life.lists(), 0, "the restart within the history listed");
    match life.informer.restore_outcome() {
        RestoreOutcome::Restored {
            objects,
            resource_version,
            target,
        } => {
            assert_eq!((objects, &resource_version), (5, &snapshot_rv));
            let target: i64 = target.as_str().parse().unwrap_or(0);
            assert!(target >= head, "target {target} before the head {head}");
        }
        other => panic!("not restored: {other:?}"),
    }
    // Progress reached the store-wide revision, past the prefix's last event.
    let applied: i64 = life
        .informer
        .last_sync_resource_version()
        .as_str()
        .parse()
        .unwrap_or(0);
    assert!(applied >= head, "applied {applied} before the head {head}");
    life.wait_heard(8).await;
    assert_eq!(
        life.heard(),
        [
            "add item-000000=1 (initial)",
            "add item-000001=1 (initial)",
            "add item-000002=1 (initial)",
            "add item-000003=1 (initial)",
            "add item-000004=1 (initial)",
            "add item-000005=5",
            "update item-000000 1->10",
            "delete item-000001",
        ]
    );
    life.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_a_compaction_past_the_snapshot_relists_with_tombstones() {
    let Some(bin) = etcd_bin("restore_after_compaction") else {
        return;
    };
    let etcd = OwnEtcd::start(bin, &[PROGRESS]).await;
    let client = connect(&etcd.endpoint()).await;
    let prefix = unique_prefix("restore_after_compaction");
    let dir = snapshot_dir("compacted");
    let path = dir.join("items.snap");
    put_all(&client, &prefix, items(5, 1), 1).await;
    first_life(&client, &prefix, &path).await;

    // While it is down: two deletions and an update, then the history is compacted away.
    delete(&client, &prefix, "item-000001").await;
    delete(&client, &prefix, "item-000003").await;
    let rev = put(&client, &prefix, &item("ns", "item-000000", 10)).await;
    let mut c = client.clone();
    c.compact(rev, Some(CompactionOptions::new().with_physical()))
        .await
        .unwrap_or_else(|e| panic!("compact: {e}"));

    let life = start(&client, &prefix, Some(&path));
    life.synced().await;
    let (raw, _) = raw_state(&client, &prefix, None).await;
    assert_eq!(life.cache(), expected(&raw));
    assert_eq!(life.lists(), 1, "the compacted version is relisted once");
    life.wait_heard(10).await;
    let heard = life.heard();
    assert_eq!(
        heard[5..],
        [
            "delete item-000001 (tombstone)",
            "delete item-000003 (tombstone)",
            "update item-000000 1->10",
            "update item-000002 1->1",
            "update item-000004 1->1",
        ]
    );
    life.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
