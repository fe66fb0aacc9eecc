//! Applying the queue's entries: client-go's `processDeltas` (one watch event) and
//! `processReplacedAllInfo` (a relist) plus the informer's dispatch.
//!
//! A watch event (`Added`, `Updated`) writes the object into the cache, as an update if the key
//! is already cached (the handlers get `on_update(old, new)`) and as an add otherwise
//! (`on_add(obj, is_in_initial_list)`): the delta type does not decide, the cache does.
//! `Deleted` removes the key and tells the handlers (even for a key the cache never held, as
//! client-go's in-order informers do). A relist (`ReplacedAll`) swaps the whole cache in one
//! step no reader can see half done (`Indexer::swap_in`), then tells the handlers what changed
//! against the state before it: the deletions first (as tombstones), then an update or an add
//! for each listed object, in list order. A resync (`SyncAll`) tells `on_update(o, o)` for
//! every cached object. The cache is always written before the handlers are told, all under
//! the dispatch lock, which a batch of entries takes once.
//!
//! An update whose resource version did not change (a relisted object that did not change, a
//! resync) only reaches the handlers flagged as syncing: all of them until the first resync
//! check (and forever in an informer without resync, as in client-go), then those whose
//! resync was due at the last check. While every handler is flagged, the versions are not
//! compared at all: the answer would change nothing.
//!
//! A watch add or update that arrives while the queue is caught up (nothing queued or being
//! processed, the informer synced) skips the queue: the sink hands it to `apply_direct`, which
//! applies it by the same rules, so the order of events is kept.

use crate::event::{DeletedObject, Event, Notification};
use crate::listener::panic_message;
use crate::processor::Dispatch;
use crate::shared::Shared;
use kcache_core::{KeyText, Meta, ResourceVersion};
use kcache_deltafifo::{DeltaType, Entry};
use kcache_indexer::{StoreError, Swapped};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

