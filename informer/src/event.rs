//! `Event` and `DeletedObject`: what a handler is told.

use kcache_core::{KeyText, ObjectKey};
use kcache_deltafifo::DeletedFinalStateUnknown;
use std::fmt;
use std::sync::Arc;

/// The object of a deletion: its last state as the watch reported it, or, when a relist revealed
/// a deletion the watch missed, the last state the cache knew (possibly stale, possibly none).
///
/// client-go passes either the object or a `DeletedFinalStateUnknown` tombstone as an untyped
/// value; here both carry the key, and [`is_final_state_unknown`](Self::is_final_state_unknown)
/// tells them apart.
///
/// # Examples
/// ```
/// use kcache_core::ObjectKey;
/// use kcache_informer::DeletedObject;
/// use std::sync::Arc;
///
/// let seen = DeletedObject::observed(ObjectKey::new("default/web")?, Arc::new(7));
/// assert_eq!(seen.object().map(|o| **o), Some(7));
/// assert!(!seen.is_final_state_unknown());
///
/// let missed = DeletedObject::<i32>::final_state_unknown(ObjectKey::new("default/web")?, None);
/// assert!(missed.object().is_none());
/// assert_eq!(missed.key().as_str(), "default/web");
/// # Ok::<(), kcache_core::KeyError>(())
/// ```
#[doc(alias = "DeletedFinalStateUnknown")]
pub struct DeletedObject<T> {
    key: ObjectKey,
    obj: Option<Arc<T>>,
    final_state_unknown: bool,
}

impl<T> DeletedObject<T> {
    /// A deletion the watch reported, with the object's last state.
    pub fn observed(key: ObjectKey, obj: Arc<T>) -> Self {
        Self {
            key,
            obj: Some(obj),
            final_state_unknown: false,
        }
    }

    /// A deletion inferred from a relist (client-go's `DeletedFinalStateUnknown` tombstone), with
    /// the last known state if there was one.
    pub fn final_state_unknown(key: ObjectKey, last_known: Option<Arc<T>>) -> Self {
        Self {
            key,
            obj: last_known,
            final_state_unknown: true,
        }
    }

    /// The deleted object's key.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// The last state: always present for an observed deletion, maybe absent for a tombstone.
    pub fn object(&self) -> Option<&Arc<T>> {
        self.obj.as_ref()
    }

    /// Whether the deletion was inferred (a tombstone) rather than observed.
    pub fn is_final_state_unknown(&self) -> bool {
        self.final_state_unknown
    }

    /// The tombstone form, for code written against `kcache_deltafifo`'s type.
    pub fn to_tombstone(&self) -> Option<DeletedFinalStateUnknown<T>> {
        self.final_state_unknown.then(|| DeletedFinalStateUnknown {
            key: self.key.clone(),
            obj: self.obj.clone(),
        })
    }
}

impl<T> Clone for DeletedObject<T> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            obj: self.obj.clone(),
            final_state_unknown: self.final_state_unknown,
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for DeletedObject<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeletedObject")
            .field("key", &self.key)
            .field("obj", &self.obj)
            .field("final_state_unknown", &self.final_state_unknown)
            .finish()
    }
}

impl<T: PartialEq> PartialEq for DeletedObject<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
            && self.obj == other.obj
            && self.final_state_unknown == other.final_state_unknown
    }
}

/// One notification, as an [`event_stream`](crate::SharedIndexInformer::event_stream) yields it
/// (the three calls of [`ResourceEventHandler`](crate::ResourceEventHandler) as values).
pub enum Event<T> {
    /// An object appeared in the cache.
    Added {
        /// The object.
        obj: Arc<T>,
        /// Whether it belongs to the initial list (or to the replay a late handler receives).
        is_in_initial_list: bool,
    },
    /// A cached object changed (or was resynced: then `old` and `new` have the same resource
    /// version).
    Updated {
        /// The previous state.
        old: Arc<T>,
        /// The new state.
        new: Arc<T>,
    },
    /// An object left the cache.
    Deleted(DeletedObject<T>),
}

impl<T> Event<T> {
    /// The newest object the event carries (the deleted object's last state, if known).
    pub fn object(&self) -> Option<&Arc<T>> {
        match self {
            Self::Added { obj, .. } => Some(obj),
            Self::Updated { new, .. } => Some(new),
            Self::Deleted(d) => d.object(),
        }
    }
}

impl<T> Clone for Event<T> {
    fn clone(&self) -> Self {
        match self {
            Self::Added {
                obj,
                is_in_initial_list,
            } => Self::Added {
                obj: obj.clone(),
                is_in_initial_list: *is_in_initial_list,
            },
            Self::Updated { old, new } => Self::Updated {
                old: old.clone(),
                new: new.clone(),
            },
            Self::Deleted(d) => Self::Deleted(d.clone()),
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Event<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Added {
                obj,
                is_in_initial_list,
            } => f
                .debug_struct("Added")
                .field("obj", obj)
                .field("is_in_initial_list", is_in_initial_list)
                .finish(),
            Self::Updated { old, new } => f
                .debug_struct("Updated")
                .field("old", old)
                .field("new", new)
                .finish(),
            Self::Deleted(d) => f.debug_tuple("Deleted").field(d).finish(),
        }
    }
}

impl<T: PartialEq> PartialEq for Event<T> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                Self::Added {
                    obj: a,
                    is_in_initial_list: ia,
                },
                Self::Added {
                    obj: b,
                    is_in_initial_list: ib,
                },
            ) => a == b && ia == ib,
            (Self::Updated { old: oa, new: na }, Self::Updated { old: ob, new: nb }) => {
                oa == ob && na == nb
            }
            (Self::Deleted(a), Self::Deleted(b)) => a == b,
            _ => false,
        }
    }
}

/// A notification inside the crate: the event, its key (for coalescing) and whether it counts
/// toward the receiving handler's initial sync.
pub(crate) struct Notification<T> {
    /// Inline text for a short key: cloning it per handler, and dropping it on a handler's
    /// thread, touches no shared reference count and frees nothing.
    pub(crate) key: KeyText,
    pub(crate) event: Event<T>,
    /// Counted in the handler's outstanding initial notifications until delivered.
    pub(crate) initial: bool,
}

impl<T> Clone for Notification<T> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            event: self.event.clone(),
            initial: self.initial,
        }
    }
}

impl<T> Notification<T> {
    pub(crate) fn new(key: KeyText, event: Event<T>) -> Self {
        let initial = matches!(
            event,
            Event::Added {
                is_in_initial_list: true,
                ..
            }
        );
        Self {
            key,
            event,
            initial,
        }
    }
}
