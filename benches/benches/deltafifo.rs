//! Criterion micro-benchmarks of kcache-deltafifo on i1's ConfigMaps. kube-runtime has no
//! DeltaFifo and the workspace has no other baseline, so each group holds kcache alone; the
//! `workloads` runner's f1 compares with client-go's figures.
//!
//! `cargo bench -p kcache-benches --bench deltafifo` (under a minute; short measurement times).

use criterion::{criterion_group, criterion_main, Criterion};
use std::time::Duration;

#[path = "deltafifo/fifo.rs"]
mod fifo;

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = fifo::update_pop, fifo::replace
}
criterion_main!(benches);
