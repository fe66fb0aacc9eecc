//! The `Indexer` (a store keyed by a `Meta` accessor): key failures, delete semantics, resource
//! versions, the reflector-facing traits, the namespace index and the listers.

mod common;

use common::{pod, Pod};
use kcache_core::{KeyError, KnownObjects, ObjectAccessor, ReflectorStore};
use kcache_indexer::{
    namespace_index_fn, BoxError, Indexer, Indexers, StoreError, NAMESPACE_INDEX,
};
use std::sync::Arc;

fn by_app(p: &Pod) -> Result<Vec<String>, BoxError> {
    Ok(p.labels.get("app").cloned().into_iter().collect())
}

fn with_namespace_index() -> Indexer<Pod> {
    Indexer::with_indexers(
        Indexers::new()
            .with(NAMESPACE_INDEX, namespace_index_fn::<Pod, ObjectAccessor>)
            .with("app", by_app),
    )
}

fn sorted_names(pods: Vec<Arc<Pod>>) -> Vec<String> {
    let mut names: Vec<String> = pods.iter().map(|p| p.name.clone()).collect();
    names.sort();
    names
}

#[test]
fn a_key_accessor_failure_is_returned_and_changes_nothing() {
    let store = with_namespace_index();
    store.bookmark("1".into());
    let nameless = pod("ns", "").rv("5");
    assert!(matches!(
        store.add(nameless.clone().arc()),
        Err(StoreError::Key(KeyError::MissingName))
    ));
    assert!(matches!(
        store.delete(&nameless),
        Err(KeyError::MissingName)
    ));
    assert!(matches!(store.get(&nameless), Err(KeyError::MissingName)));
    let err = store
        .replace(vec![pod("ns", "ok").arc(), nameless.arc()], "9".into())
        .unwrap_err();
    assert!(matches!(err, StoreError::Key(_)));
    assert!(store.is_empty());
    assert!(store.list_index_func_values(NAMESPACE_INDEX).is_empty());
    assert_eq!(store.last_store_sync_resource_version().as_str(), "1");
}

#[test]
fn an_index_function_failure_is_a_store_error_and_records_no_version() {
    let store: Indexer<Pod> = Indexer::with_indexers(Indexers::new().with("strict", |p: &Pod| {
        p.labels
            .get("app")
            .map(|a| vec![a.clone()])
            .ok_or_else(|| "no app label".into())
    }));
    let err = store.add(pod("ns", "a").rv("3").arc()).unwrap_err();
    assert!(matches!(&err, StoreError::IndexFunc(e) if e.index == "strict"));
    assert!(store.is_empty());
    assert!(store.last_store_sync_resource_version().is_empty());
}

#[test]
fn delete_removes_index_entries_according_to_the_stored_object_not_the_passed_one() {
    let store = with_namespace_index();
    store.add(pod("ns", "a").label("app", "web").arc()).unwrap();
    // The delete event carries a stale copy with another label.
    let removed = store.delete(&pod("ns", "a").label("app", "db")).unwrap();
    assert_eq!(removed.unwrap().labels["app"], "web");
    assert!(store.list_index_func_values("app").is_empty());
    assert!(store.by_index("app", "web").unwrap().is_empty());
    store.thread_safe_store().check_invariants().unwrap();
}

#[test]
fn the_indexer_is_a_reflector_store_and_known_objects() {
    fn feed<S: ReflectorStore<Pod>>(s: &S) -> Result<(), S::Error> {
        s.replace(
            vec![pod("ns", "a").rv("1").arc(), pod("ns", "b").rv("2").arc()],
            "3".into(),
        )?;
        s.add(pod("ns", "c").rv("4").arc())?;
        s.update(pod("ns", "a").rv("5").arc())?;
        s.delete(pod("ns", "b").rv("6").arc())?;
        s.resync()?;
        s.bookmark("7".into())
    }
    fn known(k: &dyn KnownObjects<Pod>) -> Vec<String> {
        let mut keys: Vec<String> = k.list_keys().iter().map(|k| k.to_string()).collect();
        keys.sort();
        keys
    }
    let store = Arc::new(with_namespace_index());
    feed(&*store).unwrap();
    assert_eq!(known(&store), ["ns/a", "ns/c"]);
    let key = kcache_core::ObjectKey::namespaced("ns", "a").unwrap();
    assert_eq!(
        KnownObjects::get_by_key(&store, &key)
            .unwrap()
            .resource_version,
        "5"
    );
    assert_eq!(store.last_store_sync_resource_version().as_str(), "7");
}

