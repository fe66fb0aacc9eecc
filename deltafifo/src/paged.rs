//! A list taken page by page: [`DeltaFifo::begin_list`], [`list_page`](DeltaFifo::list_page) (or
//! [`list_page_or_apply`](DeltaFifo::list_page_or_apply)) per page, [`finish_list`](DeltaFifo::finish_list).
//! Together they do what one [`replace`](DeltaFifo::replace) of all the pages does, without the
//! whole list ever being in memory at once.

use crate::{DeltaFifo, DeltaFifoError, Written};
use kcache_core::{Meta, ObjectKey, ResourceVersion};
use std::sync::Arc;

/// A page's objects with their keys, transformed.
pub type KeyedPage<T> = Vec<(ObjectKey, Arc<T>)>;

impl<T, M: Meta<T>> DeltaFifo<T, M> {
    /// Keys and transforms `objects`, leaving out (and returning the reasons for) those whose
    /// key or transform fails.
    pub(crate) fn prepare(&self, objects: Vec<Arc<T>>) -> (KeyedPage<T>, Vec<DeltaFifoError>) {
        let mut refused = Vec::new();
        let mut listed = Vec::with_capacity(objects.len());
        for obj in objects {
            match M::key(&obj) {
                Err(e) => refused.push(DeltaFifoError::Key(e)),
                Ok(key) => match self.transform(obj) {
                    Ok(obj) => listed.push((key, obj)),
                    Err(e) => refused.push(e),
                },
            }
        }
        (listed, refused)
    }

    /// A paged list attempt starts. Keys listed by an earlier attempt that was not finished no
    /// longer count as listed (their queued or applied changes stay: they were real states).
    pub fn begin_list(&self) {
        self.lock().core.list_begin();
    }

    /// The next page of the paged list in progress (one starts if none is): queues `Replaced`
    /// (or `Sync`) for each object, as [`replace`](Self::replace) does for its list. During the
    /// first list, each key counts toward the initial population as it is queued, but
    /// [`has_synced`](Self::has_synced) cannot turn true before [`finish_list`](Self::finish_list).
    ///
    /// # Errors
    /// [`DeltaFifoError::Refused`] with the reason for each object whose key or transform failed;
    /// those are left out (not listed: if known, [`finish_list`](Self::finish_list) tombstones
    /// them, as `replace_skipping_refused` does), the rest was queued.
    pub fn list_page(&self, objects: Vec<Arc<T>>) -> Result<(), DeltaFifoError> {
        self.list_page_or_apply(objects, |page, _| Err(page))
            .map(drop)
    }

    /// [`list_page`](Self::list_page), except when the FIFO is *caught up* (nothing queued,
    /// nothing being processed, not closed): then `apply(page, is_in_initial_list)` gets the
    /// page's keyed, transformed objects at once, under the FIFO's lock (no pop interleaves), to
    /// apply as it would apply popped `Replaced`/`Sync` deltas for them, in order.
    /// `is_in_initial_list` is true during the first list. The keys count as listed either
    /// way. `apply` may decline by handing the page back (`Err(page)`); it is then queued.
    ///
    /// # Errors
    /// As [`list_page`](Self::list_page).
    pub fn list_page_or_apply(
        &self,
        objects: Vec<Arc<T>>,
        apply: impl FnOnce(KeyedPage<T>, bool) -> Result<(), KeyedPage<T>>,
    ) -> Result<Written, DeltaFifoError> {
        let (page, refused) = self.prepare(objects);
        let mut st = self.lock();
        let core = &mut st.core;
        let page = if core.is_idle() && !core.is_closed() {
            core.list_applied(page.iter().map(|(k, _)| k));
            let initial = core.lists_initial();
            apply(page, initial)
        } else {
            Err(page)
        };
        let written = match page {
            Ok(()) => {
                drop(st);
                Written::Applied
            }
            Err(page) => {
                st.core.list_page(page);
                self.notify(st);
                Written::Queued
            }
        };
        if refused.is_empty() {
            Ok(written)
        } else {
            Err(DeltaFifoError::Refused { refused })
        }
    }

    /// The paged list is complete, as of `rv` (not used): tombstones for every key not listed
    /// since [`begin_list`](Self::begin_list), exactly as [`replace`](Self::replace) infers
    /// them (queued keys from their newest queued state, then keys being processed, then known
    /// keys with nothing pending, from the known state). The first list fixes the initial
    /// population here. Without a list in progress, this is the end of an empty list.
    pub fn finish_list(&self, rv: ResourceVersion) {
        let _ = rv;
        let mut st = self.lock();
        st.core.list_finish(self.known());
        self.notify(st);
    }

    /// The paged list attempt failed: forget its listed keys. What its pages queued stays queued
    /// (those were real states, newer than the cache's); the next list settles the rest.
    pub fn abandon_list(&self) {
        self.lock().core.list_abandon();
    }
}
