//! The event handlers that turn an informer's notifications into queue keys.

use crate::event::DeletedObject;
use crate::handler::ResourceEventHandler;
use kcache_core::{Meta, ObjectKey};
use kcache_workqueue::RateLimitingQueue;
use std::marker::PhantomData;
use std::sync::Arc;

/// Maps an object to the keys to reconcile.
pub(crate) type Mapper<T> = Arc<dyn Fn(&T) -> Vec<ObjectKey> + Send + Sync>;

/// Enqueues the object's own key (`M::key`; a deletion's key comes from the notification, so
/// tombstones without a last state are handled too).
pub(crate) struct EnqueueOwn<M> {
    pub(crate) queue: RateLimitingQueue<ObjectKey>,
    pub(crate) controller: Arc<str>,
    pub(crate) _meta: PhantomData<fn() -> M>,
}

impl<M> EnqueueOwn<M> {
    fn add<T>(&self, obj: &T)
    where
        M: Meta<T>,
    {
        match M::key(obj) {
            Ok(key) => {
                self.queue.add(key);
            }
            Err(error) => {
                tracing::warn!(controller = %self.controller, %error, "object without a key not enqueued")
            }
        }
    }
}

impl<T, M: Meta<T>> ResourceEventHandler<T> for EnqueueOwn<M> {
    fn on_add(&self, obj: &Arc<T>, _: bool) {
        self.add(&**obj);
    }
    fn on_update(&self, _: &Arc<T>, new: &Arc<T>) {
        self.add(&**new);
    }
    fn on_delete(&self, obj: &DeletedObject<T>) {
        self.queue.add(obj.key().clone());
    }
}

/// Enqueues the keys a mapper gives (owners of child objects, say). An update enqueues the keys
/// of both states, so a child that changed owner wakes both; a deletion uses the last known
/// state, and a tombstone without one enqueues nothing.
pub(crate) struct EnqueueMapped<T> {
    pub(crate) queue: RateLimitingQueue<ObjectKey>,
    pub(crate) controller: Arc<str>,
    pub(crate) map: Mapper<T>,
}

impl<T> EnqueueMapped<T> {
    fn add(&self, obj: &T) {
        for key in (self.map)(obj) {
            self.queue.add(key);
        }
    }
}

impl<T: Send + Sync + 'static> ResourceEventHandler<T> for EnqueueMapped<T> {
    fn on_add(&self, obj: &Arc<T>, _: bool) {
        self.add(obj);
    }
    fn on_update(&self, old: &Arc<T>, new: &Arc<T>) {
        let mut keys = (self.map)(old);
        for key in (self.map)(new) {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        for key in keys {
            self.queue.add(key);
        }
    }
    fn on_delete(&self, obj: &DeletedObject<T>) {
        match obj.object() {
            Some(last) => self.add(last),
            None => {
                tracing::debug!(controller = %self.controller, key = %obj.key(), "tombstone without a last state: no key to enqueue")
            }
        }
    }
}
