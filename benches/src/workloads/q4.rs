//! q4queue: 100,000 `add_rate_limited` through an exponential limiter (1 ms, 1000 s); two workers
//! get -> done -> forget. q4limiter: the limiter alone, 1,000,000 `when` + `forget` pairs.

use super::{check, join, nanos, now, unknown_impl, Metrics, Workload, QUEUE_IMPLS};
use crate::api::{RetryQueue, Retrying};
use crate::floor::{FloorDelayingQueue, FloorLimiter};
use crate::naive::{NaiveDelayingQueue, NaiveLimiter};
use kcache_workqueue::{ItemExponentialFailureRateLimiter, RateLimiter, RateLimitingQueue};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const BASE: Duration = Duration::from_millis(1);
const MAX: Duration = Duration::from_secs(1000);
const QUEUE_ITEMS: u64 = 100_000;
const WORKERS: usize = 2;
const LIMITER_ITEMS: u64 = 100_000;
const ROUNDS: usize = 10;
const PAIRS: f64 = (LIMITER_ITEMS * ROUNDS as u64) as f64;

pub(super) const QUEUE: Workload = Workload {
    name: "q4queue",
    headline: "ns_per_item",
    impls: QUEUE_IMPLS,
    about: "100,000 add_rate_limited (exponential, 1 ms..1000 s), 2 workers get/done/forget",
    run: run_queue,
};

/// The q4limiter variants, one workload each so each gets its own summary and ratios.
pub(super) const LIMITER: [Workload; 4] = [
    limiter(
        "q4limiter-grow-1t",
        "grow: when for all of the thread's items, then forget all; 1 thread",
    ),
    limiter(
        "q4limiter-grow-2t",
        "grow, 2 threads (items split by parity, one shared limiter)",
    ),
    limiter(
        "q4limiter-pair-1t",
        "pair: when then forget back to back; 1 thread",
    ),
    limiter(
        "q4limiter-pair-2t",
        "pair, 2 threads (items split by parity, one shared limiter)",
    ),
];

const fn limiter(name: &'static str, about: &'static str) -> Workload {
    Workload {
        name,
        headline: "ns_per_pair",
        impls: QUEUE_IMPLS,
        about,
        run: run_limiter,
    }
}

fn run_queue(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => drive_queue(RateLimitingQueue::new(
            ItemExponentialFailureRateLimiter::new(BASE, MAX),
        )),
        "naive" => drive_queue(Retrying::new(
            NaiveDelayingQueue::new(),
            NaiveLimiter::new(BASE, MAX),
        )),
        "floor" => drive_queue(Retrying::new(
            FloorDelayingQueue::new(WORKERS),
            FloorLimiter::new(BASE, MAX),
        )),
        _ => Err(unknown_impl("q4queue", name)),
    }
}

fn drive_queue<Q: RetryQueue<u64>>(queue: Q) -> Result<Metrics, String> {
    let forgets = Arc::new(AtomicU64::new(0));
    let start = now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (q, forgets) = (queue.clone(), forgets.clone());
            thread::spawn(move || {
                let (mut gets, mut bad_done, mut end) = (0u64, 0u64, None::<Instant>);
                while let Some(item) = q.get() {
                    gets += 1;
                    bad_done += u64::from(!q.done(&item));
                    q.forget(&item);
                    if forgets.fetch_add(1, Relaxed) + 1 == QUEUE_ITEMS {
                        end = Some(now());
                        q.shut_down();
                    }
                }
                (gets, bad_done, end)
            })
        })
        .collect();
    for i in 0..QUEUE_ITEMS {
        queue.add_rate_limited(i);
    }
    let (mut gets, mut bad_done, mut end) = (0u64, 0u64, None);
    for w in workers {
        let (g, b, e) = join(w)?;
        gets += g;
        bad_done += b;
        end = end.or(e);
    }
    let end = end.ok_or("q4queue: no worker saw the last forget")?;
    let wall = nanos(start, end);
    check(gets == QUEUE_ITEMS, || {
        format!("q4queue: {gets} gets, expected {QUEUE_ITEMS}")
    })?;
    check(bad_done == 0, || {
        format!("q4queue: {bad_done} done calls rejected")
    })?;
    let tracked = (0..QUEUE_ITEMS)
        .filter(|i| queue.num_requeues(i) != 0)
        .count();
    check(tracked == 0, || {
        format!("q4queue: the limiter still tracks {tracked} items")
    })?;
    Ok(vec![
        ("ns_per_item", wall / QUEUE_ITEMS as f64),
        ("wall_ms", wall / 1e6),
    ])
}

fn run_limiter(workload: &str, name: &str) -> Result<Metrics, String> {
    let grow = workload.contains("-grow-");
    let threads = if workload.ends_with("-2t") { 2 } else { 1 };
    match name {
        "kcache" => drive_limiter(
            ItemExponentialFailureRateLimiter::new(BASE, MAX),
            grow,
            threads,
        ),
        "naive" => drive_limiter(NaiveLimiter::new(BASE, MAX), grow, threads),
        "floor" => drive_limiter(FloorLimiter::new(BASE, MAX), grow, threads),
        _ => Err(unknown_impl(workload, name)),
    }
}

/// `threads` threads share `limiter`; thread t owns the items equal to t modulo `threads` and runs
/// `ROUNDS` rounds over them: `grow` asks `when` for all, then forgets all; otherwise it forgets
/// each item right after its `when`.
fn drive_limiter<L>(limiter: L, grow: bool, threads: u64) -> Result<Metrics, String>
where
    L: RateLimiter<u64> + 'static,
{
    let limiter = Arc::new(limiter);
    let shares: Vec<Vec<u64>> = (0..threads)
        .map(|t| (0..LIMITER_ITEMS).filter(|i| i % threads == t).collect())
        .collect();
    let start = now();
    let handles: Vec<_> = shares
        .into_iter()
        .map(|items| {
            let l = limiter.clone();
            thread::spawn(move || {
                let mut total = Duration::ZERO;
                for _ in 0..ROUNDS {
                    if grow {
                        for i in &items {
                            total += l.when(i);
                        }
                        for i in &items {
                            l.forget(i);
                        }
                    } else {
                        for i in &items {
                            total += l.when(i);
                            l.forget(i);
                        }
                    }
                }
                total
            })
        })
        .collect();
    let mut total = Duration::ZERO;
    for h in handles {
        total += join(h)?;
    }
    let wall = nanos(start, now());
    // Every `when` is an item's first failure since its last forget: exactly `BASE` each.
    let expected = BASE * (LIMITER_ITEMS as u32 * ROUNDS as u32);
    check(total == expected, || {
        format!("q4limiter: delays sum to {total:?}, expected {expected:?}")
    })?;
    let tracked = (0..LIMITER_ITEMS)
        .filter(|i| limiter.num_requeues(i) != 0)
        .count();
    check(tracked == 0, || {
        format!("q4limiter: the limiter still tracks {tracked} items")
    })?;
    Ok(vec![("ns_per_pair", wall / PAIRS), ("wall_ms", wall / 1e6)])
}
