//! Ported from client-go `tools/cache/index_test.go` (TestGetIndexFuncValues,
//! TestMultiIndexKeys, and the add-indexers-after-add cases), rewritten for kcache.

mod common;

use common::{pod, Pod};
use kcache_indexer::{AddIndexersError, BoxError, Indexer, Indexers};
use std::collections::BTreeSet;

/// One value: the pod's `foo` label (empty when absent).
fn by_foo_label(p: &Pod) -> Result<Vec<String>, BoxError> {
    Ok(vec![p.labels.get("foo").cloned().unwrap_or_default()])
}

/// Several values: the comma-separated `users` annotation.
fn by_users(p: &Pod) -> Result<Vec<String>, BoxError> {
    let users = p.annotations.get("users").map(String::as_str).unwrap_or("");
    Ok(users.split(',').map(str::to_owned).collect())
}

fn names(pods: &[std::sync::Arc<Pod>]) -> BTreeSet<String> {
    pods.iter().map(|p| p.name.clone()).collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn list_index_func_values_lists_each_distinct_value_once() {
    let index: Indexer<Pod> =
        Indexer::with_indexers(Indexers::new().with("testmodes", by_foo_label));
    index.add(pod("", "one").label("foo", "bar").arc()).unwrap();
    index.add(pod("", "two").label("foo", "bar").arc()).unwrap();
    index.add(pod("", "tre").label("foo", "biz").arc()).unwrap();

    let values = index.list_index_func_values("testmodes");
    assert_eq!(
        values.iter().map(|v| &**v).collect::<Vec<_>>(),
        ["bar", "biz"]
    );
}

#[test]
fn multi_valued_index_keys_follow_adds_deletes_and_updates() {
    let index: Indexer<Pod> = Indexer::with_indexers(Indexers::new().with("byUser", by_users));
    let pod1 = pod("", "one").annotation("users", "ernie,bert");
    let pod2 = pod("", "two").annotation("users", "bert,oscar");
    let pod3 = pod("", "tre").annotation("users", "ernie,elmo");
    index.add(pod1.clone().arc()).unwrap();
    index.add(pod2.clone().arc()).unwrap();
    index.add(pod3.clone().arc()).unwrap();

    for (user, expected) in [
        ("ernie", set(&["one", "tre"])),
        ("bert", set(&["one", "two"])),
        ("elmo", set(&["tre"])),
        ("oscar", set(&["two"])),
        ("nobody", set(&[])),
    ] {
        assert_eq!(
            names(&index.by_index("byUser", user).unwrap()),
            expected,
            "{user}"
        );
    }

    index.delete(&pod3).unwrap();
    assert_eq!(
        names(&index.by_index("byUser", "ernie").unwrap()),
        set(&["one"])
    );
    assert!(index.by_index("byUser", "elmo").unwrap().is_empty());

    let mut pod2_only_oscar = pod2.clone();
    pod2_only_oscar
        .annotations
        .insert("users".into(), "oscar".into());
    index.update(pod2_only_oscar.arc()).unwrap();
    assert_eq!(
        names(&index.by_index("byUser", "bert").unwrap()),
        set(&["one"])
    );
}

#[test]
fn indexers_added_after_objects_index_them_and_keep_up_with_later_writes() {
    let index: Indexer<Pod> = Indexer::new();
    index
        .add_indexers(Indexers::new().with("testmodes", by_foo_label))
        .unwrap();

    let pod1 = pod("", "one").label("foo", "bar");
    index.add(pod1.clone().arc()).unwrap();
    index.add(pod("", "two").label("foo", "bar").arc()).unwrap();
    index.add(pod("", "tre").label("foo", "biz").arc()).unwrap();

    // A second index on the populated store sees every object at once.
    index
        .add_indexers(Indexers::new().with("testmodes2", by_foo_label))
        .unwrap();
    assert_eq!(
        names(&index.by_index("testmodes2", "bar").unwrap()),
        set(&["one", "two"])
    );
    assert_eq!(
        names(&index.by_index("testmodes2", "biz").unwrap()),
        set(&["tre"])
    );

    // A name clash is refused.
    let err = index
        .add_indexers(Indexers::new().with("testmodes", by_foo_label))
        .unwrap_err();
    assert!(matches!(err, AddIndexersError::Conflict { .. }));

    // Both indexes follow later writes.
    index.add(pod("", "for").label("foo", "biz").arc()).unwrap();
    index.delete(&pod1).unwrap();
    for name in ["testmodes", "testmodes2"] {
        assert_eq!(
            names(&index.by_index(name, "bar").unwrap()),
            set(&["two"]),
            "{name}"
        );
        assert_eq!(
            names(&index.by_index(name, "biz").unwrap()),
            set(&["for", "tre"]),
            "{name}"
        );
    }
}

#[test]
fn index_unions_the_objects_of_every_value_of_the_probe() {
    let index: Indexer<Pod> = Indexer::with_indexers(Indexers::new().with("byUser", by_users));
    index
        .add(pod("", "one").annotation("users", "ernie,bert").arc())
        .unwrap();
    index
        .add(pod("", "two").annotation("users", "bert,oscar").arc())
        .unwrap();
    index
        .add(pod("", "tre").annotation("users", "elmo").arc())
        .unwrap();

    let probe = pod("", "probe").annotation("users", "bert,oscar");
    let found = index.index("byUser", &probe).unwrap();
    assert_eq!(
        found.len(),
        2,
        "each object once, though it matches two values"
    );
    assert_eq!(names(&found), set(&["one", "two"]));
}
