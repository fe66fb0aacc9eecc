//! The reference model: a `BTreeMap` of objects, a set of installed indexes, a version string.

use super::{index_values, rv, shared, FuzzObject, Op, INDEXES, NAMESPACES, PROBE_VALUES};
use crate::error::{AddIndexersError, IndexError, StoreError};
use crate::indexer::Indexer;
use crate::indexers::Indexers;
use crate::namespace::namespace_index_fn;
use crate::sync::Arc;
use kcache_core::ObjectAccessor;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Default)]
pub(super) struct Model {
    items: BTreeMap<String, FuzzObject>,
    indexes: BTreeSet<usize>,
    rv: String,
}

type Store = Indexer<FuzzObject>;

fn index_name(id: u8) -> (&'static str, Option<usize>) {
    let id = usize::from(id % 7);
    INDEXES
        .get(id)
        .map_or(("unknown", None), |n| (*n, Some(id)))
}

fn sorted_keys(objs: &[Arc<FuzzObject>]) -> Vec<String> {
    let mut keys: Vec<String> = objs.iter().map(|o| o.key()).collect();
    keys.sort();
    keys
}

impl Model {
    fn fails(&self, o: &FuzzObject) -> bool {
        self.indexes.iter().any(|id| index_values(*id, o).is_none())
    }

    /// `replace_skipping_refused`: every listed object (a later duplicate wins) but those an
    /// installed index function fails on is stored; the error names exactly those.
    fn replace_skipping(
        &mut self,
        store: &Store,
        next: BTreeMap<String, FuzzObject>,
        list: Vec<Arc<FuzzObject>>,
        list_rv: u8,
        step: usize,
    ) {
        let (kept, refused): (BTreeMap<_, _>, BTreeMap<_, _>) =
            next.into_iter().partition(|(_, o)| !self.fails(o));
        match store.replace_skipping_refused(list, rv(list_rv)) {
            Ok(()) => assert!(refused.is_empty(), "step {step}: should refuse {refused:?}"),
            Err(StoreError::Refused { refused: errors }) => {
                let mut keys: Vec<String> = errors
                    .iter()
                    .map(|e| match e {
                        StoreError::IndexFunc(f) => {
                            assert_eq!(f.index, "fallible", "step {step}");
                            f.key.as_ref().map(|k| k.to_string()).unwrap_or_default()
                        }
                        other => panic!("step {step}: unexpected {other}"),
                    })
                    .collect();
                keys.sort();
                let expected: Vec<String> = refused.keys().cloned().collect();
                assert_eq!(keys, expected, "step {step}");
            }
            Err(e) => panic!("step {step}: unexpected {e}"),
        }
        self.items = kept;
        self.rv = rv(list_rv).to_string();
    }

    fn values(&self, id: usize, o: &FuzzObject) -> BTreeSet<String> {
        index_values(id, o)
            .unwrap_or_default()
            .into_iter()
            .collect()
    }

    fn record(&mut self, o: &FuzzObject) {
        if o.rv != 0 {
            self.rv = o.rv.to_string();
        }
    }

