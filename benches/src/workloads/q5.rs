//! q5: priority. 100,000 low-priority items are queued; then 2 workers get -> 20 µs of work ->
//! done while a producer adds 10,000 high-priority items at a steady 1 per 50 µs. Reports the
//! high-priority items' queue wait (add to get) and the longest wait of a low-priority one.

use super::{check, join, nanos, now, unknown_impl, Metrics, Workload};
use crate::api::PriorityWorkQueue;
use crate::naive::NaivePriorityQueue;
use crate::stats::percentile;
use kcache_workqueue::{PriorityQueue, Queue};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const LOW: u64 = 100_000;
const HIGH: u64 = 10_000;
const WORKERS: usize = 2;
const WORK: Duration = Duration::from_micros(20);
const HIGH_EVERY: Duration = Duration::from_micros(50);
const LOW_PRIORITY: i32 = -100;
const HIGH_PRIORITY: i32 = 0;

pub(super) const WORKLOAD: Workload = Workload {
    name: "q5",
    headline: "high_wait_p99_ms",
    impls: &["kcache", "plain", "naive"],
    about: "100,000 low-priority items, then 10,000 high-priority, 1 per 50 us; 2 workers",
    run,
};

fn run(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => drive(PriorityQueue::new(), true),
        "plain" => drive(Queue::new(), false),
        "naive" => drive(NaivePriorityQueue::new(), false),
        _ => Err(unknown_impl("q5", name)),
    }
}

/// Spins (yielding) until `until`.
fn spin_until(until: Instant) {
    while now() < until {
        thread::yield_now();
    }
}

/// Runs q5 on `queue`. With `bounded`, checks kcache's documented bound: a low-priority item
/// added with `n` items ready is handed out within `HANDOFF_SHARE × (n + 1)` hand-offs (plus one
/// per worker: the hand-off counter is read after the `get`).
fn drive<Q: PriorityWorkQueue<u64>>(queue: Q, bounded: bool) -> Result<Metrics, String> {
    let total = (LOW + HIGH) as usize;
    // Nanoseconds after `origin` at which each item was added, and how often it was handed out.
    let added: Arc<Vec<AtomicU64>> = Arc::new((0..total).map(|_| AtomicU64::new(0)).collect());
    let got: Arc<Vec<AtomicU8>> = Arc::new((0..total).map(|_| AtomicU8::new(0)).collect());
    let handoffs = Arc::new(AtomicU64::new(0));
    let origin = now();
    let stamp = |i: u64| {
        added[i as usize].store(nanos(origin, now()) as u64, Ordering::Relaxed);
    };
    for i in 0..LOW {
        stamp(i);
        queue.add_with_priority(i, LOW_PRIORITY);
    }
    let start = now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (q, added, got, handoffs) =
                (queue.clone(), added.clone(), got.clone(), handoffs.clone());
            thread::spawn(move || {
                let (mut high, mut low_max, mut late) = (Vec::new(), 0f64, 0u64);
                while let Some(item) = q.get() {
                    let at = nanos(origin, now());
                    let handoff = handoffs.fetch_add(1, Ordering::Relaxed) + 1;
                    let wait = at - added[item as usize].load(Ordering::Relaxed) as f64;
                    got[item as usize].fetch_add(1, Ordering::Relaxed);
                    if item >= LOW {
                        high.push(wait / 1e6);
                    } else {
                        low_max = low_max.max(wait / 1e6);
                        // Low item i was added with i items ready before it.
                        let bound = PriorityQueue::<u64>::HANDOFF_SHARE * (item + 1);
                        late += u64::from(handoff > bound + WORKERS as u64);
                    }
                    spin_until(now() + WORK);
                    let _ = q.done(&item);
                }
                (high, low_max, late)
            })
        })
        .collect();
    let mut next = now();
    for i in LOW..LOW + HIGH {
        spin_until(next);
        stamp(i);
        queue.add_with_priority(i, HIGH_PRIORITY);
        next += HIGH_EVERY;
    }
    // Wait until every item was handed out, then stop the workers.
    while handoffs.load(Ordering::Acquire) < LOW + HIGH {
        thread::yield_now();
    }
    queue.shut_down();
    let (mut high, mut low_max, mut late) = (Vec::new(), 0f64, 0u64);
    for w in workers {
        let (h, l, b) = join(w)?;
        high.extend(h);
        low_max = low_max.max(l);
        late += b;
    }
    let wall = nanos(start, now());
    let twice = got
        .iter()
        .filter(|g| g.load(Ordering::Relaxed) != 1)
        .count();
    check(twice == 0, || {
        format!("q5: {twice} items not handed out exactly once")
    })?;
    check(!bounded || late == 0, || {
        format!("q5: {late} low-priority items handed out past the documented bound")
    })?;
    high.sort_by(f64::total_cmp);
    let p = |q: f64| percentile(&high, q).ok_or_else(|| "q5: no high-priority item".to_string());
    Ok(vec![
        ("high_wait_p50_ms", p(0.50)?),
        ("high_wait_p99_ms", p(0.99)?),
        ("low_wait_max_ms", low_max),
        ("ns_per_item", wall / total as f64),
        ("wall_ms", wall / 1e6),
    ])
}
