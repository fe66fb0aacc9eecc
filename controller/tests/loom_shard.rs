//! loom model of the sharding handshake: a worker reconciling a key races the rebalance that
//! moves the key to another replica, which starts it as soon as the records allow. No schedule
//! may have the key in flight on both replicas.
//!
//! Run with
//! `RUSTFLAGS="--cfg kcache_loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target-loom cargo test --release -p kcache-controller --test loom_shard`.
#![cfg(kcache_loom)]

use kcache_controller::shard::{HashRing, ShardTable, Start};
use kcache_core::sync::atomic::{AtomicUsize, Ordering};
use kcache_core::sync::{thread, Arc, Mutex};
use kcache_core::{Clock, FakeClock};
use std::collections::BTreeMap;
use std::time::Duration;

const VNODES: usize = 16;

/// The member records: a linearizable store of each replica's published view.
#[derive(Default)]
struct Records(Mutex<BTreeMap<&'static str, Vec<String>>>);

impl Records {
    fn write(&self, id: &'static str, view: Vec<String>) {
        self.0.lock().insert(id, view);
    }
    fn others(&self, me: &str) -> Vec<(String, Vec<String>)> {
        self.0
            .lock()
            .iter()
            .filter(|(id, _)| **id != me)
            .map(|(id, v)| ((*id).to_owned(), v.clone()))
            .collect()
    }
}

fn members(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

/// A key that `a` owns alone and `b` owns once it joined.
fn moving_key() -> String {
    let two = HashRing::new(["a", "b"], VNODES);
    (0..1000)
        .map(|i| format!("ns/k{i}"))
        .find(|k| two.owns("b", k))
        .expect("some key moves to b")
}

/// Writes `table`'s next view, if it has one, then lists the others (the order `Shard` keeps).
fn publish_then_list(
    table: &ShardTable,
    id: &'static str,
    records: &Records,
    deadline: std::time::Instant,
) {
    if let Some(view) = table.begin_publish() {
        records.write(id, view);
        table.publish_succeeded(deadline);
    }
    table.listed(records.others(id));
}

#[test]
fn a_key_is_never_in_flight_on_two_replicas_across_a_handover() {
    let key = moving_key();
    loom::model(move || {
        let now = FakeClock::new().now();
        let deadline = now + Duration::from_secs(10);
        let records = Arc::new(Records::default());
        // a runs alone and claims everything; b has just joined and claims nothing.
        let a = Arc::new(ShardTable::new("a", VNODES));
        a.set_target(&members(&["a"]));
        records.write("b", Vec::new());
        publish_then_list(&a, "a", &records, deadline);
        let b = Arc::new(ShardTable::new("b", VNODES));
        let running = Arc::new(AtomicUsize::new(0));

        // a's worker: reconciles the key if a may start it.
        let worker = {
            let (a, running, key) = (a.clone(), running.clone(), key.clone());
            thread::spawn(move || {
                if a.try_start(&key, now) == Start::Started {
                    assert_eq!(
                        running.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two replicas on {key}"
                    );
                    running.fetch_sub(1, Ordering::SeqCst);
                    a.finish(&key);
                }
            })
        };
        // a's driver: b joined; a publishes the new view once the key is not in flight.
        let rebalance = {
            let (a, records) = (a.clone(), records.clone());
            thread::spawn(move || {
                a.set_target(&members(&["a", "b"]));
                publish_then_list(&a, "a", &records, deadline);
            })
        };
        // b: publishes its claim, lists, and starts the key as soon as it may.
        let (b2, records2, running2, key2) =
            (b.clone(), records.clone(), running.clone(), key.clone());
        let taker = thread::spawn(move || {
            b2.set_target(&members(&["a", "b"]));
            publish_then_list(&b2, "b", &records2, deadline);
            if b2.try_start(&key2, now) == Start::Started {
                assert_eq!(
                    running2.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two replicas on {key2}"
                );
                running2.fetch_sub(1, Ordering::SeqCst);
                b2.finish(&key2);
            }
        });
        worker.join().unwrap();
        rebalance.join().unwrap();
        taker.join().unwrap();
        // Once everyone is done, a second round hands the key over for good.
        publish_then_list(&a, "a", &records, deadline);
        publish_then_list(&b, "b", &records, deadline);
        assert_eq!(a.try_start(&key, now), Start::NotOwned);
        assert_eq!(b.try_start(&key, now), Start::Started);
    });
}
