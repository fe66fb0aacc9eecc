//! `DeltaType`, `Delta` and the `DeletedFinalStateUnknown` tombstone.

use kcache_core::ObjectKey;
use std::fmt;
// Object handles are `std::sync::Arc`, the type of kcache-core's store traits (see `sync.rs`).
use std::sync::Arc;

/// What happened to an object.
///
/// # Examples
/// ```
/// use kcache_deltafifo::DeltaType;
///
/// assert_eq!(DeltaType::Replaced.to_string(), "Replaced");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "fuzz", derive(arbitrary::Arbitrary))]
pub enum DeltaType {
    /// The object was created.
    Added,
    /// The object was modified.
    Updated,
    /// The object was deleted (its object may be a [`DeletedFinalStateUnknown`] tombstone).
    Deleted,
    /// The object was seen in a list or relist (emitted only with
    /// [`DeltaFifoOptions::emit_delta_type_replaced`](crate::DeltaFifoOptions::emit_delta_type_replaced);
    /// otherwise a relist emits [`Sync`](DeltaType::Sync)).
    Replaced,
    /// A periodic resync (or a relist, without `emit_delta_type_replaced`).
    Sync,
}

impl fmt::Display for DeltaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A deletion the FIFO inferred instead of observing: a relist no longer contained the key, so
/// the watch missed its deletion. `obj` is the last state known (possibly stale), or `None` when
/// nothing was known.
///
/// A tombstone never nests: its `obj` is always a real object.
///
/// # Examples
/// ```
/// use kcache_core::ObjectKey;
/// use kcache_deltafifo::DeletedFinalStateUnknown;
///
/// let t: DeletedFinalStateUnknown<String> =
///     DeletedFinalStateUnknown { key: ObjectKey::new("default/web")?, obj: None };
/// assert_eq!(t.key.as_str(), "default/web");
/// # Ok::<(), kcache_core::KeyError>(())
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct DeletedFinalStateUnknown<T> {
    /// The key of the deleted object.
    pub key: ObjectKey,
    /// The last known state of the object, if any.
    pub obj: Option<Arc<T>>,
}

impl<T> Clone for DeletedFinalStateUnknown<T> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            obj: self.obj.clone(),
        }
    }
}

/// The object a [`Delta`] carries: a real object, or a tombstone for an inferred deletion.
#[derive(Debug, PartialEq, Eq)]
pub enum DeltaObject<T> {
    /// A real object, shared with the reflector and every other holder.
    Object(Arc<T>),
    /// An inferred deletion (only in [`DeltaType::Deleted`] deltas).
    Tombstone(DeletedFinalStateUnknown<T>),
}

impl<T> Clone for DeltaObject<T> {
    fn clone(&self) -> Self {
        match self {
            Self::Object(o) => Self::Object(Arc::clone(o)),
            Self::Tombstone(t) => Self::Tombstone(t.clone()),
        }
    }
}

impl<T> DeltaObject<T> {
    /// The object's state: the real object, or the tombstone's last known state.
    ///
    /// # Examples
    /// ```
    /// use kcache_core::ObjectKey;
    /// use kcache_deltafifo::{DeletedFinalStateUnknown, DeltaObject};
    /// use std::sync::Arc;
    ///
    /// let real = DeltaObject::Object(Arc::new(5));
    /// assert_eq!(real.object().map(|o| **o), Some(5));
    /// let key = ObjectKey::new("a")?;
    /// let gone = DeltaObject::Tombstone(DeletedFinalStateUnknown::<i32> { key, obj: None });
    /// assert!(gone.object().is_none());
    /// # Ok::<(), kcache_core::KeyError>(())
    /// ```
    pub fn object(&self) -> Option<&Arc<T>> {
        match self {
            Self::Object(o) => Some(o),
            Self::Tombstone(t) => t.obj.as_ref(),
        }
    }

    /// Whether this is a tombstone.
    pub fn is_tombstone(&self) -> bool {
        matches!(self, Self::Tombstone(_))
    }

    /// The tombstone, if this is one.
    pub fn as_tombstone(&self) -> Option<&DeletedFinalStateUnknown<T>> {
        match self {
            Self::Tombstone(t) => Some(t),
            Self::Object(_) => None,
        }
    }
}

/// One change to one object.
#[derive(Debug, PartialEq, Eq)]
pub struct Delta<T> {
    /// What happened.
    pub delta_type: DeltaType,
    /// The object after the change (or a tombstone).
    pub object: DeltaObject<T>,
}

impl<T> Clone for Delta<T> {
    fn clone(&self) -> Self {
        Self {
            delta_type: self.delta_type,
            object: self.object.clone(),
        }
    }
}

impl<T> Delta<T> {
    /// A delta carrying a real object.
    pub fn new(delta_type: DeltaType, obj: Arc<T>) -> Self {
        Self {
            delta_type,
            object: DeltaObject::Object(obj),
        }
    }

    /// A `Deleted` delta carrying a tombstone.
    pub fn tombstone(key: ObjectKey, obj: Option<Arc<T>>) -> Self {
        Self {
            delta_type: DeltaType::Deleted,
            object: DeltaObject::Tombstone(DeletedFinalStateUnknown { key, obj }),
        }
    }
}
