//! One update of a populated store, and one `by_index` lookup.

use criterion::Criterion;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_benches::api::IndexedStore;
use kcache_benches::naive::NaiveStore;
use kcache_benches::objects::{self, config_map, initial, ConfigMapMeta};
use kcache_indexer::{namespace_index_fn, Indexer, Indexers, NAMESPACE_INDEX};
use kube_runtime::reflector;
use kube_runtime::watcher::Event;
use std::hint::black_box;
use std::sync::Arc;

/// Objects in the store: 10,000 (i1 holds 100,000; fewer keeps the setup short).
const OBJECTS: usize = 10_000;

fn kcache() -> Indexer<ConfigMap, ConfigMapMeta> {
    Indexer::with_indexers(
        Indexers::new()
            .with(
                NAMESPACE_INDEX,
                namespace_index_fn::<ConfigMap, ConfigMapMeta>,
            )
            .with("label", |cm: &ConfigMap| {
                Ok(objects::app(cm).map(str::to_owned).into_iter().collect())
            }),
    )
}

fn naive() -> NaiveStore<ConfigMap> {
    NaiveStore::new(
        objects::key,
        vec![
            (NAMESPACE_INDEX, |cm: &ConfigMap| {
                Some(objects::namespace(cm).to_owned())
            }),
            ("label", |cm: &ConfigMap| {
                objects::app(cm).map(str::to_owned)
            }),
        ],
    )
}

fn filled<S: IndexedStore<ConfigMap>>(store: S) -> S {
    for i in 0..OBJECTS {
        store.add(Arc::new(initial(i))).expect("add");
    }
    store
}

/// Updating one object to a new label (both indexes move); objects are prebuilt `Arc`s, so
/// kube-runtime's figure includes the deep clone its writer makes of every event's object.
pub(crate) fn update(c: &mut Criterion) {
    let mut g = c.benchmark_group("indexer/update");
    let next: Vec<Arc<ConfigMap>> = (0..OBJECTS)
        .map(|i| Arc::new(config_map(i, i + 1, 1)))
        .collect();
    fn run<S: IndexedStore<ConfigMap>>(s: &S, next: &[Arc<ConfigMap>], i: &mut usize) {
        *i = (*i + 1) % OBJECTS;
        s.update(next[*i].clone()).expect("update");
    }
    let (k, n) = (filled(kcache()), filled(naive()));
    let mut i = 0;
    g.bench_function("kcache", |b| b.iter(|| run(&k, &next, &mut i)));
    g.bench_function("rwlock-hashmap", |b| b.iter(|| run(&n, &next, &mut i)));
    let (_reader, mut writer) = reflector::store::<ConfigMap>();
    let events: Vec<Event<ConfigMap>> = (0..OBJECTS)
        .map(|i| Event::Apply(config_map(i, i + 1, 1)))
        .collect();
    g.bench_function("kube-runtime", |b| {
        b.iter(|| {
            i = (i + 1) % OBJECTS;
            writer.apply_watcher_event(&events[i]);
        })
    });
    g.finish();
}

/// `by_index` of one namespace (100 objects of the 10,000); kube-runtime has no index.
pub(crate) fn by_index(c: &mut Criterion) {
    let mut g = c.benchmark_group("indexer/by_index");
    let (k, n) = (filled(kcache()), filled(naive()));
    g.bench_function("kcache", |b| {
        b.iter(|| {
            black_box(
                k.by_index(NAMESPACE_INDEX, black_box("ns-7"))
                    .expect("index"),
            )
        })
    });
    g.bench_function("rwlock-hashmap", |b| {
        b.iter(|| black_box(n.by_index(NAMESPACE_INDEX, black_box("ns-7"))))
    });
    g.finish();
}
