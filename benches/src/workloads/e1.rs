//! e1: informer ingest, every side fed the same prebuilt events (defined in the crate's
//! WORKLOADS.md).
//!
//! Inputs, built before any clock starts: the 100,000 objects of the initial list (list version
//! "100000") and 1,000,000 updates, update `n` on key `n % 10,000` with resourceVersion
//! `{100000 + n + 1}`.
//!
//! - `kcache`: a [`SharedIndexInformer`] over a [`Replay`] source (the prebuilt list, then the
//!   prebuilt updates as one watch, held back until the sync point) with 2 handlers that count.
//!   `sync_ms`: from `run` to `has_synced`. Then, once both handlers counted the 100,000 initial
//!   adds, the clock restarts, the watch is released, and stops when both handlers saw the last
//!   update.
//! - `kcache-unbatched`: the same informer with batching off (`InformerOptions::batch_size(1)`:
//!   every change applied under its own lock and handed to the handlers' buffers alone), to
//!   measure what batching gains.
//! - `kube-runtime`: its bare store, `Writer::apply_watcher_event` over `Init`, 100,000
//!   `InitApply`, `InitDone` (`sync_ms`), then 1,000,000 `Apply` on one thread, no fan-out: the
//!   floor of a cache write.
//! - `kube-runtime-shared`: `store_shared(1024)` + `reflector()` over the same events as a stream,
//!   2 subscribers (`Writer::subscribe`) each on its own thread counting every object it receives
//!   (the initial list is broadcast at `InitDone`). The stream waits after `InitDone` until both
//!   subscribers counted the 100,000 initial objects (the sync point, `sync_ms`); the clock then
//!   runs until both have received the last update.
//!
//! Checks: 100,000 objects cached, key 9,999 holds the last update's version, an untouched key
//! (object 99,999) keeps version "100000", each handler or subscriber saw 1,000,000 updates.

use super::{check, join, nanos, now, unknown_impl, Metrics, Workload};
use crate::objects::{config_map, initial, ConfigMapMeta, OBJECTS};
use crate::replay::{ListSource, Replay, WatchScript};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_core::{Clock, SystemClock};
use kcache_informer::{InformerOptions, ResourceEventHandler, SharedIndexInformer};
use kcache_reflector::{ListWatcher, WatchEvent};
use kube_runtime::reflector;
use kube_runtime::watcher::Event;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

const HOT_KEYS: usize = 10_000;
pub(super) const UPDATES: usize = 1_000_000;
pub(super) const HANDLERS: usize = 2;

pub(super) const E1: Workload = Workload {
    name: "e1",
    headline: "events_per_s",
    impls: &[
        "kcache",
        "kcache-unbatched",
        "kube-runtime",
        "kube-runtime-shared",
    ],
    about: "informer ingest of prebuilt events: sync 100,000, 1,000,000 updates, 2 handlers",
    run: run_e1,
};

fn run_e1(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => kcache(InformerOptions::new()),
        "kcache-unbatched" => kcache(InformerOptions::new().batch_size(1)),
        "kube-runtime" => kube_bare(),
        "kube-runtime-shared" => kube_shared(),
        _ => Err(unknown_impl("e1", name)),
    }
}

/// Update `i` of e1: key `i % 10,000`, label `app-{i % 50}`, resourceVersion `{100000 + i + 1}`.
pub(super) fn update(i: usize) -> ConfigMap {
    config_map(i % HOT_KEYS, i, (OBJECTS + i) as u64 + 1)
}

/// The version the last update leaves on key 9,999.
fn last_rv() -> String {
    (OBJECTS + UPDATES).to_string()
}

/// Checks the end state of a cache read through `rv_of(object index)`.
fn check_state(
    len: usize,
    rv_of: impl Fn(usize) -> Option<String>,
    counts: &[u64],
) -> Result<(), String> {
    check(len == OBJECTS, || {
        format!("e1: the cache holds {len} objects")
    })?;
    let last = rv_of(HOT_KEYS - 1);
    check(last.as_deref() == Some(last_rv().as_str()), || {
        format!("e1: key 9,999 holds version {last:?}, expected the last update's")
    })?;
    let untouched = rv_of(OBJECTS - 1);
    check(untouched.as_deref() == Some("100000"), || {
        format!("e1: untouched object 99,999 holds version {untouched:?}")
    })?;
    check(counts.iter().all(|&n| n == UPDATES as u64), || {
        format!("e1: handlers saw {counts:?} updates, expected {UPDATES} each")
    })
}

