//! `RealFifo`: events in write order, lists and resyncs as one entry, staged pages, the direct
//! path, processing without the lock, close.

use kcache_core::{Object, ResourceVersion};
use kcache_deltafifo::{Batch, DeltaFifoError, DeltaType, Entry, FifoClosed, RealFifo, Written};
use std::sync::Arc;

#[derive(Debug, PartialEq)]
struct Pod {
    name: String,
    rv: u64,
}

impl Object for Pod {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        self.rv.into()
    }
}

fn pod(name: &str, rv: u64) -> Arc<Pod> {
    Arc::new(Pod {
        name: name.into(),
        rv,
    })
}

/// Each entry as text: `Added a@3`, `ReplacedAll[a@1 b@2]@2`, `SyncAll`, with its initial flag.
fn describe(batch: Batch<Pod>) -> Vec<(String, bool)> {
    batch
        .into_iter()
        .map(|(e, initial)| {
            let text = match e {
                Entry::Delta {
                    key,
                    delta_type,
                    object,
                } => format!("{delta_type} {key}@{}", object.rv),
                Entry::ReplacedAll(r) => {
                    let objs: Vec<_> = r
                        .objects
                        .iter()
                        .map(|(k, o)| format!("{k}@{}", o.rv))
                        .collect();
                    format!("ReplacedAll[{}]@{}", objs.join(" "), r.resource_version)
                }
                Entry::SyncAll => "SyncAll".into(),
            };
            (text, initial)
        })
        .collect()
}

fn pop_all(fifo: &RealFifo<Pod>) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    while let Ok(Some(batch)) = fifo.try_pop_batch(1000, describe) {
        out.extend(batch);
    }
    out
}

fn texts(v: Vec<(String, bool)>) -> Vec<String> {
    v.into_iter().map(|(t, _)| t).collect()
}

#[test]
fn events_of_different_keys_come_out_in_the_order_they_were_written() {
    let fifo: RealFifo<Pod> = RealFifo::new();
    fifo.add(pod("a", 1)).unwrap();
    fifo.add(pod("b", 2)).unwrap();
    fifo.update(pod("a", 3)).unwrap();
    fifo.delete(pod("b", 4)).unwrap();
    fifo.update(pod("a", 5)).unwrap();
    assert_eq!(fifo.len(), 5, "every event is its own entry");
    assert_eq!(
        texts(pop_all(&fifo)),
        [
            "Added a@1",
            "Added b@2",
            "Updated a@3",
            "Deleted b@4",
            "Updated a@5"
        ]
    );
}

#[test]
fn a_delete_of_a_key_never_seen_is_queued() {
    let fifo: RealFifo<Pod> = RealFifo::new();
    fifo.delete(pod("ghost", 1)).unwrap();
    assert_eq!(texts(pop_all(&fifo)), ["Deleted ghost@1"]);
}

#[test]
fn a_relist_is_one_entry_handed_out_alone_in_its_place() {
    let fifo: RealFifo<Pod> = RealFifo::new();
    fifo.replace(vec![pod("a", 1), pod("b", 2)], "2".into())
        .unwrap();
    fifo.update(pod("a", 3)).unwrap();
    fifo.replace(vec![pod("a", 3)], "3".into()).unwrap();
    fifo.add(pod("c", 4)).unwrap();
    let batches: Vec<_> =
        std::iter::from_fn(|| fifo.try_pop_batch(1000, describe).ok().flatten()).collect();
    let texts: Vec<Vec<String>> = batches.into_iter().map(texts).collect();
    assert_eq!(
        texts,
        [
            vec!["ReplacedAll[a@1 b@2]@2".to_string()],
            vec!["Updated a@3".into()],
            vec!["ReplacedAll[a@3]@3".into()],
            vec!["Added c@4".into()],
        ]
    );
}

#[test]
fn a_resync_is_one_entry_and_is_not_queued_twice_in_a_row() {
    let fifo: RealFifo<Pod> = RealFifo::new();
    fifo.replace(vec![pod("a", 1), pod("b", 2)], "2".into())
        .unwrap();
    fifo.resync();
    fifo.resync();
    fifo.update(pod("a", 3)).unwrap();
    fifo.resync();
    assert_eq!(
        texts(pop_all(&fifo)),
        [
            "ReplacedAll[a@1 b@2]@2",
            "SyncAll",
            "Updated a@3",
            "SyncAll"
        ]
    );
}

