//! f1: a DeltaFifo (relists emit `Replaced`, no known objects) takes a relist of 100,000
//! ConfigMaps and gives them out, then carries 1,000,000 updates on 10,000 keys to a consumer.
//!
//! Only kcache runs it: kube-runtime has no DeltaFifo (its reflector applies watch events to its
//! store directly) and the workload compares with client-go's figures.

use super::{check, join, nanos, now, unknown_impl, Metrics, Workload};
use crate::objects::{initial, ConfigMapMeta, OBJECTS};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_deltafifo::{DeltaFifo, DeltaFifoOptions, PopError};
use std::convert::Infallible;
use std::sync::Arc;
use std::thread;

const HOT_KEYS: usize = 10_000;
const UPDATES: usize = 1_000_000;

pub(super) const WORKLOAD: Workload = Workload {
    name: "f1",
    headline: "replace_ns_per_object",
    impls: &["kcache"],
    about: "DeltaFifo: replace 100,000, pop all, then 1,000,000 updates on 10,000 keys",
    run,
};

type Fifo = DeltaFifo<ConfigMap, ConfigMapMeta>;

fn run(_: &str, name: &str) -> Result<Metrics, String> {
    match name {
        "kcache" => drive(),
        _ => Err(unknown_impl("f1", name)),
    }
}

fn drive() -> Result<Metrics, String> {
    let fifo: Arc<Fifo> = Arc::new(DeltaFifo::with_options(
        DeltaFifoOptions::new().emit_delta_type_replaced(true),
    ));
    let all: Vec<Arc<ConfigMap>> = (0..OBJECTS).map(|i| Arc::new(initial(i))).collect();
    let upd: Vec<Arc<ConfigMap>> = (0..HOT_KEYS).map(|j| Arc::new(initial(j))).collect();

    // The caller keeps the objects, as an informer's cache would: the pop phase times the FIFO,
    // not the objects' destructors (client-go leaves those to its garbage collector).
    let kept = all.clone();
    let start = now();
    fifo.replace(all, "1".into()).map_err(|e| e.to_string())?;
    let replace = nanos(start, now());

    // The relist queued exactly OBJECTS keys: pop that many (no emptiness check in the loop).
    let mut initial_pops = 0usize;
    let start = now();
    for _ in 0..OBJECTS {
        match fifo.pop(|_, _| Ok::<_, Infallible>(())) {
            Ok(()) => initial_pops += 1,
            Err(e) => return Err(format!("f1: initial pop failed: {e}")),
        }
    }
    let pop = nanos(start, now());
    check(fifo.is_empty(), || {
        format!("f1: {} keys left after {OBJECTS} pops", fifo.len())
    })?;
    check(initial_pops == OBJECTS, || {
        format!("f1: {initial_pops} initial pops")
    })?;
    check(fifo.has_synced(), || {
        "f1: not synced after popping the relist".into()
    })?;

    drop(kept);

    // The update phase twice, side by side: the consumer calling `pop` (one key per call, as
    // client-go's), then a fresh FIFO whose consumer calls `pop_batch(BATCH)`.
    let (wall, pops, deltas) = updates(&fifo, &upd, None)?;
    let fresh: Arc<Fifo> = Arc::new(DeltaFifo::with_options(
        DeltaFifoOptions::new().emit_delta_type_replaced(true),
    ));
    let (batch_wall, batch_pops, batch_deltas) = updates(&fresh, &upd, Some(BATCH))?;

    Ok(vec![
        ("replace_ns_per_object", replace / OBJECTS as f64),
        ("pop_ns", pop / OBJECTS as f64),
        ("update_ns", wall / UPDATES as f64),
        ("update_wall_ms", wall / 1e6),
        ("pops", pops as f64),
        ("deltas_per_pop", deltas as f64 / pops as f64),
        ("update_batch_ns", batch_wall / UPDATES as f64),
        ("batch_pops", batch_pops as f64),
        (
            "batch_deltas_per_pop",
            batch_deltas as f64 / batch_pops as f64,
        ),
    ])
}

/// Keys a `pop_batch` consumer takes per lock at most.
const BATCH: usize = 64;

/// The main thread writes `UPDATES` updates cycling over `upd` while a consumer thread pops
/// (with `pop`, or `pop_batch(n)`) until the FIFO closes: wall ns, keys handed out, deltas.
fn updates(
    fifo: &Arc<Fifo>,
    upd: &[Arc<ConfigMap>],
    batch: Option<usize>,
) -> Result<(f64, u64, u64), String> {
    let start = now();
    let consumer = {
        let fifo = fifo.clone();
        thread::spawn(move || {
            let (mut pops, mut deltas) = (0u64, 0u64);
            loop {
                let result = match batch {
                    None => fifo.pop(|d, _| Ok::<_, Infallible>(d.len())).map(|n| {
                        pops += 1;
                        deltas += n as u64;
                    }),
                    Some(max) => fifo
                        .pop_batch(max, |d, _| {
                            pops += 1;
                            deltas += d.len() as u64;
                        })
                        .map(|_| ()),
                };
                match result {
                    Ok(()) => {}
                    Err(PopError::Closed) => return Ok((pops, deltas)),
                    Err(e) => return Err(format!("f1: pop failed: {e}")),
                }
            }
        })
    };
    for i in 0..UPDATES {
        fifo.update(upd[i % upd.len()].clone())
            .map_err(|e| e.to_string())?;
    }
    fifo.close();
    let (pops, deltas) = join(consumer)??;
    let wall = nanos(start, now());
    check(deltas == UPDATES as u64, || {
        format!("f1: {deltas} deltas delivered, expected {UPDATES}")
    })?;
    Ok((wall, pops, deltas))
}
