//! Lists taken page by page (`begin_list`, `list_page`/`list_page_or_apply`, `finish_list`): the
//! same deltas as one `replace` when nothing is popped between pages; with a consumer applying
//! pages between them (directly or through pops), the consumer's cache still ends equal to the
//! list, with exactly one tombstone per key that vanished, and `has_synced` never turns true
//! before the first list is finished.

use kcache_core::{KnownObjects, Object, ObjectKey, ResourceVersion};
use kcache_deltafifo::{
    DeltaFifo, DeltaFifoOptions, DeltaObject, DeltaType, Deltas, KeyedPage, Written,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, PartialEq)]
struct Obj {
    name: String,
    val: u32,
}

impl Object for Obj {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        ResourceVersion::default()
    }
}

fn obj(name: &str, val: u32) -> Arc<Obj> {
    Arc::new(Obj {
        name: name.to_owned(),
        val,
    })
}

/// The consumer's cache, which is also the FIFO's known objects (as an informer's indexer).
#[derive(Default, Clone)]
struct Cache(Arc<Mutex<BTreeMap<String, Arc<Obj>>>>);

impl KnownObjects<Obj> for Cache {
    fn list_keys(&self) -> Vec<ObjectKey> {
        let map = self.0.lock().unwrap();
        map.keys()
            .map(|k| ObjectKey::new(k.as_str()).unwrap())
            .collect()
    }
    fn get_by_key(&self, key: &ObjectKey) -> Option<Arc<Obj>> {
        self.0.lock().unwrap().get(key.as_str()).cloned()
    }
}

/// What the consumer saw for one key: each delta's type, value (None for a tombstone without
/// an object) and whether it was a tombstone; plus the pop's initial flag.
type Seen = (String, Vec<(DeltaType, Option<u32>, bool)>, bool);

impl Cache {
    fn view(&self) -> BTreeMap<String, u32> {
        let map = self.0.lock().unwrap();
        map.iter().map(|(k, v)| (k.clone(), v.val)).collect()
    }

    /// Applies popped deltas as an informer does (deletes remove, everything else writes).
    fn apply(&self, deltas: &Deltas<Obj>) {
        let mut map = self.0.lock().unwrap();
        for d in deltas.iter() {
            match (&d.delta_type, &d.object) {
                (DeltaType::Deleted, DeltaObject::Object(o)) => {
                    map.remove(&o.name);
                }
                (DeltaType::Deleted, DeltaObject::Tombstone(t)) => {
                    map.remove(t.key.as_str());
                }
                (_, DeltaObject::Object(o)) => {
                    map.insert(o.name.clone(), o.clone());
                }
                (_, DeltaObject::Tombstone(_)) => panic!("a tombstone outside a delete"),
            }
        }
    }

    /// Applies a page handed over directly.
    fn apply_page(&self, page: &KeyedPage<Obj>) {
        let mut map = self.0.lock().unwrap();
        for (k, o) in page {
            map.insert(k.as_str().to_owned(), o.clone());
        }
    }
}

fn fifo(cache: &Cache, emit_replaced: bool) -> DeltaFifo<Obj> {
    DeltaFifo::with_options(
        DeltaFifoOptions::new()
            .known_objects(Arc::new(cache.clone()))
            .emit_delta_type_replaced(emit_replaced),
    )
}

fn seen(deltas: &Deltas<Obj>) -> Vec<(DeltaType, Option<u32>, bool)> {
    deltas
        .iter()
        .map(|d| {
            let tomb = d.object.is_tombstone();
            (d.delta_type, d.object.object().map(|o| o.val), tomb)
        })
        .collect()
}

/// Pops one key, applying it to `cache`; `None` when nothing is queued.
fn pop_one(f: &DeltaFifo<Obj>, cache: &Cache) -> Option<Seen> {
    if f.is_empty() {
        return None;
    }
    let out = f
        .pop(|d, initial| {
            cache.apply(&d);
            let key = d.key().map(|k| k.as_str().to_owned()).unwrap_or_default();
            Ok::<_, std::convert::Infallible>((key, seen(&d), initial))
        })
        .unwrap();
    Some(out)
}

fn drain(f: &DeltaFifo<Obj>, cache: &Cache) -> Vec<Seen> {
    std::iter::from_fn(|| pop_one(f, cache)).collect()
}

fn objs(list: &[(String, u32)]) -> Vec<Arc<Obj>> {
    list.iter().map(|(n, v)| obj(n, *v)).collect()
}

