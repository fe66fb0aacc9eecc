//! loom models of `DelayingQueue`: the timer thread's hand-off to the ready queue.
//!
//! Run: `RUSTFLAGS="--cfg kcache_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p kcache-workqueue --test loom_delaying`
#![cfg(kcache_loom)]

use kcache_core::FakeClock;
use kcache_workqueue::{DelayingQueue, QueueConfig};
use loom::thread;
use std::sync::Arc;
use std::time::Duration;

/// Key line: after firing a batch, the timer wakes as many sleepers as it fired items (one fence
/// and one look at the sleepers for the batch). Shown to catch its bug: waking none, the worker
/// sleeps for ever next to its due item, which this model reports as a deadlock.
#[test]
fn the_timer_hands_a_due_item_to_a_blocked_worker() {
    loom::model(|| {
        let clock = FakeClock::new();
        let q = DelayingQueue::with_config(QueueConfig::new().clock(Arc::new(clock.clone())));
        q.add_after(1u8, Duration::from_millis(10));
        let advancer = thread::spawn(move || clock.advance(Duration::from_millis(10)));
        assert_eq!(q.get(), Some(1));
        q.done(&1).unwrap();
        advancer.join().unwrap();
        q.shut_down();
    });
}

#[test]
fn an_add_racing_the_timer_hands_the_item_out_once() {
    loom::model(|| {
        let clock = FakeClock::new();
        let q = DelayingQueue::with_config(QueueConfig::new().clock(Arc::new(clock.clone())));
        q.add_after(1u8, Duration::from_millis(5));
        let adder = {
            let q = q.clone();
            thread::spawn(move || {
                q.add(1);
            })
        };
        clock.advance(Duration::from_millis(5));
        adder.join().unwrap();
        assert_eq!(q.get(), Some(1));
        q.done(&1).unwrap();
        // The heap entry was either consumed by the timer or made stale by the add: never both.
        assert_eq!(q.try_get(), None);
        assert_eq!(q.waiting_len(), 0);
        q.shut_down();
    });
}

#[test]
fn a_delayed_add_racing_the_clock_is_handed_out() {
    loom::model(|| {
        let clock = FakeClock::new();
        let q = DelayingQueue::with_config(QueueConfig::new().clock(Arc::new(clock.clone())));
        let deadline = kcache_core::Clock::now(&clock) + Duration::from_millis(10);
        let adder = {
            let q = q.clone();
            // Through the delayed-add inbox if it wins the race, as an immediate add otherwise.
            thread::spawn(move || assert!(q.add_at(1u8, deadline)))
        };
        clock.advance(Duration::from_millis(10));
        assert_eq!(q.get(), Some(1));
        q.done(&1).unwrap();
        adder.join().unwrap();
        q.shut_down();
    });
}

#[test]
fn a_delayed_add_racing_shut_down_is_refused_or_dropped_never_handed_out() {
    loom::model(|| {
        let clock = FakeClock::new();
        let q = DelayingQueue::with_config(QueueConfig::new().clock(Arc::new(clock.clone())));
        let adder = {
            let q = q.clone();
            thread::spawn(move || q.add_after(1u8, Duration::from_millis(10)))
        };
        q.shut_down();
        let _accepted = adder.join().unwrap();
        clock.advance(Duration::from_millis(10));
        assert_eq!(q.get(), None);
        assert_eq!(q.waiting_len(), 0);
    });
}

/// Key line: the timer fires an entry only if the item's slot is `Waiting` with that entry's
/// deadline and number. Shown to catch its bug: with "any `Waiting` slot" instead, entry 1 fires
/// item 1 at 10 ms in entry 2's place (`try_get` is `Some`), which this model reports.
#[test]
fn a_delayed_add_racing_its_own_processing_never_fires_a_stale_entry() {
    loom::model(|| {
        let clock = FakeClock::new();
        let q = DelayingQueue::with_config(QueueConfig::new().clock(Arc::new(clock.clone())));
        let start = kcache_core::Clock::now(&clock);
        // Entry 1: item 1 at 10 ms.
        q.add_at(1u8, start + Duration::from_millis(10));
        let worker = {
            let q = q.clone();
            thread::spawn(move || {
                // Ready now (entry 1 goes stale, unless the timer fired it first), processed, and
                // scheduled again during its processing: entry 2 at 20 ms, after its done.
                q.add(1);
                let item = q.get().unwrap();
                q.add_at(item, start + Duration::from_millis(20));
                q.done(&item).unwrap();
            })
        };
        let advancer = {
            let clock = clock.clone();
            thread::spawn(move || clock.advance(Duration::from_millis(10)))
        };
        worker.join().unwrap();
        advancer.join().unwrap();
        // Whenever the timer ran: entry 1 never fires in entry 2's place.
        assert_eq!(q.try_get(), None);
        assert_eq!(q.waiting_len(), 1);
        clock.advance(Duration::from_millis(10));
        assert_eq!(q.get(), Some(1));
        q.done(&1).unwrap();
        q.shut_down();
    });
}

/// Key line: `waiting_len` reads how many items stopped waiting before how many started (two
/// counters, so that the producer and the timer do not write one cache line). Shown to catch its
/// bug: read the other way round, a read racing an item's delayed add and its firing can see the
/// firing without the add and wrap below zero, which this model reports.
#[test]
fn waiting_len_racing_a_delayed_add_and_its_firing_stays_in_range() {
    loom::model(|| {
        let clock = FakeClock::new();
        let q = DelayingQueue::with_config(QueueConfig::new().clock(Arc::new(clock.clone())));
        let adder = {
            let (q, clock) = (q.clone(), clock.clone());
            thread::spawn(move || {
                q.add_after(1u8, Duration::from_millis(10));
                clock.advance(Duration::from_millis(10));
            })
        };
        assert!(q.waiting_len() <= 1);
        adder.join().unwrap();
        assert_eq!(q.get(), Some(1));
        // Counted out before it was handed out.
        assert_eq!(q.waiting_len(), 0);
        q.done(&1).unwrap();
        q.shut_down();
    });
}
