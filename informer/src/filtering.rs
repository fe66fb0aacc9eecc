//! `FilteringHandler`: passes on only the objects a predicate accepts.

use crate::event::DeletedObject;
use crate::handler::ResourceEventHandler;
use kcache_core::{Meta, ObjectAccessor};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// Wraps a handler so it only sees objects for which `filter` is true, with client-go's
/// conversion rules (`FilteringResourceEventHandler`):
///
/// - add: passed on if the object passes;
/// - update: both pass → update; only the new one → add (`is_in_initial_list = false`); only the
///   old one → delete of the old object; neither → nothing;
/// - delete: passed on if the last known state passes. A tombstone without a last known state
///   is passed on (the wrapped handler may have seen the object; client-go hands the tombstone to
///   the filter, which must cope).
///
/// The filter should depend only on the object, so that adds and deletes pair up. `M` computes
/// the key of the deletion an update turns into (default: the [`Object`](kcache_core::Object)
/// trait; use [`with_accessor`](Self::with_accessor) for another [`Meta`] accessor).
///
/// # Examples
/// ```
/// use kcache_core::{Object, ResourceVersion};
/// use kcache_informer::{FilteringHandler, HandlerFuncs, ResourceEventHandler};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// struct Job { name: &'static str, done: bool }
/// impl Object for Job {
///     fn namespace(&self) -> Option<&str> { None }
///     fn name(&self) -> &str { self.name }
///     fn resource_version(&self) -> ResourceVersion { ResourceVersion::default() }
/// }
///
/// let deletes = Arc::new(AtomicUsize::new(0));
/// let d = deletes.clone();
/// let inner = HandlerFuncs::<Job>::new().delete_func(move |gone| {
///     assert_eq!(gone.key().as_str(), "nightly");
///     d.fetch_add(1, Ordering::SeqCst);
/// });
/// let running_only = FilteringHandler::new(|j: &Job| !j.done, inner);
/// // The job finished: it leaves the filtered set, so the inner handler sees a delete.
/// running_only.on_update(
///     &Arc::new(Job { name: "nightly", done: false }),
///     &Arc::new(Job { name: "nightly", done: true }),
/// );
/// assert_eq!(deletes.load(Ordering::SeqCst), 1);
/// ```
#[doc(alias = "FilteringResourceEventHandler")]
pub struct FilteringHandler<T, F, H, M = ObjectAccessor> {
    filter: F,
    handler: H,
    _t: PhantomData<fn(&T) -> M>,
}

impl<T, F, H> FilteringHandler<T, F, H, ObjectAccessor>
where
    F: Fn(&T) -> bool + Send + Sync + 'static,
    H: ResourceEventHandler<T>,
{
    /// Wraps `handler` behind `filter`, with keys from the [`Object`](kcache_core::Object) trait.
    pub fn new(filter: F, handler: H) -> Self {
        Self::with_accessor(filter, handler)
    }
}

impl<T, F, H, M> FilteringHandler<T, F, H, M>
where
    F: Fn(&T) -> bool + Send + Sync + 'static,
    H: ResourceEventHandler<T>,
{
    /// Wraps `handler` behind `filter`, with keys from the accessor `M`.
    pub fn with_accessor(filter: F, handler: H) -> Self {
        Self {
            filter,
            handler,
            _t: PhantomData,
        }
    }

    /// The wrapped handler.
    pub fn inner(&self) -> &H {
        &self.handler
    }
}

impl<T, F, H: fmt::Debug, M> fmt::Debug for FilteringHandler<T, F, H, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilteringHandler")
            .field("handler", &self.handler)
            .finish_non_exhaustive()
    }
}

impl<T, F, H, M> ResourceEventHandler<T> for FilteringHandler<T, F, H, M>
where
    T: 'static,
    F: Fn(&T) -> bool + Send + Sync + 'static,
    H: ResourceEventHandler<T>,
    M: Meta<T>,
{
    fn on_add(&self, obj: &Arc<T>, is_in_initial_list: bool) {
        if (self.filter)(obj) {
            self.handler.on_add(obj, is_in_initial_list);
        }
    }

    fn on_update(&self, old: &Arc<T>, new: &Arc<T>) {
        match ((self.filter)(old), (self.filter)(new)) {
            (true, true) => self.handler.on_update(old, new),
            (false, true) => self.handler.on_add(new, false),
            (true, false) => match M::key(old) {
                Ok(key) => self
                    .handler
                    .on_delete(&DeletedObject::observed(key, old.clone())),
                Err(error) => tracing::warn!(
                    %error,
                    "filtering handler: the object that left the filter has no key; its deletion is not passed on"
                ),
            },
            (false, false) => {}
        }
    }

    fn on_delete(&self, obj: &DeletedObject<T>) {
        let pass = obj.object().is_none_or(|o| (self.filter)(o));
        if pass {
            self.handler.on_delete(obj);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;
    use crate::handler::HandlerFuncs;
    use crate::sync::Mutex;
    use kcache_core::{Object, ObjectKey, ResourceVersion};

    #[derive(Debug, PartialEq)]
    struct Job {
        name: &'static str,
        keep: bool,
    }
    impl Object for Job {
        fn namespace(&self) -> Option<&str> {
            None
        }
        fn name(&self) -> &str {
            self.name
        }
        fn resource_version(&self) -> ResourceVersion {
            ResourceVersion::default()
        }
    }

    fn job(name: &'static str, keep: bool) -> Arc<Job> {
        Arc::new(Job { name, keep })
    }

    fn recording() -> (Arc<Mutex<Vec<Event<Job>>>>, impl ResourceEventHandler<Job>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (a, u, d) = (log.clone(), log.clone(), log.clone());
        let h = HandlerFuncs::new()
            .add_func(move |o: &Arc<Job>, i| {
                a.lock().push(Event::Added {
                    obj: o.clone(),
                    is_in_initial_list: i,
                })
            })
            .update_func(move |o, n| {
                u.lock().push(Event::Updated {
                    old: o.clone(),
                    new: n.clone(),
                })
            })
            .delete_func(move |x| d.lock().push(Event::Deleted(x.clone())));
        (log, h)
    }

    #[test]
    fn updates_convert_by_which_side_passes_the_filter() {
        let (log, inner) = recording();
        let f = FilteringHandler::new(|j: &Job| j.keep, inner);
        f.on_update(&job("a", true), &job("a", true));
        f.on_update(&job("b", false), &job("b", true));
        f.on_update(&job("c", true), &job("c", false));
        f.on_update(&job("d", false), &job("d", false));
        let log = log.lock();
        assert_eq!(log.len(), 3);
        assert!(matches!(&log[0], Event::Updated { .. }));
        assert!(
            matches!(&log[1], Event::Added { obj, is_in_initial_list: false } if obj.name == "b")
        );
        assert!(
            matches!(&log[2], Event::Deleted(d) if d.key().as_str() == "c" && !d.is_final_state_unknown())
        );
    }

    #[test]
    fn adds_and_deletes_pass_only_with_the_filter() {
        let (log, inner) = recording();
        let f = FilteringHandler::new(|j: &Job| j.keep, inner);
        f.on_add(&job("a", false), true);
        f.on_add(&job("b", true), true);
        let key = ObjectKey::new("x").unwrap();
        f.on_delete(&DeletedObject::observed(key.clone(), job("x", false)));
        f.on_delete(&DeletedObject::observed(key.clone(), job("x", true)));
        // A tombstone without a known state is passed on.
        f.on_delete(&DeletedObject::final_state_unknown(key, None));
        assert_eq!(log.lock().len(), 3);
    }
}
