//! e1's `kcache-drain` row: the informer without the source in the wall.
//!
//! The informer watches the source through [`Gated`], whose watch streams hold every event back
//! until the gate opens. After the sync, the 1,000,000 updates are written to the source (which
//! buffers them for the open watch); the clock starts when the gate opens and stops when both
//! handlers saw the last update. That is the informer's own throughput (reflector, DeltaFifo,
//! cache, fan-out, handler threads) on events already waiting, as kube-runtime's side of e1
//! consumes prebuilt events.

use super::e1::{filled_source, start, update, wait_until, Counter, Source, HANDLERS, UPDATES};
use super::{check, nanos, now, Metrics};
use crate::objects::{ConfigMapMeta, OBJECTS};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{InformerOptions, SharedIndexInformer};
use kcache_memory::MemoryError;
use kcache_reflector::{ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream};
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The source, with watch streams that yield nothing until `open` turns true.
struct Gated {
    inner: Source,
    open: tokio::sync::watch::Receiver<bool>,
}

impl ListWatcher<ConfigMap> for Gated {
    type Error = MemoryError;

    fn list(
        &self,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<ListPage<ConfigMap>, MemoryError>> + Send {
        self.inner.list(opts)
    }

    fn watch(
        &self,
        opts: &WatchOptions,
    ) -> impl Future<Output = Result<WatchStream<ConfigMap, MemoryError>, MemoryError>> + Send {
        let inner = self.inner.watch(opts);
        let mut open = self.open.clone();
        async move {
            let events = inner.await?;
            let gate = futures::stream::once(async move {
                let _ = open.wait_for(|o| *o).await;
            })
            .filter_map(|()| async { None });
            Ok(gate.chain(events).boxed())
        }
    }
}

pub(super) fn run() -> Result<Metrics, String> {
    let source = filled_source()?;
    let updates: Vec<ConfigMap> = (0..UPDATES).map(update).collect();
    let (gate, open) = tokio::sync::watch::channel(false);
    let gated = Gated {
        inner: source.clone(),
        open,
    };
    let informer = Arc::new(SharedIndexInformer::<_, _, ConfigMapMeta>::with_accessor(
        gated,
        InformerOptions::new(),
    ));
    let counters: Vec<Arc<Counter>> = (0..HANDLERS).map(|_| Arc::default()).collect();
    for c in &counters {
        informer
            .add_event_handler(c.clone())
            .map_err(|e| e.to_string())?;
    }
    let running = start(informer.clone())?;
    check(
        wait_until(Duration::from_secs(120), || {
            informer.has_synced()
                && source.watcher_count() == 1
                && counters
                    .iter()
                    .all(|c| c.adds.load(Ordering::Relaxed) == OBJECTS as u64)
        }),
        || "e1 drain: informer not synced and watching after 120 s".into(),
    )?;
    for obj in updates {
        source.update(obj).map_err(|e| e.to_string())?;
    }
    check(source.pending_events() == UPDATES, || {
        format!(
            "e1 drain: {} events wait for the watch, expected {UPDATES}",
            source.pending_events()
        )
    })?;

    let start_at = now();
    gate.send_replace(true);
    let all_seen = wait_until(Duration::from_secs(240), || {
        counters.iter().all(|c| c.saw(UPDATES as u64))
    });
    let wall = nanos(start_at, now());
    check(all_seen, || {
        "e1 drain: the handlers did not see every update".into()
    })?;
    check(running.informer.indexer().len() == OBJECTS, || {
        "e1 drain: cache size changed".into()
    })?;
    running.finish()?;
    Ok(vec![
        ("events_per_s", UPDATES as f64 / wall * 1e9),
        ("ns_per_event", wall / UPDATES as f64),
        ("update_wall_ms", wall / 1e6),
    ])
}
