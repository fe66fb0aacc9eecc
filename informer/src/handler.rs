//! `ResourceEventHandler` and the closure adapter `HandlerFuncs`.

use crate::event::{DeletedObject, Event};
use std::fmt;
use std::sync::Arc;

/// Receives an informer's notifications (client-go's `ResourceEventHandler`).
///
/// Each registered handler has its own buffer and delivery thread: calls to one handler are
/// sequential and in order, and a slow handler never delays the others. The objects are the
/// cache's own `Arc`s: never mutate through interior mutability. Every method has an empty
/// default, so implement only what you need.
///
/// A panic in a method is caught, reported with `tracing::error!`, and counted as delivered; the
/// handler keeps receiving later notifications.
pub trait ResourceEventHandler<T>: Send + Sync + 'static {
    /// An object appeared in the cache. `is_in_initial_list` is true for objects of the first
    /// list, and for the replay of the cache a handler receives when it joins a running informer.
    fn on_add(&self, obj: &Arc<T>, is_in_initial_list: bool) {
        let _ = (obj, is_in_initial_list);
    }

    /// A cached object changed. When `old` and `new` carry the same resource version this is a
    /// resync (periodic, or an unchanged object seen again in a relist); those reach a handler
    /// only while it is flagged as syncing (see the crate's rules: always, in an informer
    /// without resync).
    fn on_update(&self, old: &Arc<T>, new: &Arc<T>) {
        let _ = (old, new);
    }

    /// An object left the cache; `obj` may be a tombstone
    /// ([`DeletedObject::is_final_state_unknown`]).
    fn on_delete(&self, obj: &DeletedObject<T>) {
        let _ = obj;
    }
}

impl<T, H: ResourceEventHandler<T> + ?Sized> ResourceEventHandler<T> for Arc<H> {
    fn on_add(&self, obj: &Arc<T>, is_in_initial_list: bool) {
        (**self).on_add(obj, is_in_initial_list)
    }
    fn on_update(&self, old: &Arc<T>, new: &Arc<T>) {
        (**self).on_update(old, new)
    }
    fn on_delete(&self, obj: &DeletedObject<T>) {
        (**self).on_delete(obj)
    }
}

impl<T, H: ResourceEventHandler<T> + ?Sized> ResourceEventHandler<T> for Box<H> {
    fn on_add(&self, obj: &Arc<T>, is_in_initial_list: bool) {
        (**self).on_add(obj, is_in_initial_list)
    }
    fn on_update(&self, old: &Arc<T>, new: &Arc<T>) {
        (**self).on_update(old, new)
    }
    fn on_delete(&self, obj: &DeletedObject<T>) {
        (**self).on_delete(obj)
    }
}

/// Calls the matching method of `handler` for `event`.
pub(crate) fn deliver<T, H: ResourceEventHandler<T> + ?Sized>(handler: &H, event: &Event<T>) {
    match event {
        Event::Added {
            obj,
            is_in_initial_list,
        } => handler.on_add(obj, *is_in_initial_list),
        Event::Updated { old, new } => handler.on_update(old, new),
        Event::Deleted(d) => handler.on_delete(d),
    }
}

type AddFn<T> = Box<dyn Fn(&Arc<T>, bool) + Send + Sync>;
type UpdateFn<T> = Box<dyn Fn(&Arc<T>, &Arc<T>) + Send + Sync>;
type DeleteFn<T> = Box<dyn Fn(&DeletedObject<T>) + Send + Sync>;

/// A handler made of closures (client-go's `ResourceEventHandlerFuncs` and
/// `ResourceEventHandlerDetailedFuncs`); a missing closure ignores its notifications.
///
/// # Examples
/// ```
/// use kcache_informer::{HandlerFuncs, ResourceEventHandler};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// let adds = Arc::new(AtomicUsize::new(0));
/// let seen = adds.clone();
/// let handler = HandlerFuncs::<String>::new()
///     .add_func(move |_obj, _initial| { seen.fetch_add(1, Ordering::SeqCst); })
///     .update_func(|old, new| assert_ne!(old, new));
/// handler.on_add(&Arc::new("web".to_string()), true);
/// assert_eq!(adds.load(Ordering::SeqCst), 1);
/// ```
#[doc(alias = "ResourceEventHandlerFuncs")]
#[doc(alias = "ResourceEventHandlerDetailedFuncs")]
pub struct HandlerFuncs<T> {
    add: Option<AddFn<T>>,
    update: Option<UpdateFn<T>>,
    delete: Option<DeleteFn<T>>,
}

impl<T> HandlerFuncs<T> {
    /// A handler that ignores everything until closures are set.
    pub fn new() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
        }
    }

    /// Sets the closure for additions (it receives `is_in_initial_list`; client-go's `AddFunc`).
    #[must_use]
    pub fn add_func(mut self, f: impl Fn(&Arc<T>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Sets the closure for updates and resyncs (client-go's `UpdateFunc`).
    #[must_use]
    pub fn update_func(mut self, f: impl Fn(&Arc<T>, &Arc<T>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Sets the closure for deletions (client-go's `DeleteFunc`).
    #[must_use]
    pub fn delete_func(mut self, f: impl Fn(&DeletedObject<T>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<T> Default for HandlerFuncs<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for HandlerFuncs<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerFuncs")
            .field("on_add", &self.add.is_some())
            .field("on_update", &self.update.is_some())
            .field("on_delete", &self.delete.is_some())
            .finish()
    }
}

impl<T: 'static> ResourceEventHandler<T> for HandlerFuncs<T> {
    fn on_add(&self, obj: &Arc<T>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(obj, is_in_initial_list)
        }
    }
    fn on_update(&self, old: &Arc<T>, new: &Arc<T>) {
        if let Some(f) = &self.update {
            f(old, new)
        }
    }
    fn on_delete(&self, obj: &DeletedObject<T>) {
        if let Some(f) = &self.delete {
            f(obj)
        }
    }
}
