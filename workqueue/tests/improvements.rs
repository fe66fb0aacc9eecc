//! One test per place where kcache's workqueue does better than client-go. Each test
//! says what client-go does instead.

use kcache_core::FakeClock;
use kcache_workqueue::{DelayingQueue, NotProcessing, Queue, QueueConfig};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

#[test]
fn an_item_waiting_for_its_delay_and_added_now_is_processed_once() {
    // client-go dedups a delayed item only against its heap, not against the ready queue: the item
    // is processed now and again when the heap entry fires (kubernetes#126027).
    let clock = FakeClock::new();
    let q = DelayingQueue::with_config(QueueConfig::new().clock(Arc::new(clock.clone())));
    assert!(q.add_after("a", Duration::from_secs(1)));
    assert!(q.add("a"));
    assert_eq!((q.len(), q.waiting_len()), (1, 0));
    assert_eq!(q.get(), Some("a"));
    q.done(&"a").unwrap();
    clock.advance(Duration::from_secs(1));
    // Only the sentinel, due after "a"'s old deadline, comes out.
    assert!(q.add_after("sentinel", Duration::from_millis(1)));
    clock.advance(Duration::from_millis(1));
    assert_eq!(q.get(), Some("sentinel"));
    assert_eq!((q.len(), q.waiting_len()), (0, 0));
}

#[test]
fn shut_down_with_drain_waits_for_queued_and_in_flight_items() {
    // client-go's ShutDownWithDrain waits only for items in flight: it returns while items are
    // still queued (kubernetes#141079 proposes waiting for them too).
    let q = Queue::with_config(QueueConfig::new().clock(Arc::new(FakeClock::new())));
    q.add("in-flight");
    q.add("queued");
    assert_eq!(q.get(), Some("in-flight"));
    let (tx, rx) = mpsc::channel();
    let drain = {
        let q = q.clone();
        thread::spawn(move || {
            q.shut_down_with_drain();
            tx.send(()).unwrap();
        })
    };
    let still_waiting = |what: &str| {
        for _ in 0..1_000 {
            thread::yield_now();
            assert_eq!(
                rx.try_recv(),
                Err(mpsc::TryRecvError::Empty),
                "drain returned {what}"
            );
        }
    };
    for _ in 0..10_000_000 {
        if q.is_shutting_down() {
            break;
        }
        thread::yield_now();
    }
    assert!(q.is_shutting_down());
    still_waiting("with one item queued and one in flight");
    q.done(&"in-flight").unwrap();
    // Nothing in flight now, but "queued" is: client-go's drain would return here.
    still_waiting("with an item still queued");
    assert_eq!(q.get(), Some("queued"));
    still_waiting("with an item in flight");
    q.done(&"queued").unwrap();
    rx.recv().unwrap();
    drain.join().unwrap();
    assert_eq!((q.len(), q.in_flight()), (0, 0));
}

#[test]
fn done_of_an_item_not_being_processed_is_rejected_and_queues_no_duplicate() {
    // client-go's Done of a queued (dirty, not processing) item pushes it a second time, so it is
    // handed out twice (kubernetes#141079).
    let q = Queue::with_config(QueueConfig::new().clock(Arc::new(FakeClock::new())));
    q.add("a");
    assert_eq!(q.done(&"a"), Err(NotProcessing));
    assert_eq!(q.len(), 1);
    assert_eq!(q.get(), Some("a"));
    assert_eq!(q.try_get(), None, "no duplicate entry");
    q.done(&"a").unwrap();
    assert_eq!(q.done(&"a"), Err(NotProcessing));
    assert_eq!((q.len(), q.in_flight()), (0, 0));
    assert_eq!(q.try_get(), None);
}
