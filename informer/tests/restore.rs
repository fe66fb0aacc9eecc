//! Warm restart (feature `snapshot`): an informer built with a snapshot to restore from fills its
//! cache from it, watches from its version (no list), hears the changes it missed as watch
//! events, falls back to a relist with tombstones when the version is gone, refuses bad
//! snapshots (and lists), and reports synced only once it caught up with the source.
#![cfg(feature = "snapshot-serde")]

use kcache_core::{FakeClock, Object, ResourceVersion};
use kcache_informer::snapshot::{
    PostcardCodec, RefusalReason, RestoreOutcome, SnapshotCounters, SnapshotFile,
};
use kcache_informer::{
    DeletedObject, Event, InformerOptions, ResourceEventHandler, SharedIndexInformer,
};
use kcache_memory::{MemoryConfig, MemoryError, MemorySource, SetResourceVersion};
use kcache_reflector::{ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

const WAIT: Duration = Duration::from_secs(20);
const TYPE: &str = "Item/v1";

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Item {
    name: String,
    value: u32,
    rv: String,
}

impl Object for Item {
    fn namespace(&self) -> Option<&str> {
        Some("default")
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        ResourceVersion::new(&self.rv)
    }
}

impl SetResourceVersion for Item {
    fn set_resource_version(&mut self, rv: ResourceVersion) {
        self.rv = rv.as_str().to_owned();
    }
}

fn item(name: &str, value: u32) -> Item {
    Item {
        name: name.into(),
        value,
        rv: String::new(),
    }
}

/// A memory source that counts lists, can hold watches back until opened, and can pretend it
/// cannot report its current version.
struct Counted {
    inner: MemorySource<Item>,
    lists: Arc<AtomicUsize>,
    watches: Arc<Mutex<Vec<String>>>,
    gate: watch::Receiver<bool>,
    knows_version: bool,
}

impl ListWatcher<Item> for Counted {
    type Error = MemoryError;

    async fn list(&self, opts: &ListOptions) -> Result<ListPage<Item>, MemoryError> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list(opts).await
    }

    async fn watch(
        &self,
        opts: &WatchOptions,
    ) -> Result<WatchStream<Item, MemoryError>, MemoryError> {
        let mut gate = self.gate.clone();
        let _ = gate.wait_for(|open| *open).await;
        self.watches
            .lock()
            .unwrap()
            .push(opts.resource_version.as_str().to_owned());
        self.inner.watch(opts).await
    }

    async fn current_resource_version(&self) -> Result<Option<ResourceVersion>, MemoryError> {
        if self.knows_version {
            self.inner.current_resource_version().await
        } else {
            Ok(None)
        }
    }
}

/// Records every notification.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Event<Item>>>>);

impl ResourceEventHandler<Item> for Recorder {
    fn on_add(&self, obj: &Arc<Item>, is_in_initial_list: bool) {
        self.0.lock().unwrap().push(Event::Added {
            obj: obj.clone(),
            is_in_initial_list,
        });
    }
    fn on_update(&self, old: &Arc<Item>, new: &Arc<Item>) {
        self.0.lock().unwrap().push(Event::Updated {
            old: old.clone(),
            new: new.clone(),
        });
    }
    fn on_delete(&self, obj: &DeletedObject<Item>) {
        self.0.lock().unwrap().push(Event::Deleted(obj.clone()));
    }
}

impl Recorder {
    fn events(&self) -> Vec<Event<Item>> {
        self.0.lock().unwrap().clone()
    }
    /// One line per notification: "add a=1 (initial)", "update a 1->2", "delete b (tombstone)".
    fn lines(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|e| match e {
                Event::Added {
                    obj,
                    is_in_initial_list,
                } => format!(
                    "add {}={}{}",
                    obj.name,
                    obj.value,
                    if *is_in_initial_list {
                        " (initial)"
                    } else {
                        ""
                    }
                ),
                Event::Updated { old, new } => {
                    format!("update {} {}->{}", new.name, old.value, new.value)
                }
                Event::Deleted(d) => format!(
                    "delete {}{}",
                    d.key().as_str().trim_start_matches("default/"),
                    if d.is_final_state_unknown() {
                        " (tombstone)"
                    } else {
                        ""
                    }
                ),
            })
            .collect()
    }
    async fn wait_for(&self, n: usize) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while self.0.lock().unwrap().len() < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {n} notifications: {:?}",
                self.lines()
            );
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

