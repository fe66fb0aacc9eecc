//! m1: bytes per cached object beyond the object, after sync: the running informer (no handler,
//! no index: cache, FIFO, reflector and watch; `cache_bytes_per_object` is what remains once it
//! stops, the cache alone), kube-runtime's store (`Init`, `InitApply`s, `InitDone` applied by its
//! writer), and a plain `RwLock<HashMap<String, Arc<_>>>` (no index). Allocations are counted on
//! the thread that builds each cache.

use super::e1_memory::{filled_source, Source};
use super::{check, unknown_impl, Metrics, Workload};
use crate::naive::NaiveStore;
use crate::objects::{self, build_counted, initial, measure_bytes, ConfigMapMeta, OBJECTS};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{InformerOptions, SharedIndexInformer};
use kube_runtime::reflector;
use kube_runtime::watcher::Event;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

pub(super) const M1: Workload = Workload {
    name: "m1",
    headline: "bytes_per_object",
    impls: &["kcache", "kube-runtime", "rwlock-hashmap"],
    about: "bytes per cached object beyond the object after syncing 100,000 ConfigMaps",
    run: run_m1,
};

type Informer = SharedIndexInformer<ConfigMap, Source, ConfigMapMeta>;

fn run_m1(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => m1_kcache(),
        "kube-runtime" => m1_kube(),
        "rwlock-hashmap" => m1_naive(),
        _ => Err(unknown_impl("m1", name)),
    }
}

fn m1_kcache() -> Result<Metrics, String> {
    let source = filled_source()?;
    let informer = Informer::with_accessor(source.clone(), InformerOptions::new());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot build a tokio runtime: {e}"))?;
    // The informer runs on this thread (allocations are counted per thread). Once it has synced,
    // `block_on` returns with `run` still alive (FIFO, reflector, watch and cache): the running
    // informer's bytes. Stopping it then drops all but the cache: the cache's own bytes.
    let (stop, stopped) = oneshot::channel::<()>();
    let (started, running_bytes) = measure_bytes(|| {
        let mut run = Box::pin(informer.run(async {
            let _ = stopped.await;
        }));
        let synced = Box::pin(async {
            while !informer.has_synced() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        match rt.block_on(futures::future::select(run.as_mut(), synced)) {
            futures::future::Either::Left((ended, _)) => Err(format!(
                "m1: the informer stopped before syncing: {ended:?}"
            )),
            futures::future::Either::Right(((), _)) => Ok(run),
        }
    });
    let run = started?;
    let _ = stop.send(());
    let (ran, stop_bytes) = measure_bytes(|| rt.block_on(run));
    ran.map_err(|e| e.to_string())?;
    let cache = informer.indexer();
    check(cache.len() == OBJECTS, || {
        format!("m1: cache holds {} objects", cache.len())
    })?;
    // The cache shares the source's objects (both hold the same Arc) or holds copies.
    let shared = (0..OBJECTS).step_by(997).all(|i| {
        let key = objects::key(&initial(i));
        matches!((source.get(&key), cache.get_by_key(&key)), (Some(a), Some(b)) if Arc::ptr_eq(&a, &b))
    });
    let (_, object_bytes) = build_counted(1_000, initial);
    let copies = if shared { 0.0 } else { object_bytes };
    Ok(vec![
        (
            "bytes_per_object",
            running_bytes as f64 / OBJECTS as f64 - copies,
        ),
        (
            "cache_bytes_per_object",
            (running_bytes + stop_bytes) as f64 / OBJECTS as f64 - copies,
        ),
        ("object_bytes", object_bytes),
        ("objects_shared_with_source", f64::from(u8::from(shared))),
    ])
}

fn m1_kube() -> Result<Metrics, String> {
    let (_, object_bytes) = build_counted(OBJECTS, initial);
    let mut events: Vec<Event<ConfigMap>> = Vec::with_capacity(OBJECTS + 2);
    events.push(Event::Init);
    events.extend((0..OBJECTS).map(|i| Event::InitApply(initial(i))));
    events.push(Event::InitDone);
    let (reader, mut writer) = reflector::store::<ConfigMap>();
    let ((), bytes) = measure_bytes(|| {
        for e in &events {
            writer.apply_watcher_event(e);
        }
    });
    check(reader.len() == OBJECTS, || {
        format!("m1: kube-runtime's store holds {} objects", reader.len())
    })?;
    Ok(vec![
        (
            "bytes_per_object",
            bytes as f64 / OBJECTS as f64 - object_bytes,
        ),
        ("object_bytes", object_bytes),
    ])
}

fn m1_naive() -> Result<Metrics, String> {
    let (objs, object_bytes) = build_counted(OBJECTS, initial);
    let store = NaiveStore::new(objects::key, Vec::new());
    let ((), bytes) = measure_bytes(|| {
        for o in &objs {
            store.add(o.clone());
        }
    });
    check(store.len() == OBJECTS, || {
        format!("m1: store holds {} objects", store.len())
    })?;
    Ok(vec![
        ("bytes_per_object", bytes as f64 / OBJECTS as f64),
        ("object_bytes", object_bytes),
    ])
}