impl<T: Send + Sync + 'static, M: Meta<T>> Shared<T, M> {
    /// Applies one queue entry to the cache and distributes it (see the module documentation),
    /// with the dispatch lock held by the caller.
    ///
    /// # Errors
    /// The cache's error for a watch event (a key or index function failure); the cache is
    /// unchanged by that event.
    pub(crate) fn apply_entry(
        &self,
        dispatch: &mut Dispatch<T>,
        entry: Entry<T>,
        is_in_initial_list: bool,
    ) -> Result<(), StoreError> {
        match entry {
            Entry::Delta {
                key,
                delta_type: DeltaType::Deleted,
                object,
            } => {
                self.indexer.delete(&object)?;
                let event = Event::Deleted(DeletedObject::observed(key.to_key(), object));
                dispatch.distribute(Notification::new(key, event), false);
            }
            Entry::Delta { key, object, .. } => {
                let old = self.indexer.insert_with_key_text(&key, object.clone())?;
                self.distribute_write(dispatch, key, old, object, is_in_initial_list);
            }
            Entry::ReplacedAll(list) => {
                self.apply_replaced_all(
                    dispatch,
                    list.objects,
                    list.resource_version,
                    is_in_initial_list,
                );
            }
            Entry::SyncAll => self.apply_sync_all(dispatch),
        }
        Ok(())
    }

    /// Tells the handlers that `obj` was written under `key`, replacing `old` (if any).
    fn distribute_write(
        &self,
        dispatch: &mut Dispatch<T>,
        key: KeyText,
        old: Option<Arc<T>>,
        obj: Arc<T>,
        is_in_initial_list: bool,
    ) {
        match old {
            Some(old) => {
                let is_sync = dispatch.filters_unchanged() && M::same_resource_version(&old, &obj);
                let event = Event::Updated { old, new: obj };
                dispatch.distribute(Notification::new(key, event), is_sync);
            }
            None => {
                let event = Event::Added {
                    obj,
                    is_in_initial_list,
                };
                dispatch.distribute(Notification::new(key, event), false);
            }
        }
    }

    /// A relist (client-go's `processReplacedAllInfo`): the cache becomes `objects` in one
    /// step, then the handlers hear of the deletions (tombstones, with the last cached state),
    /// then of each listed object against what it replaced, in list order. An object an index
    /// function refuses is left out and logged (a key it held is told as deleted).
    pub(crate) fn apply_replaced_all(
        &self,
        dispatch: &mut Dispatch<T>,
        objects: Vec<(KeyText, Arc<T>)>,
        rv: ResourceVersion,
        is_in_initial_list: bool,
    ) {
        let swapped = catch_unwind(AssertUnwindSafe(|| self.indexer.swap_in(&objects, rv)));
        let outcome = match swapped {
            Ok(outcome) => outcome,
            Err(payload) => {
                tracing::error!(
                    informer = %self.name,
                    panic = %panic_message(&*payload),
                    "applying a relist to the cache panicked (an index function?); the relist is refused, the informer goes on"
                );
                return;
            }
        };
        for (key, obj) in outcome.deleted {
            let text = KeyText::copied(&key);
            let event = Event::Deleted(DeletedObject::final_state_unknown(key, Some(obj)));
            dispatch.distribute(Notification::new(text, event), false);
        }
        for ((key, obj), swapped) in objects.into_iter().zip(outcome.listed) {
            match swapped {
                Swapped::Added => {
                    self.distribute_write(dispatch, key, None, obj, is_in_initial_list);
                }
                Swapped::Updated(old) => {
                    self.distribute_write(dispatch, key, Some(old), obj, is_in_initial_list);
                }
                Swapped::Refused(error) => tracing::error!(
                    informer = %self.name,
                    %key,
                    %error,
                    "a listed object was refused by the cache; the informer goes on"
                ),
            }
        }
    }

    /// A resync: `on_update(o, o)` for every cached object, to the handlers whose resync is due.
    fn apply_sync_all(&self, dispatch: &mut Dispatch<T>) {
        for obj in self.indexer.list() {
            let Ok(key) = M::key(&obj) else { continue };
            let event = Event::Updated {
                old: obj.clone(),
                new: obj,
            };
            dispatch.distribute(Notification::new(KeyText::from(key), event), true);
        }
    }

    /// Applies a watch event's object that the queue handed over directly (it was caught up,
    /// see `RealFifo::write_or_apply`), exactly as a popped `Added`/`Updated` entry for it would
    /// be: cache first, then the handlers, under the dispatch lock. Declines (hands the object
    /// back, so the queue takes it) until the informer has marked itself synced, and once
    /// stopped.
    ///
    /// A cache error is logged and the object dropped, as the pop loop does. `rv` is the
    /// version of the event (the cache records it as the version of the write).
    pub(crate) fn apply_direct(
        &self,
        key: &KeyText,
        obj: Arc<T>,
        rv: &ResourceVersion,
    ) -> Result<(), Arc<T>> {
        let mut dispatch = self.processor.lock();
        if !dispatch.synced || dispatch.stopped {
            return Err(obj);
        }
        let start = self.metrics.latency.as_ref().map(|_| self.clock.now());
        // An index function that panics refuses the change, as in the pop loop: indexes run
        // before any write, so the cache is left as it was.
        let written = catch_unwind(AssertUnwindSafe(|| {
            self.indexer
                .insert_with_key_text_at(key, obj.clone(), rv.clone())
        }));
        match written {
            Ok(Ok(old)) => {
                self.distribute_write(&mut dispatch, key.clone(), old, obj, false);
                if self.batch_size == 1 {
                    // Unbatched: each change reaches the buffers alone.
                    dispatch.flush();
                }
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
        if let (Some(h), Some(start)) = (&self.metrics.latency, start) {
            let took = self.clock.now().saturating_duration_since(start);
            h.observe(took.as_secs_f64());
        }
        Ok(())
    }
}
