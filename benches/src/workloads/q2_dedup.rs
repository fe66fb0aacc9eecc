//! q2-dedup: the cost of a deduplicated add. The 1,000 q2 keys are queued once, nobody takes them;
//! then one producer adds `keys[i % 1000]` for i in 0..1,000,000 (every add finds its key queued;
//! the floor pushes each into its channel).

use super::{check, nanos, now, unknown_impl, Metrics, Workload, QUEUE_IMPLS};
use crate::api::WorkQueue;
use crate::floor::FloorQueue;
use crate::naive::NaiveQueue;
use kcache_workqueue::Queue;
use std::sync::Arc;

const KEYS: usize = 1_000;
const ADDS: usize = 1_000_000;

pub(super) const WORKLOAD: Workload = Workload {
    name: "q2-dedup",
    headline: "ns_per_add",
    impls: QUEUE_IMPLS,
    about: "1,000,000 adds of 1,000 already-queued keys, 1 producer, workers held back",
    run,
};

type Key = Arc<str>;

fn run(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => {
            let q = Queue::new();
            let m = drive(&q)?;
            check(q.len() == KEYS, || {
                format!("q2-dedup: kcache holds {} items", q.len())
            })?;
            Ok(m)
        }
        "naive" => {
            let q = NaiveQueue::new();
            let m = drive(&q)?;
            check(q.len() == KEYS, || {
                format!("q2-dedup: naive holds {} items", q.len())
            })?;
            Ok(m)
        }
        "floor" => drive(&FloorQueue::new(1)),
        _ => Err(unknown_impl("q2-dedup", name)),
    }
}

fn drive<Q: WorkQueue<Key>>(queue: &Q) -> Result<Metrics, String> {
    let keys: Vec<Key> = (0..KEYS)
        .map(|k| Key::from(format!("ns-{}/name-{}", k / 100, k % 100)))
        .collect();
    for k in &keys {
        queue.add(k.clone());
    }
    let start = now();
    for i in 0..ADDS {
        queue.add(keys[i % KEYS].clone());
    }
    let wall = nanos(start, now());
    queue.shut_down();
    Ok(vec![
        ("ns_per_add", wall / ADDS as f64),
        ("wall_ms", wall / 1e6),
    ])
}
