//! One test per rule of the bookkeeping, driven without locks.

use super::{FifoCore, Next, Taken};
use crate::{Delta, DeltaType, DeltaType::*};
use kcache_core::{KnownObjects, ObjectKey};
use std::collections::BTreeMap;
use std::sync::Arc;

fn k(s: &str) -> ObjectKey {
    ObjectKey::new(s).unwrap()
}

fn o(v: u32) -> Arc<u32> {
    Arc::new(v)
}

/// Known objects backed by a map; `ghosts` are listed but cannot be looked up.
#[derive(Default)]
struct Known {
    map: BTreeMap<ObjectKey, Arc<u32>>,
    ghosts: Vec<ObjectKey>,
}

impl Known {
    fn of(entries: &[(&str, u32)]) -> Self {
        Self {
            map: entries.iter().map(|&(n, v)| (k(n), o(v))).collect(),
            ghosts: Vec::new(),
        }
    }
}

impl KnownObjects<u32> for Known {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.map
            .keys()
            .cloned()
            .chain(self.ghosts.iter().cloned())
            .collect()
    }
    fn get_by_key(&self, key: &ObjectKey) -> Option<Arc<u32>> {
        self.map.get(key).cloned()
    }
}

fn take(c: &mut FifoCore<u32>) -> Taken<u32> {
    match c.next() {
        Next::Ready(t) => t,
        other => panic!("expected a key, got {other:?}"),
    }
}

/// Pops one key and finishes it; returns (key, [(type, value or None)], initial).
fn pop(c: &mut FifoCore<u32>) -> (String, Vec<(DeltaType, Option<u32>)>, bool) {
    let t = take(c);
    c.finish(&t.key);
    let ds = t
        .deltas
        .iter()
        .map(|d| (d.delta_type, d.object.object().map(|v| **v)))
        .collect();
    (t.key.to_string(), ds, t.is_in_initial_list)
}

fn types(c: &FifoCore<u32>, key: &str) -> Vec<DeltaType> {
    let snap = c.snapshot();
    let (_, ds) = snap
        .iter()
        .find(|(q, _)| q.as_str() == key)
        .expect("key is queued");
    ds.iter().map(|d| d.delta_type).collect()
}

#[test]
fn changes_to_a_queued_key_are_appended_and_the_key_keeps_its_place() {
    let mut c = FifoCore::new(false);
    c.add(k("a"), o(1));
    c.add(k("b"), o(2));
    c.update(k("a"), o(3));
    assert_eq!(c.len(), 2);
    assert_eq!(
        pop(&mut c),
        (
            "a".into(),
            vec![(Added, Some(1)), (Updated, Some(3))],
            false
        )
    );
    assert_eq!(pop(&mut c).0, "b");
    c.check_invariants().unwrap();
}

#[test]
fn only_two_trailing_deleted_deltas_merge() {
    let mut c = FifoCore::new(false);
    c.add(k("a"), o(1));
    c.delete(k("a"), o(2), None);
    c.update(k("a"), o(3));
    c.delete(k("a"), o(4), None);
    c.delete(k("a"), o(5), None);
    assert_eq!(types(&c, "a"), [Added, Deleted, Updated, Deleted]);
    assert_eq!(
        pop(&mut c).1.last(),
        Some(&(Deleted, Some(4))),
        "the older real deletion stays"
    );
}

#[test]
fn a_real_deletion_beats_a_tombstone_in_either_order() {
    let mut c = FifoCore::new(false);
    c.add(k("a"), o(1));
    c.replace(vec![], None); // tombstone for a
    c.delete(k("a"), o(9), None);
    assert_eq!(pop(&mut c).1, [(Added, Some(1)), (Deleted, Some(9))]);

    c.add(k("b"), o(1));
    c.delete(k("b"), o(2), None);
    c.replace(vec![], None);
    assert_eq!(pop(&mut c).1, [(Added, Some(1)), (Deleted, Some(2))]);
}

