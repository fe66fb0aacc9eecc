//! The behaviour checked by client-go's `tools/cache/delta_fifo_test.go` (kubernetes/client-go),
//! rewritten in Rust in our own words.
//!
//! Left out, because the API is gone from client-go's DeltaFIFO since v0.33 or has no Rust
//! counterpart: `requeueOnPop` (`ErrRequeue`), `addIfNotPresent`, `KeyOf` on `Deltas` and on
//! tombstones, and the `List`/`ListKeys`/`Get` accessors.

use kcache_core::{KnownObjects, Object, ObjectKey, ResourceVersion};
use kcache_deltafifo::{Delta, DeltaFifo, DeltaFifoOptions, DeltaType, DeltaType::*, Deltas};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq)]
struct Obj {
    name: &'static str,
    val: u32,
}

impl Object for Obj {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn name(&self) -> &str {
        self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        ResourceVersion::default()
    }
}

fn obj(name: &'static str, val: u32) -> Arc<Obj> {
    Arc::new(Obj { name, val })
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(name).unwrap()
}

/// A fixed list of known objects, listed in the order given.
struct Literal(Vec<Arc<Obj>>);

impl KnownObjects<Obj> for Literal {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0.iter().map(|o| key(o.name)).collect()
    }
    fn get_by_key(&self, k: &ObjectKey) -> Option<Arc<Obj>> {
        self.0.iter().find(|o| o.name == k.as_str()).cloned()
    }
}

fn plain() -> DeltaFifo<Obj> {
    DeltaFifo::new()
}

fn with_known(known: &[(&'static str, u32)], emit_replaced: bool) -> DeltaFifo<Obj> {
    let known = Literal(known.iter().map(|&(n, v)| obj(n, v)).collect());
    DeltaFifo::with_options(
        DeltaFifoOptions::new()
            .known_objects(Arc::new(known))
            .emit_delta_type_replaced(emit_replaced),
    )
}

fn pop(f: &DeltaFifo<Obj>) -> Deltas<Obj> {
    f.pop(|d, _| Ok::<_, std::convert::Infallible>(d)).unwrap()
}

fn pop_newest_val(f: &DeltaFifo<Obj>) -> u32 {
    pop(f)
        .newest()
        .and_then(|d| d.object.object())
        .map(|o| o.val)
        .unwrap()
}

fn d(ty: DeltaType, name: &'static str, val: u32) -> Delta<Obj> {
    Delta::new(ty, obj(name, val))
}

fn tomb(name: &'static str, val: Option<u32>) -> Delta<Obj> {
    Delta::tombstone(key(name), val.map(|v| obj(name, v)))
}

fn rv() -> ResourceVersion {
    ResourceVersion::from("0")
}

#[test]
fn two_concurrent_producers_each_see_their_own_order_kept() {
    let f: Arc<DeltaFifo<Obj>> = Arc::new(plain());
    const N: u32 = 200;
    let names: Vec<&'static str> = (0..2 * N)
        .map(|i| &*Box::leak(format!("o{i}").into_boxed_str()))
        .collect();
    let producers: Vec<_> = [0, N]
        .into_iter()
        .map(|base| {
            let (f, names) = (f.clone(), names.clone());
            std::thread::spawn(move || {
                for i in 0..N {
                    f.add(obj(names[(base + i) as usize], base + i + 1))
                        .unwrap();
                }
            })
        })
        .collect();
    let (mut last_low, mut last_high) = (0, N);
    for _ in 0..2 * N {
        let v = pop_newest_val(&f);
        let last = if v <= N {
            &mut last_low
        } else {
            &mut last_high
        };
        assert!(v > *last, "{v} came after {last}");
        *last = v;
    }
    for p in producers {
        p.join().unwrap();
    }
}

#[test]
fn a_relist_after_a_queued_delete_still_delivers_the_listed_object() {
    // kubernetes/kubernetes#83810: without the Replaced delta the informer misses the re-creation.
    let f = with_known(&[("foo", 1)], true);
    f.delete(obj("foo", 1)).unwrap();
    f.replace(vec![obj("foo", 2)], ResourceVersion::default())
        .unwrap();
    assert_eq!(*pop(&f), [d(Deleted, "foo", 1), d(Replaced, "foo", 2)]);
}

#[test]
fn add_update_delete_of_one_key_pop_as_one_item() {
    let f = plain();
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("foo", 12)).unwrap();
    f.delete(obj("foo", 15)).unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!(pop_newest_val(&f), 15);
    assert!(f.is_empty());
}

#[test]
fn the_transformer_sees_each_object_once_and_tombstones_carry_transformed_objects() {
    #[derive(Debug)]
    struct X {
        name: &'static str,
        rv: u32,
        xfrm: u32,
    }
    impl Object for X {
        fn namespace(&self) -> Option<&str> {
            None
        }
        fn name(&self) -> &str {
            self.name
        }
        fn resource_version(&self) -> ResourceVersion {
            ResourceVersion::default()
        }
    }
    let mk = |name, rv| Arc::new(X { name, rv, xfrm: 0 });
    let f: DeltaFifo<X> =
        DeltaFifo::with_options(DeltaFifoOptions::new().transformer(|x: Arc<X>| {
            Ok::<_, std::convert::Infallible>(Arc::new(X {
                xfrm: x.xfrm + 1,
                ..*x
            }))
        }));
    f.add(mk("foo", 10)).unwrap();
    f.add(mk("bar", 11)).unwrap();
    f.update(mk("foo", 12)).unwrap();
    f.delete(mk("foo", 15)).unwrap();
    f.replace(vec![], rv()).unwrap();
    f.add(mk("bar", 16)).unwrap();
    f.replace(vec![], rv()).unwrap();
    for (name, rv, tombstone) in [("foo", 15, false), ("bar", 16, true)] {
        let deltas = f.pop(|d, _| Ok::<_, std::convert::Infallible>(d)).unwrap();
        let newest = deltas.newest().unwrap();
        let x = newest.object.object().unwrap();
        assert_eq!(
            (x.name, x.rv, x.xfrm, newest.object.is_tombstone()),
            (name, rv, 1, tombstone)
        );
    }
}

#[test]
fn without_known_objects_a_delete_of_an_unseen_key_enqueues_nothing() {
    let f = plain();
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("bar", 15)).unwrap();
    f.add(obj("qux", 17)).unwrap();
    f.delete(obj("qux", 18)).unwrap();
    f.delete(obj("baz", 20)).unwrap();
    let got: Vec<u32> = (0..3).map(|_| pop_newest_val(&f)).collect();
    assert_eq!(got, [10, 15, 18]);
    assert!(f.is_empty());
}

