//! loom models of `Queue`: every interleaving of adds, gets, dones and shutdowns.
//!
//! Run: `RUSTFLAGS="--cfg kcache_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p kcache-workqueue --test loom_queue`
#![cfg(kcache_loom)]

use kcache_workqueue::Queue;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

#[test]
fn no_item_is_handed_to_two_workers_at_once() {
    loom::model(|| {
        let q = Queue::new();
        q.add(1u8);
        let busy = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (q, busy) = (q.clone(), busy.clone());
                thread::spawn(move || {
                    if let Some(item) = q.try_get() {
                        assert_eq!(
                            busy.fetch_add(1, Ordering::SeqCst),
                            0,
                            "two workers hold {item}"
                        );
                        busy.fetch_sub(1, Ordering::SeqCst);
                        q.done(&item).unwrap();
                    }
                })
            })
            .collect();
        q.add(1);
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(q.in_flight(), 0);
        assert!(q.len() <= 1);
    });
}

#[test]
fn re_add_during_processing_is_requeued_exactly_once() {
    loom::model(|| {
        let q = Queue::new();
        q.add(7u8);
        let item = q.get().unwrap();
        let adder = {
            let q = q.clone();
            thread::spawn(move || {
                q.add(7);
                q.add(7);
            })
        };
        q.done(&item).unwrap();
        adder.join().unwrap();
        // Whether the adds came before or after `done`, exactly one copy is queued.
        assert_eq!(q.len(), 1);
        assert_eq!(q.try_get(), Some(7));
        assert_eq!(q.try_get(), None);
    });
}

#[test]
fn no_item_is_lost_across_add_get_done_races() {
    loom::model(|| {
        let q = Queue::new();
        let seen = Arc::new(AtomicUsize::new(0));
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let (q, seen) = (q.clone(), seen.clone());
                thread::spawn(move || {
                    while let Some(item) = q.get() {
                        seen.fetch_add(1usize << (item * 4), Ordering::SeqCst);
                        q.done(&item).unwrap();
                    }
                })
            })
            .collect();
        q.add(0u8);
        q.add(1u8);
        q.shut_down();
        for c in consumers {
            c.join().unwrap();
        }
        // Each distinct item was handed out exactly once.
        assert_eq!(seen.load(Ordering::SeqCst), 0x11);
    });
}

#[test]
fn shut_down_wakes_every_blocked_worker() {
    loom::model(|| {
        let q: Queue<u8> = Queue::new();
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let q = q.clone();
                thread::spawn(move || q.get())
            })
            .collect();
        q.shut_down();
        for w in waiters {
            assert_eq!(w.join().unwrap(), None);
        }
    });
}

#[test]
fn shut_down_with_drain_waits_for_in_flight_and_queued_items() {
    loom::model(|| {
        let q = Queue::new();
        q.add(1u8);
        q.add(2u8);
        let first = q.get().unwrap();
        let finished = Arc::new(AtomicUsize::new(0));
        let worker = {
            let (q, finished) = (q.clone(), finished.clone());
            thread::spawn(move || {
                finished.fetch_add(1, Ordering::SeqCst);
                q.done(&first).unwrap();
                while let Some(item) = q.get() {
                    finished.fetch_add(1, Ordering::SeqCst);
                    q.done(&item).unwrap();
                }
            })
        };
        q.shut_down_with_drain();
        assert_eq!(
            finished.load(Ordering::SeqCst),
            2,
            "drain returned before both items were done"
        );
        assert_eq!(q.in_flight(), 0);
        worker.join().unwrap();
    });
}

#[test]
fn get_async_is_woken_by_an_add_from_another_thread() {
    loom::model(|| {
        let q = Queue::new();
        let adder = {
            let q = q.clone();
            thread::spawn(move || {
                q.add(3u8);
            })
        };
        let got = loom::future::block_on(q.get_async());
        assert_eq!(got, Some(3));
        adder.join().unwrap();
    });
}

// The hand-offs of the lock-free ready queue (see `queue/ready.rs`). Under loom the FIFO is a
// `Mutex<VecDeque>` stand-in (crossbeam's `SegQueue` is not loom-aware), so these models check the
// protocol around it: the sleeper count and closed flag in one atomic word, the parking mutex and
// its tokens, the shard locks, and the shutdown sweep.
//
// Each model below names its key line. Each was shown to catch its bug by breaking that line,
// running the model at LOOM_MAX_PREEMPTIONS=2 (it failed as noted) and restoring it.

