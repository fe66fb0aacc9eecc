//! Applying one key's deltas: client-go's `processDeltas` plus the informer's dispatch.
//!
//! For each delta, oldest first: `Added`, `Updated`, `Replaced` and `Sync` write the object into
//! the cache, as an update if the key is already cached (the handlers get `on_update(old, new)`)
//! and as an add otherwise (`on_add(obj, is_in_initial_list)`): the delta type does not decide,
//! the cache does. `Deleted` removes the key and tells the handlers, with the tombstone when the
//! deletion was inferred. The cache is always written before the handlers are told, all under the
//! dispatch lock. An update whose resource version did not change only reaches the handlers
//! flagged as syncing: all of them until the first resync check (and forever in an informer
//! without resync, as in client-go), then those whose resync was due at the last check. While
//! every handler is flagged, the versions are not compared at all: the answer would change
//! nothing, and reading the replaced object's version is a cache miss per update.
//!
//! A watch add or update that arrives while the FIFO is caught up (nothing queued or being
//! processed, the informer synced) skips the queue: the sink hands it to `apply_direct`, which
//! applies it by the same rules. A list page arriving while the FIFO is caught up goes to
//! `apply_list_page` (`list_page.rs`) the same way. Deletes, the end of a list (its tombstones)
//! and resyncs always go through the FIFO (dropped deletes of unseen keys, `Sync` only for keys
//! with nothing pending).

use crate::event::{DeletedObject, Event, Notification};
use crate::listener::panic_message;
use crate::shared::Shared;
use kcache_core::{KeyText, Meta};
use kcache_deltafifo::{DeltaObject, DeltaType, Deltas};
use kcache_indexer::StoreError;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

impl<T: Send + Sync + 'static, M: Meta<T>> Shared<T, M> {
    /// Applies `deltas` to the cache and distributes them (see the module documentation).
    ///
    /// # Errors
    /// The cache's error (a key or index function failure); the remaining deltas of the key
    /// are not applied, as in client-go.
    pub(crate) fn apply(
        &self,
        deltas: Deltas<T>,
        is_in_initial_list: bool,
    ) -> Result<(), StoreError> {
        let mut dispatch = self.processor.lock();
        // Every list the FIFO hands out carries its key; build it only for one made by hand.
        let key = deltas.key().cloned();
        for delta in deltas {
            match (delta.delta_type, delta.object) {
                (DeltaType::Deleted, DeltaObject::Object(obj)) => {
                    let key = key.clone().map_or_else(|| M::key(&obj), Ok)?;
                    self.indexer.delete(&obj)?;
                    let text = KeyText::copied(&key);
                    let event = Event::Deleted(DeletedObject::observed(key, obj));
                    dispatch.distribute(Notification::new(text, event), false);
                }
                (DeltaType::Deleted, DeltaObject::Tombstone(t)) => {
                    self.indexer.thread_safe_store().delete(&t.key);
                    let text = KeyText::copied(&t.key);
                    let event = Event::Deleted(DeletedObject::final_state_unknown(t.key, t.obj));
                    dispatch.distribute(Notification::new(text, event), false);
                }
                (_, DeltaObject::Object(obj)) => {
                    let key = key.clone().map_or_else(|| M::key(&obj), Ok)?;
                    let text = KeyText::copied(&key);
                    match self.indexer.insert_with_key(key, obj.clone())? {
                        Some(old) => {
                            let is_sync = dispatch.filters_unchanged()
                                && M::same_resource_version(&old, &obj);
                            let event = Event::Updated { old, new: obj };
                            dispatch.distribute(Notification::new(text, event), is_sync);
                        }
                        None => {
                            let event = Event::Added {
                                obj,
                                is_in_initial_list,
                            };
                            dispatch.distribute(Notification::new(text, event), false);
                        }
                    }
                }
                (delta_type, DeltaObject::Tombstone(t)) => {
                    // The FIFO only puts tombstones in Deleted deltas.
                    tracing::warn!(informer = %self.name, key = %t.key, %delta_type, "tombstone in a non-delete delta ignored");
                }
            }
        }
        Ok(())
    }

    /// Applies a watch event's object that the FIFO handed over directly (it was caught up, see
    /// `DeltaFifo::write_or_apply`), exactly as a popped `Added`/`Updated` delta for it would be:
    /// cache first, then the handlers, under the dispatch lock. Declines (hands the object back,
    /// so the FIFO queues it) until the informer has marked itself synced, and once stopped.
    ///
    /// A cache error is logged and the object dropped, as the pop loop does.
    pub(crate) fn apply_direct(&self, key: &KeyText, obj: Arc<T>) -> Result<(), Arc<T>> {
        let mut dispatch = self.processor.lock();
        if !dispatch.synced || dispatch.stopped {
            return Err(obj);
        }
        let start = self.metrics.latency.as_ref().map(|_| self.clock.now());
        // An index function that panics refuses the change, as in the pop loop: indexes run
        // before any write, so the cache is left as it was.
        let written = catch_unwind(AssertUnwindSafe(|| {
            self.indexer.insert_with_key_text(key, obj.clone())
        }));
        let written = match written {
            Ok(written) => written,
            Err(payload) => {
                tracing::error!(
                    informer = %self.name,
                    panic = %panic_message(&*payload),
                    "applying a change to the cache panicked (an index function?); the change is refused, the informer goes on"
                );
                return Ok(());
            }
        };
        match written {
            Ok(Some(old)) => {
                let is_sync = dispatch.filters_unchanged() && M::same_resource_version(&old, &obj);
                let event = Event::Updated { old, new: obj };
                dispatch.distribute(Notification::new(key.clone(), event), is_sync);
            }
            Ok(None) => {
                let event = Event::Added {
                    obj,
                    is_in_initial_list: false,
                };
                dispatch.distribute(Notification::new(key.clone(), event), false);
            }
            Err(error) => tracing::error!(
                informer = %self.name,
                %error,
                "cannot apply a change to the cache; the informer goes on"
            ),
        }
        if let (Some(h), Some(start)) = (&self.metrics.latency, start) {
            let took = self.clock.now().saturating_duration_since(start);
            h.observe(took.as_secs_f64());
        }
        Ok(())
    }
}
