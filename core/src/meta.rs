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

    /// Writes the text of [`key`](Self::key) into `out` (cleared first) without building an
    /// [`ObjectKey`]: a writer that only needs to find a key (a `DeltaFifo` write) then allocates
    /// nothing. The default builds the key and copies its text; an accessor that can borrow the
    /// parts should use [`ObjectKey::write_namespaced`]. It must write exactly `key`'s text.
    ///
    /// # Errors
    /// As [`key`](Self::key).
    fn write_key(obj: &T, out: &mut String) -> Result<(), KeyError> {
        out.clear();
        out.push_str(Self::key(obj)?.as_str());
        Ok(())
    }

    /// Whether `a` and `b` carry the same resource version (an informer's test for a resync:
    /// an update that changed nothing). The default compares [`resource_version`](Self::resource_version)s;
    /// an accessor that can borrow the versions should compare them without building any.
    fn same_resource_version(a: &T, b: &T) -> bool {
        Self::resource_version(a) == Self::resource_version(b)
    }
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

    fn write_key(obj: &T, out: &mut String) -> Result<(), KeyError> {
        let name = obj.name();
        if name.is_empty() {
            out.clear();
            return Err(KeyError::MissingName);
        }
        ObjectKey::write_namespaced(obj.namespace().unwrap_or(""), name, out)
    }
}

/// The write half of [`Meta`]: stamps a resource version into an object.
///
/// As in Kubernetes, a stored object carries its own resource version, so whatever reads it
/// through the [`Meta`] accessor (a reflector, a store) sees the version of the write that made
/// it. A source of truth calls [`MetaMut::set_resource_version`] on every object it stores or
/// decodes: the in-memory source (`kcache-memory`) on every created or updated object and on the
/// last state of a deleted one, the etcd backend (`kcache-etcd`) after decoding a value at its
/// `mod_revision`.
///
/// Types you own: implement [`Object`] and [`SetResourceVersion`] and use [`ObjectAccessor`].
/// Types you do not own: implement `Meta<T>` and `MetaMut<T>` on your own zero-sized accessor.
///
/// # Examples
/// An accessor for a type this crate does not own (here a map of labels):
/// ```
/// use kcache_core::{KeyError, Meta, MetaMut, ObjectKey, ResourceVersion};
/// use std::collections::BTreeMap;
///
/// struct LabelsMeta;
///
/// impl Meta<BTreeMap<String, String>> for LabelsMeta {
///     fn key(obj: &BTreeMap<String, String>) -> Result<ObjectKey, KeyError> {
///         let name = obj.get("name").ok_or(KeyError::MissingName)?;
///         ObjectKey::cluster(name)
///     }
///     fn resource_version(obj: &BTreeMap<String, String>) -> ResourceVersion {
///         obj.get("rv").map(|rv| ResourceVersion::from(rv.as_str())).unwrap_or_default()
///     }
/// }
///
/// impl MetaMut<BTreeMap<String, String>> for LabelsMeta {
///     fn set_resource_version(obj: &mut BTreeMap<String, String>, rv: ResourceVersion) {
///         obj.insert("rv".into(), rv.as_str().to_owned());
///     }
/// }
///
/// let mut labels = BTreeMap::from([("name".to_owned(), "web".to_owned())]);
/// LabelsMeta::set_resource_version(&mut labels, ResourceVersion::from("5"));
/// assert_eq!(LabelsMeta::resource_version(&labels).as_str(), "5");
/// assert_eq!(LabelsMeta::key(&labels)?.as_str(), "web");
/// # Ok::<(), KeyError>(())
/// ```
pub trait MetaMut<T: ?Sized>: Meta<T> {
    /// Writes `rv` into `obj`, so that `Self::resource_version(obj)` returns it afterwards.
    fn set_resource_version(obj: &mut T, rv: ResourceVersion);
}

/// A type that can store its resource version (the counterpart of [`Object::resource_version`]).
///
/// With [`Object`], it makes [`ObjectAccessor`] a [`MetaMut`] for the type, which is what the
/// in-memory source and the etcd backend's default codec need.
///
/// # Examples
/// ```
/// use kcache_core::{Meta, MetaMut, Object, ObjectAccessor, ResourceVersion, SetResourceVersion};
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
///
/// let mut job = Job { name: "nightly".into(), rv: ResourceVersion::default() };
/// <ObjectAccessor as MetaMut<Job>>::set_resource_version(&mut job, ResourceVersion::from("8"));
/// assert_eq!(ObjectAccessor::resource_version(&job).as_str(), "8");
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Doc {
        rv: &'static str,
    }

    impl Object for Doc {
        fn namespace(&self) -> Option<&str> {
            None
        }
        fn name(&self) -> &str {
            "doc"
        }
        fn resource_version(&self) -> ResourceVersion {
            ResourceVersion::from(self.rv)
        }
    }

    /// An accessor that keeps the default `write_key`.
    struct Plain;
    impl Meta<Doc> for Plain {
        fn key(obj: &Doc) -> Result<ObjectKey, KeyError> {
            ObjectAccessor::key(obj)
        }
        fn resource_version(obj: &Doc) -> ResourceVersion {
            Object::resource_version(obj)
        }
    }

    struct Named(&'static str, Option<&'static str>);
    impl Object for Named {
        fn namespace(&self) -> Option<&str> {
            self.1
        }
        fn name(&self) -> &str {
            self.0
        }
        fn resource_version(&self) -> ResourceVersion {
            ResourceVersion::default()
        }
    }

    #[test]
    fn write_key_writes_what_key_builds_or_fails_alike() {
        let mut out = String::from("stale");
        for obj in [
            Named("web", Some("prod")),
            Named("node", None),
            Named("node", Some("")),
            Named("", Some("prod")),
            Named("a/b", Some("prod")),
            Named("web", Some("p/q")),
        ] {
            let key = ObjectAccessor::key(&obj);
            let written = ObjectAccessor::write_key(&obj, &mut out);
            match key {
                Ok(k) => {
                    assert_eq!(written, Ok(()));
                    assert_eq!(out, k.as_str());
                }
                Err(e) => {
                    assert_eq!(written, Err(e));
                    assert!(out.is_empty());
                }
            }
        }
        Plain::write_key(&Doc { rv: "1" }, &mut out).unwrap();
        assert_eq!(out, "doc");
    }

    #[test]
    fn the_default_same_resource_version_compares_the_versions() {
        let same = <ObjectAccessor as Meta<Doc>>::same_resource_version;
        assert!(same(&Doc { rv: "3" }, &Doc { rv: "3" }));
        assert!(!same(&Doc { rv: "3" }, &Doc { rv: "4" }));
        assert!(same(&Doc { rv: "" }, &Doc { rv: "" }));
        assert!(!same(&Doc { rv: "" }, &Doc { rv: "1" }));
    }
}
