//! One test per rule of the store: client-go's thread-safe store and indexer, and where kcache
//! departs from them (the crate docs list the differences).

use super::*;
use crate::error::BoxError;

/// Test objects are comma-separated value lists; "!" makes the index function fail.
fn by_csv(s: &String) -> Result<Vec<String>, BoxError> {
    if s.contains('!') {
        return Err(format!("bad object {s:?}").into());
    }
    Ok(s.split(',')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect())
}

fn store() -> ThreadSafeStore<String> {
    ThreadSafeStore::with_indexers(Indexers::new().with("csv", by_csv))
}

fn key(s: &str) -> ObjectKey {
    ObjectKey::new(s).unwrap()
}

fn obj(s: &str) -> Arc<String> {
    Arc::new(s.to_owned())
}

fn keys(store: &ThreadSafeStore<String>, value: &str) -> Vec<String> {
    store
        .index_keys("csv", value)
        .unwrap()
        .iter()
        .map(|k| k.to_string())
        .collect()
}

fn values(store: &ThreadSafeStore<String>) -> Vec<String> {
    store
        .list_index_func_values("csv")
        .iter()
        .map(|v| v.to_string())
        .collect()
}

#[test]
fn get_returns_the_stored_allocation_not_a_copy() {
    let s = store();
    let o = obj("a");
    s.add(key("k"), o.clone()).unwrap();
    assert!(Arc::ptr_eq(&s.get("k").unwrap(), &o));
    assert!(Arc::ptr_eq(&s.list()[0], &o));
    assert!(s.contains_key(&key("k")));
    assert_eq!((s.len(), s.is_empty()), (1, false));
}

#[test]
fn update_moves_the_key_between_index_values() {
    let s = store();
    s.add(key("k"), obj("a")).unwrap();
    s.update(key("k"), obj("b")).unwrap();
    assert_eq!(keys(&s, "a"), Vec::<String>::new());
    assert_eq!(keys(&s, "b"), ["k"]);
    s.check_invariants().unwrap();
}

#[test]
fn empty_value_sets_are_removed() {
    let s = store();
    s.add(key("k1"), obj("a,b")).unwrap();
    s.add(key("k2"), obj("b")).unwrap();
    s.delete("k1");
    assert_eq!(values(&s), ["b"]);
    s.update(key("k2"), obj("c")).unwrap();
    assert_eq!(values(&s), ["c"]);
    s.delete("k2");
    assert!(values(&s).is_empty());
}

#[test]
fn a_multi_valued_function_indexes_every_value_and_zero_values_index_nothing() {
    let s = store();
    s.add(key("k1"), obj("a,b,a")).unwrap();
    s.add(key("k2"), obj("")).unwrap();
    assert_eq!(keys(&s, "a"), ["k1"]);
    assert_eq!(keys(&s, "b"), ["k1"]);
    assert_eq!(values(&s), ["a", "b"]);
    assert_eq!(s.len(), 2);
    s.check_invariants().unwrap();
}

#[test]
fn an_index_function_failure_on_add_changes_nothing() {
    let s = store();
    s.bookmark("5".into());
    let err = s.add(key("k"), obj("a,!")).unwrap_err();
    assert_eq!(err.index, "csv");
    assert_eq!(err.key, Some(key("k")));
    assert!(s.is_empty() && values(&s).is_empty());
    assert_eq!(s.last_store_sync_resource_version().as_str(), "5");
}

#[test]
fn an_index_function_failure_on_update_keeps_the_old_object_and_its_entries() {
    let s = ThreadSafeStore::with_indexers(
        Indexers::new()
            .with("all", |_: &String| Ok(vec!["all".into()]))
            .with("csv", by_csv),
    );
    s.add(key("k"), obj("a")).unwrap();
    assert!(s.update(key("k"), obj("b,!")).is_err());
    assert_eq!(*s.get("k").unwrap(), "a");
    assert_eq!(keys(&s, "a"), ["k"]);
    assert_eq!(s.index_keys("all", "all").unwrap(), [key("k")]);
    s.check_invariants().unwrap();
}

#[test]
fn a_panicking_index_function_leaves_the_store_consistent() {
    let s = ThreadSafeStore::with_indexers(Indexers::new().with("p", |v: &String| {
        assert!(v != "boom", "index function panicked");
        Ok(vec![v.clone()])
    }));
    s.add(key("k"), obj("a")).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = s.update(key("k"), obj("boom"));
    }));
    assert!(r.is_err());
    assert_eq!(*s.get("k").unwrap(), "a");
    s.check_invariants().unwrap();
}

