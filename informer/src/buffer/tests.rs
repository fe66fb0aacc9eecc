//! Unit tests of the buffer: ordering, sync counting, coalescing bound, close.

use super::*;
use crate::event::{DeletedObject, Event};
use kcache_core::ObjectKey;
use std::sync::Arc;

fn add(k: &str, v: u32, initial: bool) -> Notification<u32> {
    Notification::new(
        ObjectKey::new(k).unwrap().into(),
        Event::Added {
            obj: Arc::new(v),
            is_in_initial_list: initial,
        },
    )
}

fn del(k: &str, v: u32) -> Notification<u32> {
    let key = ObjectKey::new(k).unwrap();
    Notification::new(
        key.clone().into(),
        Event::Deleted(DeletedObject::observed(key, Arc::new(v))),
    )
}

fn deliver_one(b: &Buffer<u32>) -> u32 {
    let n = b.pop_blocking().unwrap();
    let v = **n.event.object().unwrap();
    b.complete(n.initial);
    v
}

#[test]
fn an_ordered_buffer_hands_out_everything_in_push_order() {
    let b = Buffer::new(BufferMode::Ordered);
    for v in 0..5 {
        assert!(b.push(add("a", v, false)));
    }
    assert_eq!(b.pending(), 5);
    let got: Vec<u32> = (0..5).map(|_| deliver_one(&b)).collect();
    assert_eq!(got, [0, 1, 2, 3, 4]);
    assert_eq!(b.pending(), 0);
}

#[test]
fn has_synced_waits_for_upstream_and_for_the_last_initial_delivery() {
    let b = Buffer::new(BufferMode::Ordered);
    assert!(!b.has_synced());
    b.push(add("a", 1, true));
    b.push(add("b", 2, true));
    b.set_upstream_synced();
    assert!(!b.has_synced());
    deliver_one(&b);
    assert!(!b.has_synced());
    let n = b.pop_blocking().unwrap();
    assert!(!b.has_synced(), "taken but not yet delivered");
    b.complete(n.initial);
    assert!(b.has_synced());
    // Later, non-initial notifications do not unsync it.
    b.push(add("c", 3, false));
    assert!(b.has_synced());
}

#[test]
fn an_empty_initial_population_syncs_with_upstream() {
    let b: Buffer<u32> = Buffer::new(BufferMode::Coalescing);
    b.set_upstream_synced();
    assert!(b.has_synced());
}

#[test]
fn a_cancelled_initial_add_does_not_block_has_synced() {
    let b = Buffer::new(BufferMode::Coalescing);
    b.push(add("a", 1, true));
    b.push(del("a", 1));
    b.set_upstream_synced();
    assert_eq!(b.pending(), 0);
    assert!(b.has_synced());
}

#[test]
fn a_coalescing_buffer_holds_at_most_one_notification_per_key() {
    let b = Buffer::new(BufferMode::Coalescing);
    for round in 0..100u32 {
        for k in ["a", "b", "c"] {
            b.push(add(k, round, false));
        }
        assert!(b.pending() <= 3);
    }
    let mut got: Vec<u32> = (0..3).map(|_| deliver_one(&b)).collect();
    got.sort_unstable();
    assert_eq!(got, [99, 99, 99]);
}

#[test]
fn close_drops_the_backlog_refuses_pushes_and_releases_the_consumer() {
    let b = Buffer::new(BufferMode::Ordered);
    b.push(add("a", 1, true));
    b.close();
    assert_eq!(b.pending(), 0);
    assert!(!b.push(add("b", 2, false)));
    assert!(b.pop_blocking().is_none());
    assert!(b.is_closed());
    assert!(!b.has_synced());
}

#[test]
fn a_blocked_consumer_is_woken_by_a_push_from_another_thread() {
    let b = Arc::new(Buffer::new(BufferMode::Ordered));
    let consumer = {
        let b = b.clone();
        std::thread::spawn(move || deliver_one(&b))
    };
    b.push(add("a", 7, false));
    assert_eq!(consumer.join().unwrap(), 7);
}

