//! The traits between a reflector and the stores it feeds.

use crate::{ObjectKey, ResourceVersion};
use std::sync::Arc;

/// What a reflector writes into: the sink side of client-go's `ReflectorStore`.
///
/// `DeltaFifo` and the indexer's `Store` implement it. Objects travel as `Arc<T>`: the reflector
/// allocates each object once and every store, FIFO and handler shares that allocation. All methods
/// take `&self`; implementations are internally synchronized.
pub trait ReflectorStore<T>: Send + Sync {
    /// The store's error (a key accessor failure, an index function failure, a closed FIFO, …).
    type Error: std::error::Error + Send + Sync + 'static;

    /// An object was created.
    ///
    /// # Errors
    /// The store's error; the store is left unchanged.
    fn add(&self, obj: Arc<T>) -> Result<(), Self::Error>;

    /// An object was modified.
    ///
    /// # Errors
    /// The store's error; the store is left unchanged.
    fn update(&self, obj: Arc<T>) -> Result<(), Self::Error>;

    /// An object was deleted (`obj` is its last known state).
    ///
    /// # Errors
    /// The store's error; the store is left unchanged.
    fn delete(&self, obj: Arc<T>) -> Result<(), Self::Error>;

    /// The complete current state, as of resource version `rv` (a list or relist): everything
    /// not in `objects` is gone.
    ///
    /// # Errors
    /// The store's error.
    fn replace(&self, objects: Vec<Arc<T>>, rv: ResourceVersion) -> Result<(), Self::Error>;

    /// Whether `error`, returned by [`replace`](Self::replace), still left the store holding
    /// every listed object it could take, as of the list's version (it refused some, say on an
    /// index function's failure). The reflector then reports the error and goes on to watch:
    /// relisting would only fail the same way, keeping the whole store stale. The default: no
    /// (the store kept its old content, and the reflector relists after a backoff).
    fn replace_applied(&self, error: &Self::Error) -> bool {
        let _ = error;
        false
    }

    /// The periodic resync tick.
    ///
    /// # Errors
    /// The store's error.
    fn resync(&self) -> Result<(), Self::Error>;

    /// The source has reached `rv` with no change to report (a watch bookmark). The default
    /// ignores it.
    ///
    /// # Errors
    /// The store's error.
    fn bookmark(&self, rv: ResourceVersion) -> Result<(), Self::Error> {
        let _ = rv;
        Ok(())
    }
}

/// A read view of the objects a consumer already knows (client-go's `KeyListerGetter`): the
/// informer's indexer, as the `DeltaFifo` sees it to detect deletions missed during a relist.
pub trait KnownObjects<T>: Send + Sync {
    /// Every known key.
    fn list_keys(&self) -> Vec<ObjectKey>;
    /// The known object under `key`, if any.
    fn get_by_key(&self, key: &ObjectKey) -> Option<Arc<T>>;
}

impl<T, K: KnownObjects<T> + ?Sized> KnownObjects<T> for Arc<K> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        (**self).list_keys()
    }
    fn get_by_key(&self, key: &ObjectKey) -> Option<Arc<T>> {
        (**self).get_by_key(key)
    }
}