#[test]
fn of_two_tombstones_the_newer_one_stays() {
    let mut c = FifoCore::new(false);
    c.enqueue(k("a"), Delta::tombstone(k("a"), Some(o(1))));
    c.enqueue(k("a"), Delta::tombstone(k("a"), Some(o(2))));
    assert_eq!(pop(&mut c).1, [(Deleted, Some(2))]);
}

#[test]
fn a_delete_of_a_never_seen_key_is_dropped_without_known_objects() {
    let mut c = FifoCore::new(false);
    assert!(!c.delete(k("a"), o(1), None));
    assert_eq!(c.len(), 0);
    c.add(k("b"), o(1));
    assert!(c.delete(k("b"), o(2), None));
}

#[test]
fn with_known_objects_a_delete_is_dropped_only_for_keys_in_neither() {
    let known = Known::of(&[("a", 1)]);
    let mut c = FifoCore::new(false);
    assert!(c.delete(k("a"), o(2), Some(&known)), "known key");
    assert!(!c.delete(k("z"), o(2), Some(&known)), "unknown, not queued");
    c.add(k("q"), o(1));
    assert!(c.delete(k("q"), o(2), Some(&known)), "queued key");
}

#[test]
fn a_dropped_delete_before_any_replace_marks_the_fifo_synced() {
    let mut c = FifoCore::<u32>::new(false);
    assert!(!c.has_synced());
    c.delete(k("a"), o(1), None);
    assert!(c.has_synced());
}

#[test]
fn replace_emits_sync_by_default_and_replaced_when_asked() {
    for (emit, ty) in [(false, Sync), (true, Replaced)] {
        let mut c = FifoCore::new(emit);
        c.replace(vec![(k("a"), o(1))], None);
        assert_eq!(pop(&mut c).1, [(ty, Some(1))]);
    }
}

#[test]
fn replace_tombstones_queued_keys_missing_from_the_list_from_their_newest_state() {
    let mut c = FifoCore::new(true);
    c.add(k("a"), o(1));
    c.update(k("a"), o(2));
    c.replace(vec![(k("b"), o(5))], None);
    let t = take(&mut c);
    let last = t.deltas.newest().unwrap();
    let tomb = last.object.as_tombstone().expect("a tombstone");
    assert_eq!((tomb.key.as_str(), tomb.obj.as_deref()), ("a", Some(&2)));
}

#[test]
fn replace_unwraps_a_queued_tombstone_instead_of_nesting_it() {
    let known = Known::of(&[("a", 3)]);
    let mut c = FifoCore::new(true);
    c.replace(vec![], Some(&known));
    c.update(k("a"), o(4));
    c.replace(vec![], Some(&known));
    let t = take(&mut c);
    let got: Vec<_> = t
        .deltas
        .iter()
        .map(|d| (d.delta_type, d.object.object().map(|v| **v)))
        .collect();
    assert_eq!(
        got,
        [(Deleted, Some(3)), (Updated, Some(4)), (Deleted, Some(4))]
    );
}

#[test]
fn replace_tombstones_known_keys_missing_from_the_list_with_nothing_queued() {
    let mut known = Known::of(&[("a", 1), ("b", 2), ("c", 3)]);
    known.ghosts.push(k("g"));
    let mut c = FifoCore::new(true);
    c.delete(k("c"), o(30), Some(&known));
    c.replace(vec![(k("a"), o(1))], Some(&known));
    assert_eq!(pop(&mut c), ("c".into(), vec![(Deleted, Some(30))], false));
    assert_eq!(pop(&mut c).1, [(Replaced, Some(1))]);
    assert_eq!(pop(&mut c), ("b".into(), vec![(Deleted, Some(2))], false));
    let g = take(&mut c);
    assert_eq!(g.key.as_str(), "g");
    assert_eq!(
        g.deltas[0],
        Delta::tombstone(k("g"), None),
        "failed lookup: no object"
    );
}

