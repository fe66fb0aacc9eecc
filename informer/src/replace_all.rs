//! [`SharedIndexInformer::replace_all`]: a whole list handed in from outside the source (a
//! cache restored from a snapshot), applied as a relist is.

use crate::error::ReplaceAllError;
use crate::informer::SharedIndexInformer;
use kcache_core::{KeyText, Meta, ResourceVersion};
use kcache_reflector::ListWatcher;
use std::sync::Arc;

impl<T, L, M> SharedIndexInformer<T, L, M>
where
    T: Send + Sync + 'static,
    L: ListWatcher<T>,
    M: Meta<T>,
{
    /// Replaces the whole cache with `objects` as of resource version `rv`, in one step no
    /// reader can see half done, then tells the handlers what changed against the cache before
    /// it: deletions first (as tombstones with the last cached state), then an update or an
    /// add for each object, in order. This is exactly what a relist does (client-go's
    /// `ReplacedAll`); an object whose `Arc` is already cached changes nothing and is told as
    /// an update of itself, to the handlers whose resync is due.
    ///
    /// Before [`run`](Self::run) the cache is replaced at once (the adds count as part of the
    /// initial list, `is_in_initial_list`), and
    /// [`wait_for_resource_version`](Self::wait_for_resource_version) for `rv` resolves; it
    /// does not mark the informer synced (the source decides that). While it runs, the list is
    /// queued behind the events already received and applied in its turn. The transform (see
    /// [`set_transform`](Self::set_transform)) does not run: hand in objects as the cache holds
    /// them.
    ///
    /// # Errors
    /// [`ReplaceAllError::Key`] if an object has no key (nothing changes);
    /// [`ReplaceAllError::Stopped`] once the informer has stopped.
    pub fn replace_all(
        &self,
        objects: Vec<Arc<T>>,
        rv: ResourceVersion,
    ) -> Result<(), ReplaceAllError> {
        let keyed = objects
            .into_iter()
            .map(|obj| M::key(&obj).map(|key| (KeyText::from(key), obj)))
            .collect::<Result<Vec<_>, _>>()?;
        let shared = &self.shared;
        let fifo = shared.fifo.lock().clone();
        if let Some(fifo) = fifo {
            if fifo.is_closed() {
                return Err(ReplaceAllError::Stopped);
            }
            fifo.replace_keyed(keyed, rv.clone());
            shared.received(rv);
            return Ok(());
        }
        let mut dispatch = shared.processor.lock();
        if dispatch.stopped {
            return Err(ReplaceAllError::Stopped);
        }
        shared.apply_replaced_all(&mut dispatch, keyed, rv.clone(), true);
        dispatch.flush();
        drop(dispatch);
        let received = shared.received(rv);
        shared.publish_applied(received);
        Ok(())
    }
}