#[test]
fn delete_returns_the_removed_object_and_ignores_missing_keys() {
    let s = store();
    s.add(key("k"), obj("a")).unwrap();
    assert_eq!(s.delete("missing"), None);
    assert_eq!(
        s.delete(&key("k")).as_deref().map(String::as_str),
        Some("a")
    );
    assert!(s.is_empty());
}

#[test]
fn delete_cleans_up_even_when_the_function_now_fails_on_the_stored_object() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let broken = Arc::new(AtomicBool::new(false));
    let flag = broken.clone();
    let s = ThreadSafeStore::with_indexers(Indexers::new().with("flaky", move |v: &String| {
        if flag.load(Ordering::SeqCst) {
            return Err("flaky".into());
        }
        Ok(vec![v.clone()])
    }));
    s.add(key("k1"), obj("a")).unwrap();
    s.add(key("k2"), obj("a")).unwrap();
    broken.store(true, Ordering::SeqCst);
    s.delete("k1");
    assert_eq!(s.index_keys("flaky", "a").unwrap(), [key("k2")]);
}

#[test]
fn replace_rebuilds_every_index_and_records_the_list_version() {
    let s = store();
    s.add(key("old"), obj("a")).unwrap();
    s.replace([(key("n1"), obj("b")), (key("n2"), obj("b,c"))], "9".into())
        .unwrap();
    assert_eq!(values(&s), ["b", "c"]);
    assert_eq!(keys(&s, "b"), ["n1", "n2"]);
    assert!(s.get("old").is_none());
    assert_eq!(s.last_store_sync_resource_version().as_str(), "9");
    s.check_invariants().unwrap();
}

#[test]
fn replace_with_a_failing_object_changes_nothing() {
    let s = store();
    s.add(key("old"), obj("a")).unwrap();
    s.bookmark("3".into());
    let err = s
        .replace([(key("n1"), obj("b")), (key("n2"), obj("!"))], "9".into())
        .unwrap_err();
    assert_eq!(err.key, Some(key("n2")));
    assert_eq!(s.list_keys(), [key("old")]);
    assert_eq!(values(&s), ["a"]);
    assert_eq!(s.last_store_sync_resource_version().as_str(), "3");
}

#[test]
fn replace_with_a_duplicate_key_keeps_the_later_object() {
    let s = store();
    s.replace([(key("k"), obj("!")), (key("k"), obj("b"))], "1".into())
        .unwrap();
    assert_eq!(*s.get("k").unwrap(), "b");
    assert_eq!(values(&s), ["b"]);
}

#[test]
fn add_indexers_on_a_populated_store_indexes_existing_items() {
    let s = ThreadSafeStore::new();
    s.add(key("k1"), obj("a,b")).unwrap();
    s.add(key("k2"), obj("b")).unwrap();
    s.add_indexers(Indexers::new().with("csv", by_csv)).unwrap();
    assert_eq!(keys(&s, "b"), ["k1", "k2"]);
    s.add(key("k3"), obj("a")).unwrap();
    assert_eq!(keys(&s, "a"), ["k1", "k3"]);
    s.check_invariants().unwrap();
}

#[test]
fn add_indexers_with_conflict_installs_none() {
    let s = store();
    let err = s
        .add_indexers(
            Indexers::new()
                .with("new", by_csv)
                .with("csv", by_csv)
                .with("z", by_csv),
        )
        .unwrap_err();
    assert!(matches!(&err, AddIndexersError::Conflict { names } if names == &["csv"]));
    assert!(err.to_string().contains("indexer conflict"));
    assert_eq!(s.indexer_names(), ["csv"]);
}

#[test]
fn add_indexers_whose_function_fails_on_an_existing_item_installs_none() {
    let s = ThreadSafeStore::new();
    s.add(key("k1"), obj("a")).unwrap();
    s.add(key("k2"), obj("!")).unwrap();
    let err = s
        .add_indexers(
            Indexers::new()
                .with("a-ok", |_: &String| Ok(vec!["x".into()]))
                .with("csv", by_csv),
        )
        .unwrap_err();
    assert!(matches!(err, AddIndexersError::IndexFunc(e) if e.key == Some(key("k2"))));
    assert!(s.indexer_names().is_empty());
    assert!(s.index_keys("a-ok", "x").is_err());
}

