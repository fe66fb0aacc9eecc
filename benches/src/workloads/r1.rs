//! r1: warm restart (defined in the runner's `--help`). An informer of 100,000 ConfigMaps was
//! down while the source changed 1,000 of them and deleted 100; it restarts:
//! - `kcache`: warm, from a snapshot of its cache at version 100000 (written beforehand by a
//!   separate process, so this run's peak memory is the restart's own): it loads the snapshot,
//!   watches from its version, receives the 1,100 missed changes and a bookmark at the source's
//!   version, and reports synced;
//! - `cold-list`: the same informer without a snapshot: it lists the 99,900 objects (pages of
//!   500, each encoded to JSON and decoded again, standing in for the server and the client)
//!   and reports synced.
//!
//! Reported: `time_to_synced_ms` (from `run` to `has_synced`), `objects_transferred` (objects the
//! source handed out, in list pages and watch events), `synced_peak_rss_mib` (the process's peak
//! resident set when it synced), and, after the sync, a snapshot of the cache written by
//! [`CacheSnapshots::write_now`](kcache_informer::snapshot::CacheSnapshots::write_now):
//! `snapshot_write_ms` and `snapshot_mib`. Each run checks the cache against the source's state.
//!
//! The source is [`R1Source`]: everything it hands out (list pages, watch events) is encoded to
//! JSON and decoded again in the process (no network, no API server); the warm path decodes the
//! snapshot with [`ConfigMapCodec`], a compact binary codec.

use super::r1_source::{
    changed, ConfigMapCodec, Meta, R1Source, CHANGED, CURRENT_OBJECTS, SNAPSHOT_RV,
};
use super::{check, nanos, now, unknown_impl, Metrics, Workload};
use crate::objects::{initial, key, OBJECTS};
use crate::rss::peak_rss_mib;
use futures::future::{select, Either};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_core::ResourceVersion;
use kcache_informer::snapshot::{RestoreOutcome, SnapshotFile};
use kcache_informer::{InformerOptions, SharedIndexInformer};
use std::path::{Path, PathBuf};
use std::process::Command;

pub(super) const R1: Workload = Workload {
    name: "r1",
    headline: "time_to_synced_ms",
    impls: &["kcache", "cold-list"],
    about: "restart of an informer of 100,000 ConfigMaps after 1,000 changes and 100 deletions: warm from a snapshot vs a cold list",
    run: run_r1,
};

/// The flag of the runner that writes r1's snapshot in a process of its own.
pub const WRITE_SNAPSHOT_FLAG: &str = "--r1-write-snapshot";

fn run_r1(_: &str, name: &str) -> Result<Metrics, String> {
    let dir = std::env::temp_dir().join(format!("kcache-r1-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("r1: cannot create {dir:?}: {e}"))?;
    let result = match name {
        "kcache" => write_in_another_process(&dir.join("restore.snap"))
            .and_then(|path| restart(Some(&path), &dir)),
        "cold-list" => restart(None, &dir),
        _ => Err(unknown_impl("r1", name)),
    };
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Runs this binary with [`WRITE_SNAPSHOT_FLAG`] to write the snapshot at `path`.
fn write_in_another_process(path: &Path) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("r1: no current exe: {e}"))?;
    let status = Command::new(exe)
        .arg(WRITE_SNAPSHOT_FLAG)
        .arg(path)
        .status()
        .map_err(|e| format!("r1: cannot run the snapshot writer: {e}"))?;
    check(status.success(), || {
        format!("r1: the snapshot writer failed: {status}")
    })?;
    Ok(path.to_owned())
}

/// Writes the snapshot the warm restart starts from: the 100,000 objects as first written, at
/// version 100000 (the informer's cache just before it went down). The runner calls this for
/// [`WRITE_SNAPSHOT_FLAG`].
///
/// # Errors
/// A message when the snapshot cannot be written.
pub fn write_snapshot(path: &Path) -> Result<(), String> {
    let objects: Vec<ConfigMap> = (0..OBJECTS).map(initial).collect();
    SnapshotFile::new(path, ConfigMapCodec)
        .write(
            &ResourceVersion::from(SNAPSHOT_RV.to_string()),
            objects.iter(),
        )
        .map(drop)
        .map_err(|e| format!("r1: cannot write the snapshot: {e}"))
}

/// One restart: warm from `snapshot`, or cold without.
fn restart(snapshot: Option<&Path>, dir: &Path) -> Result<Metrics, String> {
    let source = R1Source::default();
    let mut options = InformerOptions::new().name("r1");
    if let Some(path) = snapshot {
        options = options.restore_from(SnapshotFile::new(path, ConfigMapCodec));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("r1: cannot build a tokio runtime: {e}"))?;

    let start = now();
    let informer = SharedIndexInformer::<_, _, Meta>::with_accessor(source.clone(), options);
    let mut run = Box::pin(informer.run(std::future::pending()));
    let synced = Box::pin(informer.wait_for_cache_sync());
    match rt.block_on(select(run.as_mut(), synced)) {
        Either::Left((ended, _)) => {
            return Err(format!(
                "r1: the informer stopped before syncing: {ended:?}"
            ))
        }
        Either::Right((false, _)) => return Err("r1: the informer did not sync".into()),
        Either::Right((true, _)) => {}
    }
    let took = nanos(start, now());
    let peak = peak_rss_mib()?;
    let transferred = source.transferred();

    // The cache is the source's state after the downtime.
    let cache = informer.indexer();
    check(cache.len() == CURRENT_OBJECTS, || {
        format!(
            "r1: {} objects cached, {CURRENT_OBJECTS} expected",
            cache.len()
        )
    })?;
    let probe = cache.get_by_key(&key(&changed(0)));
    check(probe.as_deref() == Some(&changed(0)), || {
        "r1: object 0 is not its changed state".into()
    })?;
    check(cache.get_by_key(&key(&initial(CHANGED))).is_none(), || {
        "r1: a deleted object is still cached".into()
    })?;
    let restored = matches!(informer.restore_outcome(), RestoreOutcome::Restored { .. });
    let lists = source.lists();
    check(
        restored == snapshot.is_some() && lists == u64::from(!restored),
        || {
            format!(
                "r1: restored {restored}, {lists} lists ({:?})",
                informer.restore_outcome()
            )
        },
    )?;

    // A snapshot of the synced cache, written by the running informer.
    let snapshots = informer.snapshots(SnapshotFile::new(dir.join("after.snap"), ConfigMapCodec));
    let written = Box::pin(snapshots.write_now());
    let stats = match rt.block_on(select(run.as_mut(), written)) {
        Either::Left((ended, _)) => {
            return Err(format!("r1: the informer stopped while writing: {ended:?}"))
        }
        Either::Right((written, _)) => written.map_err(|e| format!("r1: snapshot: {e}"))?,
    };
    check(stats.objects == CURRENT_OBJECTS as u64, || {
        format!("r1: the snapshot holds {} objects", stats.objects)
    })?;
    informer.stop_handle().stop();
    rt.block_on(run).map_err(|e| e.to_string())?;
    Ok(vec![
        ("time_to_synced_ms", took / 1e6),
        ("objects_transferred", transferred as f64),
        ("synced_peak_rss_mib", peak),
        ("snapshot_write_ms", stats.took.as_secs_f64() * 1e3),
        ("snapshot_mib", stats.bytes as f64 / (1024.0 * 1024.0)),
    ])
}