/// Objects by name and value.
type Named = Vec<(String, u32)>;
/// Writes: (0 add, 1 update, 2 delete), name, value.
type Writes = Vec<(u8, String, u32)>;

/// A cache state, then writes still queued, then a list: names from a small set so they
/// overlap.
fn scenario() -> impl Strategy<Value = (Named, Writes, Named)> {
    let name =
        prop::sample::select(vec!["a", "b", "c", "d", "e", "f", "g", "h"]).prop_map(str::to_owned);
    let uniq = |v: Vec<(String, u32)>| {
        let mut seen = BTreeSet::new();
        v.into_iter()
            .filter(|(n, _)| seen.insert(n.clone()))
            .collect::<Vec<_>>()
    };
    (
        prop::collection::vec((name.clone(), 0..5u32), 0..8).prop_map(uniq),
        prop::collection::vec((0..3u8, name.clone(), 5..10u32), 0..6),
        prop::collection::vec((name, 10..15u32), 0..8).prop_map(uniq),
    )
}

/// Splits `list` into pages at the given cut points.
fn pages(list: &[(String, u32)], cuts: &[usize]) -> Vec<Vec<(String, u32)>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (list.len() + 1)).collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut from = 0;
    for c in cuts.into_iter().chain([list.len()]) {
        out.push(list[from..c.max(from)].to_vec());
        from = c.max(from);
    }
    out
}

/// Fills `cache` through a first list, then queues `writes` (0 add, 1 update, 2 delete).
fn prepare(
    f: &DeltaFifo<Obj>,
    cache: &Cache,
    state: &[(String, u32)],
    writes: &[(u8, String, u32)],
) {
    f.replace(objs(state), "1".into()).unwrap();
    drain(f, cache);
    for (op, n, v) in writes {
        match op {
            0 => f.add(obj(n, *v)).unwrap(),
            1 => f.update(obj(n, *v)).unwrap(),
            _ => f.delete(obj(n, *v)).unwrap(),
        }
    }
}

proptest! {
    /// Nothing popped between pages: exactly the deltas, order and sync state of one replace.
    #[test]
    fn pages_without_pops_between_them_equal_one_replace(
        (state, writes, list) in scenario(),
        cuts in prop::collection::vec(0..10usize, 0..4),
        emit_replaced in any::<bool>(),
        first_list in any::<bool>(),
    ) {
        let (ca, cb) = (Cache::default(), Cache::default());
        let (a, b) = (fifo(&ca, emit_replaced), fifo(&cb, emit_replaced));
        if !first_list {
            prepare(&a, &ca, &state, &writes);
            prepare(&b, &cb, &state, &writes);
        }
        a.replace(objs(&list), "9".into()).unwrap();
        b.begin_list();
        for page in pages(&list, &cuts) {
            b.list_page(objs(&page)).unwrap();
        }
        prop_assert!(!b.has_synced() || !first_list);
        b.finish_list("9".into());
        prop_assert_eq!(a.has_synced(), b.has_synced());
        prop_assert_eq!(a.len(), b.len());
        loop {
            let (x, y) = (pop_one(&a, &ca), pop_one(&b, &cb));
            prop_assert_eq!(&x, &y);
            prop_assert_eq!(a.has_synced(), b.has_synced());
            if x.is_none() {
                break;
            }
        }
        prop_assert_eq!(ca.view(), cb.view());
    }

    /// A consumer applies pages between them (directly when caught up, else by popping some
    /// keys): the cache ends equal to the list; every key that vanished gets exactly one
    /// tombstone (with its last known state) and no listed key gets one; during a first list
    /// `has_synced` stays false until `finish_list` and the keys popped are initial.
    #[test]
    fn pages_applied_between_them_converge_with_one_tombstone_per_vanished_key(
        (state, writes, list) in scenario(),
        cuts in prop::collection::vec(0..10usize, 0..4),
        pops in prop::collection::vec(0..4usize, 5),
        direct in any::<bool>(),
        first_list in any::<bool>(),
    ) {
        let cache = Cache::default();
        let f = fifo(&cache, true);
        if !first_list {
            prepare(&f, &cache, &state, &writes);
        }
        // What the cache held before the list.
        let before: BTreeSet<String> = cache.view().into_keys().collect();
        let mut popped = Vec::new();
        f.begin_list();
        for (i, page) in pages(&list, &cuts).into_iter().enumerate() {
            if direct {
                let caught_up = f.is_idle();
                let how = f
                    .list_page_or_apply(objs(&page), |p, initial| {
                        assert_eq!(initial, first_list);
                        cache.apply_page(&p);
                        Ok(())
                    })
                    .unwrap();
                prop_assert_eq!(how == Written::Applied, caught_up);
            } else {
                f.list_page(objs(&page)).unwrap();
            }
            for _ in 0..pops[i % pops.len()] {
                if let Some(s) = pop_one(&f, &cache) {
                    popped.push(s);
                }
            }
            if first_list {
                prop_assert!(!f.has_synced(), "synced before the list was finished");
            }
        }
        f.finish_list("9".into());
        popped.extend(drain(&f, &cache));
        prop_assert!(f.has_synced());
        let expected: BTreeMap<String, u32> = list.iter().cloned().collect();
        prop_assert_eq!(cache.view(), expected.clone());
        for (key, deltas, initial) in &popped {
            let tombs = deltas.iter().filter(|d| d.2).count();
            if expected.contains_key(key) {
                prop_assert_eq!(tombs, 0, "listed key {} was tombstoned", key);
            }
            if first_list {
                prop_assert!(*initial, "key {} of the first list popped as not initial", key);
            }
        }
        let count = |key: &str, tomb_only: bool| -> usize {
            popped
                .iter()
                .filter(|(k, _, _)| k == key)
                .map(|(_, d, _)| {
                    d.iter().filter(|d| d.0 == DeltaType::Deleted && (d.2 || !tomb_only)).count()
                })
                .sum()
        };
        for (key, _, _) in &popped {
            prop_assert!(count(key, true) <= 1, "key {} tombstoned twice", key);
        }
        for key in before.iter().filter(|k| !expected.contains_key(*k)) {
            // Cached before, not listed: the consumer hears of its deletion (a tombstone, or the
            // queued delete that came first).
            prop_assert!(count(key, false) >= 1, "vanished key {} never deleted", key);
        }
    }
}

