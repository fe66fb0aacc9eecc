//! Ported from client-go's `util/workqueue/delaying_queue_test.go` (kubernetes/client-go),
//! rewritten in our words. client-go polls `Len()` with real sleeps to learn that its timer
//! goroutine caught up; here a worker blocks in `get`, and "nothing became ready" is shown by a
//! sentinel item added after the clock moved, which must be the next item handed out.

use kcache_core::FakeClock;
use kcache_workqueue::{DelayingQueue, QueueConfig};
use std::sync::Arc;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

fn delaying() -> (DelayingQueue<&'static str>, FakeClock) {
    let clock = FakeClock::new();
    let q = DelayingQueue::with_config(QueueConfig::new().clock(Arc::new(clock.clone())));
    (q, clock)
}

/// Proves the timer thread made nothing ready: a sentinel due in 1 ms comes out first, and then
/// nothing is left.
fn assert_nothing_fired(q: &DelayingQueue<&'static str>, clock: &FakeClock) {
    assert!(q.add_after("sentinel", MS));
    clock.advance(MS);
    assert_eq!(q.get(), Some("sentinel"));
    q.done(&"sentinel").unwrap();
    assert_eq!(q.len(), 0);
}

#[test]
fn an_item_added_after_a_delay_is_handed_out_once_the_delay_passed() {
    let (q, clock) = delaying();
    q.add_after("foo", 50 * MS);
    assert_eq!((q.len(), q.waiting_len()), (0, 1));
    clock.advance(60 * MS);
    assert_eq!(q.get(), Some("foo"));
    q.done(&"foo").unwrap();
    // Past client-go's 10 s heartbeat: the item does not come back.
    clock.advance(Duration::from_secs(10));
    assert_eq!(q.waiting_len(), 0);
    assert_nothing_fired(&q, &clock);
}

#[test]
fn delayed_adds_of_one_item_keep_the_earliest_deadline() {
    let (q, clock) = delaying();
    q.add_after("foo", 50 * MS);
    q.add_after("foo", 70 * MS);
    assert_eq!((q.len(), q.waiting_len()), (0, 1));
    clock.advance(60 * MS);
    assert_eq!(q.get(), Some("foo"));
    q.done(&"foo").unwrap();
    // The later deadline (70 ms) was never scheduled.
    clock.advance(20 * MS);
    assert_nothing_fired(&q, &clock);

    // The earlier request wins when it comes second, too.
    q.add_after("foo", 50 * MS);
    q.add_after("foo", 30 * MS);
    assert_eq!((q.len(), q.waiting_len()), (0, 1));
    clock.advance(40 * MS);
    assert_eq!(q.get(), Some("foo"));
    q.done(&"foo").unwrap();
    clock.advance(20 * MS);
    assert_nothing_fired(&q, &clock);

    // A delayed add of an item in flight is kept (client-go: `Find` reports it).
    q.add("foo");
    assert_eq!(q.get(), Some("foo"));
    assert!(q.add_after("foo", 5 * MS));
    q.done(&"foo").unwrap();
    assert_eq!((q.len(), q.waiting_len()), (0, 1));
    clock.advance(5 * MS);
    assert_eq!(q.get(), Some("foo"));
}

#[test]
fn a_shorter_delay_added_later_fires_first() {
    let (q, clock) = delaying();
    q.add_after("foo", Duration::from_secs(1));
    q.add_after("bar", 50 * MS);
    assert_eq!((q.len(), q.waiting_len()), (0, 2));

    clock.advance(60 * MS);
    assert_eq!(q.get(), Some("bar"));
    assert_eq!(q.len(), 0);

    q.add_after("baz", Duration::from_secs(2));
    clock.advance(Duration::from_secs(1));
    assert_eq!(q.get(), Some("foo"));
    assert_eq!(q.len(), 0);

    clock.advance(Duration::from_secs(2));
    assert_eq!(q.get(), Some("baz"));
    assert_eq!((q.len(), q.waiting_len()), (0, 0));
}

#[test]
fn items_due_together_come_out_in_deadline_order() {
    let (q, clock) = delaying();
    q.add_after("foo", Duration::from_secs(1));
    q.add_after("bar", 500 * MS);
    q.add_after("baz", 250 * MS);
    assert_eq!((q.len(), q.waiting_len()), (0, 3));

    clock.advance(Duration::from_secs(2));
    assert_eq!(q.get(), Some("baz"));
    assert_eq!(q.get(), Some("bar"));
    assert_eq!(q.get(), Some("foo"));
    assert_eq!((q.len(), q.waiting_len()), (0, 0));
}
