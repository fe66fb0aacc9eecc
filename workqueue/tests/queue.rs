//! `Queue`: the rules the crate docs state that the client-go ports do not
//! already cover.

use futures::executor::block_on;
use kcache_core::FakeClock;
use kcache_workqueue::{NotProcessing, Queue, QueueConfig};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread;

fn queue<T: Clone + Eq + std::hash::Hash + Send + 'static>() -> Queue<T> {
    Queue::with_config(QueueConfig::new().clock(Arc::new(FakeClock::new())))
}

/// A waker that counts its wake-ups.
#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl CountingWaker {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

fn poll<F: Future + Unpin>(fut: &mut F, waker: &Arc<CountingWaker>) -> Poll<F::Output> {
    let waker = Waker::from(waker.clone());
    Pin::new(fut).poll(&mut Context::from_waker(&waker))
}

#[test]
fn items_come_out_in_first_add_order_and_a_queued_item_is_not_queued_twice() {
    let q = queue();
    for item in [3, 1, 2, 1, 3] {
        assert!(q.add(item));
    }
    assert_eq!(q.len(), 3);
    assert_eq!([q.get(), q.get(), q.get()], [Some(3), Some(1), Some(2)]);
    assert_eq!(q.try_get(), None);
    assert!(q.is_empty());
}

#[test]
fn add_returns_false_after_shut_down() {
    let q = queue();
    assert!(q.add(1));
    q.shut_down();
    assert!(!q.add(2));
    // Refused even for an item already queued.
    assert!(!q.add(1));
    assert_eq!(q.len(), 1);
}

#[test]
fn get_hands_out_queued_items_after_shut_down_and_then_returns_none() {
    let q = queue();
    q.add("a");
    q.add("b");
    q.shut_down();
    assert!(q.is_shutting_down());
    assert_eq!(q.get(), Some("a"));
    assert_eq!(q.get(), Some("b"));
    assert_eq!(q.get(), None);
    assert_eq!(q.in_flight(), 2);
    q.done(&"a").unwrap();
    q.done(&"b").unwrap();
    assert_eq!(q.get(), None);
}

#[test]
fn shut_down_wakes_a_blocked_get_with_none() {
    let q = queue::<u32>();
    let worker = {
        let q = q.clone();
        thread::spawn(move || q.get())
    };
    q.shut_down();
    assert_eq!(worker.join().unwrap(), None);
}

#[test]
fn during_a_drain_get_returns_none_once_nothing_is_queued_even_while_others_are_in_flight() {
    let q = queue();
    q.add("a");
    q.add("b");
    assert_eq!(q.get(), Some("a"));
    let drain = {
        let q = q.clone();
        thread::spawn(move || q.shut_down_with_drain())
    };
    // "b" is still queued, so it is handed out whether or not the drain has started yet.
    assert_eq!(q.get(), Some("b"));
    // Now nothing is queued: once the drain starts, `get` reports the end though "a" and "b" are
    // in flight (a blocked `get` is woken by the shutdown).
    assert_eq!(q.get(), None);
    assert_eq!(q.in_flight(), 2);
    q.done(&"a").unwrap();
    q.done(&"b").unwrap();
    drain.join().unwrap();
}

#[test]
fn an_item_re_added_while_processing_before_shut_down_is_handed_out_after_its_done() {
    let q = queue();
    q.add("a");
    assert_eq!(q.get(), Some("a"));
    assert!(q.add("a"));
    q.shut_down();
    assert_eq!(q.try_get(), None, "not ready while in flight");
    q.done(&"a").unwrap();
    assert_eq!(q.get(), Some("a"));
    q.done(&"a").unwrap();
    assert_eq!(q.get(), None);
}

#[test]
fn an_item_re_added_after_shut_down_while_processing_is_not_handed_out_again() {
    let q = queue();
    q.add("a");
    assert_eq!(q.get(), Some("a"));
    q.shut_down();
    assert!(!q.add("a"));
    q.done(&"a").unwrap();
    assert_eq!(q.get(), None);
}

#[test]
fn done_twice_is_rejected_with_not_processing_and_queues_nothing() {
    let q = queue();
    q.add("a");
    assert_eq!(q.get(), Some("a"));
    assert_eq!(q.done(&"a"), Ok(()));
    assert_eq!(q.done(&"a"), Err(NotProcessing));
    assert_eq!((q.len(), q.in_flight()), (0, 0));
    assert_eq!(q.try_get(), None);
}

