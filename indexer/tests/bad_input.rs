//! Hostile input to the indexer: objects without a valid key, index functions that fail, panic
//! or return a huge number of values, unknown index names. Each case asserts the typed error or
//! the documented behaviour, and that the store stays consistent and usable.

mod common;

use common::pod;
use kcache_core::KeyError;
use kcache_indexer::{AddIndexersError, Indexer, Indexers, StoreError};
use std::panic::{catch_unwind, AssertUnwindSafe};

type Pod = common::Pod;

fn by_label() -> Indexers<Pod> {
    Indexers::new().with("app", |p: &Pod| {
        assert!(p.name != "boom", "the index function panics on boom");
        match p.labels.get("app") {
            Some(v) if v == "bad" => Err("the index function refuses bad".into()),
            Some(v) => Ok(vec![v.clone()]),
            None => Ok(vec![]),
        }
    })
}

#[test]
fn objects_without_a_valid_key_are_typed_errors_and_change_nothing() {
    let cache: Indexer<Pod> = Indexer::with_indexers(by_label());
    for (ns, name) in [("ns", ""), ("a/b", "x"), ("ns", "x/y")] {
        let r = cache.add(pod(ns, name).label("app", "web").arc());
        assert!(
            matches!(r, Err(StoreError::Key(_))),
            "{ns:?}/{name:?}: {r:?}"
        );
        let d = cache.delete(&pod(ns, name));
        assert!(d.is_err(), "{ns:?}/{name:?}: {d:?}");
    }
    assert!(cache.is_empty());
    assert_eq!(cache.by_index("app", "web").unwrap().len(), 0);
    assert!(matches!(
        kcache_core::ObjectKey::new("a/b/c"),
        Err(KeyError::TooManySlashes(_))
    ));
}

#[test]
fn a_failing_or_panicking_index_function_leaves_the_store_as_it_was() {
    let cache: Indexer<Pod> = Indexer::with_indexers(by_label());
    cache.add(pod("ns", "a").label("app", "web").arc()).unwrap();
    let r = cache.update(pod("ns", "a").label("app", "bad").arc());
    assert!(matches!(r, Err(StoreError::IndexFunc(_))), "{r:?}");
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        let _ = cache.add(pod("ns", "boom").label("app", "web").arc());
    }));
    assert!(panicked.is_err(), "the panic reaches the writer");
    // Unchanged, consistent, usable.
    assert_eq!(cache.len(), 1);
    assert_eq!(cache.by_index("app", "web").unwrap().len(), 1);
    cache.add(pod("ns", "b").label("app", "web").arc()).unwrap();
    assert_eq!(cache.by_index("app", "web").unwrap().len(), 2);
}

#[test]
fn a_relist_leaves_out_only_the_objects_the_indexer_refuses() {
    let cache: Indexer<Pod> = Indexer::with_indexers(by_label());
    let listed = vec![
        pod("ns", "a").label("app", "web").arc(),
        pod("ns", "b").label("app", "bad").arc(),
        pod("ns", "").arc(),
    ];
    let r = cache.replace_skipping_refused(listed, "7".into());
    assert!(
        matches!(&r, Err(StoreError::Refused { refused }) if refused.len() == 2),
        "{r:?}"
    );
    assert_eq!(cache.len(), 1);
    assert!(cache.get_by_key("ns/a").is_some());
}

#[test]
fn unknown_index_names_and_conflicting_indexers_are_typed_errors() {
    let cache: Indexer<Pod> = Indexer::with_indexers(by_label());
    assert!(cache.by_index("nope", "x").is_err());
    assert!(cache.index_keys("nope", "x").is_err());
    let r = cache.add_indexers(Indexers::new().with("app", |_: &Pod| Ok(vec![])));
    assert!(
        matches!(&r, Err(AddIndexersError::Conflict { names }) if names == &["app"]),
        "{r:?}"
    );
}

#[test]
fn an_object_with_many_index_values_is_indexed_once_per_distinct_value() {
    // Linear, not quadratic, in the number of values (the complexity itself is checked by a
    // unit test counting comparisons in src/index.rs); here: the result.
    let cache: Indexer<Pod> = Indexer::with_indexers(Indexers::new().with("many", |p: &Pod| {
        let n: usize = p.labels.get("n").and_then(|n| n.parse().ok()).unwrap_or(0);
        Ok((0..n).map(|i| format!("v{}", i % (n / 2).max(1))).collect())
    }));
    cache.add(pod("ns", "a").label("n", "20000").arc()).unwrap();
    assert_eq!(cache.list_index_func_values("many").len(), 10_000);
    assert_eq!(cache.by_index("many", "v9999").unwrap().len(), 1);
    cache.update(pod("ns", "a").label("n", "2").arc()).unwrap();
    assert_eq!(cache.list_index_func_values("many").len(), 1);
}