#[test]
fn unlisted_keys_are_the_known_keys_a_relist_left_out() {
    let store = Arc::new(with_namespace_index());
    for name in ["a", "b", "c", "d"] {
        store.add(pod("ns", name).rv("1").arc()).unwrap();
    }
    let listed = |k: &str| k == "ns/a" || k == "ns/c";
    let mut left_out: Vec<String> = KnownObjects::unlisted_keys(&store, &listed)
        .iter()
        .map(|k| k.to_string())
        .collect();
    left_out.sort();
    assert_eq!(left_out, ["ns/b", "ns/d"]);
    assert!(KnownObjects::unlisted_keys(&store, &|_| true).is_empty());
}

#[test]
fn objects_are_shared_with_every_reader_never_copied() {
    let store = with_namespace_index();
    let p = pod("ns", "a").label("app", "web").arc();
    store.add(p.clone()).unwrap();
    for found in [
        store.get_by_key("ns/a").unwrap(),
        store.list()[0].clone(),
        store.by_index("app", "web").unwrap()[0].clone(),
        store.by_namespace("ns")[0].clone(),
        store.list_all(|_| true)[0].clone(),
    ] {
        assert!(Arc::ptr_eq(&found, &p));
    }
}

#[test]
fn namespace_index_fn_puts_cluster_scoped_objects_under_the_empty_namespace() {
    let store = with_namespace_index();
    store.add(pod("", "node-1").arc()).unwrap();
    store.add(pod("kube-system", "dns").arc()).unwrap();
    let values: Vec<String> = store
        .list_index_func_values(NAMESPACE_INDEX)
        .iter()
        .map(|v| v.to_string())
        .collect();
    assert_eq!(values, ["", "kube-system"]);
    assert_eq!(sorted_names(store.by_namespace("")), ["node-1"]);
}

fn populate(store: &Indexer<Pod>) {
    for (ns, name, app) in [
        ("a", "a1", "web"),
        ("a", "a2", "db"),
        ("b", "b1", "web"),
        ("", "c1", "web"),
    ] {
        store.add(pod(ns, name).label("app", app).arc()).unwrap();
    }
}

#[test]
fn listers_give_the_same_answers_with_or_without_the_namespace_index() {
    let indexed = with_namespace_index();
    let scanned: Indexer<Pod> = Indexer::new();
    populate(&indexed);
    populate(&scanned);
    let web = |p: &Pod| p.labels.get("app").is_some_and(|a| a == "web");
    for store in [&indexed, &scanned] {
        assert_eq!(sorted_names(store.list_all(web)), ["a1", "b1", "c1"]);
        assert_eq!(sorted_names(store.list_by_namespace("a", web)), ["a1"]);
        assert_eq!(
            sorted_names(store.list_by_namespace("a", |_| true)),
            ["a1", "a2"]
        );
        // "" means every namespace for the lister, as in client-go's ListAllByNamespace.
        assert_eq!(
            sorted_names(store.list_by_namespace("", web)),
            ["a1", "b1", "c1"]
        );
        assert!(store.list_by_namespace("missing", |_| true).is_empty());
        assert_eq!(sorted_names(store.by_namespace("b")), ["b1"]);
        assert_eq!(sorted_names(store.by_namespace("")), ["c1"]);
    }
}