#[test]
fn resync_emits_sync_only_for_known_keys_without_pending_deltas() {
    let known = Known::of(&[("a", 1), ("b", 2)]);
    let mut c = FifoCore::new(false);
    c.update(k("a"), o(10));
    c.resync(Some(&known));
    assert_eq!(types(&c, "a"), [Updated]);
    assert_eq!(types(&c, "b"), [Sync]);
}

#[test]
fn resync_without_known_objects_does_nothing() {
    let mut c = FifoCore::<u32>::new(false);
    c.resync(None);
    assert_eq!(c.len(), 0);
    assert!(!c.has_synced(), "resync does not populate");
}

#[test]
fn has_synced_turns_true_only_after_the_last_initial_key_is_finished() {
    let mut c = FifoCore::new(true);
    c.replace(vec![(k("a"), o(1)), (k("b"), o(2))], None);
    let a = take(&mut c);
    assert!(a.is_in_initial_list);
    c.finish(&a.key);
    let b = take(&mut c);
    assert!(b.is_in_initial_list);
    assert!(!c.has_synced(), "b is taken but not processed yet");
    c.finish(&b.key);
    assert!(c.has_synced());
}

#[test]
fn an_empty_first_replace_syncs_at_once_and_later_replaces_do_not_reset_it() {
    let mut c = FifoCore::new(true);
    c.replace(vec![], None);
    assert!(c.has_synced());
    c.replace(vec![(k("a"), o(1))], None);
    assert!(c.has_synced());
    assert!(!take(&mut c).is_in_initial_list);
}

#[test]
fn duplicate_listed_keys_count_once_toward_the_initial_population() {
    let mut c = FifoCore::new(false);
    c.replace(vec![(k("a"), o(1)), (k("a"), o(2))], None);
    assert_eq!(pop(&mut c).1, [(Sync, Some(1)), (Sync, Some(2))]);
    assert!(c.has_synced());
}

#[test]
fn a_key_in_flight_is_requeued_at_the_back_and_not_handed_out_until_finished() {
    let mut c = FifoCore::new(false);
    c.add(k("a"), o(1));
    c.add(k("b"), o(1));
    let a = take(&mut c);
    c.update(k("a"), o(2));
    c.add(k("c"), o(1));
    // a is queued again, behind b; a second popper gets b, then c (skipping a in flight).
    assert_eq!(take(&mut c).key.as_str(), "b");
    assert_eq!(take(&mut c).key.as_str(), "c");
    assert!(
        matches!(c.next(), Next::Wait),
        "only a is queued, and it is in flight"
    );
    c.finish(&a.key);
    assert_eq!(
        take(&mut c).deltas.newest().map(|d| d.delta_type),
        Some(Updated)
    );
    c.check_invariants().unwrap();
}

#[test]
fn a_delete_of_a_key_in_flight_is_kept_and_resync_skips_it() {
    let known = Known::of(&[("a", 0)]);
    let mut c = FifoCore::new(false);
    c.add(k("x"), o(1));
    let x = take(&mut c);
    c.resync(Some(&Known::of(&[("x", 0)])));
    assert_eq!(c.len(), 0, "no resync of a key being processed");
    assert!(
        c.delete(k("x"), o(2), Some(&known)),
        "x is in flight, so it was seen"
    );
    c.finish(&x.key);
    assert_eq!(pop(&mut c).1, [(Deleted, Some(2))]);
}

#[test]
fn replace_tombstones_an_in_flight_key_missing_from_the_list_unless_it_was_a_deletion() {
    let mut c = FifoCore::new(true);
    c.add(k("a"), o(1));
    c.add(k("d"), o(1));
    c.delete(k("d"), o(2), None);
    let a = take(&mut c);
    let d = take(&mut c);
    c.replace(vec![], None);
    assert_eq!(
        c.len(),
        1,
        "only a, whose handed-out state was not a deletion"
    );
    c.finish(&a.key);
    c.finish(&d.key);
    assert_eq!(pop(&mut c).1, [(Deleted, Some(1))]);
}