#[test]
fn a_paged_first_list_syncs_only_after_its_last_page_and_the_tombstones() {
    let cache = Cache::default();
    let f = fifo(&cache, true);
    f.begin_list();
    f.list_page(vec![obj("a", 1), obj("b", 1)]).unwrap();
    assert_eq!(pop_one(&f, &cache).map(|s| s.2), Some(true));
    assert_eq!(pop_one(&f, &cache).map(|s| s.2), Some(true));
    assert!(!f.has_synced(), "two pages to go");
    f.list_page(vec![obj("c", 1)]).unwrap();
    assert_eq!(pop_one(&f, &cache).map(|s| s.2), Some(true));
    assert!(!f.has_synced(), "the list is not finished");
    f.list_page(Vec::new()).unwrap();
    f.finish_list("3".into());
    assert!(f.has_synced(), "everything was processed");
    assert_eq!(cache.view().len(), 3);
}

#[test]
fn deletes_are_inferred_across_pages_from_the_known_state() {
    let cache = Cache::default();
    let f = fifo(&cache, true);
    f.replace(
        vec![obj("a", 1), obj("b", 1), obj("c", 1), obj("d", 1)],
        "1".into(),
    )
    .unwrap();
    drain(&f, &cache);
    f.begin_list();
    // Page 1 applied directly: a and c are cached afresh, no longer pending anywhere.
    let how = f
        .list_page_or_apply(vec![obj("c", 2)], |p, initial| {
            assert!(!initial);
            cache.apply_page(&p);
            Ok(())
        })
        .unwrap();
    assert_eq!(how, Written::Applied);
    f.list_page(vec![obj("a", 2)]).unwrap();
    drain(&f, &cache);
    f.finish_list("2".into());
    let popped = drain(&f, &cache);
    let deleted: Vec<_> = popped.iter().map(|s| (s.0.as_str(), s.1.clone())).collect();
    assert_eq!(
        deleted,
        [
            ("b", vec![(DeltaType::Deleted, Some(1), true)]),
            ("d", vec![(DeltaType::Deleted, Some(1), true)]),
        ],
        "a and c were listed on other pages: only b and d vanished"
    );
    assert_eq!(
        cache.view(),
        BTreeMap::from([("a".into(), 2), ("c".into(), 2)])
    );
}

