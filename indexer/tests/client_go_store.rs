//! Ported from client-go `tools/cache/store_test.go` (doTestStore with TestCache, doTestIndex
//! with TestIndex), rewritten for kcache. The FIFO and UndeltaStore variants of that file belong
//! to other crates. The Go test's key function (the object's `id`) becomes a custom `Meta`
//! accessor, the way a user keys types that are not Kubernetes objects.

use kcache_core::{KeyError, Meta, ObjectKey, ResourceVersion};
use kcache_indexer::{Indexer, Indexers};
use std::collections::BTreeSet;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq)]
struct TestStoreObject {
    id: String,
    val: String,
}

fn obj(id: &str, val: &str) -> TestStoreObject {
    TestStoreObject {
        id: id.into(),
        val: val.into(),
    }
}

/// Keys objects by their `id`.
struct ById;

impl Meta<TestStoreObject> for ById {
    fn key(obj: &TestStoreObject) -> Result<ObjectKey, KeyError> {
        ObjectKey::new(obj.id.as_str())
    }
    fn resource_version(_: &TestStoreObject) -> ResourceVersion {
        ResourceVersion::default()
    }
}

type Store = Indexer<TestStoreObject, ById>;

fn vals(store: &Store) -> BTreeSet<String> {
    store.list().iter().map(|o| o.val.clone()).collect()
}

#[test]
fn a_store_adds_updates_deletes_lists_and_replaces() {
    let store = Store::new();

    store.add(Arc::new(obj("foo", "bar"))).unwrap();
    assert_eq!(store.get(&obj("foo", "")).unwrap().unwrap().val, "bar");

    store.update(Arc::new(obj("foo", "baz"))).unwrap();
    assert_eq!(store.get(&obj("foo", "")).unwrap().unwrap().val, "baz");

    store.delete(&obj("foo", "")).unwrap();
    assert!(
        store.get(&obj("foo", "")).unwrap().is_none(),
        "found a deleted item"
    );

    store.add(Arc::new(obj("a", "b"))).unwrap();
    store.add(Arc::new(obj("c", "d"))).unwrap();
    store.add(Arc::new(obj("e", "e"))).unwrap();
    assert_eq!(vals(&store), ["b", "d", "e"].map(String::from).into());

    store
        .replace(
            vec![Arc::new(obj("foo", "foo")), Arc::new(obj("bar", "bar"))],
            "0".into(),
        )
        .unwrap();
    assert_eq!(vals(&store), ["bar", "foo"].map(String::from).into());
    assert_eq!(store.len(), 2);
}

#[test]
fn an_indexer_finds_objects_by_the_probe_objects_value() {
    let store = Store::with_indexers(
        Indexers::new().with("by_val", |o: &TestStoreObject| Ok(vec![o.val.clone()])),
    );
    store.add(Arc::new(obj("a", "b"))).unwrap();
    store.add(Arc::new(obj("c", "b"))).unwrap();
    store.add(Arc::new(obj("e", "f"))).unwrap();
    store.add(Arc::new(obj("g", "h"))).unwrap();

    for (val, ids) in [("b", vec!["a", "c"]), ("f", vec!["e"]), ("h", vec!["g"])] {
        let found = store.index("by_val", &obj("", val)).unwrap();
        let found: Vec<&str> = found.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(found, ids, "value {val}");
    }
}
