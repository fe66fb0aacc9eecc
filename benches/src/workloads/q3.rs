//! q3: 100,000 `add_after` with random delays up to 50 ms; two workers record how late each
//! item came out.

use super::{check, join, nanos, now, unknown_impl, Metrics, Workload, QUEUE_IMPLS};
use crate::api::DelayQueue;
use crate::floor::FloorDelayingQueue;
use crate::naive::NaiveDelayingQueue;
use crate::splitmix::SplitMix64;
use crate::stats::percentile;
use kcache_workqueue::DelayingQueue;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const ITEMS: usize = 100_000;
const MAX_DELAY_US: u64 = 50_000;
const WORKERS: usize = 2;

pub(super) const WORKLOAD: Workload = Workload {
    name: "q3",
    headline: "lateness_p99_ms",
    impls: QUEUE_IMPLS,
    about: "100,000 add_after, delays 0-50 ms, 2 workers record lateness (real clock)",
    run,
};

fn run(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => drive(DelayingQueue::new()),
        "naive" => drive(NaiveDelayingQueue::new()),
        "floor" => drive(FloorDelayingQueue::new(WORKERS)),
        _ => Err(unknown_impl("q3", name)),
    }
}

/// What the workers share: deadlines in nanoseconds after `base`, written by the main thread
/// before the item's `add_after` (the queue's hand-off orders the write before the worker's read).
struct Board {
    base: Instant,
    deadline_ns: Vec<AtomicU64>,
    seen: Vec<AtomicU8>,
    gets: AtomicU64,
    /// Nanoseconds after `base` at which the last item was got.
    last_get_ns: AtomicU64,
}

fn drive<Q: DelayQueue<u64>>(queue: Q) -> Result<Metrics, String> {
    let delays: Vec<Duration> = SplitMix64::new(42)
        .take(ITEMS)
        .map(|x| Duration::from_micros(x % (MAX_DELAY_US + 1)))
        .collect();
    let board = Arc::new(Board {
        base: now(),
        deadline_ns: (0..ITEMS).map(|_| AtomicU64::new(0)).collect(),
        seen: (0..ITEMS).map(|_| AtomicU8::new(0)).collect(),
        gets: AtomicU64::new(0),
        last_get_ns: AtomicU64::new(0),
    });
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (q, b) = (queue.clone(), board.clone());
            thread::spawn(move || work(&q, &b))
        })
        .collect();

    let start = now();
    for (i, &delay) in delays.iter().enumerate() {
        let now_i = now();
        let deadline = nanos(board.base, now_i) as u64 + delay.as_nanos() as u64;
        board.deadline_ns[i].store(deadline, Relaxed);
        queue.add_after(i as u64, delay);
    }
    let loop_end = now();
    let add_loop = nanos(start, loop_end);
    let loop_end_ns = nanos(board.base, loop_end) as u64;

    let mut lateness = Vec::with_capacity(ITEMS);
    // Lateness of the items due after the add loop ended: the timer without the producer's load.
    let mut after_loop = Vec::new();
    let mut bad_done = 0;
    for w in workers {
        let (l, b) = join(w)?;
        for (slot, late) in l {
            if board.deadline_ns[slot as usize].load(Relaxed) > loop_end_ns {
                after_loop.push(late);
            }
            lateness.push(late);
        }
        bad_done += b;
    }
    let last_deadline = board
        .deadline_ns
        .iter()
        .map(|d| d.load(Relaxed))
        .max()
        .unwrap_or(0);
    let drain = board.last_get_ns.load(Relaxed) as f64 - last_deadline as f64;

    check(lateness.len() == ITEMS, || {
        format!("q3: {} gets, expected {ITEMS}", lateness.len())
    })?;
    let dups = board.seen.iter().filter(|s| s.load(Relaxed) != 1).count();
    check(dups == 0, || {
        format!("q3: {dups} items not got exactly once")
    })?;
    check(bad_done == 0, || {
        format!("q3: {bad_done} done calls rejected")
    })?;
    let early = lateness.iter().filter(|&&l| l < 0).count();
    check(early == 0, || {
        format!("q3: {early} items handed out before their deadline")
    })?;
    lateness.sort_unstable();
    after_loop.sort_unstable();
    let ms = |p: f64| percentile(&lateness, p).map_or(f64::NAN, |ns| ns as f64 / 1e6);
    let after_ms = |p: f64| percentile(&after_loop, p).map_or(f64::NAN, |ns| ns as f64 / 1e6);
    Ok(vec![
        ("lateness_p99_ms", ms(99.0)),
        ("lateness_p50_ms", ms(50.0)),
        ("lateness_max_ms", ms(100.0)),
        ("ns_per_add_after", add_loop / ITEMS as f64),
        ("drain_past_last_deadline_ms", drain / 1e6),
        ("due_after_add_loop", after_loop.len() as f64),
        ("lateness_after_add_loop_p50_ms", after_ms(50.0)),
        ("lateness_after_add_loop_p99_ms", after_ms(99.0)),
        ("gets", lateness.len() as f64),
    ])
}

/// A worker: get -> record lateness -> done; the one that gets the last item shuts the queue down.
/// Returns `(item, lateness in ns)` pairs and the number of rejected `done` calls.
fn work<Q: DelayQueue<u64>>(q: &Q, b: &Board) -> (Vec<(u32, i64)>, u64) {
    let (mut lateness, mut bad_done) = (Vec::with_capacity(ITEMS), 0u64);
    while let Some(i) = q.get() {
        let at = nanos(b.base, now()) as i64;
        let slot = i as usize;
        lateness.push((slot as u32, at - b.deadline_ns[slot].load(Relaxed) as i64));
        b.seen[slot].fetch_add(1, Relaxed);
        bad_done += u64::from(!q.done(&i));
        if b.gets.fetch_add(1, Relaxed) + 1 == ITEMS as u64 {
            b.last_get_ns.store(at as u64, Relaxed);
            q.shut_down();
        }
    }
    (lateness, bad_done)
}
