//! Peak memory of a 100,000-object list into an empty store, measured as the growth of the
//! process's peak RSS (`VmHWM`, reset through `/proc/self/clear_refs`; the workspace forbids the
//! `unsafe` a counting allocator needs). The objects travel as `Arc`s shared with the source: the
//! reflector adds its page buffer and one `Vec` of handles for `replace`, never a copy of the
//! objects. Skipped (passes) where `/proc` is unavailable.

mod common;

use common::{eventually, MapStore, Pod};
use kcache_core::{FakeClock, ResourceVersion};
use kcache_memory::{MemoryConfig, MemorySource};
use kcache_reflector::Reflector;
use std::sync::Arc;

/// A `/proc/self/status` field in KiB (Linux); `None` elsewhere.
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Resets the peak RSS (`VmHWM`) to the current RSS (Linux ≥ 4.0).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

const OBJECTS: usize = 100_000;

#[tokio::test(flavor = "current_thread")]
async fn a_100k_object_list_never_copies_the_objects() {
    let before = status_kib("VmRSS").unwrap_or(0);
    let clock = FakeClock::new();
    let source: MemorySource<Pod> =
        MemorySource::with_config(MemoryConfig::new().with_clock(clock.clone()));
    for i in 0..OBJECTS {
        let pod = Pod {
            ns: "ns".into(),
            name: format!("pod-{i:06}"),
            rv: ResourceVersion::default(),
            value: i as u64,
        };
        source.create(pod).expect("create");
    }
    let source_kib = status_kib("VmRSS").unwrap_or(0).saturating_sub(before);
    let populated = status_kib("VmRSS");
    let store = MapStore::default();
    if !reset_peak() {
        eprintln!("no /proc/self/clear_refs: skipped");
        return;
    }
    let (Some(base), Some(_)) = (status_kib("VmRSS"), populated) else {
        eprintln!("no /proc/self/status: skipped");
        return;
    };
    let r = Reflector::builder(source.clone(), store.clone())
        .clock(Arc::new(clock))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("listed", || !handle.last_sync_resource_version().is_empty()).await;
    let peak = status_kib("VmHWM").unwrap_or(base).saturating_sub(base);
    let settled = status_kib("VmRSS").unwrap_or(base).saturating_sub(base);
    handle.stop();
    task.await.expect("reflector task");
    eprintln!(
        "list of {OBJECTS} objects into an empty store: peak RSS +{:.1} MiB, +{:.1} MiB held after \
         (the store's map); the source itself holds {:.1} MiB",
        peak as f64 / 1024.0,
        settled as f64 / 1024.0,
        source_kib as f64 / 1024.0,
    );
    assert_eq!(store.snapshot().len(), OBJECTS);
    // The objects are never copied: the peak stays below what the source needs for them.
    assert!(
        peak < source_kib,
        "peak +{peak} KiB vs source {source_kib} KiB"
    );
}