struct TempDir(std::path::PathBuf);
impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "kcache-informer-restore-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
    fn file(&self) -> std::path::PathBuf {
        self.0.join("items.snap")
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

type Informer = SharedIndexInformer<Item, Counted>;

/// One informer over the source, with its list counter, its watch gate and the snapshot counters.
struct Harness {
    informer: Arc<Informer>,
    lists: Arc<AtomicUsize>,
    watches: Arc<Mutex<Vec<String>>>,
    gate: watch::Sender<bool>,
    counters: Arc<SnapshotCounters>,
    recorder: Recorder,
}

struct Setup<'a> {
    source: &'a MemorySource<Item>,
    path: std::path::PathBuf,
    restore: bool,
    knows_version: bool,
    watch_open: bool,
    clock: FakeClock,
    max_age: Option<Duration>,
}

impl<'a> Setup<'a> {
    fn new(source: &'a MemorySource<Item>, dir: &TempDir) -> Self {
        Self {
            source,
            path: dir.file(),
            restore: true,
            knows_version: true,
            watch_open: true,
            clock: FakeClock::new(),
            max_age: None,
        }
    }

    fn build(self) -> Harness {
        let (gate, gate_rx) = watch::channel(self.watch_open);
        let lists = Arc::new(AtomicUsize::new(0));
        let watches = Arc::new(Mutex::new(Vec::new()));
        let lw = Counted {
            inner: self.source.clone(),
            lists: lists.clone(),
            watches: watches.clone(),
            gate: gate_rx,
            knows_version: self.knows_version,
        };
        let counters = Arc::new(SnapshotCounters::default());
        let mut options = InformerOptions::new().name("items");
        if self.restore {
            let mut file = SnapshotFile::new(self.path, PostcardCodec::<Item>::named(TYPE))
                .clock(Arc::new(self.clock.clone()))
                .metrics(counters.clone());
            if let Some(age) = self.max_age {
                file = file.max_age(age);
            }
            options = options.restore_from(file);
        }
        let informer = Arc::new(SharedIndexInformer::with_options(lw, options));
        let recorder = Recorder::default();
        informer.add_event_handler(recorder.clone()).unwrap();
        Harness {
            informer,
            lists,
            watches,
            gate,
            counters,
            recorder,
        }
    }
}

impl Harness {
    fn run(&self) -> tokio::task::JoinHandle<Result<(), kcache_informer::InformerError>> {
        let informer = self.informer.clone();
        tokio::spawn(async move { informer.run(std::future::pending()).await })
    }

    async fn synced(&self) {
        let r = tokio::time::timeout(WAIT, self.informer.wait_for_cache_sync()).await;
        assert_eq!(r, Ok(true), "informer did not sync");
    }

    async fn stop(
        &self,
        task: tokio::task::JoinHandle<Result<(), kcache_informer::InformerError>>,
    ) {
        self.informer.stop_handle().stop();
        let r = tokio::time::timeout(WAIT, task).await;
        assert!(matches!(r, Ok(Ok(Ok(())))), "informer did not stop: {r:?}");
    }

    fn cache(&self) -> BTreeMap<String, (u32, String)> {
        state(self.informer.indexer().list().iter().map(|o| &**o))
    }

    fn lists(&self) -> usize {
        self.lists.load(Ordering::SeqCst)
    }
}

fn state<'a>(objects: impl Iterator<Item = &'a Item>) -> BTreeMap<String, (u32, String)> {
    objects
        .map(|o| (o.name.clone(), (o.value, o.rv.clone())))
        .collect()
}

