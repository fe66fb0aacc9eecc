//! `CacheReader`: the cheap, read-only handle on an informer's cache.

use kcache_core::{KeyError, Meta, ObjectKey, ResourceVersion};
use kcache_indexer::{IndexError, Indexer, UnknownIndexError};
use std::fmt;
use std::sync::Arc;

/// A read-only handle on an informer's indexed cache (client-go's `GetIndexer()` plus the
/// listers). Cheap to clone; reads see the cache as the informer keeps it.
///
/// It does not allow writes: the cache changes only through the informer, so that every handler
/// hears of every change.
pub struct CacheReader<T, M> {
    pub(crate) indexer: Arc<Indexer<T, M>>,
}

impl<T, M> Clone for CacheReader<T, M> {
    fn clone(&self) -> Self {
        Self {
            indexer: self.indexer.clone(),
        }
    }
}

impl<T, M> fmt::Debug for CacheReader<T, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CacheReader").field(&self.indexer).finish()
    }
}

impl<T, M: Meta<T>> CacheReader<T, M> {
    /// The object stored under `key`.
    pub fn get_by_key<Q: AsRef<str> + ?Sized>(&self, key: &Q) -> Option<Arc<T>> {
        self.indexer.get_by_key(key)
    }

    /// The stored object with the same key as `obj`.
    ///
    /// # Errors
    /// The accessor's [`KeyError`].
    pub fn get(&self, obj: &T) -> Result<Option<Arc<T>>, KeyError> {
        self.indexer.get(obj)
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<T>> {
        self.indexer.list()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.indexer.list_keys()
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.indexer.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.indexer.is_empty()
    }

    /// Every object for which `pred` is true (client-go's `ListAll`).
    #[doc(alias = "ListAll")]
    pub fn list_all(&self, pred: impl FnMut(&T) -> bool) -> Vec<Arc<T>> {
        self.indexer.list_all(pred)
    }

    /// The objects of `namespace` for which `pred` is true; `""` means all (client-go's
    /// `ListAllByNamespace`).
    #[doc(alias = "ListAllByNamespace")]
    pub fn list_by_namespace(&self, namespace: &str, pred: impl FnMut(&T) -> bool) -> Vec<Arc<T>> {
        self.indexer.list_by_namespace(namespace, pred)
    }

    /// See [`Indexer::index`].
    ///
    /// # Errors
    /// As [`Indexer::index`].
    pub fn index(&self, name: &str, obj: &T) -> Result<Vec<Arc<T>>, IndexError> {
        self.indexer.index(name, obj)
    }

    /// See [`Indexer::index_keys`] (sorted keys).
    ///
    /// # Errors
    /// [`UnknownIndexError`] for an unknown index.
    pub fn index_keys(&self, name: &str, value: &str) -> Result<Vec<ObjectKey>, UnknownIndexError> {
        self.indexer.index_keys(name, value)
    }

    /// See [`Indexer::by_index`].
    ///
    /// # Errors
    /// [`UnknownIndexError`] for an unknown index.
    pub fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<T>>, UnknownIndexError> {
        self.indexer.by_index(name, value)
    }

    /// See [`Indexer::list_index_func_values`].
    pub fn list_index_func_values(&self, name: &str) -> Vec<Arc<str>> {
        self.indexer.list_index_func_values(name)
    }

    /// The installed index names.
    pub fn indexer_names(&self) -> Vec<String> {
        self.indexer.indexer_names()
    }

    /// The resource version of the last write the cache applied.
    pub fn last_store_sync_resource_version(&self) -> ResourceVersion {
        self.indexer.last_store_sync_resource_version()
    }
}
