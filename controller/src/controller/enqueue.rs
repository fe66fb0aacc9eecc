//! The event handlers that turn an informer's notifications into queue keys.

use super::queue::ControllerQueue;
use kcache_core::{Meta, ObjectKey};
use kcache_informer::DeletedObject;
use kcache_informer::ResourceEventHandler;
use std::marker::PhantomData;
use std::sync::Arc;

/// Maps an object to the keys to reconcile.
pub(crate) type Mapper<T> = Arc<dyn Fn(&T) -> Vec<ObjectKey> + Send + Sync>;

/// Enqueues the object's own key (`M::key`; a deletion's key comes from the notification, so
/// tombstones without a last state are handled too).
pub(crate) struct EnqueueOwn<M> {
    pub(crate) queue: ControllerQueue,
    pub(crate) controller: Arc<str>,
    pub(crate) _meta: PhantomData<fn() -> M>,
}

/// The priority of a key from an add notification: low for the informer's initial list (a
/// restart's or a relist's replay), normal for a change seen on the watch.
fn priority_of_add(is_in_initial_list: bool) -> i32 {
    if is_in_initial_list {
        ControllerQueue::LOW
    } else {
        0
    }
}

impl<M> EnqueueOwn<M> {
    fn add<T>(&self, obj: &T, priority: i32)
    where
        M: Meta<T>,
    {
        match M::key(obj) {
            Ok(key) => {
                self.queue.add_with_priority(key, priority);
            }
            Err(error) => {
                tracing::warn!(controller = %self.controller, %error, "object without a key not enqueued")
            }
        }
    }
}

impl<T, M: Meta<T>> ResourceEventHandler<T> for EnqueueOwn<M> {
    fn on_add(&self, obj: &Arc<T>, is_in_initial_list: bool) {
        self.add(&**obj, priority_of_add(is_in_initial_list));
    }
    fn on_update(&self, _: &Arc<T>, new: &Arc<T>) {
        self.add(&**new, 0);
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
    pub(crate) queue: ControllerQueue,
    pub(crate) controller: Arc<str>,
    pub(crate) map: Mapper<T>,
}

impl<T> EnqueueMapped<T> {
    fn add(&self, obj: &T, priority: i32) {
        for key in (self.map)(obj) {
            self.queue.add_with_priority(key, priority);
        }
    }
}

impl<T: Send + Sync + 'static> ResourceEventHandler<T> for EnqueueMapped<T> {
    fn on_add(&self, obj: &Arc<T>, is_in_initial_list: bool) {
        self.add(obj, priority_of_add(is_in_initial_list));
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
            Some(last) => self.add(last, 0),
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

    fn queue() -> ControllerQueue {
        ControllerQueue::new(
            true,
            ItemExponentialFailureRateLimiter::new(
                Duration::from_millis(5),
                Duration::from_secs(1),
            ),
            kcache_workqueue::QueueConfig::new(),
        )
    }

    fn drain(queue: &ControllerQueue) -> Vec<String> {
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

    fn key(s: &str) -> ObjectKey {
        ObjectKey::new(s).unwrap()
    }

    #[test]
    fn initial_list_adds_go_in_at_low_priority_and_watched_changes_at_normal() {
        let own = EnqueueOwn::<StrMeta> {
            queue: queue(),
            controller: Arc::from("test"),
            _meta: PhantomData,
        };
        for name in ["default/listed-1", "default/listed-2"] {
            own.on_add(&Arc::new(name.to_owned()), true);
        }
        own.on_add(&Arc::new("default/added".to_owned()), false);
        own.on_update(
            &Arc::new("default/changed".to_owned()),
            &Arc::new("default/changed".to_owned()),
        );
        let q = &own.queue;
        assert_eq!(
            q.priority_of(&key("default/listed-1")),
            Some(ControllerQueue::LOW)
        );
        assert_eq!(q.priority_of(&key("default/added")), Some(0));
        assert_eq!(q.priority_of(&key("default/changed")), Some(0));
        // The watched changes are reconciled before the initial list's replay.
        assert_eq!(
            drain(q),
            [
                "default/added",
                "default/changed",
                "default/listed-1",
                "default/listed-2"
            ]
        );

        let mapped = EnqueueMapped::<String> {
            queue: queue(),
            controller: Arc::from("test"),
            map: Arc::new(|o: &String| vec![ObjectKey::new(o.as_str()).unwrap()]),
        };
        mapped.on_add(&Arc::new("default/owner-listed".to_owned()), true);
        mapped.on_add(&Arc::new("default/owner-added".to_owned()), false);
        assert_eq!(
            mapped.queue.priority_of(&key("default/owner-listed")),
            Some(ControllerQueue::LOW)
        );
        assert_eq!(
            drain(&mapped.queue),
            ["default/owner-added", "default/owner-listed"]
        );
    }
}