/// Key line: `Ready::register` looks at the FIFO once more after counting itself a sleeper (the
/// worker's half of the Dekker pair with `Ready::push`). Without that second look the model
/// deadlocks: the push read "no sleeper" just before the worker registered, and the worker sleeps
/// with an item ready.
#[test]
fn an_add_racing_a_blocking_get_wakes_it() {
    loom::model(|| {
        let q = Queue::new();
        let worker = {
            let q = q.clone();
            thread::spawn(move || q.get())
        };
        // Before, during or after the worker registers as a sleeper: it must get the item.
        q.add(1u8);
        assert_eq!(worker.join().unwrap(), Some(1));
        assert_eq!(q.in_flight(), 1);
    });
}

/// Key line: `done`'s requeue hands its push's "a sleeper was registered" on to `wake_one`.
/// Ignoring it deadlocks (the worker sleeps while the requeued item is ready).
#[test]
fn an_add_racing_done_requeues_once_and_wakes_a_sleeping_worker() {
    loom::model(|| {
        let q = Queue::new();
        q.add(7u8);
        let item = q.get().unwrap();
        let sleeper = {
            let q = q.clone();
            thread::spawn(move || {
                let got = q.get();
                if let Some(i) = got {
                    q.done(&i).unwrap();
                }
                got
            })
        };
        let adder = {
            let q = q.clone();
            thread::spawn(move || assert!(q.add(7)))
        };
        // The add comes while 7 is in flight (requeued by this done) or after it (queued fresh):
        // either way exactly one copy reaches the sleeping worker.
        q.done(&item).unwrap();
        adder.join().unwrap();
        assert_eq!(sleeper.join().unwrap(), Some(7));
        assert_eq!(q.try_get(), None);
        assert_eq!(q.in_flight(), 0);
    });
}

/// Key line: `Ready::register` refuses to register when the word has the closed flag. Without
/// that check a worker that arrives after `close` sleeps for ever (deadlock).
#[test]
fn shut_down_racing_a_worker_going_to_sleep_wakes_it() {
    loom::model(|| {
        let q: Queue<u8> = Queue::new();
        let worker = {
            let q = q.clone();
            thread::spawn(move || q.get())
        };
        q.shut_down();
        assert_eq!(worker.join().unwrap(), None);
    });
}

/// Key line: the same closed-flag check in `Ready::register`, reached through `park_task`.
/// Without it a task polled after `close` parks for ever (deadlock).
#[test]
fn shut_down_racing_a_task_going_to_sleep_wakes_it() {
    loom::model(|| {
        let q: Queue<u8> = Queue::new();
        let closer = {
            let q = q.clone();
            thread::spawn(move || q.shut_down())
        };
        assert_eq!(loom::future::block_on(q.get_async()), None);
        closer.join().unwrap();
    });
}

/// Key line: `Shared::shut_down` closes the ready queue only after sweeping every shard. Closing
/// it first lets a worker return `None` before an accepted add's push (the item is never handed
/// out: `left: None, right: Some(5)`).
#[test]
fn an_add_racing_shut_down_is_refused_or_handed_out() {
    loom::model(|| {
        let q = Queue::new();
        let adder = {
            let q = q.clone();
            thread::spawn(move || q.add(5u8))
        };
        let worker = {
            let q = q.clone();
            thread::spawn(move || q.get())
        };
        q.shut_down();
        let accepted = adder.join().unwrap();
        // An accepted add is handed out even though the queue shut down meanwhile.
        assert_eq!(worker.join().unwrap(), accepted.then_some(5));
    });
}

/// Key line: `Slots::mark_taken` raises its shard's `taken` mark with an atomic maximum. A plain
/// store lets the worker that took an earlier ticket of a shard write its mark after the worker
/// that took a later one, below that later ticket: the later item looks queued again, its
/// worker's re-add is dropped as a duplicate and its `done` is refused (`NotProcessing`). Three
/// items over the two shards loom uses put two in one shard.
#[test]
fn a_re_add_by_the_worker_holding_an_item_survives_a_take_racing_in_its_shard() {
    loom::model(|| {
        let q = Queue::new();
        for i in 0..3u8 {
            q.add(i);
        }
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let q = q.clone();
                thread::spawn(move || {
                    let (mut gets, mut readds, mut readded) = (0, 0, [false; 3]);
                    while let Some(item) = q.try_get() {
                        gets += 1;
                        // Re-add once per worker and item while holding it: it must come back.
                        if !readded[usize::from(item)] {
                            readded[usize::from(item)] = true;
                            readds += 1;
                            q.add(item);
                        }
                        q.done(&item).unwrap();
                    }
                    (gets, readds)
                })
            })
            .collect();
        let (mut gets, mut readds) = (0, 0);
        for w in workers {
            let (g, r) = w.join().unwrap();
            gets += g;
            readds += r;
        }
        // Each add made while the item was held handed it out once more; nothing is left.
        assert_eq!(gets, 3 + readds);
        assert_eq!((q.len(), q.in_flight()), (0, 0));
    });
}
