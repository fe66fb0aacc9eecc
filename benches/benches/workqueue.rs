//! Criterion micro-benchmarks of kcache-workqueue (placeholder).
fn main() {}
