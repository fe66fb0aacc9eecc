//! The cases of client-go's `queue_test.go`, shared by `client_go_queue.rs` (the plain queue) and
//! `client_go_priority_queue.rs` (the priority queue, every item at one priority). Each includes
//! this file and provides `queue()`.

use super::queue;
use kcache_workqueue::Queue;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::thread;

/// Waits (bounded spin, no sleep) until the queue reports it is shutting down.
fn wait_shutting_down<T: Clone + Eq + std::hash::Hash + Send + 'static>(q: &Queue<T>) {
    for _ in 0..10_000_000 {
        if q.is_shutting_down() {
            return;
        }
        thread::yield_now();
    }
    panic!("the queue never started shutting down");
}

/// Gives a thread that should stay blocked many chances to (wrongly) finish.
fn assert_stays_blocked(handle: &thread::JoinHandle<()>, what: &str) {
    for _ in 0..1_000 {
        thread::yield_now();
        assert!(!handle.is_finished(), "{what} returned too early");
    }
}

#[derive(Clone, Copy, Debug)]
enum Stop {
    ShutDown,
    Drain,
}

impl Stop {
    fn apply<T: Clone + Eq + std::hash::Hash + Send + 'static>(self, q: &Queue<T>) {
        match self {
            Stop::ShutDown => q.shut_down(),
            Stop::Drain => q.shut_down_with_drain(),
        }
    }
}

/// The sentinel client-go's `TestBasic` adds after shutdown.
const AFTER_SHUTDOWN: i32 = -1;

