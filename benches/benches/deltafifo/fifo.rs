//! One update then one pop on one thread; a relist of 1,000 objects.

use criterion::{BatchSize, Criterion};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_benches::objects::{initial, ConfigMapMeta};
use kcache_deltafifo::{DeltaFifo, DeltaFifoOptions};
use std::convert::Infallible;
use std::hint::black_box;
use std::sync::Arc;

type Fifo = DeltaFifo<ConfigMap, ConfigMapMeta>;

fn fifo() -> Fifo {
    DeltaFifo::with_options(DeltaFifoOptions::new().emit_delta_type_replaced(true))
}

/// An update of one of 1,000 keys, then a pop of it (the uncontended cost of one event's trip).
pub(crate) fn update_pop(c: &mut Criterion) {
    let mut g = c.benchmark_group("deltafifo/update_pop");
    let objs: Vec<Arc<ConfigMap>> = (0..1_000).map(|i| Arc::new(initial(i))).collect();
    let f = fifo();
    let mut i = 0;
    g.bench_function("kcache", |b| {
        b.iter(|| {
            i = (i + 1) % objs.len();
            f.update(objs[i].clone()).expect("update");
            black_box(f.pop(|d, _| Ok::<_, Infallible>(d.len())).expect("pop"));
        })
    });
    g.finish();
}

/// `replace` of 1,000 objects into an empty FIFO (the FIFO is built outside the timing).
pub(crate) fn replace(c: &mut Criterion) {
    let mut g = c.benchmark_group("deltafifo/replace_1000");
    let objs: Vec<Arc<ConfigMap>> = (0..1_000).map(|i| Arc::new(initial(i))).collect();
    g.bench_function("kcache", |b| {
        b.iter_batched(
            || (fifo(), objs.clone()),
            |(f, o)| {
                f.replace(o, "1".into()).expect("replace");
                f
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}
