//! i1: an indexed store of 100,000 ConfigMaps: add all, `by_index`, update all, `list`.
//!
//! `kube-runtime`'s `reflector::Store` has no indexes, so it runs only the phases it has: add and
//! update are `Writer::apply_watcher_event(&Event::Apply(obj))` (which deep-clones the object into
//! a new `Arc`, as the reflector does with every watch event), list is `Store::state()`; its
//! `by_index` metrics are absent, and its bytes per object count the store without index maps.

use super::{check, nanos, now, unknown_impl, Metrics, Workload};
use crate::api::IndexedStore;
use crate::naive::NaiveStore;
use crate::objects::{
    self, build_counted, initial, measure_bytes, replacement, ConfigMapMeta, OBJECTS,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_indexer::{Indexer, Indexers, NAMESPACE_INDEX};
use kube_runtime::reflector::{self, ObjectRef};
use kube_runtime::watcher::Event;
use std::hint::black_box;

const NAMESPACES: usize = 100;
const ROUNDS: usize = 10;
const LISTS: usize = 10;
const LABEL_INDEX: &str = "label";

pub(super) const WORKLOAD: Workload = Workload {
    name: "i1",
    headline: "add_ns",
    impls: &["kcache", "rwlock-hashmap", "kube-runtime"],
    about: "indexed store of 100,000 ConfigMaps: add, by_index, update, list",
    run,
};

fn run(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => drive(Indexer::<ConfigMap, ConfigMapMeta>::with_indexers(
            Indexers::new()
                .with_namespace_index::<ConfigMapMeta>()
                .with_each_value(LABEL_INDEX, |cm: &ConfigMap, emit: &mut dyn FnMut(&str)| {
                    if let Some(app) = objects::app(cm) {
                        emit(app);
                    }
                    Ok(())
                }),
        )),
        "rwlock-hashmap" => drive(NaiveStore::new(
            objects::key,
            vec![
                (NAMESPACE_INDEX, |cm: &ConfigMap| {
                    Some(objects::namespace(cm).to_owned())
                }),
                (LABEL_INDEX, |cm: &ConfigMap| {
                    objects::app(cm).map(str::to_owned)
                }),
            ],
        )),
        "kube-runtime" => drive_kube(),
        _ => Err(unknown_impl("i1", name)),
    }
}

fn drive<S: IndexedStore<ConfigMap>>(store: S) -> Result<Metrics, String> {
    let (objs, object_bytes) = build_counted(OBJECTS, initial);
    let (repl, _) = build_counted(OBJECTS, replacement);
    let namespaces: Vec<String> = (0..NAMESPACES).map(|k| format!("ns-{k}")).collect();

    let (added, bytes) = measure_bytes(|| {
        let start = now();
        for o in &objs {
            store.add(o.clone())?;
        }
        Ok::<_, String>(nanos(start, now()))
    });
    let add = added?;
    let store_bytes = bytes as f64 / OBJECTS as f64;
    check(store.len() == OBJECTS, || {
        format!("i1: {} objects after the adds", store.len())
    })?;

    let mut returned = 0usize;
    let start = now();
    for _ in 0..ROUNDS {
        for ns in &namespaces {
            let found = store.by_index(NAMESPACE_INDEX, ns)?;
            returned += found.len();
            black_box(found);
        }
    }
    let by_index = nanos(start, now());
    check(returned == ROUNDS * OBJECTS, || {
        format!("i1: by_index returned {returned} objects")
    })?;

    let start = now();
    for o in &repl {
        store.update(o.clone())?;
    }
    let update = nanos(start, now());

    let mut listed = 0usize;
    let start = now();
    for _ in 0..LISTS {
        let all = store.list();
        listed += all.len();
        black_box(all);
    }
    let list = nanos(start, now());
    check(listed == LISTS * OBJECTS, || {
        format!("i1: {LISTS} lists returned {listed} objects")
    })?;

    // Final state: app-1 now labels the objects i with (i + 1) % 50 == 1, each at its new version.
    let app1 = store.by_index(LABEL_INDEX, "app-1")?;
    check(app1.len() == OBJECTS / 50, || {
        format!(
            "i1: {} objects labelled app-1 after the updates",
            app1.len()
        )
    })?;
    check(
        app1.iter()
            .all(|cm| objects::app(cm) == Some("app-1") && objects::rv(cm) > OBJECTS as u64),
        || "i1: a stale object under app-1 after the updates".into(),
    )?;

    let calls = (ROUNDS * NAMESPACES) as f64;
    Ok(vec![
        ("add_ns", add / OBJECTS as f64),
        ("update_ns", update / OBJECTS as f64),
        ("by_index_call_ns", by_index / calls),
        ("by_index_object_ns", by_index / returned as f64),
        ("list_ms", list / LISTS as f64 / 1e6),
        ("store_bytes_per_object", store_bytes),
        ("object_bytes", object_bytes),
    ])
}

/// kube-runtime's store: adds and updates as applied watch events, lists as `state()`.
fn drive_kube() -> Result<Metrics, String> {
    // The objects' own bytes, as the store's deep clone allocates them.
    let (_, object_bytes) = build_counted(OBJECTS, initial);
    let adds: Vec<Event<ConfigMap>> = (0..OBJECTS).map(|i| Event::Apply(initial(i))).collect();
    let updates: Vec<Event<ConfigMap>> =
        (0..OBJECTS).map(|i| Event::Apply(replacement(i))).collect();
    let (reader, mut writer) = reflector::store::<ConfigMap>();

    let (add, bytes) = measure_bytes(|| {
        let start = now();
        for e in &adds {
            writer.apply_watcher_event(e);
        }
        nanos(start, now())
    });
    let store_bytes = bytes as f64 / OBJECTS as f64 - object_bytes;
    check(reader.len() == OBJECTS, || {
        format!("i1: {} objects after the adds", reader.len())
    })?;

    let start = now();
    for e in &updates {
        writer.apply_watcher_event(e);
    }
    let update = nanos(start, now());

    let mut listed = 0usize;
    let start = now();
    for _ in 0..LISTS {
        let all = reader.state();
        listed += all.len();
        black_box(all);
    }
    let list = nanos(start, now());
    check(listed == LISTS * OBJECTS, || {
        format!("i1: {LISTS} lists returned {listed} objects")
    })?;
    let one = reader.get(&ObjectRef::new("name-1").within("ns-1"));
    check(
        one.as_deref().is_some_and(|cm| {
            objects::app(cm) == Some("app-2") && objects::rv(cm) == OBJECTS as u64 + 2
        }),
        || "i1: ns-1/name-1 not updated".into(),
    )?;

    Ok(vec![
        ("add_ns", add / OBJECTS as f64),
        ("update_ns", update / OBJECTS as f64),
        ("list_ms", list / LISTS as f64 / 1e6),
        ("store_bytes_per_object", store_bytes),
        ("object_bytes", object_bytes),
    ])
}
