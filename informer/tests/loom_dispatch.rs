//! Loom model of the hand-off from the dispatcher into handler buffers: nothing is lost, each
//! handler sees its notifications in dispatch order, a handler's `has_synced` never turns true
//! before it received its last initial notification, and closing wakes a blocked consumer.
//!
//! Run: `RUSTFLAGS="--cfg kcache_loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p kcache-informer --release --test loom_dispatch`
#![cfg(kcache_loom)]

use kcache_core::ObjectKey;
use kcache_informer::loom_support::Dispatcher;
use kcache_informer::{BufferMode, Event};
use loom::sync::Arc;
use loom::thread;

fn key(k: &str) -> ObjectKey {
    ObjectKey::new(k).unwrap()
}

fn name(e: &Event<u32>) -> u32 {
    **e.object().unwrap()
}

#[test]
fn dispatched_notifications_reach_every_handler_in_order_and_sync_after_the_last() {
    loom::model(|| {
        let d = Arc::new(Dispatcher::<u32>::new(2, BufferMode::Ordered));
        let producer = {
            let d = d.clone();
            thread::spawn(move || {
                for (i, k) in ["a", "b"].iter().enumerate() {
                    d.dispatch_add(&key(k), std::sync::Arc::new(i as u32), true);
                }
                d.set_synced();
            })
        };
        let consumers: Vec<_> = (0..2)
            .map(|i| {
                let d = d.clone();
                thread::spawn(move || {
                    let mut got = Vec::new();
                    while got.len() < 2 {
                        let (_, e) = d.consume(i).expect("not closed");
                        got.push(name(&e));
                        if got.len() < 2 {
                            assert!(!d.has_synced(i), "synced before the last initial item");
                        }
                    }
                    got
                })
            })
            .collect();
        producer.join().unwrap();
        for c in consumers {
            assert_eq!(c.join().unwrap(), vec![0, 1]);
        }
        assert!(d.has_synced(0) && d.has_synced(1));
    });
}

#[test]
fn a_coalescing_buffer_never_loses_the_latest_state() {
    loom::model(|| {
        let d = Arc::new(Dispatcher::<u32>::new(1, BufferMode::Coalescing));
        let producer = {
            let d = d.clone();
            thread::spawn(move || {
                let a = key("a");
                d.dispatch_add(&a, std::sync::Arc::new(1), false);
                d.dispatch_update(&a, std::sync::Arc::new(1), std::sync::Arc::new(2));
                assert!(d.pending(0) <= 1);
            })
        };
        let consumer = {
            let d = d.clone();
            thread::spawn(move || {
                let mut seen = Vec::new();
                loop {
                    let (_, e) = d.consume(0).expect("not closed");
                    let v = name(&e);
                    seen.push(v);
                    if v == 2 {
                        return seen;
                    }
                }
            })
        };
        producer.join().unwrap();
        let seen = consumer.join().unwrap();
        // Either both in order, or the update merged into the add.
        assert!(seen == vec![1, 2] || seen == vec![2], "{seen:?}");
    });
}

#[test]
fn stopping_wakes_a_blocked_consumer() {
    loom::model(|| {
        let d = Arc::new(Dispatcher::<u32>::new(1, BufferMode::Ordered));
        let consumer = {
            let d = d.clone();
            thread::spawn(move || {
                let mut n = 0;
                while d.consume(0).is_some() {
                    n += 1;
                }
                d.finish(0);
                n
            })
        };
        d.dispatch_add(&key("a"), std::sync::Arc::new(1), false);
        d.stop();
        let n = consumer.join().unwrap();
        assert!(n <= 1);
    });
}
