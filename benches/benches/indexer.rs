//! Criterion micro-benchmarks of kcache-indexer on i1's ConfigMaps, each group with kcache and its
//! baselines side by side: `rwlock-hashmap` (client-go's `threadSafeMap` ported as is, see
//! `kcache_benches::naive::NaiveStore`) and, where it has the operation, kube-runtime's
//! `reflector::Store` (no indexes).
//!
//! `cargo bench -p kcache-benches --bench indexer` (about a minute; short measurement times).

use criterion::{criterion_group, criterion_main, Criterion};
use std::time::Duration;

#[path = "indexer/store.rs"]
mod store;

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = store::update, store::by_index
}
criterion_main!(benches);
