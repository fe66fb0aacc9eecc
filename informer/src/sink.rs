//! `Sink`: what the reflector writes into — the in-order queue ([`RealFifo`]), plus the
//! informer's bookkeeping of sync and resource versions.

use crate::shared::Shared;
use kcache_core::{BoxFuture, KeyText, Meta, PagedReplace, ReflectorStore, ResourceVersion};
use kcache_deltafifo::{DeltaFifoError, RealFifo, Written};
use std::sync::Arc;

pub(crate) struct Sink<T, M: Meta<T>> {
    pub(crate) fifo: Arc<RealFifo<T, M>>,
    pub(crate) shared: Arc<Shared<T, M>>,
}

impl<T, M: Meta<T>> Sink<T, M> {
    /// After a write that queued an entry: record the version. The pop loop will take the
    /// entry and then look at the queue's progress itself, so reading it here would only cost
    /// a lock of the queue per event. This relies on the pop loop running in the reflector's
    /// task (`run` selects over both): it cannot take the entry between the write and this
    /// record, so when it next finds the queue idle it publishes this version.
    fn queued(&self, rv: ResourceVersion) {
        self.shared.note_received(rv);
    }

    /// After a write that queued nothing (a bookmark): record the version, and publish it if
    /// the queue is idle.
    fn written(&self, rv: ResourceVersion) {
        let received = self.shared.received(rv);
        let progress = self.fifo.progress();
        if progress.idle {
            self.shared.publish_applied(received);
        }
        if progress.synced {
            self.shared.set_synced();
        }
    }
}

impl<T: Send + Sync + 'static, M: Meta<T>> Sink<T, M> {
    /// An add or an update: applied directly when the queue is caught up (nothing queued or
    /// being processed, see `RealFifo::write_or_apply`), else queued for the pop loop.
    fn write(&self, obj: Arc<T>, added: bool) -> Result<(), DeltaFifoError> {
        let rv = M::resource_version(&obj);
        let written = self.fifo.write_or_apply(obj, added, |key, obj| {
            self.shared.apply_direct(key, obj, &rv)
        })?;
        match written {
            Written::Queued => self.queued(rv),
            Written::Applied => {
                // The cache has it and the handlers' notifications are staged: the pop loop
                // flushes them and publishes the version (it runs as soon as the reflector
                // yields, at the latest after a streak of events).
                self.shared.note_received(rv);
                self.shared.direct.signal();
            }
        }
        Ok(())
    }

    /// What a relisted object becomes in the queue: the cached `Arc` when the cache holds the
    /// same resource version of it (the new copy is dropped now, so a relist that changed
    /// little holds little beside the cache), else the new copy.
    fn keep(&self) -> impl FnMut(&KeyText, Arc<T>) -> Arc<T> + '_ {
        |key, obj| match self.shared.indexer.get_by_key(key.as_str()) {
            Some(cached)
                if !M::resource_version(&obj).is_empty()
                    && M::same_resource_version(&cached, &obj) =>
            {
                cached
            }
            _ => obj,
        }
    }
}

impl<T: Send + Sync + 'static, M: Meta<T>> ReflectorStore<T> for Sink<T, M> {
    type Error = DeltaFifoError;

    fn add(&self, obj: Arc<T>) -> Result<(), DeltaFifoError> {
        self.write(obj, true)
    }

    fn update(&self, obj: Arc<T>) -> Result<(), DeltaFifoError> {
        self.write(obj, false)
    }

    fn delete(&self, obj: Arc<T>) -> Result<(), DeltaFifoError> {
        let rv = M::resource_version(&obj);
        self.fifo.delete(obj)?;
        self.queued(rv);
        Ok(())
    }

    /// A list in one piece (a streaming list's end, or a list the reflector gathered): one
    /// `ReplacedAll` entry. An object whose key or transform fails is left out and reported;
    /// the rest syncs.
    fn replace(&self, objects: Vec<Arc<T>>, rv: ResourceVersion) -> Result<(), DeltaFifoError> {
        tracing::debug!(informer = %self.shared.name, objects = objects.len(), %rv, "relist");
        let result = self.fifo.replace_keeping(objects, rv.clone(), self.keep());
        if matches!(result, Ok(()) | Err(DeltaFifoError::Refused { .. })) {
            self.queued(rv);
        }
        result
    }

    fn replace_applied(&self, error: &DeltaFifoError) -> bool {
        matches!(error, DeltaFifoError::Refused { .. })
    }

    fn resync(&self) -> Result<(), DeltaFifoError> {
        self.fifo.resync();
        Ok(())
    }

    fn bookmark(&self, rv: ResourceVersion) -> Result<(), DeltaFifoError> {
        self.written(rv);
        Ok(())
    }

    fn paged(&self) -> Option<&dyn PagedReplace<T, Error = DeltaFifoError>> {
        Some(self)
    }
}

/// Lists reach the informer page by page, to be staged: nothing of a list is visible to a
/// reader until its last page, when the whole list is queued as one `ReplacedAll` entry (the
/// cache is then swapped in one step). Each page is staged as it arrives, and an object whose
/// cached copy has the same resource version is staged as that cached `Arc` (the new copy is
/// dropped with its page): a relist holds beside the cache only what changed, plus the keys.
/// An abandoned attempt's pages are dropped; the reflector's list limits bound one attempt.
impl<T: Send + Sync + 'static, M: Meta<T>> PagedReplace<T> for Sink<T, M> {
    type Error = DeltaFifoError;

    fn begin_list(&self) {
        self.fifo.begin_list();
    }

    fn list_page(&self, objects: Vec<Arc<T>>) -> Result<(), DeltaFifoError> {
        self.fifo.list_page(objects, self.keep())
    }

    fn page_taken(&self) -> BoxFuture<'_, ()> {
        // A staged page needs no processing before the next one is fetched.
        Box::pin(std::future::ready(()))
    }

    fn finish_list(&self, rv: ResourceVersion) -> Result<(), DeltaFifoError> {
        tracing::debug!(informer = %self.shared.name, %rv, staged = self.fifo.staged_len(), "relisted page by page");
        self.fifo.finish_list(rv.clone());
        self.queued(rv);
        Ok(())
    }

    fn list_delete(&self, obj: Arc<T>) -> Result<(), DeltaFifoError> {
        self.fifo.list_delete(&obj)
    }

    fn abandon_list(&self) {
        self.fifo.abandon_list();
    }
}