#[test]
fn add_indexers_on_a_populated_indexer_installs_the_namespace_index() {
    let store: Indexer<Pod> = Indexer::new();
    populate(&store);
    store
        .add_indexers(
            Indexers::new().with(NAMESPACE_INDEX, namespace_index_fn::<Pod, ObjectAccessor>),
        )
        .unwrap();
    assert_eq!(store.indexer_names(), [NAMESPACE_INDEX]);
    let keys: Vec<String> = store
        .index_keys(NAMESPACE_INDEX, "a")
        .unwrap()
        .iter()
        .map(|k| k.to_string())
        .collect();
    assert_eq!(keys, ["a/a1", "a/a2"]);
}

#[test]
fn concurrent_readers_always_see_objects_under_their_own_index_values() {
    let store = Arc::new(with_namespace_index());
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..2000 {
                    let app = if i % 2 == 0 { "web" } else { "db" };
                    let p = pod("ns", &format!("p{w}-{}", i % 7)).label("app", app);
                    if i % 5 == 4 {
                        store.delete(&p).unwrap();
                    } else {
                        store.update(p.arc()).unwrap();
                    }
                }
            })
        })
        .collect();
    let reader = {
        let store = store.clone();
        std::thread::spawn(move || {
            for _ in 0..2000 {
                for app in ["web", "db"] {
                    for p in store.by_index("app", app).unwrap() {
                        assert_eq!(p.labels["app"], app);
                    }
                }
            }
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    reader.join().unwrap();
    store.thread_safe_store().check_invariants().unwrap();
}

#[test]
fn the_emitting_namespace_and_value_indexes_agree_with_the_list_forms() {
    let lists = with_namespace_index();
    let emitting: Indexer<Pod> = Indexer::with_indexers(
        Indexers::new()
            .with_namespace_index::<ObjectAccessor>()
            .with_each_value("app", |p: &Pod, emit: &mut dyn FnMut(&str)| {
                if let Some(app) = p.labels.get("app") {
                    emit(app);
                    emit(app); // repeats are ignored
                }
                Ok(())
            }),
    );
    for store in [&lists, &emitting] {
        store.add(pod("a", "x").label("app", "web").arc()).unwrap();
        store.add(pod("b", "y").label("app", "web").arc()).unwrap();
        store.add(pod("", "z").arc()).unwrap();
        store
            .update(pod("a", "x").label("app", "db").arc())
            .unwrap();
        // Written with a key the accessor did not compute: the namespace comes from the object.
        store
            .thread_safe_store()
            .add(
                kcache_core::ObjectKey::new("other/w").unwrap(),
                pod("b", "w").arc(),
            )
            .unwrap();
        store.thread_safe_store().check_invariants().unwrap();
    }
    for (index, value) in [
        (NAMESPACE_INDEX, "a"),
        (NAMESPACE_INDEX, "b"),
        (NAMESPACE_INDEX, ""),
        (NAMESPACE_INDEX, "other"),
        ("app", "web"),
        ("app", "db"),
    ] {
        assert_eq!(
            sorted_names(lists.by_index(index, value).unwrap()),
            sorted_names(emitting.by_index(index, value).unwrap()),
            "{index}={value}"
        );
    }
    assert_eq!(
        lists.list_index_func_values(NAMESPACE_INDEX),
        emitting.list_index_func_values(NAMESPACE_INDEX)
    );
}

#[test]
fn an_emitting_function_that_fails_after_emitting_changes_nothing() {
    let store: Indexer<Pod> = Indexer::with_indexers(Indexers::new().with_each_value(
        "app",
        |p: &Pod, emit: &mut dyn FnMut(&str)| {
            emit("seen");
            if p.labels.contains_key("bad") {
                return Err("bad pod".into());
            }
            Ok(())
        },
    ));
    store.add(pod("a", "x").arc()).unwrap();
    assert!(store.add(pod("a", "x").label("bad", "1").arc()).is_err());
    assert!(store.add(pod("a", "y").label("bad", "1").arc()).is_err());
    assert_eq!(store.len(), 1);
    assert_eq!(store.index_keys("app", "seen").unwrap().len(), 1);
    store.thread_safe_store().check_invariants().unwrap();
}

#[test]
fn update_with_key_stores_indexes_and_records_the_version_like_update() {
    let with_key = with_namespace_index();
    let plain = with_namespace_index();
    for (i, store) in [&with_key, &plain].into_iter().enumerate() {
        let p = Arc::new(pod("prod", "web").rv("5"));
        if i == 0 {
            let key = store.key_of(&p).unwrap();
            store.update_with_key(key, p).unwrap();
        } else {
            store.update(p).unwrap();
        }
    }
    assert_eq!(
        with_key.get_by_key("prod/web"),
        plain.get_by_key("prod/web")
    );
    assert_eq!(
        sorted_names(with_key.by_index(NAMESPACE_INDEX, "prod").unwrap()),
        ["web"]
    );
    assert_eq!(
        with_key.last_store_sync_resource_version(),
        plain.last_store_sync_resource_version()
    );
}

#[test]
fn replace_skipping_refused_stores_everything_else_and_names_what_it_left_out() {
    let strict = Indexer::<Pod>::with_indexers(Indexers::new().with("app", refuse_bad));
    let listed = || {
        vec![
            pod("ns", "a").label("app", "web").rv("2").arc(),
            pod("ns", "bad").label("app", "bad").rv("3").arc(),
            pod("ns", "").rv("4").arc(),
            pod("ns", "b").label("app", "db").rv("5").arc(),
        ]
    };
    // The all-or-nothing form refuses the whole list.
    assert!(strict.replace(listed(), "9".into()).is_err());
    assert!(strict.is_empty());

    let lenient = Indexer::<Pod>::with_indexers(Indexers::new().with("app", refuse_bad));
    lenient.add(pod("ns", "old").rv("1").arc()).unwrap();
    let err = lenient
        .replace_skipping_refused(listed(), "9".into())
        .unwrap_err();
    let StoreError::Refused { refused } = err else {
        panic!("expected Refused, got {err:?}");
    };
    assert_eq!(refused.len(), 2);
    assert!(refused.iter().any(|e| matches!(e, StoreError::Key(_))));
    assert!(refused.iter().any(
        |e| matches!(e, StoreError::IndexFunc(f) if f.key.as_ref().map(|k| k.as_str()) == Some("ns/bad"))
    ));
    assert_eq!(
        sorted_names(lenient.list()),
        ["a", "b"],
        "old is gone, a and b stored"
    );
    assert_eq!(sorted_names(lenient.by_index("app", "db").unwrap()), ["b"]);
    assert_eq!(lenient.last_store_sync_resource_version().as_str(), "9");
    assert!(ReflectorStore::replace_applied(
        &lenient,
        &StoreError::Refused { refused: vec![] }
    ));
    // A clean list is simply stored.
    lenient
        .replace_skipping_refused(vec![pod("ns", "c").label("app", "x").arc()], "10".into())
        .unwrap();
    assert_eq!(sorted_names(lenient.list()), ["c"]);
}

fn refuse_bad(p: &Pod) -> Result<Vec<String>, BoxError> {
    match p.labels.get("app").map(String::as_str) {
        Some("bad") => Err("bad app".into()),
        other => Ok(other.map(str::to_owned).into_iter().collect()),
    }
}

#[test]
fn a_function_that_fails_only_once_leaves_the_store_unchanged() {
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let calls = Arc::new(calls);
    let c = calls.clone();
    let store = Indexer::<Pod>::with_indexers(Indexers::new().with("flaky", move |_: &Pod| {
        if c.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            Err("once".into())
        } else {
            Ok(vec![])
        }
    }));
    store.bookmark("1".into());
    let err = store
        .replace_skipping_refused(vec![pod("ns", "a").arc()], "2".into())
        .unwrap_err();
    assert!(matches!(err, StoreError::IndexFunc(_)));
    assert!(store.is_empty());
    assert_eq!(store.last_store_sync_resource_version().as_str(), "1");
}
