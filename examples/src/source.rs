//! Where the world's objects live: the [`Source`] trait, and its implementation for kcache's
//! embedded in-memory source (the etcd one is in `etcd.rs`, behind the `etcd` feature).
//!
//! The controller, the user and the convergence check only speak this trait, so the same code
//! runs over either backend.

use kcache_core::{Meta, MetaMut, ObjectAccessor, ObjectKey, ResourceVersion};
use kcache_memory::{MemoryError, MemorySource};
use kcache_reflector::ListWatcher;
use std::future::Future;
use std::sync::Arc;

/// One kind of object in a source of truth: what the informer lists and watches, and the writes
/// and reads of the user, the controller and the final check. Errors are messages for the report.
pub(crate) trait Source<T>: Clone + Send + Sync + 'static {
    /// What an informer lists and watches.
    type ListWatcher: ListWatcher<T>;

    /// A list-watcher for an informer.
    fn list_watcher(&self) -> Self::ListWatcher;

    /// Creates `obj`; returns the write's resource version.
    fn create(&self, obj: T) -> impl Future<Output = Result<ResourceVersion, String>> + Send;

    /// Replaces the object with `obj`'s key (if its version is still `obj`'s, where the source
    /// checks); returns the write's resource version.
    fn update(&self, obj: T) -> impl Future<Output = Result<ResourceVersion, String>> + Send;

    /// Deletes the object under `key`; returns the deletion's resource version, or `None` when
    /// there was no such object.
    fn delete(
        &self,
        key: &ObjectKey,
    ) -> impl Future<Output = Result<Option<ResourceVersion>, String>> + Send;

    /// The object under `key` now, if any.
    fn get(&self, key: &ObjectKey) -> impl Future<Output = Result<Option<Arc<T>>, String>> + Send;

    /// Every object now (a consistent read).
    fn list(&self) -> impl Future<Output = Result<Vec<Arc<T>>, String>> + Send;
}

impl<T> Source<T> for MemorySource<T>
where
    T: Clone + Send + Sync + 'static,
    ObjectAccessor: MetaMut<T>,
{
    type ListWatcher = MemorySource<T>;

    fn list_watcher(&self) -> Self::ListWatcher {
        self.clone()
    }

    async fn create(&self, obj: T) -> Result<ResourceVersion, String> {
        MemorySource::create(self, obj)
            .map(|o| ObjectAccessor::resource_version(&*o))
            .map_err(|e| e.to_string())
    }

    async fn update(&self, obj: T) -> Result<ResourceVersion, String> {
        MemorySource::update(self, obj)
            .map(|o| ObjectAccessor::resource_version(&*o))
            .map_err(|e| e.to_string())
    }

    async fn delete(&self, key: &ObjectKey) -> Result<Option<ResourceVersion>, String> {
        match MemorySource::delete(self, key.as_str()) {
            Ok(last) => Ok(Some(ObjectAccessor::resource_version(&*last))),
            Err(MemoryError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn get(&self, key: &ObjectKey) -> Result<Option<Arc<T>>, String> {
        Ok(MemorySource::get(self, key.as_str()))
    }

    async fn list(&self) -> Result<Vec<Arc<T>>, String> {
        Ok(self.list_all())
    }
}
