//! The event handlers that turn an informer's notifications into queue keys.

use kcache_core::{Meta, ObjectKey};
use kcache_informer::DeletedObject;
use kcache_informer::ResourceEventHandler;
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
/// state, and a tombstone without one enqueues nothing and is reported with `tracing::warn!`
/// (the owners it would have woken are not known; client-go's controllers report this case
/// through `HandleError`).
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
                tracing::warn!(controller = %self.controller, key = %obj.key(), "tombstone without a last state: its owners cannot be mapped, no key enqueued")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcache_core::{KeyError, ResourceVersion};
    use kcache_workqueue::ItemExponentialFailureRateLimiter;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    use std::time::Duration;
    use tracing::{span, Level, Metadata, Subscriber};

    /// The key of a string is the string.
    struct StrMeta;

    impl Meta<String> for StrMeta {
        fn key(obj: &String) -> Result<ObjectKey, KeyError> {
            ObjectKey::new(obj.as_str())
        }
        fn resource_version(_: &String) -> ResourceVersion {
            ResourceVersion::default()
        }
    }

    /// Records the level of every event.
    #[derive(Clone, Default)]
    struct Levels(Arc<Mutex<Vec<Level>>>);

    impl Subscriber for Levels {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
            span::Id::from_u64(1)
        }
        fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
        fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            self.0.lock().unwrap().push(*event.metadata().level());
        }
        fn enter(&self, _: &span::Id) {}
        fn exit(&self, _: &span::Id) {}
    }

    fn queue() -> RateLimitingQueue<ObjectKey> {
        RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1),
        ))
    }

    fn drain(queue: &RateLimitingQueue<ObjectKey>) -> Vec<String> {
        queue.shut_down();
        std::iter::from_fn(|| queue.get())
            .map(|k| k.to_string())
            .collect()
    }

    fn tombstone() -> DeletedObject<String> {
        DeletedObject::final_state_unknown(ObjectKey::new("default/child").unwrap(), None)
    }

    #[test]
    fn a_mapped_tombstone_without_a_last_state_enqueues_nothing_and_is_reported() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let handler = EnqueueMapped::<String> {
            queue: queue(),
            controller: Arc::from("test"),
            map: Arc::new(move |owner: &String| {
                c.fetch_add(1, Ordering::SeqCst);
                vec![ObjectKey::new(owner.as_str()).unwrap()]
            }),
        };
        let levels = Levels::default();
        tracing::subscriber::with_default(levels.clone(), || handler.on_delete(&tombstone()));
        assert_eq!(calls.load(Ordering::SeqCst), 0, "no state to map");
        assert!(drain(&handler.queue).is_empty());
        assert_eq!(
            *levels.0.lock().unwrap(),
            [Level::WARN],
            "reported, not dropped silently"
        );

        // With a last known state, its owner is enqueued.
        let handler = EnqueueMapped {
            queue: queue(),
            ..handler
        };
        let last = Arc::new("default/owner".to_owned());
        handler.on_delete(&DeletedObject::final_state_unknown(
            ObjectKey::new("default/child").unwrap(),
            Some(last),
        ));
        assert_eq!(drain(&handler.queue), ["default/owner"]);
    }

    #[test]
    fn an_own_tombstone_without_a_last_state_enqueues_its_key() {
        let handler = EnqueueOwn::<StrMeta> {
            queue: queue(),
            controller: Arc::from("test"),
            _meta: PhantomData,
        };
        handler.on_delete(&tombstone());
        assert_eq!(drain(&handler.queue), ["default/child"]);
    }
}
