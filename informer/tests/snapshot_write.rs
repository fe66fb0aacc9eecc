//! Snapshots written from a running informer (feature `snapshot`): consistent with their
//! resource version while the informer keeps ingesting, written every period and on stop.
#![cfg(feature = "snapshot-serde")]

use kcache_core::{FakeClock, Object, ResourceVersion};
use kcache_informer::snapshot::{PostcardCodec, SnapshotFile, SnapshotMetrics};
use kcache_informer::{InformerOptions, SharedIndexInformer};
use kcache_memory::{MemoryConfig, MemorySource, SetResourceVersion};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

const WAIT: Duration = Duration::from_secs(20);

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

struct TempDir(std::path::PathBuf);
impl TempDir {
    fn new(tag: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("kcache-informer-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Counts writes on a watch channel, so a test can wait for the next one.
struct Writes(watch::Sender<u64>);
impl SnapshotMetrics for Writes {
    fn written(&self, _: u64, _: u64, _: Duration) {
        self.0.send_modify(|n| *n += 1);
    }
}

type State = BTreeMap<String, (u32, String)>;
/// Every write: its resource version, key and value (`None`: deleted).
type Log = Vec<(u64, String, Option<u32>)>;

fn state_of<'a>(objects: impl Iterator<Item = &'a Item>) -> State {
    objects
        .map(|o| (format!("default/{}", o.name), (o.value, o.rv.clone())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_taken_while_the_informer_ingests_is_the_source_exactly_at_its_version() {
    let dir = TempDir::new("consistent");
    let source =
        MemorySource::<Item>::with_config(MemoryConfig::new().with_history_window(100_000));
    let log: Arc<Mutex<Log>> = Arc::default();
    let record = |log: &Mutex<Vec<_>>, stored: &Item, value| {
        let rv = stored.rv.parse::<u64>().unwrap();
        log.lock()
            .unwrap()
            .push((rv, format!("default/{}", stored.name), value));
    };
    for i in 0..20 {
        let stored = source.create(item(&format!("k{i}"), 0)).unwrap();
        record(&log, &stored, Some(0));
    }
    let informer = SharedIndexInformer::new(source.clone(), Duration::ZERO);
    let snapshots = Arc::new(informer.snapshots(SnapshotFile::new(
        dir.0.join("items.snap"),
        PostcardCodec::named("Item/v1"),
    )));
    assert!(
        snapshots.capture().is_none(),
        "nothing before the informer synced"
    );

    // The writer writes bursts of 1-16 changes, each started by the capturing thread, which
    // then captures again and again while the burst is written and ingested (the informer runs
    // on the runtime's threads, the capturer on its own).
    let (go, bursts) = std::sync::mpsc::sync_channel::<()>(1);
    let writer = {
        let (source, log) = (source.clone(), log.clone());
        std::thread::spawn(move || {
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            for n in 1..=3000u32 {
                if n % (1 + (x % 16) as u32) == 0 && bursts.recv().is_err() {
                    return;
                }
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = format!("k{}", x % 40);
                let full = format!("default/{key}");
                let (stored, value) = match source.get(&full) {
                    None => (source.create(item(&key, n)).unwrap(), Some(n)),
                    Some(_) if x % 10 < 3 => (source.delete(&full).unwrap(), None),
                    Some(_) => (source.update(item(&key, n)).unwrap(), Some(n)),
                };
                record(&log, &stored, value);
            }
        })
    };

    let stop = informer.stop_handle();
    let run = informer.run(std::future::pending());
    let work = async {
        assert!(informer.wait_for_cache_sync().await);
        let capturer = {
            let snapshots = snapshots.clone();
            std::thread::spawn(move || {
                let (mut captures, mut mid_change) = (Vec::new(), 0u64);
                while !writer.is_finished() {
                    let _ = go.try_send(());
                    for _ in 0..64 {
                        match snapshots.capture() {
                            Some(c) => captures.push((
                                c.resource_version.as_str().parse::<u64>().unwrap(),
                                state_of(c.objects.iter().map(|o| &**o)),
                            )),
                            None => mid_change += 1,
                        }
                    }
                }
                writer.join().unwrap();
                (captures, mid_change)
            })
        };
        // Meanwhile, snapshots through the file, from this task.
        let mut files = Vec::new();
        while !capturer.is_finished() {
            tokio::time::timeout(WAIT, snapshots.write_now())
                .await
                .unwrap()
                .unwrap();
            let loaded = snapshots.file().load().unwrap();
            let rv = loaded
                .header
                .resource_version
                .as_str()
                .parse::<u64>()
                .unwrap();
            files.push((rv, state_of(loaded.objects.iter())));
            tokio::task::yield_now().await;
        }
        let (captures, mid_change) = capturer.join().unwrap();
        stop.stop();
        (captures, files, mid_change)
    };
    let (ran, (mut captures, files, mid_change)) = tokio::join!(run, work);
    ran.unwrap();

    let n_files = files.len();
    captures.extend(files);
    captures.sort_by_key(|(rv, _)| *rv);
    let log = log.lock().unwrap();
    let (mut state, mut next, mut distinct) = (State::new(), 0, 0);
    for (i, (rv, captured)) in captures.iter().enumerate() {
        while next < log.len() && log[next].0 <= *rv {
            let (at, key, value) = &log[next];
            match value {
                Some(v) => state.insert(key.clone(), (*v, at.to_string())),
                None => state.remove(key),
            };
            next += 1;
        }
        assert_eq!(
            captured, &state,
            "the capture at {rv} is not the source's state then"
        );
        if i == 0 || captures[i - 1].0 != *rv {
            distinct += 1;
        }
    }
    eprintln!(
        "{} captures ({n_files} through the file) at {distinct} distinct versions, all exact; \
         {mid_change} attempts found the cache mid-change",
        captures.len(),
    );
    assert!(
        n_files >= 5 && distinct >= 100 && mid_change > 0,
        "too few captures during the writes to prove anything"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_are_written_every_period_when_the_version_moved_and_on_stop() {
    let dir = TempDir::new("periodic");
    let source = MemorySource::<Item>::new();
    source.create(item("a", 1)).unwrap();
    let clock = Arc::new(FakeClock::new());
    let informer = SharedIndexInformer::with_options(
        source.clone(),
        InformerOptions::new().clock(clock.clone()),
    );
    let (writes_tx, mut writes) = watch::channel(0u64);
    let file = SnapshotFile::new(
        dir.0.join("items.snap"),
        PostcardCodec::<Item>::named("Item/v1"),
    )
    .metrics(Arc::new(Writes(writes_tx)));
    let snapshots = informer.snapshots(file);
    let period = Duration::from_secs(60);

    let stop = informer.stop_handle();
    let run = async {
        let (ran, ()) = tokio::join!(informer.run(std::future::pending()), snapshots.run(period));
        ran
    };
    let work = async {
        assert!(informer.wait_for_cache_sync().await);
        // Ticks until a write lands (the writer may not be sleeping on its tick yet).
        let tick_until_written = async |writes: &mut watch::Receiver<u64>, count: u64| {
            while *writes.borrow_and_update() < count {
                clock.advance(period);
                let _ = tokio::time::timeout(Duration::from_millis(50), writes.changed()).await;
            }
        };
        tokio::time::timeout(WAIT, tick_until_written(&mut writes, 1))
            .await
            .unwrap();
        let first = snapshots.file().load().unwrap();
        assert_eq!(first.header.resource_version, source.resource_version());
        assert_eq!(first.objects.len(), 1);

        // Nothing changed: more periods write nothing.
        for _ in 0..3 {
            clock.advance(period);
            tokio::task::yield_now().await;
        }
        let b = source.create(item("b", 2)).unwrap();
        informer
            .wait_for_resource_version(&ResourceVersion::new(&b.rv))
            .await
            .unwrap();
        assert_eq!(*writes.borrow(), 1, "no write without a period");
        tokio::time::timeout(WAIT, tick_until_written(&mut writes, 2))
            .await
            .unwrap();
        assert_eq!(
            snapshots
                .file()
                .load()
                .unwrap()
                .header
                .resource_version
                .as_str(),
            b.rv
        );

        // A change, then a stop: the last snapshot has it.
        let c = source.update(item("a", 3)).unwrap();
        informer
            .wait_for_resource_version(&ResourceVersion::new(&c.rv))
            .await
            .unwrap();
        stop.stop();
    };
    let (ran, ()) = tokio::join!(run, work);
    ran.unwrap();
    assert_eq!(*writes.borrow(), 3);
    let last = snapshots.file().load().unwrap();
    assert_eq!(last.header.resource_version, source.resource_version());
    let mut objects = last.objects;
    objects.sort_by(|x, y| x.name.cmp(&y.name));
    assert_eq!(
        objects
            .iter()
            .map(|o| (o.name.as_str(), o.value))
            .collect::<Vec<_>>(),
        [("a", 3), ("b", 2)]
    );
}
