//! loom models: readers never observe items and indexes out of step under concurrent writes.
//!
//! Run with
//! `RUSTFLAGS="--cfg kcache_loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target-loom
//! cargo test --release -p kcache-indexer --test loom_indexer`.
#![cfg(kcache_loom)]

use kcache_core::sync::{thread, Arc as LoomArc};
use kcache_core::ObjectKey;
use kcache_indexer::{Indexers, ThreadSafeStore};
use std::sync::Arc;

fn key(s: &str) -> ObjectKey {
    ObjectKey::new(s).unwrap()
}

/// Objects are comma-separated value lists, indexed under each value.
fn store() -> ThreadSafeStore<String> {
    ThreadSafeStore::with_indexers(Indexers::new().with("v", |s: &String| {
        Ok(s.split(',').map(str::to_owned).collect())
    }))
}

fn obj(s: &str) -> Arc<String> {
    Arc::new(s.to_owned())
}

/// What one read call returned must be self-consistent: every object found under `value` has
/// `value` among its values.
fn assert_by_index_consistent(store: &ThreadSafeStore<String>, value: &str) {
    for o in store.by_index("v", value).unwrap() {
        assert!(
            o.split(',').any(|v| v == value),
            "{o:?} found under {value:?}"
        );
    }
}

#[test]
fn a_reader_never_sees_an_update_or_delete_half_applied() {
    loom::model(|| {
        let store = LoomArc::new(store());
        store.add(key("k"), obj("a")).unwrap();
        let writer = {
            let store = store.clone();
            thread::spawn(move || {
                store.update(key("k"), obj("b,c")).unwrap();
                store.delete("k");
            })
        };
        for value in ["a", "b", "c"] {
            assert_by_index_consistent(&store, value);
        }
        // Whatever the reader sees under "b" must be there under "c" too: one write moved both.
        let under_b = store.index_keys("v", "b").unwrap();
        store.check_invariants().unwrap();
        let got = store.get("k");
        assert!(
            matches!(
                got.as_deref().map(String::as_str),
                None | Some("a") | Some("b,c")
            ),
            "{got:?}"
        );
        assert!(under_b.len() <= 1);
        writer.join().unwrap();
        assert!(store.is_empty());
        assert!(store.list_index_func_values("v").is_empty());
    });
}

#[test]
fn concurrent_writers_and_replace_leave_items_and_indexes_in_step() {
    loom::model(|| {
        let store = LoomArc::new(store());
        store.add(key("k1"), obj("a")).unwrap();
        let updater = {
            let store = store.clone();
            thread::spawn(move || {
                store.update(key("k1"), obj("b")).unwrap();
            })
        };
        let replacer = {
            let store = store.clone();
            thread::spawn(move || {
                store
                    .replace([(key("k2"), obj("a,b"))], "7".into())
                    .unwrap();
            })
        };
        store.check_invariants().unwrap();
        assert_by_index_consistent(&store, "a");
        updater.join().unwrap();
        replacer.join().unwrap();
        store.check_invariants().unwrap();
        // Either order is linearizable: replace last leaves only k2; update last adds k1 back.
        let keys: Vec<String> = {
            let mut k: Vec<String> = store.list_keys().iter().map(|k| k.to_string()).collect();
            k.sort();
            k
        };
        assert!(keys == ["k2"] || keys == ["k1", "k2"], "{keys:?}");
        assert_eq!(store.last_store_sync_resource_version().as_str(), "7");
    });
}

#[test]
fn add_indexers_racing_a_write_indexes_every_object_exactly_once() {
    loom::model(|| {
        let store = LoomArc::new(store());
        store.add(key("k1"), obj("a")).unwrap();
        let indexer = {
            let store = store.clone();
            thread::spawn(move || {
                store
                    .add_indexers(
                        Indexers::new().with("len", |s: &String| Ok(vec![s.len().to_string()])),
                    )
                    .unwrap();
            })
        };
        store.add(key("k2"), obj("bb")).unwrap();
        // Before or after the new index exists, a reader sees a consistent store.
        store.check_invariants().unwrap();
        indexer.join().unwrap();
        store.check_invariants().unwrap();
        assert_eq!(store.index_keys("len", "1").unwrap(), [key("k1")]);
        assert_eq!(store.index_keys("len", "2").unwrap(), [key("k2")]);
    });
}