#[test]
fn with_known_objects_a_delete_of_a_known_key_is_enqueued() {
    let f = with_known(&[("foo", 5), ("bar", 6), ("baz", 7)], false);
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("bar", 15)).unwrap();
    f.delete(obj("baz", 20)).unwrap();
    let got: Vec<u32> = (0..3).map(|_| pop_newest_val(&f)).collect();
    assert_eq!(got, [10, 15, 20]);
    assert!(f.is_empty());
}

#[test]
fn a_replace_after_an_add_pops_once_with_the_listed_object_newest() {
    let f = plain();
    f.add(obj("foo", 10)).unwrap();
    f.replace(vec![obj("foo", 15)], rv()).unwrap();
    assert_eq!(pop_newest_val(&f), 15);
    assert!(f.is_empty());
}

#[test]
fn resync_does_not_add_to_a_key_with_a_pending_delete() {
    let f = with_known(&[("foo", 5)], false);
    f.delete(obj("foo", 10)).unwrap();
    f.resync();
    assert_eq!(*pop(&f), [d(Deleted, "foo", 10)]);
}

#[test]
fn resync_queues_sync_for_a_known_key() {
    let f = with_known(&[("foo", 5)], false);
    f.resync();
    assert_eq!(*pop(&f), [d(Sync, "foo", 5)]);
}

#[test]
fn a_delete_of_a_queued_but_unknown_key_is_kept() {
    let f = with_known(&[], false);
    f.add(obj("foo", 5)).unwrap();
    f.delete(obj("foo", 6)).unwrap();
    assert_eq!(*pop(&f), [d(Added, "foo", 5), d(Deleted, "foo", 6)]);
}

#[test]
fn replace_makes_deletions_for_everything_missing_from_the_list() {
    let known = [("foo", 5), ("bar", 6), ("baz", 7)];

    // A queued delete for baz is kept; bar gets a tombstone from the known objects.
    let f = with_known(&known, false);
    f.delete(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 5)], rv()).unwrap();
    assert_eq!(*pop(&f), [d(Deleted, "baz", 10)]);
    assert_eq!(*pop(&f), [d(Sync, "foo", 5)]);
    assert_eq!(*pop(&f), [tomb("bar", Some(6))]);

    // A queued add for baz: the tombstone carries the queued state, not the known one.
    let f = with_known(&known, false);
    f.add(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 5)], rv()).unwrap();
    assert_eq!(*pop(&f), [d(Added, "baz", 10), tomb("baz", Some(10))]);
    assert_eq!(*pop(&f), [d(Sync, "foo", 5)]);
    assert_eq!(*pop(&f), [tomb("bar", Some(6))]);

    // Deleted then re-created in the queue: the tombstone carries the newest queued state.
    let f = with_known(&known, false);
    f.delete(obj("bar", 6)).unwrap();
    f.add(obj("bar", 100)).unwrap();
    f.replace(vec![obj("foo", 5)], rv()).unwrap();
    assert_eq!(
        *pop(&f),
        [
            d(Deleted, "bar", 6),
            d(Added, "bar", 100),
            tomb("bar", Some(100))
        ]
    );
    assert_eq!(*pop(&f), [d(Sync, "foo", 5)]);
    assert_eq!(*pop(&f), [tomb("baz", Some(7))]);

    // Two relists: the second one's tombstone for bar uses the first one's listed state.
    let f = with_known(&known, false);
    f.replace(vec![obj("bar", 100), obj("foo", 5)], rv())
        .unwrap();
    f.replace(vec![obj("foo", 5)], rv()).unwrap();
    assert_eq!(*pop(&f), [d(Sync, "bar", 100), tomb("bar", Some(100))]);
    assert_eq!(*pop(&f), [d(Sync, "foo", 5), d(Sync, "foo", 5)]);
    assert_eq!(*pop(&f), [tomb("baz", Some(7))]);

    // No known objects: only queued keys can be detected as deleted.
    let f = plain();
    f.add(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 5)], rv()).unwrap();
    assert_eq!(*pop(&f), [d(Added, "baz", 10), tomb("baz", Some(10))]);
    assert_eq!(*pop(&f), [d(Sync, "foo", 5)]);
    assert!(f.is_empty());
}

