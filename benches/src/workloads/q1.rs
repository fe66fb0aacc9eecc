//! q1: one producer adds 0..1,000,000 to a queue of `u64`; two workers get -> done until `None`.

use super::{check, join, nanos, now, unknown_impl, Metrics, Workload};
use crate::api::WorkQueue;
use crate::floor::{FloorDedupQueue, FloorQueue};
use crate::naive::NaiveQueue;
use kcache_workqueue::Queue;
use std::thread;

const ITEMS: u64 = 1_000_000;
const WORKERS: usize = 2;

pub(super) const WORKLOAD: Workload = Workload {
    name: "q1",
    headline: "ns_per_item",
    impls: &["kcache", "naive", "floor", "floor-dedup"],
    about: "1,000,000 u64 through a queue, 1 producer, 2 workers get -> done",
    run,
};

fn run(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => drive(Queue::new()),
        "naive" => drive(NaiveQueue::new()),
        "floor" => drive(FloorQueue::new(WORKERS)),
        "floor-dedup" => drive(FloorDedupQueue::new(WORKERS)),
        _ => Err(unknown_impl("q1", name)),
    }
}

fn drive<Q: WorkQueue<u64>>(queue: Q) -> Result<Metrics, String> {
    let start = now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let q = queue.clone();
            thread::spawn(move || {
                let (mut gets, mut sum, mut bad_done) = (0u64, 0u64, 0u64);
                while let Some(item) = q.get() {
                    gets += 1;
                    sum = sum.wrapping_add(item);
                    bad_done += u64::from(!q.done(&item));
                }
                (gets, sum, bad_done)
            })
        })
        .collect();
    for i in 0..ITEMS {
        queue.add(i);
    }
    queue.shut_down();
    let (mut gets, mut sum, mut bad_done) = (0u64, 0u64, 0u64);
    for w in workers {
        let (g, s, b) = join(w)?;
        gets += g;
        sum = sum.wrapping_add(s);
        bad_done += b;
    }
    let wall = nanos(start, now());
    check(gets == ITEMS, || {
        format!("q1: {gets} gets, expected {ITEMS}")
    })?;
    check(sum == ITEMS * (ITEMS - 1) / 2, || {
        format!("q1: items got sum to {sum}")
    })?;
    check(bad_done == 0, || {
        format!("q1: {bad_done} done calls rejected")
    })?;
    Ok(vec![
        ("ns_per_item", wall / ITEMS as f64),
        ("wall_ms", wall / 1e6),
        ("gets", gets as f64),
    ])
}
