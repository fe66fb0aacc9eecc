//! m2 and m2-changed: relist memory (defined in the crate's WORKLOADS.md). A cache holds the
//! 100,000 objects; then a relist delivers 100,000 freshly built copies, as a client decoding a
//! list allocates them: in m2 copies of the same objects (same resource versions), in m2-changed every object
//! changed (label `app-{(i + 7) % 50}`, resourceVersion `{200000 + i}`), so an atomic relist
//! holds the old and the new state of every object until its swap.
//! Reported: the peak of live heap bytes during the relist above the steady state before it, per
//! object (`relist_peak_bytes_per_object`), and the live bytes the relist left behind, per object
//! (`after_bytes_per_object`: about 0, since the new state replaces the old one).
//!
//! - `kcache`: an informer (no handler, no index) over a [`Replay`] source that builds every
//!   listed page afresh, page size 500. After the sync, its watch fails with an expired resource
//!   version and the reflector relists; the relist is over when the cache has applied the second
//!   list's version. In m2 the cache must keep its own `Arc` of every object (the relisted copy,
//!   with the same resource version, is dropped); in m2-changed it must hold the new copy.
//! - `kube-runtime`: its store fed by `Writer::apply_watcher_event`: `Init`, 100,000 `InitApply`,
//!   `InitDone` to fill it, then the relist the same way, each page of 500 objects built just before
//!   its objects are applied and each event dropped once applied (as its watcher drains a decoded
//!   page).
//!
//! Everything runs on the measuring thread (the allocation counter counts per thread): the
//! informer on a current-thread tokio runtime driven by this thread.

use super::{check, unknown_impl, Metrics, Workload};
use crate::objects::{config_map, initial, key, measure_bytes_info, ConfigMapMeta, OBJECTS};
use crate::replay::{ListSource, Replay, WatchScript};
use futures::future::{select, Either};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_core::ResourceVersion;
use kcache_informer::{InformerOptions, SharedIndexInformer};
use kube_runtime::reflector;
use kube_runtime::watcher::Event;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

const PAGE: usize = 500;

pub(super) const M2: Workload = Workload {
    name: "m2",
    headline: "relist_peak_bytes_per_object",
    impls: &["kcache", "kube-runtime"],
    about: "peak heap bytes per object above steady state while relisting 100,000",
    run: run_m2,
};

pub(super) const M2_CHANGED: Workload = Workload {
    name: "m2-changed",
    headline: "relist_peak_bytes_per_object",
    impls: &["kcache", "kube-runtime"],
    about: "as m2, but the relist changes every object",
    run: run_m2_changed,
};

fn run_m2(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => kcache(false),
        "kube-runtime" => kube(false),
        _ => Err(unknown_impl("m2", name)),
    }
}

fn run_m2_changed(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => kcache(true),
        "kube-runtime" => kube(true),
        _ => Err(unknown_impl("m2-changed", name)),
    }
}

/// Object `i` as m2-changed's relist has it.
fn changed(i: usize) -> ConfigMap {
    config_map(i, i + 7, 200_000 + i as u64)
}

/// The relisted object `i`: the same object again, or its changed form.
fn relisted(i: usize, changes: bool) -> ConfigMap {
    if changes {
        changed(i)
    } else {
        initial(i)
    }
}

/// The version of the relist.
fn relist_rv(changes: bool) -> ResourceVersion {
    ResourceVersion::from(if changes { "300000" } else { "100001" })
}

/// Checks what object 0 became: in m2 the cache's own `Arc`, kept (kcache) or an equal copy
/// (kube-runtime, `keeps_arc` false); in m2-changed the changed object.
fn check_probe(
    before: &Arc<ConfigMap>,
    after: &Arc<ConfigMap>,
    changes: bool,
    keeps_arc: bool,
) -> Result<(), String> {
    let name = if changes { "m2-changed" } else { "m2" };
    if changes {
        check(*after == Arc::new(changed(0)), || {
            format!("{name}: object 0 is not the changed copy")
        })
    } else if keeps_arc {
        check(Arc::ptr_eq(before, after), || {
            format!("{name}: the relist replaced object 0's cached Arc with an equal copy")
        })
    } else {
        check(!Arc::ptr_eq(before, after) && **before == **after, || {
            format!("{name}: object 0 is not the relisted copy")
        })
    }
}

fn metrics(peak: u64, after: i64, object_bytes: f64) -> Metrics {
    vec![
        ("relist_peak_bytes_per_object", peak as f64 / OBJECTS as f64),
        ("after_bytes_per_object", after as f64 / OBJECTS as f64),
        ("object_bytes", object_bytes),
    ]
}

