//! loom models of `PriorityQueue`: the hand-offs it adds to the queue's (priority add racing a
//! blocked worker; a raise racing the `done` that requeues the item).
//!
//! Run: `RUSTFLAGS="--cfg kcache_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p kcache-workqueue --test loom_priority`
#![cfg(kcache_loom)]

use kcache_core::FakeClock;
use kcache_workqueue::{PriorityQueue, QueueConfig, RateLimiter};
use loom::thread;
use std::sync::Arc;
use std::time::Duration;

struct NoDelay;

impl<T> RateLimiter<T> for NoDelay {
    fn when(&self, _: &T) -> Duration {
        Duration::ZERO
    }
    fn forget(&self, _: &T) {}
    fn num_requeues(&self, _: &T) -> usize {
        0
    }
}

fn queue() -> PriorityQueue<u8> {
    PriorityQueue::with_config(
        NoDelay,
        QueueConfig::new().clock(Arc::new(FakeClock::new())),
    )
}

/// Key line: a priority add that finds a sleeper registered wakes it (`after_push(wake, ..)` in
/// `Shared::add_with_priority`). Shown to catch its bug: with the wake dropped, the interleaving
/// where the worker registers before the add's push leaves it asleep next to its items, which
/// loom reports as a deadlock.
#[test]
fn a_priority_add_racing_a_blocked_get_is_handed_out_in_rank_order() {
    loom::model(|| {
        let q = queue();
        let worker = {
            let q = q.clone();
            thread::spawn(move || {
                let a = q.get();
                let b = q.get();
                (a, b)
            })
        };
        q.add_with_priority(1, PriorityQueue::<u8>::LOW);
        q.add_with_priority(2, 10);
        let (a, b) = worker.join().unwrap();
        // The worker may take 1 before 2 arrives; if both were ready, 2 goes first.
        let got = [a, b];
        assert!(
            got == [Some(1), Some(2)] || got == [Some(2), Some(1)],
            "{got:?}"
        );
        q.shut_down();
    });
}

/// Key line: a raise of an item in flight and already re-added lifts the priority of its requeue
/// (`*p = (*p).max(priority)` in the `Then::Requeue` arm of `Shared::add_with_priority`). Shown
/// to catch its bug: with the raise dropped, the interleaving where the raise comes before `done`
/// requeues the item at its low priority, and the normal-priority item is handed out first.
#[test]
fn a_raise_racing_the_done_that_requeues_the_item_takes_effect_either_way() {
    loom::model(|| {
        let q = queue();
        q.add_with_priority(1, PriorityQueue::<u8>::LOW);
        assert_eq!(q.try_get(), Some(1));
        q.add_with_priority(1, PriorityQueue::<u8>::LOW); // dirty, to be requeued at LOW
        q.add(2); // NORMAL
        let raiser = {
            let q = q.clone();
            thread::spawn(move || {
                q.add_with_priority(1, 10);
            })
        };
        q.done(&1).unwrap();
        raiser.join().unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(q.try_get(), Some(1), "the raised item goes first");
        assert_eq!(q.try_get(), Some(2));
        q.shut_down();
    });
}