#[test]
fn an_unknown_index_name_is_a_typed_error() {
    let s = store();
    let unknown = UnknownIndexError {
        name: "nope".into(),
    };
    assert_eq!(s.index_keys("nope", "a").unwrap_err(), unknown);
    assert_eq!(s.by_index("nope", "a").unwrap_err(), unknown);
    assert!(
        matches!(s.index("nope", &"a".into()), Err(IndexError::UnknownIndex(e)) if e == unknown)
    );
    assert!(s.list_index_func_values("nope").is_empty());
    assert!(unknown.to_string().contains("does not exist"));
}

#[test]
fn index_returns_each_object_sharing_a_value_once() {
    let s = store();
    s.add(key("k1"), obj("a,b")).unwrap();
    s.add(key("k2"), obj("b,c")).unwrap();
    s.add(key("k3"), obj("d")).unwrap();
    let found = s.index("csv", &"a,b,c".to_owned()).unwrap();
    assert_eq!(
        found.iter().map(|o| o.as_str()).collect::<Vec<_>>(),
        ["a,b", "b,c"]
    );
    assert!(
        matches!(s.index("csv", &"!".to_owned()), Err(IndexError::IndexFunc(e)) if e.key.is_none())
    );
}

#[test]
fn index_keys_are_sorted_and_an_unknown_value_is_empty() {
    let s = store();
    for k in ["z", "b", "m", "a"] {
        s.add(key(k), obj("v")).unwrap();
    }
    assert_eq!(keys(&s, "v"), ["a", "b", "m", "z"]);
    assert!(keys(&s, "other").is_empty());
    assert_eq!(s.by_index("csv", "v").unwrap().len(), 4);
    assert!(s.by_index("csv", "other").unwrap().is_empty());
}

#[test]
fn bookmark_records_the_version_and_plain_writes_do_not() {
    let s = store();
    assert!(s.last_store_sync_resource_version().is_empty());
    s.bookmark("4".into());
    s.add(key("k"), obj("a")).unwrap();
    s.delete("k");
    assert_eq!(s.last_store_sync_resource_version().as_str(), "4");
}

#[test]
fn debug_shows_size_indexes_and_version() {
    let s = store();
    s.add(key("k"), obj("a")).unwrap();
    let text = format!("{s:?}");
    assert!(text.contains("len: 1") && text.contains("csv"), "{text}");
}

#[test]
fn keys_of_every_length_and_script_round_trip_through_the_store() {
    // Keys around the 22-byte inline boundary, long ones and non-ASCII ones (a multi-byte char
    // ending right at, or straddling, the boundary), written, re-written, listed and deleted over
    // several chunks of ids.
    let mut texts: Vec<String> = Vec::new();
    for n in 1..=40 {
        texts.push(format!("ns/{}", "n".repeat(n)));
        texts.push("x".repeat(n));
    }
    for c in ["é", "日", "🦀"] {
        for n in 14..=24 {
            texts.push(format!("ns/{}{c}", "n".repeat(n - 3)));
        }
    }
    texts.push(format!("{}/{}", "a".repeat(63), "b".repeat(253)));
    texts.push("名前空間/名前".to_owned());
    for i in 0..5000 {
        texts.push(format!("ns-{}/name-{i}", i % 7));
    }
    let s = store();
    for t in &texts {
        s.add(key(t), obj(&format!("v,{t}"))).unwrap();
    }
    for t in &texts {
        s.update(key(t), obj(&format!("w,{t}"))).unwrap();
    }
    s.check_invariants().unwrap();
    assert_eq!(s.len(), texts.len());
    let mut listed: Vec<String> = s.list_keys().iter().map(|k| k.to_string()).collect();
    listed.sort();
    let mut want = texts.clone();
    want.sort();
    assert_eq!(listed, want);
    assert_eq!(keys(&s, "w"), want);
    for t in &texts {
        assert_eq!(s.get(t).as_deref(), Some(&format!("w,{t}")));
        assert_eq!(keys(&s, t), std::slice::from_ref(t));
    }
    for t in texts.iter().step_by(2) {
        assert_eq!(s.delete(t).as_deref(), Some(&format!("w,{t}")));
        assert!(s.get(t).is_none());
    }
    s.check_invariants().unwrap();
    // Freed ids are reused by new keys, of other lengths.
    for t in texts.iter().step_by(2) {
        s.add(key(&format!("{t}-again")), obj("z")).unwrap();
    }
    s.check_invariants().unwrap();
    assert_eq!(s.len(), texts.len());
    assert_eq!(keys(&s, "z").len(), texts.len().div_ceil(2));
}