/// The bytes one listed object takes (its `Arc` allocation and its strings).
fn object_bytes() -> f64 {
    let (objs, bytes) = measure_bytes_info(|| (0..1000).map(|i| Arc::new(initial(i))).collect());
    drop::<Vec<Arc<ConfigMap>>>(objs);
    bytes.bytes_current as f64 / 1000.0
}

fn kcache(changes: bool) -> Result<Metrics, String> {
    // The first list has the initial objects, the relist (once `relisting`) the relisted ones.
    let relisting = Arc::new(AtomicBool::new(false));
    let phase = relisting.clone();
    let replay = Replay::with_list_versions(
        ListSource::Fresh {
            len: OBJECTS,
            make: Box::new(move |i| {
                if phase.load(Ordering::Relaxed) {
                    relisted(i, changes)
                } else {
                    initial(i)
                }
            }),
        },
        vec![WatchScript::Expired],
        vec![ResourceVersion::from("100000"), relist_rv(changes)],
    );
    let informer = SharedIndexInformer::<_, _, ConfigMapMeta>::with_accessor(
        replay.clone(),
        InformerOptions::new().page_size(PAGE as u32),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot build a tokio runtime: {e}"))?;
    let (stop, stopped) = oneshot::channel::<()>();
    let mut run = Box::pin(informer.run(async {
        let _ = stopped.await;
    }));
    // Steady state: synced, the watch open (and held back by the replay's gate).
    let steady = Box::pin(async {
        while !(informer.has_synced() && replay.watches() == 1) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    if let Either::Left((ended, _)) = rt.block_on(select(run.as_mut(), steady)) {
        return Err(format!(
            "m2: the informer stopped before syncing: {ended:?}"
        ));
    }
    let probe = key(&initial(0));
    let before = informer
        .indexer()
        .get_by_key(&probe)
        .ok_or("m2: object 0 is not cached")?;

    let rv = relist_rv(changes);
    relisting.store(true, Ordering::Relaxed);
    let (relisted, info) = measure_bytes_info(|| {
        replay.open();
        let relisted = Box::pin(informer.wait_for_resource_version(&rv));
        let result = match rt.block_on(select(run.as_mut(), relisted)) {
            Either::Left((ended, _)) => Err(format!(
                "m2: the informer stopped before relisting: {ended:?}"
            )),
            Either::Right((waited, _)) => waited.map_err(|e| e.to_string()),
        };
        result
    });
    relisted?;
    let cache = informer.indexer();
    check(cache.len() == OBJECTS && replay.lists() == 2, || {
        format!(
            "m2: {} objects cached after {} lists",
            cache.len(),
            replay.lists()
        )
    })?;
    let after = cache.get_by_key(&probe).ok_or("m2: object 0 is gone")?;
    check_probe(&before, &after, changes, true)?;
    drop((before, after));
    let _ = stop.send(());
    rt.block_on(run).map_err(|e| e.to_string())?;
    Ok(metrics(info.bytes_max, info.bytes_current, object_bytes()))
}

fn kube(changes: bool) -> Result<Metrics, String> {
    let (reader, mut writer) = reflector::store::<ConfigMap>();
    let list = |writer: &mut reflector::store::Writer<ConfigMap>,
                make: &dyn Fn(usize) -> ConfigMap| {
        writer.apply_watcher_event(&Event::Init);
        for page in 0..OBJECTS.div_ceil(PAGE) {
            let objs: Vec<ConfigMap> = (page * PAGE..((page + 1) * PAGE).min(OBJECTS))
                .map(make)
                .collect();
            for obj in objs {
                writer.apply_watcher_event(&Event::InitApply(obj));
            }
        }
        writer.apply_watcher_event(&Event::InitDone);
    };
    list(&mut writer, &initial);
    check(reader.len() == OBJECTS, || {
        format!("m2: kube-runtime's store holds {} objects", reader.len())
    })?;
    let probe = reflector::ObjectRef::new("name-0").within("ns-0");
    let before = reader.get(&probe).ok_or("m2: object 0 is not cached")?;
    let ((), info) = measure_bytes_info(|| list(&mut writer, &|i| relisted(i, changes)));
    check(reader.len() == OBJECTS, || {
        format!("m2: kube-runtime's store holds {} objects", reader.len())
    })?;
    let after = reader.get(&probe).ok_or("m2: object 0 is gone")?;
    check_probe(&before, &after, changes, false)?;
    Ok(metrics(info.bytes_max, info.bytes_current, object_bytes()))
}
