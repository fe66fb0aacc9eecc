//! How the source writes the resource version it assigns into the stored object.

use kcache_core::{Meta, Object, ObjectAccessor, ResourceVersion};

/// The write half of [`Meta`]: stamps the resource version the source assigned into an object.
///
/// As in Kubernetes, a stored object carries its own resource version, so whatever reads it
/// through the [`Meta`] accessor (a reflector, a store) sees the version of the write that made it.
/// The source calls [`MetaMut::set_resource_version`] on every created or updated object before it
/// stores it (no copy: the object is yours, passed by value), and on a copy of the last state of a
/// deleted object (the `Deleted` event carries the deletion's version).
///
/// Types you own: implement [`Object`] and [`SetResourceVersion`] and use [`ObjectAccessor`] (the
/// default). Types you do not own: implement `Meta<T>` and `MetaMut<T>` on your own zero-sized
/// accessor.
pub trait MetaMut<T: ?Sized>: Meta<T> {
    /// Writes `rv` into `obj`, so that `Self::resource_version(obj)` returns it afterwards.
    fn set_resource_version(obj: &mut T, rv: ResourceVersion);
}

/// A type that can store its resource version (the counterpart of [`Object::resource_version`]).
///
/// # Examples
/// ```
/// use kcache_core::{Object, ResourceVersion};
/// use kcache_memory::SetResourceVersion;
///
/// #[derive(Clone)]
/// struct Job { name: String, rv: ResourceVersion }
///
/// impl Object for Job {
///     fn namespace(&self) -> Option<&str> { None }
///     fn name(&self) -> &str { &self.name }
///     fn resource_version(&self) -> ResourceVersion { self.rv.clone() }
/// }
///
/// impl SetResourceVersion for Job {
///     fn set_resource_version(&mut self, rv: ResourceVersion) { self.rv = rv; }
/// }
/// ```
pub trait SetResourceVersion {
    /// Stores `rv` as this object's resource version.
    fn set_resource_version(&mut self, rv: ResourceVersion);
}

impl<T: Object + SetResourceVersion + ?Sized> MetaMut<T> for ObjectAccessor {
    fn set_resource_version(obj: &mut T, rv: ResourceVersion) {
        SetResourceVersion::set_resource_version(obj, rv);
    }
}
