//! e1 and m1: a kcache informer over the in-memory source (kcache-memory) holding 100,000
//! ConfigMaps, next to kube-runtime's reflector and store.
//!
//! - e1: time from `run` to `has_synced`; then 1,000,000 updates on 10,000 keys written to the
//!   source, delivered to 2 handlers that count; wall until both saw the last one.
//!   kube-runtime: `reflector::reflector(writer, stream)` fed the same sequence as a stream of
//!   prebuilt `watcher::Event`s (`Init`, 100,000 `InitApply`, `InitDone`, then 1,000,000 `Apply`);
//!   its "handlers" are two counting calls made inline by the task consuming the reflector's stream
//!   (kube-runtime has no per-handler fan-out). Its side thus has no source to write through and
//!   no thread hand-off: a conservative comparison for kcache.
//!   `memory-source` is kcache's floor: the same 1,000,000 updates written to the same source
//!   with no watcher and no informer. kcache's wall includes these writes, so it can never
//!   deliver faster than this. `kcache-drain` (module `e1_drain`) takes the source out of the
//!   wall instead: the updates wait in the informer's watch, and the clock runs from releasing
//!   them until both handlers saw the last, as kube-runtime's side consumes prebuilt events.
//! - m1: bytes per cached object beyond the object, after sync: the running informer (no handler,
//!   no index: cache, FIFO, reflector and watch; `cache_bytes_per_object` is what remains once it
//!   stops, the cache alone), kube-runtime's store (`Init`, `InitApply`s, `InitDone` applied by its
//!   writer), and a plain `RwLock<HashMap<String, Arc<_>>>` (no index). Allocations are counted on
//!   the thread that builds each cache.

use super::{check, join, nanos, now, unknown_impl, Metrics, Workload};
use crate::naive::NaiveStore;
use crate::objects::{
    self, build_counted, config_map, initial, measure_bytes, ConfigMapMeta, OBJECTS,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_core::{Clock, SystemClock};
use kcache_informer::{InformerOptions, ResourceEventHandler, SharedIndexInformer};
use kcache_memory::{MemoryConfig, MemorySource};
use kube_runtime::reflector;
use kube_runtime::watcher::{self, Event};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use tokio::sync::oneshot;

const HOT_KEYS: usize = 10_000;
pub(super) const UPDATES: usize = 1_000_000;
pub(super) const HANDLERS: usize = 2;

pub(super) const E1: Workload = Workload {
    name: "e1",
    headline: "events_per_s",
    impls: &["kcache", "kube-runtime", "memory-source", "kcache-drain"],
    about: "informer over kcache-memory: sync 100,000 ConfigMaps, 1,000,000 updates to 2 handlers",
    run: run_e1,
};

pub(super) const M1: Workload = Workload {
    name: "m1",
    headline: "bytes_per_object",
    impls: &["kcache", "kube-runtime", "rwlock-hashmap"],
    about: "bytes per cached object beyond the object after syncing 100,000 ConfigMaps",
    run: run_m1,
};

pub(super) type Source = MemorySource<ConfigMap, ConfigMapMeta>;
type Informer = SharedIndexInformer<ConfigMap, Source, ConfigMapMeta>;

fn run_e1(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => e1_kcache(),
        "kube-runtime" => e1_kube(),
        "memory-source" => e1_source_alone(),
        "kcache-drain" => super::e1_drain::run(),
        _ => Err(unknown_impl("e1", name)),
    }
}

fn run_m1(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => m1_kcache(),
        "kube-runtime" => m1_kube(),
        "rwlock-hashmap" => m1_naive(),
        _ => Err(unknown_impl("m1", name)),
    }
}

/// Update `i` of e1: key `i % 10,000`, a label that changes every time, resourceVersion
/// `{100000 + i + 1}` (the memory source stamps its own).
pub(super) fn update(i: usize) -> ConfigMap {
    config_map(i % HOT_KEYS, i, (OBJECTS + i) as u64 + 1)
}

/// A handler that counts.
#[derive(Default)]
pub(super) struct Counter {
    pub(super) adds: AtomicU64,
    updates: AtomicU64,
}

impl Counter {
    pub(super) fn saw(&self, updates: u64) -> bool {
        self.updates.load(Ordering::Acquire) >= updates
    }
}

impl ResourceEventHandler<ConfigMap> for Counter {
    fn on_add(&self, _: &Arc<ConfigMap>, _: bool) {
        self.adds.fetch_add(1, Ordering::Relaxed);
    }
    fn on_update(&self, _: &Arc<ConfigMap>, _: &Arc<ConfigMap>) {
        self.updates.fetch_add(1, Ordering::Release);
    }
}

/// Polls `cond` every 50 µs until it holds or `limit` passes; `false` on timeout.
pub(super) fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = now() + limit;
    while !cond() {
        if now() >= deadline {
            return false;
        }
        SystemClock.sleep(Duration::from_micros(50));
    }
    true
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