/// A handler that counts.
#[derive(Default)]
pub(super) struct Counter {
    pub(super) adds: AtomicU64,
    pub(super) updates: AtomicU64,
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

/// A running informer: the thread driving `run` on a current-thread tokio runtime, and its stop.
pub(super) struct Running<L: ListWatcher<ConfigMap>> {
    pub(super) informer: Arc<SharedIndexInformer<ConfigMap, L, ConfigMapMeta>>,
    stop: oneshot::Sender<()>,
    thread: thread::JoinHandle<Result<(), String>>,
}

pub(super) fn start<L: ListWatcher<ConfigMap>>(
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

impl<L: ListWatcher<ConfigMap>> Running<L> {
    pub(super) fn finish(self) -> Result<(), String> {
        let _ = self.stop.send(());
        join(self.thread)?
    }
}

fn kcache(options: InformerOptions<ConfigMap>) -> Result<Metrics, String> {
    let list: Vec<Arc<ConfigMap>> = (0..OBJECTS).map(|i| Arc::new(initial(i))).collect();
    let events: Vec<WatchEvent<ConfigMap>> = (0..UPDATES)
        .map(|i| WatchEvent::Modified(Arc::new(update(i))))
        .collect();
    let replay = Replay::new(
        ListSource::Prebuilt(list),
        vec![WatchScript::Events(events)],
    );
    let informer = Arc::new(SharedIndexInformer::<_, _, ConfigMapMeta>::with_accessor(
        replay.clone(),
        options,
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
            replay.watches() == 1
                && counters
                    .iter()
                    .all(|c| c.adds.load(Ordering::Relaxed) == OBJECTS as u64)
        }),
        || "e1: handlers did not see the 100,000 adds, or no watch opened".into(),
    )?;

    let start_at = now();
    replay.open();
    let all_seen = wait_until(Duration::from_secs(240), || {
        counters.iter().all(|c| c.saw(UPDATES as u64))
    });
    let wall = nanos(start_at, now());
    check(all_seen, || {
        "e1: the handlers did not see every update".into()
    })?;
    let counts: Vec<u64> = counters
        .iter()
        .map(|c| c.updates.load(Ordering::Acquire))
        .collect();
    let cache = running.informer.indexer();
    check_state(
        cache.len(),
        |i| {
            let key = crate::objects::key(&initial(i));
            cache
                .get_by_key(&key)
                .and_then(|o| o.metadata.resource_version.clone())
        },
        &counts,
    )?;
    running.finish()?;
    Ok(vec![
        ("events_per_s", UPDATES as f64 / wall * 1e9),
        ("ns_per_event", wall / UPDATES as f64),
        ("sync_ms", sync / 1e6),
        ("update_wall_ms", wall / 1e6),
    ])
}

/// `Init`, the 100,000 `InitApply`s, `InitDone`.
fn initial_events() -> Vec<Event<ConfigMap>> {
    let mut events = Vec::with_capacity(OBJECTS + 2);
    events.push(Event::Init);
    events.extend((0..OBJECTS).map(|i| Event::InitApply(initial(i))));
    events.push(Event::InitDone);
    events
}

fn update_events() -> Vec<Event<ConfigMap>> {
    (0..UPDATES).map(|i| Event::Apply(update(i))).collect()
}

/// The version kube-runtime's store holds for object `i`.
fn kube_rv(store: &reflector::Store<ConfigMap>, i: usize) -> Option<String> {
    let obj = initial(i);
    let key = reflector::ObjectRef::new(obj.metadata.name.as_deref().unwrap_or(""))
        .within(obj.metadata.namespace.as_deref().unwrap_or(""));
    store.get(&key)?.metadata.resource_version.clone()
}

fn kube_bare() -> Result<Metrics, String> {
    let initial = initial_events();
    let updates = update_events();
    let (reader, mut writer) = reflector::store::<ConfigMap>();

    let start_at = now();
    for e in &initial {
        writer.apply_watcher_event(e);
    }
    let synced_at = now();
    for e in &updates {
        writer.apply_watcher_event(e);
    }
    let end = now();
    let (sync, wall) = (nanos(start_at, synced_at), nanos(synced_at, end));
    check_state(reader.len(), |i| kube_rv(&reader, i), &[UPDATES as u64])?;
    Ok(vec![
        ("events_per_s", UPDATES as f64 / wall * 1e9),
        ("ns_per_event", wall / UPDATES as f64),
        ("sync_ms", sync / 1e6),
        ("update_wall_ms", wall / 1e6),
    ])
}

fn kube_shared() -> Result<Metrics, String> {
    let initial = initial_events();
    let updates = update_events();
    let (reader, writer) = reflector::store_shared::<ConfigMap>(1024);
    let counters: Vec<Arc<AtomicU64>> = (0..HANDLERS).map(|_| Arc::default()).collect();
    let subscribers = counters
        .iter()
        .map(|count| {
            let handle = writer
                .subscribe()
                .ok_or("e1: kube-runtime's shared store cannot be subscribed")?;
            let count = count.clone();
            thread::Builder::new()
                .name("subscriber".into())
                .spawn(move || {
                    futures::executor::block_on(handle.for_each(|obj| {
                        std::hint::black_box(&obj);
                        count.fetch_add(1, Ordering::Release);
                        async {}
                    }));
                })
                .map_err(|e| format!("cannot start a subscriber thread: {e}"))
        })
        .collect::<Result<Vec<_>, String>>()?;

    // After `InitDone`, the stream waits (blocking its own thread, which runs nothing else)
    // until both subscribers counted the initial objects: the sync point.
    let synced_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let sync_point = {
        let (counters, synced_at) = (counters.clone(), synced_at.clone());
        futures::stream::once(async move {
            let synced = wait_until(Duration::from_secs(120), || {
                counters
                    .iter()
                    .all(|c| c.load(Ordering::Acquire) >= OBJECTS as u64)
            });
            *synced_at.lock() = synced.then(now);
        })
        .filter_map(|()| async { None })
    };
    let stream = futures::stream::iter(initial.into_iter().map(Ok))
        .chain(sync_point)
        .chain(futures::stream::iter(updates.into_iter().map(Ok)));

    let start_at = now();
    let total = (OBJECTS + UPDATES) as u64;
    let driven = futures::executor::block_on(async {
        let mut events = std::pin::pin!(reflector::reflector(writer, stream));
        let mut n = 0usize;
        while let Some(e) = events.next().await {
            e.map_err(|e| e.to_string())?;
            n += 1;
        }
        Ok::<usize, String>(n)
    })?;
    let all_seen = wait_until(Duration::from_secs(240), || {
        counters.iter().all(|c| c.load(Ordering::Acquire) >= total)
    });
    let end = now();
    // The writer is gone with the stream, so the subscribers' streams end.
    for s in subscribers {
        join(s)?;
    }
    let synced_at = (*synced_at.lock()).ok_or("e1: kube-runtime's subscribers did not sync")?;
    check(all_seen && driven == OBJECTS + 2 + UPDATES, || {
        format!("e1: kube-runtime's reflector yielded {driven} events")
    })?;
    let counts: Vec<u64> = counters
        .iter()
        .map(|c| c.load(Ordering::Acquire) - OBJECTS as u64)
        .collect();
    check_state(reader.len(), |i| kube_rv(&reader, i), &counts)?;
    let (sync, wall) = (nanos(start_at, synced_at), nanos(synced_at, end));
    Ok(vec![
        ("events_per_s", UPDATES as f64 / wall * 1e9),
        ("ns_per_event", wall / UPDATES as f64),
        ("sync_ms", sync / 1e6),
        ("update_wall_ms", wall / 1e6),
    ])
}
