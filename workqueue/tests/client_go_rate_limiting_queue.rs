//! Ported from client-go's `util/workqueue/rate_limiting_queue_test.go` (kubernetes/client-go),
//! rewritten in our words. The Go test reads each delay off the delaying queue's internal channel;
//! we observe it from outside instead, on a `FakeClock`: an item is not ready a microsecond before
//! its delay and is ready at it.

use kcache_core::FakeClock;
use kcache_workqueue::{
    default_controller_rate_limiter_with_clock, ItemExponentialFailureRateLimiter, QueueConfig,
    RateLimitingQueue,
};
use std::sync::Arc;
use std::time::Duration;

type Q = RateLimitingQueue<&'static str>;

const TICK: Duration = Duration::from_micros(1);

fn queue_on(limiter: impl kcache_workqueue::RateLimiter<&'static str> + 'static) -> (Q, FakeClock) {
    let clock = FakeClock::new();
    let queue =
        RateLimitingQueue::with_config(limiter, QueueConfig::new().clock(Arc::new(clock.clone())));
    (queue, clock)
}

/// Waits (bounded, without sleeping) until the timer thread made something ready, then takes it.
fn take_ready(queue: &Q) -> Option<&'static str> {
    for _ in 0..1_000_000 {
        if !queue.is_empty() {
            break;
        }
        std::thread::yield_now();
    }
    let item = queue.try_get()?;
    queue.done(&item).ok()?;
    Some(item)
}

/// Asserts that `item`, which waits in the queue, becomes ready exactly `delay` from now.
///
/// A probe due one tick earlier proves the timer thread ran at that instant: it moves every due
/// item in one pass, so `item` still waiting after the probe was handed out means it was not due.
fn assert_ready_after(queue: &Q, clock: &FakeClock, item: &'static str, delay: Duration) {
    assert!(queue.add_after("probe", delay - TICK));
    clock.advance(delay - TICK);
    assert_eq!(take_ready(queue), Some("probe"));
    assert_eq!(queue.len(), 0, "{item} was ready before {delay:?}");
    clock.advance(TICK);
    assert_eq!(
        take_ready(queue),
        Some(item),
        "{item} not ready after {delay:?}"
    );
}

#[test]
fn rate_limited_adds_wait_per_item_exponential_delays_and_forget_resets_them() {
    let (queue, clock) = queue_on(ItemExponentialFailureRateLimiter::new(
        Duration::from_millis(1),
        Duration::from_secs(1),
    ));
    let ms = Duration::from_millis;

    assert!(queue.add_rate_limited("one"));
    assert_ready_after(&queue, &clock, "one", ms(1));
    assert!(queue.add_rate_limited("one"));
    assert_ready_after(&queue, &clock, "one", ms(2));
    assert_eq!(queue.num_requeues(&"one"), 2);

    assert!(queue.add_rate_limited("two"));
    assert_ready_after(&queue, &clock, "two", ms(1));
    assert!(queue.add_rate_limited("two"));
    assert_ready_after(&queue, &clock, "two", ms(2));

    queue.forget(&"one");
    assert_eq!(queue.num_requeues(&"one"), 0);
    assert!(queue.add_rate_limited("one"));
    assert_ready_after(&queue, &clock, "one", ms(1));
}

#[test]
fn default_controller_limiter_hands_a_rate_limited_item_back_after_five_milliseconds() {
    let clock = FakeClock::new();
    let limiter = default_controller_rate_limiter_with_clock(Arc::new(clock.clone()));
    let queue: Q =
        RateLimitingQueue::with_config(limiter, QueueConfig::new().clock(Arc::new(clock.clone())));

    assert!(queue.add_rate_limited("one"));
    assert_eq!((queue.len(), queue.waiting_len()), (0, 1));
    assert_ready_after(&queue, &clock, "one", Duration::from_millis(5));
    assert_eq!(queue.num_requeues(&"one"), 1);
}
