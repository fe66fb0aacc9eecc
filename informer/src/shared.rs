//! `Shared`: the state the informer, its pop loop, its sink and its registrations share.

use crate::metrics::InformerMetrics;
use crate::processor::Processor;
use crate::stop::StopHandle;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::Mutex;
use kcache_core::{Clock, ResourceVersion};
use kcache_deltafifo::RealFifo;
use kcache_indexer::Indexer;
use std::sync::Arc;
use tokio::sync::{watch, Notify};

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
    /// reflector's last synced resource version, numbered by arrival.
    pub(crate) received_rv: Mutex<(u64, ResourceVersion)>,
    /// The arrival number of the version last published in `applied_rv` (it only grows).
    pub(crate) published_seq: Mutex<u64>,
    /// The newest resource version all of whose events the cache has applied.
    pub(crate) applied_rv: watch::Sender<ResourceVersion>,
    /// Raised when the sink applied a write directly: the pop loop has notifications to flush
    /// and a version to publish.
    pub(crate) direct: DirectSignal,
    /// The running informer's queue (a relist handed in by
    /// [`replace_all`](crate::SharedIndexInformer::replace_all) goes through it, in order).
    pub(crate) fifo: Mutex<Option<Arc<RealFifo<T, M>>>>,
    /// The highest decimal resource version ever published in `applied_rv`: a version once
    /// reached stays reached even if the source's versions later go down (a restored source).
    pub(crate) peak_rv: Mutex<Option<ResourceVersion>>,
    /// Set by the informer's [`StopHandle`]s.
    pub(crate) stop_requested: StopHandle,
    /// A cache restored from a snapshot must reach this version (the source's as of the
    /// restore) before the informer reports synced; cleared once it has.
    pub(crate) catch_up: Mutex<Option<ResourceVersion>>,
    /// How the restore from a snapshot went.
    #[cfg(all(feature = "snapshot", not(kcache_loom)))]
    pub(crate) restore_outcome: Mutex<crate::restore::RestoreOutcome>,
    /// The most entries applied under one lock ([`InformerOptions::batch_size`](crate::InformerOptions::batch_size));
    /// 1 also hands each direct write's notifications to the buffers at once.
    pub(crate) batch_size: usize,
}

/// The sink's signal to the pop loop after a direct apply. Raising an already raised signal
/// costs one atomic swap; the pop loop lowers it before it flushes.
#[derive(Default)]
pub(crate) struct DirectSignal {
    raised: AtomicBool,
    notify: Notify,
}

impl DirectSignal {
    /// Raises the signal; wakes the pop loop if it was lowered.
    pub(crate) fn signal(&self) {
        if !self.raised.swap(true, Ordering::AcqRel) {
            self.notify.notify_one();
        }
    }

    /// Resolves once raised (at once if it was raised since the last [`lower`](Self::lower)).
    pub(crate) async fn raised(&self) {
        self.notify.notified().await;
    }

    /// Lowers the signal, before the pop loop looks at what it signals.
    pub(crate) fn lower(&self) {
        self.raised.store(false, Ordering::Release);
    }
}

impl<T, M> Shared<T, M> {
    /// Marks the informer synced (idempotent) and tells every handler.
    ///
    /// The informer's flag goes up first: a registration's `has_synced` promises the informer's
    /// (a controller's workers wait on their registration, then read the informer's cache), so
    /// no handler may be marked synced while the informer still reports it is not.
    ///
    /// A cache restored from a snapshot is not synced before its applied version reached the
    /// source's version as of the restore (see the `restore` module).
    pub(crate) fn set_synced(&self) {
        if self.lifecycle.borrow().synced || !self.caught_up() {
            return;
        }
        self.lifecycle.send_modify(|l| l.synced = true);
        self.processor.lock().set_synced();
        tracing::debug!(informer = %self.name, "informer synced");
    }

    /// Whether a restored cache has caught up (always true without a restore): its applied
    /// version is at least the target, both decimal.
    fn caught_up(&self) -> bool {
        let mut target = self.catch_up.lock();
        let Some(t) = target.as_ref() else {
            return true;
        };
        let applied = self.applied_rv.borrow().clone();
        let reached = applied
            .cmp_decimal(t)
            .is_some_and(|order| order != std::cmp::Ordering::Less);
        if reached {
            tracing::info!(informer = %self.name, target = %t, %applied, "restored cache caught up with the source");
            *target = None;
        }
        reached
    }

    /// Stops the fan-out: every handler's buffer is closed, waiters are released.
    pub(crate) fn stop(&self) {
        self.processor.lock().stop();
        self.lifecycle.send_modify(|l| l.stopped = true);
    }

    /// Records a resource version the source reported (after its write reached the FIFO);
    /// returns the newest received version with its arrival number, as `last_received`.
    pub(crate) fn received(&self, rv: ResourceVersion) -> (u64, ResourceVersion) {
        let mut r = self.received_rv.lock();
        if !rv.is_empty() {
            *r = (r.0 + 1, rv);
        }
        r.clone()
    }

    /// [`received`](Self::received) without the answer (no copy of the version).
    pub(crate) fn note_received(&self, rv: ResourceVersion) {
        if !rv.is_empty() {
            let mut r = self.received_rv.lock();
            *r = (r.0 + 1, rv);
        }
    }

    /// The newest received version, with its arrival number.
    pub(crate) fn last_received(&self) -> (u64, ResourceVersion) {
        self.received_rv.lock().clone()
    }

    /// Publishes `received` (read with [`last_received`](Self::last_received) *before* the FIFO
    /// was found idle) as applied: every event that arrived up to it reached the FIFO before it
    /// was recorded, and an idle FIFO has processed all of them. Publications only move forward.
    pub(crate) fn publish_applied(&self, received: (u64, ResourceVersion)) {
        let (seq, received) = received;
        if received.is_empty() {
            return;
        }
        {
            let mut published = self.published_seq.lock();
            if seq <= *published {
                return;
            }
            *published = seq;
        }
        self.metrics.set_store_rv(received.as_str());
        if received.is_decimal() {
            let mut peak = self.peak_rv.lock();
            let higher = peak.as_ref().is_none_or(|p| {
                received
                    .cmp_decimal(p)
                    .is_none_or(|order| order == std::cmp::Ordering::Greater)
            });
            if higher {
                *peak = Some(received.clone());
            }
        }
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
