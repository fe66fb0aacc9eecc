//! The exponential per-item limiter: `when` then `forget` of one item.

use criterion::Criterion;
use kcache_benches::floor::FloorLimiter;
use kcache_benches::naive::NaiveLimiter;
use kcache_workqueue::{ItemExponentialFailureRateLimiter, RateLimiter};
use std::hint::black_box;
use std::time::Duration;

const BASE: Duration = Duration::from_millis(1);
const MAX: Duration = Duration::from_secs(1000);

/// `when` + `forget` of one item (the success path of a retried item), on a limiter that tracks
/// 10,000 other items, single thread.
pub(crate) fn when_forget(c: &mut Criterion) {
    let mut g = c.benchmark_group("limiter/when_forget");
    fn pair<L: RateLimiter<u64>>(l: &L, i: &mut u64) {
        *i = (*i + 1) % 100_000 + 10_000;
        black_box(l.when(black_box(i)));
        l.forget(i);
    }
    fn prefilled<L: RateLimiter<u64>>(l: L) -> L {
        for i in 0..10_000 {
            l.when(&i);
        }
        l
    }
    let kcache = prefilled(ItemExponentialFailureRateLimiter::new(BASE, MAX));
    let naive = prefilled(NaiveLimiter::new(BASE, MAX));
    let floor = prefilled(FloorLimiter::new(BASE, MAX));
    let mut i = 0;
    g.bench_function("kcache", |b| b.iter(|| pair(&kcache, &mut i)));
    g.bench_function("naive", |b| b.iter(|| pair(&naive, &mut i)));
    g.bench_function("floor", |b| b.iter(|| pair(&floor, &mut i)));
    g.finish();
}