#[test]
fn done_of_a_never_seen_item_is_rejected() {
    let q = queue();
    assert_eq!(q.done(&"ghost"), Err(NotProcessing));
    q.add("a");
    assert_eq!(q.done(&"ghost"), Err(NotProcessing));
    assert_eq!((q.len(), q.in_flight()), (1, 0));
    assert_eq!(q.get(), Some("a"));
    assert_eq!(q.try_get(), None);
}

#[test]
fn an_item_added_many_times_while_processing_is_handed_out_once_more() {
    let q = queue();
    q.add(7);
    assert_eq!(q.get(), Some(7));
    for _ in 0..5 {
        assert!(q.add(7));
    }
    assert_eq!(q.len(), 0);
    q.done(&7).unwrap();
    assert_eq!(q.len(), 1);
    assert_eq!(q.get(), Some(7));
    q.done(&7).unwrap();
    assert_eq!(q.try_get(), None);
}

#[test]
fn a_second_drain_after_a_finished_drain_returns_at_once() {
    let q = queue::<u32>();
    q.shut_down_with_drain();
    q.shut_down_with_drain();
    q.shut_down();
    assert!(q.is_shutting_down());
    assert_eq!(q.get(), None);
}

#[test]
fn get_async_hands_out_a_queued_item() {
    let q = queue();
    q.add("a");
    q.add("b");
    assert_eq!(block_on(q.get_async()), Some("a"));
    assert_eq!(block_on(q.get_async()), Some("b"));
    assert_eq!(q.in_flight(), 2);
}

#[test]
fn get_async_parks_until_an_add_wakes_it() {
    let q = queue();
    let waker = Arc::new(CountingWaker::default());
    let mut fut = q.get_async();
    assert_eq!(poll(&mut fut, &waker), Poll::Pending);
    assert_eq!(waker.count(), 0);
    q.add("a");
    assert_eq!(waker.count(), 1);
    assert_eq!(poll(&mut fut, &waker), Poll::Ready(Some("a")));
}

#[test]
fn get_async_wakes_in_a_thread_and_returns_none_after_shut_down() {
    let q = queue::<u32>();
    let worker = {
        let q = q.clone();
        thread::spawn(move || {
            let mut got = Vec::new();
            while let Some(item) = block_on(q.get_async()) {
                got.push(item);
                q.done(&item).unwrap();
            }
            got
        })
    };
    for i in 0..100 {
        q.add(i);
    }
    q.shut_down_with_drain();
    let got = worker.join().unwrap();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
}

#[test]
fn dropping_a_woken_get_async_passes_the_wake_up_on() {
    let q = queue();
    let (wa, wb) = (
        Arc::new(CountingWaker::default()),
        Arc::new(CountingWaker::default()),
    );
    let mut a = q.get_async();
    let mut b = q.get_async();
    assert_eq!(poll(&mut a, &wa), Poll::Pending);
    assert_eq!(poll(&mut b, &wb), Poll::Pending);
    q.add("x");
    // One item wakes one waiter: the one parked first.
    assert_eq!((wa.count(), wb.count()), (1, 0));
    // The woken future is cancelled before it takes the item: the wake-up goes to `b`.
    drop(a);
    assert_eq!(wb.count(), 1);
    assert_eq!(poll(&mut b, &wb), Poll::Ready(Some("x")));
    assert_eq!(q.in_flight(), 1);
}

#[test]
fn dropping_a_parked_get_async_takes_nothing_and_wakes_nobody() {
    let q = queue();
    let (wa, wb) = (
        Arc::new(CountingWaker::default()),
        Arc::new(CountingWaker::default()),
    );
    let mut a = q.get_async();
    let mut b = q.get_async();
    assert_eq!(poll(&mut a, &wa), Poll::Pending);
    assert_eq!(poll(&mut b, &wb), Poll::Pending);
    drop(a);
    assert_eq!((wa.count(), wb.count()), (0, 0));
    q.add("x");
    // `a` is gone, so the add wakes `b`.
    assert_eq!(wb.count(), 1);
    assert_eq!(poll(&mut b, &wb), Poll::Ready(Some("x")));
    assert_eq!(q.len(), 0);
}

#[test]
fn shut_down_wakes_every_parked_get_async_with_none() {
    let q = queue::<u32>();
    let (wa, wb) = (
        Arc::new(CountingWaker::default()),
        Arc::new(CountingWaker::default()),
    );
    let mut a = q.get_async();
    let mut b = q.get_async();
    assert_eq!(poll(&mut a, &wa), Poll::Pending);
    assert_eq!(poll(&mut b, &wb), Poll::Pending);
    q.shut_down();
    assert_eq!((wa.count(), wb.count()), (1, 1));
    assert_eq!(poll(&mut a, &wa), Poll::Ready(None));
    assert_eq!(poll(&mut b, &wb), Poll::Ready(None));
}
