//! e1-memory: e1's older, end-to-end form. A kcache informer follows the in-memory source
//! (kcache-memory) holding the 100,000 ConfigMaps; after the sync, e1's 1,000,000 updates are
//! written to the source while the informer follows, and the clock runs from the first write until
//! both counting handlers saw the last update: the source's writes are in the wall.
//! `memory-source` is this row's floor: the same writes with no watcher and no informer.

use super::e1::{start, update, wait_until, Counter, HANDLERS, UPDATES};
use super::{check, nanos, now, unknown_impl, Metrics, Workload};
use crate::objects::{self, initial, ConfigMapMeta, OBJECTS};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{InformerOptions, SharedIndexInformer};
use kcache_memory::{MemoryConfig, MemorySource};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

pub(super) const E1_MEMORY: Workload = Workload {
    name: "e1-memory",
    headline: "events_per_s",
    impls: &["kcache", "memory-source"],
    about: "e1 through kcache-memory, the source's writes in the wall",
    run,
};

pub(super) type Source = MemorySource<ConfigMap, ConfigMapMeta>;
type Informer = SharedIndexInformer<ConfigMap, Source, ConfigMapMeta>;

fn run(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => e1_kcache(),
        "memory-source" => e1_source_alone(),
        _ => Err(unknown_impl("e1-memory", name)),
    }
}

/// A memory source holding the 100,000 objects. Its watcher buffer holds every update of e1, so
/// the informer's watch is never evicted however far the writer runs ahead.
pub(super) fn filled_source() -> Result<Source, String> {
    let source = Source::with_config(MemoryConfig::new().with_watcher_buffer(2 * UPDATES));
    for i in 0..OBJECTS {
        source.create(initial(i)).map_err(|e| e.to_string())?;
    }
    Ok(source)
}

fn e1_kcache() -> Result<Metrics, String> {
    let source = filled_source()?;
    let updates: Vec<ConfigMap> = (0..UPDATES).map(update).collect();
    let informer = Arc::new(Informer::with_accessor(
        source.clone(),
        InformerOptions::new(),
    ));
    let counters: Vec<Arc<Counter>> = (0..HANDLERS).map(|_| Arc::default()).collect();
    for c in &counters {
        informer
            .add_event_handler(c.clone())
            .map_err(|e| e.to_string())?;
    }

    let start_at = now();
    let running = start(informer.clone())?;
    check(
        wait_until(Duration::from_secs(120), || informer.has_synced()),
        || "e1-memory: informer not synced after 120 s".into(),
    )?;
    let sync = nanos(start_at, now());
    // The updates start once the informer's watch is open (as e1 waits for its replay's
    // watch): `has_synced` may turn true before the reflector opened it (as in client-go), and
    // a writer that ran more than the source's history window ahead would make it expire.
    check(
        wait_until(Duration::from_secs(60), || {
            source.watcher_count() == 1
                && counters
                    .iter()
                    .all(|c| c.adds.load(Ordering::Relaxed) == OBJECTS as u64)
        }),
        || "e1-memory: handlers did not see the 100,000 adds, or no watch opened".into(),
    )?;

    let start_at = now();
    for obj in updates {
        source.update(obj).map_err(|e| e.to_string())?;
    }
    let written = nanos(start_at, now());
    let all_seen = wait_until(Duration::from_secs(240), || {
        counters.iter().all(|c| c.saw(UPDATES as u64))
    });
    let wall = nanos(start_at, now());
    let seen: Vec<u64> = counters
        .iter()
        .map(|c| c.updates.load(Ordering::Relaxed))
        .collect();
    check(all_seen, || {
        format!("e1-memory: handlers saw {seen:?} updates, expected {UPDATES} each")
    })?;
    check(seen.iter().all(|&n| n == UPDATES as u64), || {
        format!("e1-memory: handlers saw {seen:?} updates, expected {UPDATES} each")
    })?;
    check(running.informer.indexer().len() == OBJECTS, || {
        "e1-memory: cache size changed".into()
    })?;
    running.finish()?;
    Ok(vec![
        ("events_per_s", UPDATES as f64 / wall * 1e9),
        ("ns_per_event", wall / UPDATES as f64),
        ("sync_ms", sync / 1e6),
        ("update_wall_ms", wall / 1e6),
        ("source_write_ms", written / 1e6),
    ])
}

/// The floor of kcache's side: e1's writes into the memory source, with nobody watching.
fn e1_source_alone() -> Result<Metrics, String> {
    let source = filled_source()?;
    let updates: Vec<ConfigMap> = (0..UPDATES).map(update).collect();
    let start_at = now();
    for obj in updates {
        source.update(obj).map_err(|e| e.to_string())?;
    }
    let wall = nanos(start_at, now());
    check(source.len() == OBJECTS, || {
        format!("e1-memory: the source holds {} objects", source.len())
    })?;
    let last = objects::key(&update(UPDATES - 1));
    let stored = source.get(&last).map(|o| o.metadata.labels.clone());
    check(stored == Some(update(UPDATES - 1).metadata.labels), || {
        "e1-memory: the source does not hold the last update".into()
    })?;
    Ok(vec![
        ("events_per_s", UPDATES as f64 / wall * 1e9),
        ("ns_per_event", wall / UPDATES as f64),
        ("source_write_ms", wall / 1e6),
    ])
}
