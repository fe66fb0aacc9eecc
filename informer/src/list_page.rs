//! Applying a list page directly: while a relist (or the first list) streams in page by page
//! and the FIFO is caught up, each page goes straight to the cache and the handlers' buffers
//! (see `DeltaFifo::list_page_or_apply`), by the rules of popped `Replaced` deltas: an update
//! when the key is cached (RV-unchanged ones only to handlers whose resync is due), an add
//! otherwise (`is_in_initial_list` during the first list). The cache is written before the
//! handlers hear, under the dispatch lock; the page's notifications reach the buffers together,
//! before the next page is fetched.

use crate::event::{Event, Notification};
use crate::listener::panic_message;
use crate::shared::Shared;
use kcache_core::{KeyText, Meta};
use kcache_deltafifo::KeyedPage;
use std::panic::{catch_unwind, AssertUnwindSafe};

impl<T: Send + Sync + 'static, M: Meta<T>> Shared<T, M> {
    /// Applies `page` (see the module documentation). Declines (hands the page back, so the FIFO
    /// queues it) once the informer is stopped. An object the cache refuses (an index function
    /// that fails or panics) is logged and left out, as the pop loop does.
    pub(crate) fn apply_list_page(
        &self,
        page: KeyedPage<T>,
        is_in_initial_list: bool,
    ) -> Result<(), KeyedPage<T>> {
        let mut dispatch = self.processor.lock();
        if dispatch.stopped {
            return Err(page);
        }
        // One processing-latency observation per page (a batch, as client-go's `PopBatch`);
        // none for an empty page (nothing processed).
        let start = self
            .metrics
            .latency
            .as_ref()
            .filter(|_| !page.is_empty())
            .map(|_| self.clock.now());
        for (key, obj) in page {
            let text = KeyText::copied(&key);
            let written = catch_unwind(AssertUnwindSafe(|| {
                self.indexer.insert_with_key(key, obj.clone())
            }));
            match written {
                Ok(Ok(Some(old))) => {
                    let is_sync =
                        dispatch.filters_unchanged() && M::same_resource_version(&old, &obj);
                    let event = Event::Updated { old, new: obj };
                    dispatch.distribute(Notification::new(text, event), is_sync);
                }
                Ok(Ok(None)) => {
                    let event = Event::Added {
                        obj,
                        is_in_initial_list,
                    };
                    dispatch.distribute(Notification::new(text, event), false);
                }
                Ok(Err(error)) => tracing::error!(
                    informer = %self.name,
                    %error,
                    "cannot apply a change to the cache; the informer goes on"
                ),
                Err(payload) => tracing::error!(
                    informer = %self.name,
                    panic = %panic_message(&*payload),
                    "applying a change to the cache panicked (an index function?); the change is refused, the informer goes on"
                ),
            }
        }
        dispatch.flush();
        if let (Some(h), Some(start)) = (&self.metrics.latency, start) {
            let took = self.clock.now().saturating_duration_since(start);
            h.observe(took.as_secs_f64());
        }
        Ok(())
    }
}