fn many_producers_and_consumers(stop: Stop) {
    let q = queue::<i32>();
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    let processed = Arc::new(Mutex::new(HashSet::new()));
    let producers: Vec<_> = (0..50)
        .map(|i| {
            let q = q.clone();
            thread::spawn(move || {
                for _ in 0..50 {
                    assert!(q.add(i), "add before shutdown must be accepted");
                    thread::yield_now();
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..10)
        .map(|_| {
            let (q, in_flight, processed) = (q.clone(), in_flight.clone(), processed.clone());
            thread::spawn(move || {
                while let Some(item) = q.get() {
                    assert_ne!(item, AFTER_SHUTDOWN, "got an item added after shutdown");
                    assert!(
                        in_flight.lock().unwrap().insert(item),
                        "{item} handed out twice"
                    );
                    processed.lock().unwrap().insert(item);
                    thread::yield_now();
                    in_flight.lock().unwrap().remove(&item);
                    q.done(&item).unwrap();
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    stop.apply(&q);
    assert!(!q.add(AFTER_SHUTDOWN), "add after shutdown must be refused");
    for c in consumers {
        c.join().unwrap();
    }
    assert_eq!(q.len(), 0);
    assert_eq!(q.in_flight(), 0);
    // Every item was added before the shutdown, and queued items are still handed out after it.
    assert_eq!(*processed.lock().unwrap(), (0..50).collect::<HashSet<_>>());
}

#[test]
fn many_producers_and_consumers_with_shut_down_process_every_item_and_nothing_added_after() {
    many_producers_and_consumers(Stop::ShutDown);
}

#[test]
fn many_producers_and_consumers_with_drain_process_every_item_and_nothing_added_after() {
    many_producers_and_consumers(Stop::Drain);
}

fn add_while_processing(stop: Stop) {
    let q = queue::<i32>();
    // Per item: how often it was handed out, and how many re-adds the queue accepted.
    let seen = Arc::new(Mutex::new(HashMap::<i32, (u32, u32)>::new()));
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    let producers: Vec<_> = (0..50)
        .map(|i| {
            let q = q.clone();
            thread::spawn(move || assert!(q.add(i)))
        })
        .collect();
    let consumers: Vec<_> = (0..10)
        .map(|_| {
            let (q, seen, in_flight) = (q.clone(), seen.clone(), in_flight.clone());
            thread::spawn(move || {
                while let Some(item) = q.get() {
                    assert!(
                        in_flight.lock().unwrap().insert(item),
                        "{item} handed out twice"
                    );
                    let first = {
                        let mut seen = seen.lock().unwrap();
                        let entry = seen.entry(item).or_default();
                        entry.0 += 1;
                        entry.0 == 1
                    };
                    if first {
                        // Re-added while processing: handed out once more, after done.
                        let accepted = q.add(item);
                        seen.lock().unwrap().get_mut(&item).unwrap().1 += u32::from(accepted);
                    }
                    in_flight.lock().unwrap().remove(&item);
                    q.done(&item).unwrap();
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    stop.apply(&q);
    for c in consumers {
        c.join().unwrap();
    }
    assert_eq!(q.len(), 0);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 50);
    for (item, (gets, readds)) in seen.iter() {
        // An accepted re-add is handed out exactly once more, even after the shutdown.
        assert_eq!(*gets, 1 + readds, "item {item}");
    }
}

#[test]
fn add_while_processing_with_shut_down_hands_each_accepted_re_add_out_exactly_once() {
    add_while_processing(Stop::ShutDown);
}

#[test]
fn add_while_processing_with_drain_hands_each_accepted_re_add_out_exactly_once() {
    add_while_processing(Stop::Drain);
}

#[test]
fn add_reports_acceptance_and_refuses_after_shutdown() {
    let q = queue();
    assert!(q.add("foo"));
    // client-go's newer `Add` reports (added=false, shutdown=false) for a deduplicated add; kcache
    // returns one bool, "accepted", which is true for a deduplicated add (see `Queue::add`).
    assert!(q.add("foo"));
    assert_eq!(q.len(), 1);
    let drain = {
        let q = q.clone();
        thread::spawn(move || q.shut_down_with_drain())
    };
    assert_eq!(q.get(), Some("foo"));
    // Blocks until the drain starts, then reports the end: nothing queued, "foo" in flight.
    assert_eq!(q.get(), None);
    assert!(!q.add("bar"));
    assert_eq!(q.len(), 0);
    q.done(&"foo").unwrap();
    drain.join().unwrap();
    assert_eq!(q.in_flight(), 0);
}

#[test]
fn len_counts_queued_items_once_each() {
    let q = queue();
    q.add("foo");
    assert_eq!(q.len(), 1);
    q.add("bar");
    assert_eq!(q.len(), 2);
    q.add("foo");
    assert_eq!(q.len(), 2);
}

#[test]
fn an_item_added_back_while_processing_is_handed_out_again_after_done() {
    let q = queue();
    q.add("foo");
    let item = q.get().unwrap();
    assert_eq!(item, "foo");
    q.add(item);
    assert_eq!(q.len(), 0, "not queued while in flight");
    q.done(&item).unwrap();
    assert_eq!(q.get(), Some("foo"));
    q.done(&"foo").unwrap();
    assert_eq!(q.len(), 0);
    assert_eq!(q.try_get(), None);
}

#[test]
fn shut_down_with_drain_waits_for_items_in_flight() {
    let q = queue();
    q.add("foo");
    q.add("bar");
    let first = q.get().unwrap();
    let second = q.get().unwrap();
    assert_eq!((first, second), ("foo", "bar"));
    let drain = {
        let q = q.clone();
        thread::spawn(move || q.shut_down_with_drain())
    };
    // Returns once the drain has started: nothing is queued.
    assert_eq!(q.get(), None);
    assert_stays_blocked(&drain, "shut_down_with_drain");
    q.done(&first).unwrap();
    assert_stays_blocked(&drain, "shut_down_with_drain");
    q.done(&second).unwrap();
    drain.join().unwrap();
}

#[test]
fn shut_down_returns_without_waiting_for_items_in_flight() {
    let q = queue();
    q.add("foo");
    q.add("bar");
    q.get().unwrap();
    q.get().unwrap();
    q.shut_down();
    assert!(q.is_shutting_down());
    assert_eq!(q.in_flight(), 2);
    assert_eq!(q.get(), None);
    q.done(&"foo").unwrap();
    q.done(&"bar").unwrap();
    assert_eq!(q.in_flight(), 0);
}

#[test]
fn shut_down_ends_a_drain_that_is_still_waiting() {
    let q = queue();
    q.add("foo");
    q.add("bar");
    q.get().unwrap();
    q.get().unwrap();
    let drain = {
        let q = q.clone();
        thread::spawn(move || q.shut_down_with_drain())
    };
    assert_eq!(q.get(), None);
    assert_stays_blocked(&drain, "shut_down_with_drain");
    q.shut_down();
    drain.join().unwrap();
    assert_eq!(
        q.in_flight(),
        2,
        "the forced shutdown did not finish the items"
    );
}

#[test]
fn a_drain_waits_for_an_item_re_added_while_in_flight() {
    let q = queue();
    q.add("foo");
    let gotten = q.get().unwrap();
    q.add("foo");
    let drain = {
        let q = q.clone();
        thread::spawn(move || q.shut_down_with_drain())
    };
    wait_shutting_down(&q);
    // Nothing is queued: "foo" is in flight (and dirty).
    assert_eq!(q.get(), None);
    assert_stays_blocked(&drain, "shut_down_with_drain");
    q.done(&gotten).unwrap();
    // done put the dirty item back: it is handed out even though the queue is shutting down.
    let again = q.get();
    assert_eq!(again, Some("foo"));
    assert_stays_blocked(&drain, "shut_down_with_drain");
    q.done(&"foo").unwrap();
    assert_eq!(q.get(), None);
    drain.join().unwrap();
}

#[test]
fn the_queue_keeps_no_copy_of_an_item_after_done() {
    // client-go checks with a finalizer that the item can be garbage collected; here the queue
    // must have dropped every clone of the `Arc`.
    let q = queue();
    let item = Arc::new(String::from("hello"));
    q.add(item.clone());
    let got = q.get().unwrap();
    assert!(Arc::ptr_eq(&got, &item));
    q.done(&got).unwrap();
    drop(got);
    assert_eq!(Arc::strong_count(&item), 1);
}