    pub(super) fn step(&mut self, store: &Store, op: &Op, step: usize) {
        match op {
            Op::Add(o) | Op::Update(o) => {
                let o = o.build();
                let res = if matches!(op, Op::Add(_)) {
                    store.add(shared(&o))
                } else {
                    store.update(shared(&o))
                };
                match res {
                    Ok(()) => {
                        assert!(!self.fails(&o), "step {step}: {op:?} should have failed");
                        self.record(&o);
                        self.items.insert(o.key(), o);
                    }
                    Err(StoreError::IndexFunc(e)) => {
                        assert!(self.fails(&o), "step {step}: {op:?} failed: {e}");
                        assert_eq!(e.index, "fallible", "step {step}");
                        assert_eq!(e.key.as_ref().map(|k| k.to_string()), Some(o.key()));
                    }
                    Err(e) => panic!("step {step}: {op:?}: unexpected {e}"),
                }
            }
            Op::Delete(o) => {
                let o = o.build();
                let removed = store
                    .delete(&o)
                    .unwrap_or_else(|e| panic!("step {step}: {e}"));
                assert_eq!(
                    removed.as_deref(),
                    self.items.remove(&o.key()).as_ref(),
                    "step {step}"
                );
                self.record(&o);
            }
            Op::DeleteKey(o) => {
                let key = o.build().key();
                let removed = store.thread_safe_store().delete(key.as_str());
                assert_eq!(
                    removed.as_deref(),
                    self.items.remove(&key).as_ref(),
                    "step {step}"
                );
            }
            Op::Replace(objs, flags) => {
                let (skipping, list_rv) = (flags & 0x80 != 0, flags & 0x7f);
                let objs: Vec<FuzzObject> = objs.iter().map(|o| o.build()).collect();
                let next: BTreeMap<String, FuzzObject> =
                    objs.iter().map(|o| (o.key(), o.clone())).collect();
                let list = objs.iter().map(shared).collect();
                if skipping {
                    self.replace_skipping(store, next, list, list_rv, step);
                    return;
                }
                let should_fail = next.values().any(|o| self.fails(o));
                let res = store.replace(list, rv(list_rv));
                assert_eq!(res.is_err(), should_fail, "step {step}: {op:?}: {res:?}");
                if !should_fail {
                    self.items = next;
                    self.rv = rv(list_rv).to_string();
                }
            }
            Op::Bookmark(n) => {
                store.bookmark(rv(*n));
                self.rv = rv(*n).to_string();
            }
            Op::AddIndexers(mask) => self.add_indexers(store, *mask, step),
            Op::Index(id, probe) => self.check_index(store, *id, &probe.build(), step),
            Op::ByIndex(id, value) => {
                let value = PROBE_VALUES[usize::from(*value) % PROBE_VALUES.len()];
                let (name, id) = index_name(*id);
                let res = store.by_index(name, value);
                let keys = store.index_keys(name, value);
                match id.filter(|id| self.indexes.contains(id)) {
                    None => assert!(res.is_err() && keys.is_err(), "step {step}: {name}"),
                    Some(id) => {
                        let expected: Vec<String> = self
                            .items
                            .iter()
                            .filter(|(_, o)| self.values(id, o).contains(value))
                            .map(|(k, _)| k.clone())
                            .collect();
                        let found = res.unwrap_or_else(|e| panic!("step {step}: {e}"));
                        assert_eq!(sorted_keys(&found), expected, "step {step}: {op:?}");
                        let keys: Vec<String> = keys
                            .unwrap_or_else(|e| panic!("step {step}: {e}"))
                            .iter()
                            .map(|k| k.to_string())
                            .collect();
                        assert_eq!(keys, expected, "step {step}: {op:?}");
                    }
                }
            }
            Op::ListByNamespace(ns, mask) => {
                let ns = NAMESPACES[usize::from(*ns) % NAMESPACES.len()];
                let found = store.list_by_namespace(ns, |o| o.labels & mask == *mask);
                let expected: Vec<String> = self
                    .items
                    .iter()
                    .filter(|(_, o)| (ns.is_empty() || o.ns == ns) && o.labels & mask == *mask)
                    .map(|(k, _)| k.clone())
                    .collect();
                assert_eq!(sorted_keys(&found), expected, "step {step}: {op:?}");
            }
            Op::ByNamespace(ns) => {
                let ns = NAMESPACES[usize::from(*ns) % NAMESPACES.len()];
                let found = store.by_namespace(ns);
                let expected: Vec<String> = self
                    .items
                    .iter()
                    .filter(|(_, o)| o.ns == ns)
                    .map(|(k, _)| k.clone())
                    .collect();
                assert_eq!(sorted_keys(&found), expected, "step {step}: {op:?}");
            }
        }
    }