#[test]
fn a_key_taken_before_the_first_replace_does_not_count_toward_it() {
    let known = Known::of(&[("a", 1)]);
    let mut c = FifoCore::new(true);
    c.resync(Some(&known));
    let early = take(&mut c);
    assert!(!early.is_in_initial_list);
    c.replace(vec![(k("a"), o(2)), (k("b"), o(3))], Some(&known));
    let b = take(&mut c);
    assert_eq!(b.key.as_str(), "b", "a is in flight");
    c.finish(&b.key);
    c.finish(&early.key);
    assert!(!c.has_synced(), "the relisted a is still queued");
    assert_eq!(pop(&mut c), ("a".into(), vec![(Replaced, Some(2))], true));
    assert!(c.has_synced());
}

#[test]
fn a_closed_fifo_reports_closed_only_once_nothing_is_queued() {
    let mut c = FifoCore::new(false);
    c.add(k("a"), o(1));
    let a = take(&mut c);
    c.update(k("a"), o(2));
    c.close();
    assert!(
        matches!(c.next(), Next::Wait),
        "a is queued behind its own processing"
    );
    c.finish(&a.key);
    assert_eq!(pop(&mut c).0, "a");
    assert!(matches!(c.next(), Next::Closed));
    c.add(k("b"), o(1));
    assert_eq!(pop(&mut c).0, "b", "writes are still accepted after close");
}

#[test]
fn a_fully_drained_fifo_gives_back_large_storage_but_not_while_draining() {
    let mut c = FifoCore::new(true);
    let listed = (0..3000).map(|i| (k(&format!("k{i}")), o(i))).collect();
    c.replace(listed, None);
    let big = c.queue.capacity();
    assert!(big >= 3000);
    for _ in 0..2999 {
        pop(&mut c);
    }
    // (A hash map's reported capacity drops as removals leave tombstones; the queue's does not.)
    assert_eq!(c.queue.capacity(), big, "not shrunk while keys remain");
    assert!(c.items.capacity() > super::SHRINK_ABOVE);
    let last = take(&mut c);
    assert_eq!(
        c.queue.capacity(),
        big,
        "not shrunk while a key is in flight"
    );
    assert!(c.items.capacity() > super::SHRINK_ABOVE);
    c.finish(&last.key);
    assert!(c.has_synced());
    assert!(c.items.capacity() <= super::SHRINK_ABOVE);
    assert!(c.queue.capacity() <= super::SHRINK_ABOVE);
    assert!(c.in_flight.capacity() <= super::SHRINK_ABOVE);
    c.add(k("x"), o(1));
    assert_eq!(pop(&mut c).0, "x");
    c.check_invariants().unwrap();
}

#[test]
fn untake_puts_a_taken_key_back_in_front_with_its_initial_flag_and_older_deltas_first() {
    let mut c: FifoCore<u32> = FifoCore::new(true);
    c.replace(vec![(k("a"), o(1)), (k("b"), o(1)), (k("c"), o(1))], None);
    let Next::Ready(a) = c.next() else {
        panic!("a not handed out")
    };
    let Next::Ready(b) = c.next() else {
        panic!("b not handed out")
    };
    c.update(k("b"), o(2));
    c.check_invariants().unwrap();
    // Give both back, newest taken first (as a batch unwinds).
    c.untake(b);
    c.untake(a);
    c.check_invariants().unwrap();
    assert!(!c.has_synced());
    let snap: Vec<(String, Vec<DeltaType>)> = c
        .snapshot()
        .into_iter()
        .map(|(k, d)| {
            (
                k.as_str().to_owned(),
                d.iter().map(|d| d.delta_type).collect(),
            )
        })
        .collect();
    assert_eq!(
        snap,
        [
            ("a".to_owned(), vec![Replaced]),
            ("b".to_owned(), vec![Replaced, Updated]),
            ("c".to_owned(), vec![Replaced]),
        ]
    );
    for _ in 0..3 {
        let Next::Ready(t) = c.next() else {
            panic!("nothing handed out")
        };
        assert!(t.is_in_initial_list);
        c.finish(&t.key);
    }
    assert!(c.has_synced());
    c.check_invariants().unwrap();
}