#[test]
fn has_synced_turns_true_only_after_the_initial_population_was_processed() {
    let fifo: RealFifo<Pod> = RealFifo::new();
    assert!(!fifo.has_synced());
    fifo.replace(vec![pod("a", 1)], "1".into()).unwrap();
    fifo.update(pod("a", 2)).unwrap();
    assert!(!fifo.has_synced());
    let seen = fifo
        .try_pop_batch(1000, |batch| {
            let synced_inside = fifo.has_synced();
            (describe(batch), synced_inside)
        })
        .unwrap();
    assert_eq!(
        seen,
        Some((vec![("ReplacedAll[a@1]@1".to_string(), true)], false)),
        "the list is initial, and the queue is not synced while it is processed"
    );
    assert!(fifo.has_synced());
    assert_eq!(pop_all(&fifo), [("Updated a@2".to_string(), false)]);
}

#[test]
fn a_write_before_any_list_marks_the_queue_synced() {
    let fifo: RealFifo<Pod> = RealFifo::new();
    fifo.add(pod("a", 1)).unwrap();
    assert!(fifo.has_synced());
    fifo.replace(vec![], "2".into()).unwrap();
    assert_eq!(
        pop_all(&fifo),
        [
            ("Added a@1".to_string(), false),
            ("ReplacedAll[]@2".to_string(), false)
        ]
    );
}

#[test]
fn pages_stay_invisible_until_the_list_is_finished_and_an_abandoned_attempt_leaves_nothing() {
    let fifo: RealFifo<Pod> = RealFifo::new();
    fifo.begin_list();
    fifo.list_page(vec![pod("a", 1), pod("b", 2)], |_, o| o)
        .unwrap();
    assert_eq!((fifo.len(), fifo.staged_len()), (0, 2));
    fifo.abandon_list();
    assert_eq!((fifo.len(), fifo.staged_len()), (0, 0));
    // A new attempt drops what an unfinished one staged, too.
    fifo.begin_list();
    fifo.list_page(vec![pod("x", 9)], |_, o| o).unwrap();
    fifo.begin_list();
    fifo.list_page(vec![pod("a", 1)], |_, o| o).unwrap();
    fifo.list_page(vec![pod("c", 3)], |_, o| o).unwrap();
    assert!(fifo.is_empty());
    fifo.finish_list("3".into());
    assert_eq!(texts(pop_all(&fifo)), ["ReplacedAll[a@1 c@3]@3"]);
    assert!(fifo.has_synced());
}

#[test]
fn keep_swaps_a_listed_object_for_the_one_the_caller_holds() {
    let fifo: RealFifo<Pod> = RealFifo::new();
    let cached = pod("a", 1);
    let held = cached.clone();
    fifo.list_page(vec![pod("a", 1), pod("b", 2)], |key, obj| {
        if key.as_str() == "a" {
            held.clone()
        } else {
            obj
        }
    })
    .unwrap();
    fifo.finish_list("2".into());
    let kept = fifo
        .try_pop_batch(1, |batch| match batch.into_iter().next() {
            Some((Entry::ReplacedAll(r), _)) => Arc::ptr_eq(&r.objects[0].1, &cached),
            _ => false,
        })
        .unwrap();
    assert_eq!(kept, Some(true));
}

