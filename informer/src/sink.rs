//! `Sink`: what the reflector writes into — the `DeltaFifo`, plus the informer's bookkeeping of
//! sync and resource versions.

use crate::shared::Shared;
use kcache_core::{BoxFuture, Meta, PagedReplace, ReflectorStore, ResourceVersion};
use kcache_deltafifo::{DeltaFifo, DeltaFifoError, Written};
use std::pin::pin;
use std::sync::Arc;

pub(crate) struct Sink<T, M: Meta<T>> {
    pub(crate) fifo: Arc<DeltaFifo<T, M>>,
    pub(crate) shared: Arc<Shared<T, M>>,
}

impl<T, M: Meta<T>> Sink<T, M> {
    /// After a write that queued a key (an add or an update): record the version. The pop loop
    /// will take that key and then look at the FIFO's progress itself, so reading it here would
    /// only cost a lock of the FIFO per event. This relies on the pop loop running in the
    /// reflector's task (`run` selects over both): it cannot take the key between the write and
    /// this record, so when it next finds the FIFO idle it publishes this version.
    fn queued(&self, rv: ResourceVersion) {
        self.shared.received(rv);
    }

    /// After a write that may have queued nothing: record the version, and notice an initial
    /// population of zero keys (an empty first list syncs without any pop).
    fn written(&self, rv: ResourceVersion) {
        let received = self.shared.received(rv);
        let progress = self.fifo.progress();
        if progress.idle {
            // Nothing to pop (a dropped deletion, a bookmark, an empty list): the cache is as
            // far as the source.
            self.shared.publish_applied(received);
        }
        if progress.synced {
            self.shared.set_synced();
        }
    }
}

impl<T: Send + Sync + 'static, M: Meta<T>> Sink<T, M> {
    /// An add or an update: applied directly when the FIFO is caught up (nothing queued or
    /// being processed, see `DeltaFifo::write_or_apply`), else queued for the pop loop.
    fn write(&self, obj: Arc<T>, added: bool) -> Result<(), DeltaFifoError> {
        let rv = M::resource_version(&obj);
        let written = self
            .fifo
            .write_or_apply(obj, added, |key, obj| self.shared.apply_direct(key, obj))?;
        match written {
            Written::Queued => self.queued(rv),
            Written::Applied => {
                // The cache has it and the handlers' notifications are staged: the pop loop
                // flushes them and publishes the version (it runs as soon as the reflector
                // yields, at the latest after a streak of events).
                self.shared.received(rv);
                self.shared.direct.signal();
            }
        }
        Ok(())
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
        self.written(rv);
        Ok(())
    }

    fn replace(&self, objects: Vec<Arc<T>>, rv: ResourceVersion) -> Result<(), DeltaFifoError> {
        tracing::debug!(informer = %self.shared.name, objects = objects.len(), %rv, "relist");
        // An object whose key or transform fails is left out and reported; the rest syncs.
        let result = self.fifo.replace_skipping_refused(objects, rv.clone());
        if matches!(result, Ok(()) | Err(DeltaFifoError::Refused { .. })) {
            self.written(rv);
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

/// Lists reach the informer page by page: a page is applied straight to the cache and the
/// handlers' buffers when the FIFO is caught up (else queued), and the reflector fetches the
/// next page only once the FIFO has drained, so a relist holds about one page of new objects
/// beside the cache (plus the set of listed keys) instead of a second copy of the whole cache.
/// Deletions are inferred when the list is complete, as one `replace` would.
impl<T: Send + Sync + 'static, M: Meta<T>> PagedReplace<T> for Sink<T, M> {
    type Error = DeltaFifoError;

    fn begin_list(&self) {
        self.fifo.begin_list();
    }

    fn list_page(&self, objects: Vec<Arc<T>>) -> Result<(), DeltaFifoError> {
        let written = self.fifo.list_page_or_apply(objects, |page, initial| {
            self.shared.apply_list_page(page, initial)
        });
        // A page applied directly needs no pop; one queued is popped while the reflector waits
        // in `page_taken`.
        written.map(drop)
    }

    fn page_taken(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            loop {
                let mut drained = pin!(self.shared.drained.notified());
                drained.as_mut().enable();
                if self.fifo.is_closed() || self.fifo.is_idle() {
                    return;
                }
                drained.await;
            }
        })
    }

    fn finish_list(&self, rv: ResourceVersion) -> Result<(), DeltaFifoError> {
        self.fifo.finish_list(rv.clone());
        tracing::debug!(informer = %self.shared.name, %rv, "relisted page by page");
        self.written(rv);
        Ok(())
    }

    fn abandon_list(&self) {
        self.fifo.abandon_list();
    }
}
