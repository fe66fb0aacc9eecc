//! How the cache learns an object's key and resource version.

use crate::{KeyError, ObjectKey, ResourceVersion};

/// Reads the key and resource version of objects of type `T`.
///
/// Implemented by a zero-sized accessor type rather than by `T` itself, so a backend crate can
/// provide one for types it does not own (`impl<K: kube::Resource> Meta<K> for KubeMeta`). Types
/// you own can implement the simpler [`Object`] trait and use the [`ObjectAccessor`] accessor.
///
/// Key extraction can fail (an object without a name, say); callers get the [`KeyError`] back,
/// nothing panics.
pub trait Meta<T: ?Sized>: Send + Sync + 'static {
    /// The object's key: `"namespace/name"`, or `"name"` for cluster-scoped objects.
    ///
    /// # Errors
    /// A [`KeyError`] when the object carries no usable name.
    fn key(obj: &T) -> Result<ObjectKey, KeyError>;

    /// The object's resource version (empty when the object carries none).
    fn resource_version(obj: &T) -> ResourceVersion;
}

/// A type that knows its own namespace, name and resource version.
///
/// # Examples
/// ```
/// use kcache_core::{Meta, Object, ObjectAccessor, ResourceVersion};
///
/// struct Job { ns: String, name: String, rv: u64 }
///
/// impl Object for Job {
///     fn namespace(&self) -> Option<&str> { Some(&self.ns) }
///     fn name(&self) -> &str { &self.name }
///     fn resource_version(&self) -> ResourceVersion { self.rv.into() }
/// }
///
/// let job = Job { ns: "batch".into(), name: "nightly".into(), rv: 3 };
/// assert_eq!(ObjectAccessor::key(&job)?.as_str(), "batch/nightly");
/// assert_eq!(ObjectAccessor::resource_version(&job).as_str(), "3");
/// # Ok::<(), kcache_core::KeyError>(())
/// ```
pub trait Object {
    /// The namespace, or `None` for a cluster-scoped object.
    fn namespace(&self) -> Option<&str>;
    /// The name.
    fn name(&self) -> &str;
    /// The resource version.
    fn resource_version(&self) -> ResourceVersion;
}

/// The [`Meta`] accessor for every type that implements [`Object`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ObjectAccessor;

impl<T: Object + ?Sized> Meta<T> for ObjectAccessor {
    fn key(obj: &T) -> Result<ObjectKey, KeyError> {
        let name = obj.name();
        if name.is_empty() {
            return Err(KeyError::MissingName);
        }
        ObjectKey::namespaced(obj.namespace().unwrap_or(""), name)
    }

    fn resource_version(obj: &T) -> ResourceVersion {
        Object::resource_version(obj)
    }
}