    fn add_indexers(&mut self, store: &Store, mask: u8, step: usize) {
        let ids: Vec<usize> = (0..INDEXES.len())
            .filter(|b| mask & (1 << b) != 0)
            .collect();
        let mut indexers = Indexers::new();
        for &id in &ids {
            if id == 0 {
                indexers.insert(INDEXES[0], namespace_index_fn::<FuzzObject, ObjectAccessor>);
            } else {
                indexers.insert(INDEXES[id], move |o: &FuzzObject| {
                    index_values(id, o).ok_or_else(|| "labels bit 7 is set".into())
                });
            }
        }
        let conflicts: Vec<String> = ids
            .iter()
            .filter(|id| self.indexes.contains(id))
            .map(|id| INDEXES[*id].to_owned())
            .collect();
        let fails = ids
            .iter()
            .any(|id| self.items.values().any(|o| index_values(*id, o).is_none()));
        match store.add_indexers(indexers) {
            Err(AddIndexersError::Conflict { names }) => {
                let mut expected = conflicts;
                expected.sort();
                assert_eq!(names, expected, "step {step}: conflict");
            }
            Err(AddIndexersError::IndexFunc(e)) => {
                assert!(conflicts.is_empty() && fails, "step {step}: unexpected {e}");
            }
            Ok(()) => {
                assert!(
                    conflicts.is_empty() && !fails,
                    "step {step}: add_indexers should fail"
                );
                self.indexes.extend(ids);
            }
        }
    }

    fn check_index(&self, store: &Store, id: u8, probe: &FuzzObject, step: usize) {
        let (name, id) = index_name(id);
        let res = store.index(name, probe);
        let Some(id) = id.filter(|id| self.indexes.contains(id)) else {
            assert!(
                matches!(res, Err(IndexError::UnknownIndex(_))),
                "step {step}: {name}"
            );
            return;
        };
        let Some(probe_values) = index_values(id, probe) else {
            assert!(
                matches!(res, Err(IndexError::IndexFunc(_))),
                "step {step}: {name}"
            );
            return;
        };
        let expected: Vec<String> = self
            .items
            .iter()
            .filter(|(_, o)| probe_values.iter().any(|v| self.values(id, o).contains(v)))
            .map(|(k, _)| k.clone())
            .collect();
        let found = res.unwrap_or_else(|e| panic!("step {step}: {e}"));
        let keys: Vec<String> = found.iter().map(|o| o.key()).collect();
        assert_eq!(
            keys, expected,
            "step {step}: index {name} in key order, each once"
        );
    }

    pub(super) fn check(&self, store: &Store, step: usize) {
        if let Err(e) = store.thread_safe_store().check_invariants() {
            panic!("step {step}: invariant broken: {e}");
        }
        let mut keys: Vec<String> = store.list_keys().iter().map(|k| k.to_string()).collect();
        keys.sort();
        assert!(
            keys.iter().eq(self.items.keys()),
            "step {step}: keys {keys:?}"
        );
        assert_eq!(store.len(), self.items.len(), "step {step}");
        for (key, o) in &self.items {
            assert_eq!(
                store.get_by_key(key.as_str()).as_deref(),
                Some(o),
                "step {step}: {key}"
            );
        }
        assert_eq!(
            store.last_store_sync_resource_version().as_str(),
            self.rv,
            "step {step}"
        );
        let mut names: Vec<&str> = self.indexes.iter().map(|id| INDEXES[*id]).collect();
        names.sort_unstable();
        assert_eq!(store.indexer_names(), names, "step {step}");
        for (id, name) in INDEXES.iter().copied().enumerate() {
            if !self.indexes.contains(&id) {
                assert!(store.index_keys(name, "x").is_err(), "step {step}: {name}");
                assert!(
                    store.list_index_func_values(name).is_empty(),
                    "step {step}: {name}"
                );
                continue;
            }
            let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (key, o) in &self.items {
                for value in self.values(id, o) {
                    expected.entry(value).or_default().push(key.clone());
                }
            }
            let values: Vec<String> = store
                .list_index_func_values(name)
                .iter()
                .map(|v| v.to_string())
                .collect();
            assert!(
                values.iter().eq(expected.keys()),
                "step {step}: {name} values {values:?}"
            );
            for (value, keys) in &expected {
                let found: Vec<String> = store
                    .index_keys(name, value)
                    .unwrap_or_else(|e| panic!("step {step}: {e}"))
                    .iter()
                    .map(|k| k.to_string())
                    .collect();
                assert_eq!(&found, keys, "step {step}: {name}={value}");
            }
        }
    }
}