fn source_state(source: &MemorySource<Item>) -> BTreeMap<String, (u32, String)> {
    state(source.list_all().iter().map(|o| &**o))
}

/// Writes the source's current content as a snapshot at its current version (nothing writes
/// to the source meanwhile).
fn write_snapshot(source: &MemorySource<Item>, path: &std::path::Path, clock: &FakeClock) {
    let objects = source.list_all();
    SnapshotFile::new(path, PostcardCodec::<Item>::named(TYPE))
        .clock(Arc::new(clock.clone()))
        .write(&source.resource_version(), objects.iter().map(|o| &**o))
        .unwrap();
}

/// A source with a, b, c and d.
fn seeded(config: MemoryConfig) -> MemorySource<Item> {
    let source = MemorySource::with_config(config);
    for (i, name) in ["a", "b", "c", "d"].into_iter().enumerate() {
        source.create(item(name, i as u32 + 1)).unwrap();
    }
    source
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_restart_hears_the_missed_adds_updates_and_deletes_without_listing() {
    let dir = TempDir::new("missed");
    let source = seeded(MemoryConfig::new());

    // The first life: a cold start, a snapshot written by the running informer, a stop.
    let first = Setup {
        restore: false,
        ..Setup::new(&source, &dir)
    }
    .build();
    let task = first.run();
    first.synced().await;
    let snapshots = first.informer.snapshots(SnapshotFile::new(
        dir.file(),
        PostcardCodec::<Item>::named(TYPE),
    ));
    let written = snapshots.write_now().await.unwrap();
    assert_eq!(written.objects, 4);
    first.stop(task).await;
    assert_eq!(first.lists(), 1);
    let snapshot_rv = source.resource_version();

    // While it is down: an add, two updates (one of them twice), a delete.
    source.create(item("e", 5)).unwrap();
    source.update(item("a", 10)).unwrap();
    source.update(item("c", 30)).unwrap();
    source.update(item("c", 31)).unwrap();
    source.delete("default/b").unwrap();

    // The second life restores and watches from the snapshot's version.
    let second = Setup::new(&source, &dir).build();
    let task = second.run();
    second.synced().await;
    assert_eq!(second.cache(), source_state(&source));
    second.recorder.wait_for(9).await;
    assert_eq!(
        second.recorder.lines(),
        [
            "add a=1 (initial)",
            "add b=2 (initial)",
            "add c=3 (initial)",
            "add d=4 (initial)",
            "add e=5",
            "update a 1->10",
            "update c 3->30",
            "update c 30->31",
            "delete b",
        ]
    );
    assert_eq!(second.lists(), 0, "a warm restart lists nothing");
    assert_eq!(
        *second.watches.lock().unwrap(),
        [snapshot_rv.as_str().to_owned()]
    );
    assert_eq!(
        second.informer.restore_outcome(),
        RestoreOutcome::Restored {
            objects: 4,
            resource_version: snapshot_rv,
            target: source.resource_version(),
        }
    );
    assert_eq!(second.counters.loads(), 1);

    // And it goes on watching.
    let f = source.create(item("f", 6)).unwrap();
    second
        .informer
        .wait_for_resource_version(&ResourceVersion::new(&f.rv))
        .await
        .unwrap();
    assert_eq!(second.cache(), source_state(&source));
    second.stop(task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_informer_reports_synced_only_once_it_caught_up_with_the_source() {
    let dir = TempDir::new("catch-up");
    let source = seeded(MemoryConfig::new());
    write_snapshot(&source, &dir.file(), &FakeClock::new());
    let snapshot_rv = source.resource_version();
    source.update(item("a", 10)).unwrap();
    source.delete("default/d").unwrap();

    // The watch is held back: the snapshot is in the cache, the missed changes are not.
    let h = Setup {
        watch_open: false,
        ..Setup::new(&source, &dir)
    }
    .build();
    let task = h.run();
    h.informer
        .wait_for_resource_version(&snapshot_rv)
        .await
        .unwrap();
    h.recorder.wait_for(4).await;
    assert_eq!(h.cache().len(), 4);
    assert!(
        !h.informer.has_synced(),
        "synced with the snapshot's state while the source had moved on"
    );
    let waiting = {
        let informer = h.informer.clone();
        tokio::spawn(async move { informer.wait_for_cache_sync().await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished());

    // The watch opens: the missed changes arrive, then the informer is synced.
    h.gate.send_replace(true);
    assert!(tokio::time::timeout(WAIT, waiting).await.unwrap().unwrap());
    assert_eq!(h.cache(), source_state(&source));
    assert_eq!(h.lists(), 0);
    h.stop(task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_at_the_source_version_syncs_at_once() {
    let dir = TempDir::new("same");
    let source = seeded(MemoryConfig::new());
    write_snapshot(&source, &dir.file(), &FakeClock::new());
    // The watch never opens: the snapshot alone is the source's state.
    let h = Setup {
        watch_open: false,
        ..Setup::new(&source, &dir)
    }
    .build();
    let task = h.run();
    h.synced().await;
    assert_eq!(h.cache(), source_state(&source));
    assert_eq!(h.lists(), 0);
    h.stop(task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_version_relists_and_tells_the_vanished_objects_as_tombstones() {
    let dir = TempDir::new("expired");
    // A history of 2 changes: the 4 made while down push the snapshot's version out of it.
    let source = seeded(MemoryConfig::new().with_history_window(2));
    write_snapshot(&source, &dir.file(), &FakeClock::new());
    source.delete("default/b").unwrap();
    source.delete("default/c").unwrap();
    source.update(item("a", 10)).unwrap();
    source.create(item("e", 5)).unwrap();

    let h = Setup::new(&source, &dir).build();
    let task = h.run();
    h.synced().await;
    assert_eq!(h.cache(), source_state(&source));
    assert_eq!(h.lists(), 1, "the expired version is relisted once");
    h.recorder.wait_for(9).await;
    let lines = h.recorder.lines();
    assert_eq!(
        lines[..4],
        [
            "add a=1 (initial)",
            "add b=2 (initial)",
            "add c=3 (initial)",
            "add d=4 (initial)",
        ]
    );
    // The relist against the restored cache: deletions first, as tombstones with the last
    // state the snapshot held, then the listed objects in order.
    assert_eq!(
        lines[4..],
        [
            "delete b (tombstone)",
            "delete c (tombstone)",
            "update a 1->10",
            "update d 4->4",
            "add e=5",
        ]
    );
    let tombstones: Vec<u32> = h
        .recorder
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Deleted(d) => d.object().map(|o| o.value),
            _ => None,
        })
        .collect();
    assert_eq!(tombstones, [2, 3]);
    assert!(matches!(
        h.informer.restore_outcome(),
        RestoreOutcome::Restored { objects: 4, .. }
    ));
    h.stop(task).await;
}

/// Starts an informer over `source` with `setup`, expects a cold start for `reason` (a list,
/// the source's content as plain adds, the refusal counted), and stops it.
async fn expect_cold(setup: Setup<'_>, reason: RefusalReason) {
    let source = setup.source.clone();
    let h = setup.build();
    let task = h.run();
    h.synced().await;
    assert_eq!(h.informer.restore_outcome(), RestoreOutcome::Cold(reason));
    assert_eq!(h.counters.refusals(reason), 1, "{reason} counted");
    // A snapshot newer than the source was loaded (then not used); the others were refused.
    let loaded = u64::from(reason == RefusalReason::AheadOfSource);
    assert_eq!(h.counters.loads(), loaded);
    assert_eq!(h.lists(), 1, "a refused snapshot lists");
    assert_eq!(h.cache(), source_state(&source));
    h.stop(task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_snapshot_starts_cold() {
    let dir = TempDir::new("missing");
    let source = seeded(MemoryConfig::new());
    expect_cold(Setup::new(&source, &dir), RefusalReason::Missing).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_of_another_type_is_refused_and_the_informer_lists() {
    let dir = TempDir::new("type");
    let source = seeded(MemoryConfig::new());
    let objects = source.list_all();
    SnapshotFile::new(dir.file(), PostcardCodec::<Item>::named("Item/v0"))
        .write(&source.resource_version(), objects.iter().map(|o| &**o))
        .unwrap();
    expect_cold(Setup::new(&source, &dir), RefusalReason::WrongType).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_of_another_format_version_is_refused_and_the_informer_lists() {
    let dir = TempDir::new("format");
    let source = seeded(MemoryConfig::new());
    write_snapshot(&source, &dir.file(), &FakeClock::new());
    let mut bytes = std::fs::read(dir.file()).unwrap();
    let version = u16::from_le_bytes([bytes[8], bytes[9]]) + 1;
    bytes[8..10].copy_from_slice(&version.to_le_bytes());
    std::fs::write(dir.file(), bytes).unwrap();
    expect_cold(Setup::new(&source, &dir), RefusalReason::FormatVersion).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_with_a_bad_checksum_is_refused_and_the_informer_lists() {
    let dir = TempDir::new("checksum");
    let source = seeded(MemoryConfig::new());
    write_snapshot(&source, &dir.file(), &FakeClock::new());
    let mut bytes = std::fs::read(dir.file()).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(dir.file(), bytes).unwrap();
    expect_cold(Setup::new(&source, &dir), RefusalReason::Checksum).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_truncated_at_any_byte_is_refused_and_the_informer_lists() {
    let dir = TempDir::new("truncated");
    let source = seeded(MemoryConfig::new());
    write_snapshot(&source, &dir.file(), &FakeClock::new());
    let whole = std::fs::read(dir.file()).unwrap();
    assert!(whole.len() < 400, "a small snapshot: {} bytes", whole.len());
    for len in 0..whole.len() {
        std::fs::write(dir.file(), &whole[..len]).unwrap();
        expect_cold(Setup::new(&source, &dir), RefusalReason::Truncated).await;
    }
    // The whole file is accepted.
    std::fs::write(dir.file(), &whole).unwrap();
    let h = Setup::new(&source, &dir).build();
    let task = h.run();
    h.synced().await;
    assert_eq!(h.lists(), 0);
    h.stop(task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_older_than_the_max_age_is_refused_by_the_clock() {
    let dir = TempDir::new("age");
    let source = seeded(MemoryConfig::new());
    let clock = FakeClock::new();
    write_snapshot(&source, &dir.file(), &clock);
    let aged = |clock: &FakeClock| Setup {
        clock: clock.clone(),
        max_age: Some(Duration::from_secs(3600)),
        ..Setup::new(&source, &dir)
    };

    // Just inside the age: restored.
    clock.advance(Duration::from_secs(3599));
    let h = aged(&clock).build();
    let task = h.run();
    h.synced().await;
    assert!(matches!(
        h.informer.restore_outcome(),
        RestoreOutcome::Restored { .. }
    ));
    assert_eq!(h.lists(), 0);
    h.stop(task).await;

    // Past it: refused, listed.
    clock.advance(Duration::from_secs(2));
    expect_cold(aged(&clock), RefusalReason::TooOld).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_cannot_tell_its_version_takes_the_relist_path() {
    let dir = TempDir::new("no-version");
    let source = seeded(MemoryConfig::new());
    write_snapshot(&source, &dir.file(), &FakeClock::new());
    let setup = Setup {
        knows_version: false,
        ..Setup::new(&source, &dir)
    };
    expect_cold(setup, RefusalReason::NoSourceVersion).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_newer_than_the_source_is_not_used() {
    let dir = TempDir::new("ahead");
    let source = seeded(MemoryConfig::new());
    let objects = source.list_all();
    let ahead = ResourceVersion::from("1000");
    SnapshotFile::new(dir.file(), PostcardCodec::<Item>::named(TYPE))
        .write(&ahead, objects.iter().map(|o| &**o))
        .unwrap();
    expect_cold(Setup::new(&source, &dir), RefusalReason::AheadOfSource).await;
}
