//! Criterion micro-benchmarks of kcache-workqueue, each group with kcache and its baselines side
//! by side: `naive` (client-go's design ported as is) and `floor` (the least the operation costs,
//! without work-queue semantics). See `kcache_benches::naive` and `kcache_benches::floor`.
//!
//! `cargo bench -p kcache-benches --bench workqueue` (a few minutes; short measurement times).

use criterion::{criterion_group, criterion_main, Criterion};
use std::time::Duration;

#[path = "workqueue/delaying.rs"]
mod delaying;
#[path = "workqueue/limiter.rs"]
mod limiter;
#[path = "workqueue/queue.rs"]
mod queue;

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = queue::add_get_done, queue::dedup_add, delaying::add_after, limiter::when_forget
}
criterion_main!(benches);
