//! `Shared`: the state the informer, its pop loop, its sink and its registrations share.

use crate::metrics::InformerMetrics;
use crate::processor::Processor;
use crate::sync::Mutex;
use kcache_core::{Clock, ResourceVersion};
use kcache_indexer::Indexer;
use std::sync::Arc;
use tokio::sync::watch;

/// The informer's lifecycle, as waiters see it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Lifecycle {
    pub(crate) synced: bool,
    pub(crate) stopped: bool,
}

pub(crate) struct Shared<T, M> {
    pub(crate) name: Arc<str>,
    pub(crate) indexer: Arc<Indexer<T, M>>,
    pub(crate) processor: Arc<Processor<T>>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) metrics: InformerMetrics,
    pub(crate) lifecycle: watch::Sender<Lifecycle>,
    /// The newest resource version the source reported (written after the FIFO write): the
    /// reflector's last synced resource version.
    pub(crate) received_rv: Mutex<ResourceVersion>,
    /// The newest resource version all of whose events the cache has applied.
    pub(crate) applied_rv: watch::Sender<ResourceVersion>,
}

impl<T, M> Shared<T, M> {
    /// Marks the informer synced (idempotent) and tells every handler.
    pub(crate) fn set_synced(&self) {
        if self.lifecycle.borrow().synced {
            return;
        }
        self.processor.lock().set_synced();
        self.lifecycle.send_modify(|l| l.synced = true);
        tracing::debug!(informer = %self.name, "informer synced");
    }

    /// Stops the fan-out: every handler's buffer is closed, waiters are released.
    pub(crate) fn stop(&self) {
        self.processor.lock().stop();
        self.lifecycle.send_modify(|l| l.stopped = true);
    }

    /// Records a resource version the source reported (after its write reached the FIFO).
    pub(crate) fn received(&self, rv: ResourceVersion) {
        if !rv.is_empty() {
            *self.received_rv.lock() = rv;
        }
    }

    /// After a pop finished: if nothing is queued, every event received so far is applied.
    /// `received` must be read before the emptiness check (see `run.rs`).
    pub(crate) fn publish_applied(&self, received: ResourceVersion) {
        if received.is_empty() {
            return;
        }
        self.metrics.set_store_rv(received.as_str());
        self.applied_rv.send_if_modified(|rv| {
            if *rv == received {
                false
            } else {
                *rv = received;
                true
            }
        });
    }
}