#[test]
fn replace_makes_deletions_and_emits_replaced_when_asked() {
    let f = with_known(&[("foo", 5), ("bar", 6), ("baz", 7)], true);
    f.delete(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 6)], rv()).unwrap();
    assert_eq!(*pop(&f), [d(Deleted, "baz", 10)]);
    assert_eq!(*pop(&f), [d(Replaced, "foo", 6)]);
    assert_eq!(*pop(&f), [tomb("bar", Some(6))]);
}

#[test]
fn replace_emits_replaced_for_a_listed_known_object_when_asked() {
    let f = with_known(&[("foo", 5)], true);
    f.replace(vec![obj("foo", 5)], rv()).unwrap();
    assert_eq!(*pop(&f), [d(Replaced, "foo", 5)]);
}

#[test]
fn resync_after_an_update_does_not_queue_a_stale_sync() {
    let f = with_known(&[("foo", 5)], false);
    f.update(obj("foo", 6)).unwrap();
    f.resync();
    assert_eq!(*pop(&f), [d(Updated, "foo", 6)]);
}

#[test]
fn has_synced_waits_for_the_initial_tombstones_too() {
    let f = with_known(&[("foo", 5), ("bar", 6), ("baz", 7)], false);
    f.replace(vec![obj("foo", 5)], rv()).unwrap();
    for expected in [
        vec![d(Sync, "foo", 5)],
        vec![tomb("bar", Some(6))],
        vec![tomb("baz", Some(7))],
    ] {
        assert!(!f.has_synced());
        let (deltas, initial) = f
            .pop(|d, initial| Ok::<_, std::convert::Infallible>((d, initial)))
            .unwrap();
        assert_eq!(*deltas, expected);
        assert!(initial);
    }
    assert!(f.has_synced());
}

#[test]
fn a_requeued_key_does_not_jump_the_line() {
    let f = plain();
    f.add(obj("foo", 10)).unwrap();
    f.add(obj("bar", 1)).unwrap();
    f.add(obj("foo", 11)).unwrap();
    f.add(obj("foo", 13)).unwrap();
    f.add(obj("zab", 30)).unwrap();
    assert_eq!(pop_newest_val(&f), 13);
    f.add(obj("foo", 14)).unwrap();
    let got: Vec<u32> = (0..3).map(|_| pop_newest_val(&f)).collect();
    assert_eq!(got, [1, 30, 14]);
}

#[test]
fn has_synced_follows_the_first_population() {
    type Action = fn(&DeltaFifo<Obj>);
    let two: Action = |f| f.replace(vec![obj("a", 1), obj("b", 2)], rv()).unwrap();
    let popper: Action = |f| drop(pop(f));
    let cases: Vec<(Vec<Action>, bool)> = vec![
        (vec![], false),
        (vec![|f| f.add(obj("a", 1)).unwrap()], true),
        (vec![|f| f.replace(vec![], rv()).unwrap()], true),
        (vec![two], false),
        (vec![two, popper], false),
        (vec![two, popper, popper], true),
        // Duplicate keys in one list (a broken server) count once.
        (
            vec![
                |f| f.replace(vec![obj("a", 1), obj("a", 2)], rv()).unwrap(),
                popper,
            ],
            true,
        ),
    ];
    for (i, (actions, synced)) in cases.into_iter().enumerate() {
        let f = plain();
        for a in actions {
            a(&f);
        }
        assert_eq!(f.has_synced(), synced, "case {i}");
    }
}

#[test]
fn every_blocked_pop_returns_after_close() {
    let f: Arc<DeltaFifo<Obj>> = Arc::new(with_known(&[("foo", 5)], false));
    let poppers: Vec<_> = (0..10)
        .map(|_| {
            let f = f.clone();
            std::thread::spawn(move || f.pop(|_, _| Ok::<(), ()>(())).is_err())
        })
        .collect();
    f.close();
    for p in poppers {
        assert!(p.join().unwrap(), "pop returned Closed");
    }
}