/// A running informer: the thread driving `run` on a current-thread tokio runtime, and its stop.
pub(super) struct Running<L: kcache_reflector::ListWatcher<ConfigMap> = Source> {
    pub(super) informer: Arc<SharedIndexInformer<ConfigMap, L, ConfigMapMeta>>,
    stop: oneshot::Sender<()>,
    thread: thread::JoinHandle<Result<(), String>>,
}

pub(super) fn start<L: kcache_reflector::ListWatcher<ConfigMap>>(
    informer: Arc<SharedIndexInformer<ConfigMap, L, ConfigMapMeta>>,
) -> Result<Running<L>, String> {
    let (stop, stopped) = oneshot::channel::<()>();
    let inf = informer.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot build a tokio runtime: {e}"))?;
    let thread = thread::Builder::new()
        .name("informer".into())
        .spawn(move || {
            rt.block_on(inf.run(async {
                let _ = stopped.await;
            }))
            .map_err(|e| e.to_string())
        })
        .map_err(|e| format!("cannot start the informer thread: {e}"))?;
    Ok(Running {
        informer,
        stop,
        thread,
    })
}

impl<L: kcache_reflector::ListWatcher<ConfigMap>> Running<L> {
    pub(super) fn finish(self) -> Result<(), String> {
        let _ = self.stop.send(());
        join(self.thread)?
    }
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
        || "e1: informer not synced after 120 s".into(),
    )?;
    let sync = nanos(start_at, now());
    check(
        wait_until(Duration::from_secs(60), || {
            counters
                .iter()
                .all(|c| c.adds.load(Ordering::Relaxed) == OBJECTS as u64)
        }),
        || "e1: handlers did not see the 100,000 adds".into(),
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
        format!("e1: handlers saw {seen:?} updates, expected {UPDATES} each")
    })?;
    check(seen.iter().all(|&n| n == UPDATES as u64), || {
        format!("e1: handlers saw {seen:?} updates, expected {UPDATES} each")
    })?;
    check(running.informer.indexer().len() == OBJECTS, || {
        "e1: cache size changed".into()
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
        format!("e1: the source holds {} objects", source.len())
    })?;
    let last = objects::key(&update(UPDATES - 1));
    let stored = source.get(&last).map(|o| o.metadata.labels.clone());
    check(stored == Some(update(UPDATES - 1).metadata.labels), || {
        "e1: the source does not hold the last update".into()
    })?;
    Ok(vec![
        ("events_per_s", UPDATES as f64 / wall * 1e9),
        ("ns_per_event", wall / UPDATES as f64),
        ("source_write_ms", wall / 1e6),
    ])
}

fn e1_kube() -> Result<Metrics, String> {
    let mut events: Vec<watcher::Result<Event<ConfigMap>>> =
        Vec::with_capacity(OBJECTS + UPDATES + 2);
    events.push(Ok(Event::Init));
    events.extend((0..OBJECTS).map(|i| Ok(Event::InitApply(initial(i)))));
    events.push(Ok(Event::InitDone));
    events.extend((0..UPDATES).map(|i| Ok(Event::Apply(update(i)))));
    let counters: Vec<Counter> = (0..HANDLERS).map(|_| Counter::default()).collect();
    let (reader, writer) = reflector::store::<ConfigMap>();

    let start_at = now();
    let mut synced_at = None;
    let stream = reflector::reflector(writer, futures::stream::iter(events));
    futures::executor::block_on(async {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::InitApply(obj)) => counters.iter().for_each(|c| c.on_add_obj(&obj)),
                Ok(Event::InitDone) => synced_at = Some(now()),
                Ok(Event::Apply(obj)) => counters.iter().for_each(|c| c.on_update_obj(&obj)),
                _ => {}
            }
        }
    });
    let end = now();
    let synced_at = synced_at.ok_or("e1: kube-runtime's stream ended before InitDone")?;
    let (sync, wall) = (nanos(start_at, synced_at), nanos(synced_at, end));
    for c in &counters {
        check(
            c.adds.load(Ordering::Relaxed) == OBJECTS as u64 && c.saw(UPDATES as u64),
            || "e1: kube-runtime's handlers missed events".into(),
        )?;
    }
    check(reader.len() == OBJECTS, || {
        format!("e1: kube-runtime's store holds {} objects", reader.len())
    })?;
    Ok(vec![
        ("events_per_s", UPDATES as f64 / wall * 1e9),
        ("ns_per_event", wall / UPDATES as f64),
        ("sync_ms", sync / 1e6),
        ("update_wall_ms", wall / 1e6),
    ])
}

impl Counter {
    /// kube-runtime's inline "handler": counts the object it is given.
    fn on_add_obj(&self, obj: &ConfigMap) {
        std::hint::black_box(obj);
        self.adds.fetch_add(1, Ordering::Relaxed);
    }
    fn on_update_obj(&self, obj: &ConfigMap) {
        std::hint::black_box(obj);
        self.updates.fetch_add(1, Ordering::Release);
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
