//! The delaying queue: `add_after` of new items into a heap already holding 100,000.

use criterion::Criterion;
use kcache_benches::api::DelayQueue;
use kcache_benches::floor::FloorDelayingQueue;
use kcache_benches::naive::NaiveDelayingQueue;
use kcache_workqueue::DelayingQueue;
use std::hint::black_box;
use std::time::Duration;

/// Items already waiting when the timed adds start.
const PREFILL: u64 = 100_000;
/// Timed adds per queue before a fresh one is built (bounds memory).
const CHUNK: u64 = 100_000;
/// Far enough that nothing fires during the benchmark.
const FAR: Duration = Duration::from_secs(3600);

/// `add_after` of distinct items with distinct far deadlines into a heap of 100,000 waiting items.
/// The naive queue's cost includes the bounded channel to its waiting loop (which may block).
pub(crate) fn add_after(c: &mut Criterion) {
    let mut g = c.benchmark_group("delaying/add_after_into_100k");
    g.bench_function("kcache", |b| {
        b.iter_custom(|iters| timed(iters, DelayingQueue::new))
    });
    g.bench_function("naive", |b| {
        b.iter_custom(|iters| timed(iters, NaiveDelayingQueue::new))
    });
    g.bench_function("floor", |b| {
        b.iter_custom(|iters| timed(iters, || FloorDelayingQueue::new(1)))
    });
    g.finish();
}

/// Times `iters` adds, on fresh prefilled queues of at most `CHUNK` timed adds each.
fn timed<Q: DelayQueue<u64>>(iters: u64, make: impl Fn() -> Q) -> Duration {
    let clock = kcache_core::SystemClock;
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(CHUNK);
        left -= n;
        let q = make();
        for i in 0..PREFILL {
            q.add_after(i, FAR + Duration::from_nanos(i * 7));
        }
        let start = kcache_core::Clock::now(&clock);
        for i in PREFILL..PREFILL + n {
            q.add_after(
                black_box(i),
                FAR + Duration::from_nanos((i * 7) % 1_000_003),
            );
        }
        total += kcache_core::Clock::now(&clock) - start;
        q.shut_down();
    }
    total
}