#[test]
fn waiting_for_the_consumer_returns_once_it_finished() {
    let b: Arc<Buffer<u32>> = Arc::new(Buffer::new(BufferMode::Ordered));
    let consumer = {
        let b = b.clone();
        std::thread::spawn(move || {
            while b.pop_blocking().is_some() {}
            b.finish_consumer();
        })
    };
    b.close();
    b.wait_consumer_done();
    consumer.join().unwrap();
}

mod model {
    //! The coalescing buffer against a model: whatever the interleaving of pushes and
    //! deliveries, every delivered notification makes sense for what the handler already saw
    //! (adds of unknown keys, updates and deletes of known ones), at most one notification per
    //! key is pending, and once drained the handler's view equals the truth.

    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn push(b: &Buffer<u32>, truth: &mut BTreeMap<u8, u32>, key: u8, kind: u8, value: u32) {
        let k = ObjectKey::new(format!("k{key}")).unwrap();
        let event = match (truth.get(&key).copied(), kind % 3) {
            (None, _) => {
                truth.insert(key, value);
                Event::Added {
                    obj: Arc::new(value),
                    is_in_initial_list: false,
                }
            }
            (Some(old), 0) => {
                truth.remove(&key);
                Event::Deleted(DeletedObject::observed(k.clone(), Arc::new(old)))
            }
            (Some(old), _) => {
                truth.insert(key, value);
                Event::Updated {
                    old: Arc::new(old),
                    new: Arc::new(value),
                }
            }
        };
        assert!(b.push(Notification::new(k.into(), event)));
    }

    fn deliver(b: &Buffer<u32>, view: &mut BTreeMap<String, u32>) {
        let n = b.pop_blocking().unwrap();
        let key = n.key.as_str().to_owned();
        match &n.event {
            Event::Added { obj, .. } => {
                assert!(
                    !view.contains_key(&key),
                    "add of a key the handler knows: {key}"
                );
                view.insert(key, **obj);
            }
            Event::Updated { old, new } => {
                assert_eq!(
                    view.get(&key),
                    Some(&**old),
                    "update from a state the handler never saw"
                );
                view.insert(key, **new);
            }
            Event::Deleted(_) => {
                // The deleted object is the key's final state, which may be newer than what
                // the handler knew (intermediate updates were coalesced away).
                assert!(
                    view.contains_key(&key),
                    "delete of a key the handler does not know"
                );
                view.remove(&key);
            }
        }
        b.complete(n.initial);
    }

    proptest! {
        #[test]
        fn a_coalescing_buffer_converges_to_the_truth_with_one_pending_per_key(
            ops in proptest::collection::vec((0u8..4, 0u8..3, 0u32..100, any::<bool>()), 0..200)
        ) {
            let b = Buffer::new(BufferMode::Coalescing);
            let mut truth = BTreeMap::new();
            let mut view = BTreeMap::new();
            for (key, kind, value, pop) in ops {
                push(&b, &mut truth, key, kind, value);
                prop_assert!(b.pending() <= 4);
                if pop && b.pending() > 0 {
                    deliver(&b, &mut view);
                }
            }
            while b.pending() > 0 {
                deliver(&b, &mut view);
            }
            let want: BTreeMap<String, u32> =
                truth.iter().map(|(k, v)| (format!("k{k}"), *v)).collect();
            prop_assert_eq!(view, want);
        }
    }
}

#[test]
fn complete_and_pop_tells_whether_it_waited_for_the_next_notification() {
    let b = Arc::new(Buffer::new(BufferMode::Ordered));
    b.push(add("a", 1, false));
    b.push(add("b", 2, false));
    let n = b.pop_blocking().unwrap();
    let (next, waited) = b.complete_and_pop(n.initial);
    assert!(!waited, "the next notification was already queued");
    let n = next.unwrap();
    let consumer = {
        let b = b.clone();
        std::thread::spawn(move || b.complete_and_pop(n.initial))
    };
    // Push only once the consumer has parked on the empty queue.
    while b.state.lock().parked == 0 {
        std::thread::yield_now();
    }
    b.push(add("c", 3, false));
    let (next, waited) = consumer.join().unwrap();
    assert!(waited, "the queue was empty: the pop waited for the push");
    assert_eq!(**next.unwrap().event.object().unwrap(), 3);
    b.close();
    assert!(b.complete_and_pop(false).0.is_none());
}
