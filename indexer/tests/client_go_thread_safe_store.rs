//! Ported from client-go `tools/cache/thread_safe_store_test.go`
//! (TestThreadSafeStoreDeleteRemovesEmptySetsFromIndex,
//! TestThreadSafeStoreAddKeepsNonEmptySetPostDeleteFromIndex,
//! TestThreadSafeStoreIndexingFunctionsWithMultipleValues, TestThreadSafeStoreRV), rewritten
//! for kcache. client-go's store reads resource versions itself; ours learns them through the
//! `Indexer`'s accessor, so the RV cases run on an `Indexer`.

mod common;

use common::{pod, Pod};
use kcache_core::ObjectKey;
use kcache_indexer::{Indexer, Indexers, ThreadSafeStore};
use std::sync::Arc;

fn key(s: &str) -> ObjectKey {
    ObjectKey::new(s).unwrap()
}

fn identity_store() -> ThreadSafeStore<String> {
    ThreadSafeStore::with_indexers(
        Indexers::new().with("testIndexer", |s: &String| Ok(vec![s.clone()])),
    )
}

#[test]
fn deleting_the_last_key_of_a_value_removes_the_value() {
    let store = identity_store();
    store
        .add(key("testKey"), Arc::new("testKey".to_owned()))
        .unwrap();
    assert_eq!(store.index_keys("testIndexer", "testKey").unwrap().len(), 1);

    store.delete("testKey");
    assert!(store.list_index_func_values("testIndexer").is_empty());
}

#[test]
fn deleting_one_of_two_keys_keeps_the_value_with_the_other() {
    let store: ThreadSafeStore<String> = ThreadSafeStore::with_indexers(
        Indexers::new().with("testIndexer", |_: &String| Ok(vec!["testIndex".to_owned()])),
    );
    store
        .add(key("retain"), Arc::new("retain".to_owned()))
        .unwrap();
    store
        .add(key("delete"), Arc::new("delete".to_owned()))
        .unwrap();
    assert_eq!(
        store.index_keys("testIndexer", "testIndex").unwrap().len(),
        2
    );

    store.delete("delete");
    assert_eq!(
        store.index_keys("testIndexer", "testIndex").unwrap(),
        [key("retain")]
    );
}

#[test]
fn a_function_with_several_values_tracks_every_update_and_delete() {
    let store: ThreadSafeStore<String> =
        ThreadSafeStore::with_indexers(Indexers::new().with("testIndexer", |s: &String| {
            Ok(s.split(',').map(str::to_owned).collect())
        }));
    let check = |value: &str, keys: &[&str]| {
        let found: Vec<String> = store
            .index_keys("testIndexer", value)
            .unwrap()
            .iter()
            .map(|k| k.to_string())
            .collect();
        assert_eq!(found, keys, "value {value}");
    };
    let put = |k: &str, v: &str| store.update(key(k), Arc::new(v.to_owned())).unwrap();

    put("key1", "foo");
    put("key2", "bar");
    check("foo", &["key1"]);
    check("bar", &["key2"]);

    put("key2", "foo,bar");
    check("foo", &["key1", "key2"]);
    check("bar", &["key2"]);

    put("key1", "foo,bar");
    check("foo", &["key1", "key2"]);
    check("bar", &["key1", "key2"]);

    put("key3", "foo,bar,baz");
    check("foo", &["key1", "key2", "key3"]);
    check("bar", &["key1", "key2", "key3"]);
    check("baz", &["key3"]);

    put("key1", "foo");
    check("foo", &["key1", "key2", "key3"]);
    check("bar", &["key2", "key3"]);
    check("baz", &["key3"]);

    put("key2", "bar");
    check("foo", &["key1", "key3"]);
    check("bar", &["key2", "key3"]);
    check("baz", &["key3"]);

    store.delete("key1");
    check("foo", &["key3"]);
    check("bar", &["key2", "key3"]);
    check("baz", &["key3"]);

    store.delete("key3");
    check("foo", &[]);
    check("bar", &["key2"]);
    check("baz", &[]);
}

fn rv(store: &Indexer<Pod>) -> String {
    store.last_store_sync_resource_version().to_string()
}

#[test]
fn the_store_version_starts_empty() {
    assert_eq!(rv(&Indexer::<Pod>::new()), "");
}

#[test]
fn the_store_version_follows_adds_updates_and_deletes_with_objects() {
    let store: Indexer<Pod> = Indexer::new();
    store.add(pod("ns", "key1").rv("10").arc()).unwrap();
    assert_eq!(rv(&store), "10");

    store.add(pod("ns", "key3").rv("10").arc()).unwrap();
    assert_eq!(rv(&store), "10");

    store.add(pod("ns", "key4").rv("20").arc()).unwrap();
    assert_eq!(rv(&store), "20");

    // Deleting an object with a newer version records that version.
    store.delete(&pod("ns", "key4").rv("30")).unwrap();
    assert_eq!(rv(&store), "30");

    // An object without a version (client-go: without metadata) leaves it alone.
    store.add(pod("ns", "key5").arc()).unwrap();
    assert_eq!(rv(&store), "30");

    store.add(pod("ns", "key6").rv("40").arc()).unwrap();
    assert_eq!(rv(&store), "40");

    // A delete by key alone carries no version.
    store.thread_safe_store().delete("ns/key6");
    assert_eq!(rv(&store), "40");

    // The last of several writes wins (client-go runs these as one transaction).
    store.update(pod("ns", "key9").rv("40").arc()).unwrap();
    store.update(pod("ns", "key10").rv("30").arc()).unwrap();
    store.update(pod("ns", "key11").rv("50").arc()).unwrap();
    assert_eq!(rv(&store), "50");
}

#[test]
fn replace_records_the_list_version() {
    let store: Indexer<Pod> = Indexer::new();
    store.add(pod("ns", "key1").rv("10").arc()).unwrap();
    assert_eq!(rv(&store), "10");
    store
        .replace(
            vec![
                pod("ns", "key3").rv("40").arc(),
                pod("ns", "key2").rv("30").arc(),
            ],
            "50".into(),
        )
        .unwrap();
    assert_eq!(rv(&store), "50");
}

#[test]
fn delete_records_the_deleted_objects_version() {
    let store: Indexer<Pod> = Indexer::new();
    store.add(pod("ns", "key1").rv("10").arc()).unwrap();
    store.delete(&pod("ns", "key1").rv("20")).unwrap();
    assert_eq!(rv(&store), "20");
}
