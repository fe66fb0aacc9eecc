//! q2: two producers add 1,000,000 draws from 1,000 string keys; two workers get -> done.

use super::{check, join, nanos, now, unknown_impl, Metrics, Workload, QUEUE_IMPLS};
use crate::api::WorkQueue;
use crate::floor::FloorQueue;
use crate::naive::NaiveQueue;
use crate::splitmix::SplitMix64;
use kcache_workqueue::Queue;
use std::collections::HashSet;
use std::sync::Arc;
use std::thread;

const KEYS: u64 = 1_000;
const ADDS_PER_PRODUCER: usize = 500_000;
const PRODUCERS: u64 = 2;
const WORKERS: usize = 2;
const ADDS: f64 = (ADDS_PER_PRODUCER as u64 * PRODUCERS) as f64;

pub(super) const WORKLOAD: Workload = Workload {
    name: "q2",
    headline: "ns_per_add",
    impls: QUEUE_IMPLS,
    about: "1,000,000 adds of 1,000 Arc<str> keys from 2 producers, 2 workers (dedup)",
    run,
};

/// Keys are `Arc<str>`: an add clones the key, and a `String` clone would time the allocator (about
/// 170 ns) rather than the queue. Every implementation gets the same keys.
type Key = Arc<str>;

fn run(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => drive(Queue::new(), true),
        "naive" => drive(NaiveQueue::new(), true),
        "floor" => drive(FloorQueue::new(WORKERS), false),
        _ => Err(unknown_impl("q2", name)),
    }
}

/// Runs q2 on `queue`; without `dedup`, every add must come out as one get.
fn drive<Q: WorkQueue<Key>>(queue: Q, dedup: bool) -> Result<Metrics, String> {
    let keys: Arc<Vec<Key>> = Arc::new(
        (0..KEYS)
            .map(|k| Key::from(format!("ns-{}/name-{}", k / 100, k % 100)))
            .collect(),
    );
    let indices: Vec<Vec<u16>> = (0..PRODUCERS)
        .map(|p| {
            SplitMix64::new(p + 1)
                .take(ADDS_PER_PRODUCER)
                .map(|x| (x % KEYS) as u16)
                .collect()
        })
        .collect();
    let distinct = indices.iter().flatten().collect::<HashSet<_>>().len() as u64;

    let start = now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let q = queue.clone();
            thread::spawn(move || {
                let (mut gets, mut bad_done) = (0u64, 0u64);
                while let Some(item) = q.get() {
                    gets += 1;
                    bad_done += u64::from(!q.done(&item));
                }
                (gets, bad_done)
            })
        })
        .collect();
    let producers: Vec<_> = indices
        .into_iter()
        .map(|idx| {
            let (q, keys) = (queue.clone(), keys.clone());
            thread::spawn(move || {
                for i in idx {
                    q.add(keys[usize::from(i)].clone());
                }
            })
        })
        .collect();
    for p in producers {
        join(p)?;
    }
    queue.shut_down();
    let (mut gets, mut bad_done) = (0u64, 0u64);
    for w in workers {
        let (g, b) = join(w)?;
        gets += g;
        bad_done += b;
    }
    let wall = nanos(start, now());
    check(bad_done == 0, || {
        format!("q2: {bad_done} done calls rejected")
    })?;
    check((distinct..=ADDS as u64).contains(&gets), || {
        format!("q2: {gets} gets, expected between {distinct} distinct keys and {ADDS} adds")
    })?;
    check(dedup || gets == ADDS as u64, || {
        format!("q2: {gets} gets without dedup")
    })?;
    Ok(vec![
        ("ns_per_add", wall / ADDS),
        ("wall_ms", wall / 1e6),
        ("gets", gets as f64),
        ("dedup_ratio", ADDS / gets as f64),
    ])
}