#[test]
fn refused_objects_are_left_out_of_a_list_and_reported() {
    let fifo: RealFifo<Pod> =
        RealFifo::with_transformer(|o: Arc<Pod>| if o.rv == 2 { Err("no") } else { Ok(o) });
    let err = fifo
        .replace(vec![pod("a", 1), pod("b", 2), pod("", 3)], "3".into())
        .unwrap_err();
    match err {
        DeltaFifoError::Refused { refused } => assert_eq!(refused.len(), 2),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(texts(pop_all(&fifo)), ["ReplacedAll[a@1]@3"]);
    assert!(matches!(
        fifo.add(pod("b", 2)),
        Err(DeltaFifoError::Transform(_))
    ));
    assert!(fifo.is_empty());
}

#[test]
fn write_or_apply_applies_only_when_caught_up_and_keeps_the_order() {
    let fifo: RealFifo<Pod> = RealFifo::new();
    let direct = |fifo: &RealFifo<Pod>, o| fifo.write_or_apply(o, true, |_, _| Ok(())).unwrap();
    // Not synced yet: queued.
    fifo.replace(vec![], "1".into()).unwrap();
    assert_eq!(direct(&fifo, pod("a", 2)), Written::Queued);
    assert_eq!(pop_all(&fifo).len(), 2);
    assert_eq!(direct(&fifo, pod("b", 3)), Written::Applied);
    // Something queued: the next write queues behind it.
    fifo.delete(pod("b", 4)).unwrap();
    assert_eq!(direct(&fifo, pod("c", 5)), Written::Queued);
    // While a batch is processed (the lock is released), writes queue, never apply.
    let inside = fifo
        .try_pop_batch(1, |_| direct(&fifo, pod("d", 6)))
        .unwrap();
    assert_eq!(inside, Some(Written::Queued));
    assert_eq!(texts(pop_all(&fifo)), ["Added c@5", "Added d@6"]);
}

#[test]
fn the_lock_is_released_while_a_batch_is_processed_and_a_second_popper_waits() {
    let fifo: RealFifo<Pod> = RealFifo::new();
    fifo.add(pod("a", 1)).unwrap();
    fifo.add(pod("b", 2)).unwrap();
    let nested = fifo
        .try_pop_batch(1, |first| {
            // A write and a second pop from inside processing: no deadlock; the second popper
            // gets nothing until the first batch is done, so order is kept.
            fifo.add(pod("c", 3)).unwrap();
            let second = fifo.try_pop_batch(10, describe).unwrap();
            (describe(first), second)
        })
        .unwrap();
    assert_eq!(nested, Some((vec![("Added a@1".to_string(), false)], None)));
    assert_eq!(texts(pop_all(&fifo)), ["Added b@2", "Added c@3"]);
}

#[test]
fn a_panicking_process_function_does_not_wedge_the_queue() {
    let fifo: RealFifo<Pod> = RealFifo::new();
    fifo.add(pod("a", 1)).unwrap();
    fifo.add(pod("b", 2)).unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fifo.try_pop_batch(1, |_| panic!("boom")).ok()
    }));
    assert!(caught.is_err());
    assert_eq!(texts(pop_all(&fifo)), ["Added b@2"]);
}

#[test]
fn a_closed_queue_hands_out_what_is_left_then_reports_closed() {
    let fifo: RealFifo<Pod> = RealFifo::new();
    fifo.add(pod("a", 1)).unwrap();
    fifo.close();
    assert!(fifo.is_closed());
    assert_eq!(texts(pop_all(&fifo)), ["Added a@1"]);
    assert_eq!(fifo.try_pop_batch(1, describe).unwrap_err(), FifoClosed);
}

#[test]
fn an_async_pop_waits_for_a_write_and_for_close() {
    let fifo: Arc<RealFifo<Pod>> = Arc::new(RealFifo::new());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            fifo.update(pod("a", 1)).unwrap();
        })
    };
    let got = futures::executor::block_on(fifo.pop_batch_async(10, describe)).unwrap();
    writer.join().unwrap();
    assert_eq!(texts(got), ["Updated a@1"]);
    let closer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fifo.close())
    };
    let closed = futures::executor::block_on(fifo.pop_batch_async(10, describe));
    closer.join().unwrap();
    assert_eq!(closed.unwrap_err(), FifoClosed);
}

#[test]
fn a_batch_holds_at_most_max_entries_and_stops_before_a_list() {
    let fifo: RealFifo<Pod> = RealFifo::new();
    for i in 0..5 {
        fifo.add(pod(&format!("p{i}"), i)).unwrap();
    }
    fifo.replace(vec![], "9".into()).unwrap();
    let sizes: Vec<usize> =
        std::iter::from_fn(|| fifo.try_pop_batch(3, |b| b.len()).ok().flatten()).collect();
    assert_eq!(sizes, [3, 2, 1]);
    assert_eq!(DeltaType::Added.to_string(), "Added");
}
