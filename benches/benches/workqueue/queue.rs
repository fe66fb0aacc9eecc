//! The plain queue: one add -> get -> done round trip, and the add of an item already queued.

use criterion::Criterion;
use kcache_benches::api::WorkQueue;
use kcache_benches::floor::FloorQueue;
use kcache_benches::naive::NaiveQueue;
use kcache_workqueue::Queue;
use std::hint::black_box;

/// One thread: add an item, get it, mark it done (the uncontended cost of one item's life).
pub(crate) fn add_get_done(c: &mut Criterion) {
    let mut g = c.benchmark_group("queue/add_get_done");
    fn round_trip<Q: WorkQueue<u64>>(q: &Q, i: &mut u64) {
        *i += 1;
        q.add(black_box(*i));
        if let Some(item) = q.get() {
            black_box(q.done(&item));
        }
    }
    let (kcache, naive, floor) = (Queue::new(), NaiveQueue::new(), FloorQueue::new(1));
    let mut i = 0;
    g.bench_function("kcache", |b| b.iter(|| round_trip(&kcache, &mut i)));
    g.bench_function("naive", |b| b.iter(|| round_trip(&naive, &mut i)));
    g.bench_function("floor", |b| b.iter(|| round_trip(&floor, &mut i)));
    g.finish();
}

/// Adding an item that is already queued (the deduplicated path; the floor has none, so it is not
/// in this group).
pub(crate) fn dedup_add(c: &mut Criterion) {
    let mut g = c.benchmark_group("queue/dedup_add");
    let kcache = Queue::new();
    let naive = NaiveQueue::new();
    for i in 0..1_000u64 {
        kcache.add(i);
        WorkQueue::add(&naive, i);
    }
    g.bench_function("kcache", |b| b.iter(|| kcache.add(black_box(500))));
    g.bench_function("naive", |b| {
        b.iter(|| WorkQueue::add(&naive, black_box(500)))
    });
    g.finish();
}