#[test]
fn an_abandoned_attempt_no_longer_counts_as_listed() {
    let cache = Cache::default();
    let f = fifo(&cache, true);
    f.replace(vec![obj("a", 1), obj("b", 1)], "1".into())
        .unwrap();
    drain(&f, &cache);
    // The first attempt lists a and b, then fails (an expired continue token, say).
    f.begin_list();
    f.list_page(vec![obj("a", 2), obj("b", 2)]).unwrap();
    drain(&f, &cache);
    f.abandon_list();
    // The retry (a full list) no longer has b.
    f.begin_list();
    f.list_page(vec![obj("a", 3)]).unwrap();
    f.finish_list("3".into());
    let popped = drain(&f, &cache);
    assert!(
        popped
            .iter()
            .any(|s| s.0 == "b" && s.1 == [(DeltaType::Deleted, Some(2), true)]),
        "b is tombstoned from the state the failed attempt applied: {popped:?}"
    );
    assert_eq!(cache.view(), BTreeMap::from([("a".into(), 3)]));
}

#[test]
fn a_resync_between_pages_is_settled_by_the_rest_of_the_list() {
    let cache = Cache::default();
    let f = fifo(&cache, false);
    f.replace(vec![obj("a", 1), obj("b", 1), obj("c", 1)], "1".into())
        .unwrap();
    drain(&f, &cache);
    f.begin_list();
    f.list_page(vec![obj("a", 2)]).unwrap();
    // A resync between pages: Sync for the known keys with nothing pending (b and c).
    f.resync();
    f.list_page(vec![obj("b", 2)]).unwrap();
    f.finish_list("2".into());
    let popped = drain(&f, &cache);
    let sync = DeltaType::Sync;
    assert_eq!(
        popped
            .iter()
            .map(|s| (s.0.as_str(), s.1.clone()))
            .collect::<Vec<_>>(),
        [
            ("a", vec![(sync, Some(2), false)]),
            ("b", vec![(sync, Some(1), false), (sync, Some(2), false)]),
            (
                "c",
                vec![(sync, Some(1), false), (DeltaType::Deleted, Some(1), true)]
            ),
        ],
        "listed objects come as Sync without emit_delta_type_replaced"
    );
    assert_eq!(
        cache.view(),
        BTreeMap::from([("a".into(), 2), ("b".into(), 2)])
    );
}

#[test]
fn a_page_is_applied_directly_only_when_the_fifo_is_caught_up() {
    let cache = Cache::default();
    let f = fifo(&cache, true);
    f.begin_list();
    let how = f
        .list_page_or_apply(vec![obj("a", 1)], |p, initial| {
            assert!(initial, "the first list's objects are initial");
            cache.apply_page(&p);
            Ok(())
        })
        .unwrap();
    assert_eq!(how, Written::Applied);
    assert!(f.is_empty() && !f.has_synced());
    // Declined: queued.
    let how = f
        .list_page_or_apply(vec![obj("b", 1)], |p, _| Err(p))
        .unwrap();
    assert_eq!(how, Written::Queued);
    // Something queued: the next page queues behind it, apply is not called.
    let how = f
        .list_page_or_apply(vec![obj("c", 1)], |_, _| panic!("not caught up"))
        .unwrap();
    assert_eq!(how, Written::Queued);
    f.finish_list("1".into());
    assert!(!f.has_synced());
    let popped = drain(&f, &cache);
    assert_eq!(popped.len(), 2);
    assert!(popped.iter().all(|s| s.2), "b and c are initial");
    assert!(f.has_synced());
    assert_eq!(cache.view().len(), 3);
}

#[test]
fn a_restarted_list_forgets_what_the_first_attempt_listed() {
    // An expired continue token: the reflector lists again from the start (a full list at the
    // same version), and `begin_list` starts over without an `abandon_list`.
    let cache = Cache::default();
    let f = fifo(&cache, true);
    f.replace(vec![obj("a", 1), obj("b", 1)], "1".into())
        .unwrap();
    drain(&f, &cache);
    f.begin_list();
    f.list_page(vec![obj("b", 2)]).unwrap();
    drain(&f, &cache);
    f.begin_list();
    f.list_page(vec![obj("a", 2)]).unwrap();
    f.finish_list("2".into());
    drain(&f, &cache);
    assert_eq!(
        cache.view(),
        BTreeMap::from([("a".into(), 2)]),
        "b was only listed by the abandoned attempt"
    );
}
