//! Writes: resource versions, write errors, stamping, sharing.

mod common;

use common::{item, ok, rv, source, Item};
use kcache_core::{KeyError, Meta, ObjectKey, ResourceVersion};
use kcache_memory::{MemoryError, MemorySource, MetaMut};
use std::collections::BTreeMap;
use std::sync::Arc;

#[test]
fn a_new_source_is_at_version_one_and_every_write_takes_the_next() {
    let (s, _) = source();
    assert_eq!(s.resource_version(), rv("1"));
    let a = ok(s.create(item("a", 1)));
    let b = ok(s.create(item("b", 1)));
    let a2 = ok(s.update(item("a", 2)));
    let gone = ok(s.delete("ns/b"));
    let versions: Vec<_> = [&a, &b, &a2, &gone]
        .iter()
        .map(|o| o.rv.to_string())
        .collect();
    assert_eq!(versions, ["2", "3", "4", "5"]);
    assert_eq!(s.resource_version(), rv("5"));
}

#[test]
fn the_stored_object_carries_its_version_through_the_accessor() {
    let (s, _) = source();
    let mut given = item("a", 1);
    given.rv = rv("999");
    ok(s.create(given));
    let stored = s.get("ns/a").unwrap_or_else(|| panic!("stored"));
    assert_eq!(
        <kcache_core::ObjectAccessor as Meta<Item>>::resource_version(&stored),
        rv("2")
    );
}

#[test]
fn create_of_an_existing_key_is_already_exists_and_changes_nothing() {
    let (s, _) = source();
    ok(s.create(item("a", 1)));
    let err = s.create(item("a", 2));
    assert!(matches!(&err, Err(MemoryError::AlreadyExists { key }) if key.as_str() == "ns/a"));
    assert_eq!(s.resource_version(), rv("2"));
    assert_eq!(s.get("ns/a").map(|o| o.value), Some(1));
}

#[test]
fn update_and_delete_of_a_missing_key_are_not_found() {
    let (s, _) = source();
    assert!(matches!(
        s.update(item("a", 1)),
        Err(MemoryError::NotFound { .. })
    ));
    assert!(matches!(
        s.delete("ns/a"),
        Err(MemoryError::NotFound { .. })
    ));
    assert_eq!(s.resource_version(), rv("1"));
}

#[test]
fn update_if_with_a_stale_version_is_a_conflict_and_changes_nothing() {
    let (s, _) = source();
    let v1 = ok(s.create(item("a", 1)));
    let v2 = ok(s.update_if(item("a", 2), &v1.rv));
    assert_eq!(v2.rv, rv("3"));
    let err = s.update_if(item("a", 3), &v1.rv);
    assert_eq!(
        err,
        Err(MemoryError::Conflict {
            key: ok(ObjectKey::new("ns/a")),
            expected: rv("2"),
            stored: rv("3")
        })
    );
    assert!(matches!(
        s.update_if(item("a", 3), &rv("junk")),
        Err(MemoryError::Conflict { .. })
    ));
    assert_eq!(s.get("ns/a").map(|o| o.value), Some(2));
    assert_eq!(s.resource_version(), rv("3"));
}

#[test]
fn delete_if_deletes_only_at_the_expected_version() {
    let (s, _) = source();
    ok(s.create(item("a", 1)));
    assert!(matches!(
        s.delete_if("ns/a", &rv("1")),
        Err(MemoryError::Conflict { .. })
    ));
    assert!(s.get("ns/a").is_some());
    ok(s.delete_if("ns/a", &rv("2")));
    assert!(s.get("ns/a").is_none());
}

#[test]
fn delete_returns_the_last_state_stamped_with_the_deletion_version() {
    let (s, _) = source();
    ok(s.create(item("a", 7)));
    let last = ok(s.delete("ns/a"));
    assert_eq!((last.value, last.rv.as_str()), (7, "3"));
    assert!(s.is_empty());
}

#[test]
fn bad_keys_are_typed_errors_not_panics() {
    let (s, _) = source();
    assert_eq!(
        s.create(item("", 1)),
        Err(MemoryError::Key(KeyError::MissingName))
    );
    assert!(matches!(s.update(item("", 1)), Err(MemoryError::Key(_))));
    assert!(matches!(
        s.delete("a/b/c"),
        Err(MemoryError::Key(KeyError::TooManySlashes(_)))
    ));
    assert!(matches!(s.delete(""), Err(MemoryError::Key(_))));
    assert_eq!(s.resource_version(), rv("1"));
}

#[test]
fn readers_share_the_stored_allocation() {
    let (s, _) = source();
    let created = ok(s.create(item("a", 1)));
    let got = s.get("ns/a").unwrap_or_else(|| panic!("stored"));
    assert!(Arc::ptr_eq(&created, &got));
    assert!(Arc::ptr_eq(&created, &s.list_all()[0]));
}

#[test]
fn list_all_is_in_key_order_and_len_counts_objects() {
    let (s, _) = source();
    for name in ["c", "a", "b"] {
        ok(s.create(item(name, 0)));
    }
    let names: Vec<_> = s.list_all().iter().map(|o| o.name.clone()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(s.len(), 3);
    ok(s.delete("ns/b"));
    assert_eq!(s.len(), 2);
}

#[test]
fn clones_share_one_source() {
    let (s, _) = source();
    let other = s.clone();
    ok(other.create(item("a", 1)));
    assert_eq!(s.get("ns/a").map(|o| o.value), Some(1));
}

/// A type the test "does not own": a map with the key and version in well-known entries.
type Labels = BTreeMap<String, String>;

struct LabelsMeta;

impl Meta<Labels> for LabelsMeta {
    fn key(obj: &Labels) -> Result<ObjectKey, KeyError> {
        ObjectKey::new(obj.get("name").ok_or(KeyError::MissingName)?.as_str())
    }
    fn resource_version(obj: &Labels) -> ResourceVersion {
        obj.get("rv")
            .map(|s| ResourceVersion::from(s.as_str()))
            .unwrap_or_default()
    }
}

impl MetaMut<Labels> for LabelsMeta {
    fn set_resource_version(obj: &mut Labels, rv: ResourceVersion) {
        obj.insert("rv".into(), rv.to_string());
    }
}

#[test]
fn a_custom_accessor_stamps_types_the_source_does_not_own() {
    let s = MemorySource::<Labels, LabelsMeta>::new();
    let obj = Labels::from([("name".to_owned(), "node-a".to_owned())]);
    let stored = ok(s.create(obj));
    assert_eq!(LabelsMeta::resource_version(&stored), rv("2"));
    assert_eq!(
        s.create(Labels::new()),
        Err(MemoryError::Key(KeyError::MissingName))
    );
    let gone = ok(s.delete("node-a"));
    assert_eq!(LabelsMeta::resource_version(&gone), rv("3"));
}
