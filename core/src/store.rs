//! The traits between a reflector and the stores it feeds.

use crate::{ObjectKey, ResourceVersion};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What a reflector writes into: the sink side of client-go's `ReflectorStore`.
///
/// kcache-indexer's `Indexer` and kcache-deltafifo's `DeltaFifo` implement it, and so does
/// kcache-informer's writer in front of its `RealFifo` (with the page-by-page form,
/// [`PagedReplace`]). Objects travel as `Arc<T>`: the reflector
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

    /// The store's page-by-page form of [`replace`](Self::replace), if it has one: a reflector
    /// then hands each list page over as it arrives and waits until the store took it before it
    /// fetches the next, instead of gathering the whole list first (so a relist holds about a
    /// page of new objects beside the cache, not a whole second copy). The default: none (the
    /// reflector gathers the pages and calls `replace` once).
    fn paged(&self) -> Option<&dyn PagedReplace<T, Error = Self::Error>> {
        None
    }
}

/// A boxed, sendable future (what [`PagedReplace::page_taken`] returns).
pub type BoxFuture<'a, O> = Pin<Box<dyn Future<Output = O> + Send + 'a>>;

/// A list handed to a store page by page: [`ReflectorStore::replace`] spread over
/// [`begin_list`](Self::begin_list), one [`list_page`](Self::list_page) per page in order, and
/// [`finish_list`](Self::finish_list).
///
/// Together they mean what one `replace` of every page's objects means: `finish_list` infers the
/// deletions (keys the store holds that no page of this attempt listed) and records the list's
/// version. The difference a reader can see: a store may apply a page's objects before the list
/// is complete (its content is then part old state, part new, as while any change is being
/// applied), and the deletions only come at `finish_list`.
pub trait PagedReplace<T>: Send + Sync {
    /// The error of the [`ReflectorStore`] this belongs to.
    type Error;

    /// A list attempt starts: keys listed by an earlier attempt that did not finish (a failed
    /// list, an expired continue token) no longer count as listed.
    fn begin_list(&self);

    /// The next page of the current attempt. An object whose key an earlier object of the
    /// attempt had (in this page or an earlier one) replaces it: the last one wins. A paged list
    /// has no such repeats; the initial events of a streaming list, which arrive in pages too,
    /// may.
    ///
    /// # Errors
    /// The store's error. When [`ReflectorStore::replace_applied`] says so, the store took the
    /// page's other objects and the list goes on; otherwise the reflector abandons the attempt.
    fn list_page(&self, objects: Vec<Arc<T>>) -> Result<(), Self::Error>;

    /// Resolves once the store has taken the pages handed over so far far enough for the next
    /// one to be fetched (the reflector awaits it after every page): the back-pressure that
    /// keeps a relist's memory at about a page.
    fn page_taken(&self) -> BoxFuture<'_, ()>;

    /// The list is complete, as of resource version `rv`: every key not listed since
    /// [`begin_list`](Self::begin_list) is gone.
    ///
    /// # Errors
    /// The store's error.
    fn finish_list(&self, rv: ResourceVersion) -> Result<(), Self::Error>;

    /// A streaming list's initial event deleted `obj` (after the pages handed over so far):
    /// its key is no longer listed by this attempt, unless a later page lists it again.
    ///
    /// # Errors
    /// The store's error; the reflector abandons the attempt.
    fn list_delete(&self, obj: Arc<T>) -> Result<(), Self::Error>;

    /// The attempt failed after some pages: forget what it listed (what it applied stays; the
    /// next attempt's `finish_list` settles it).
    fn abandon_list(&self);
}

/// A read view of the objects a consumer already knows (client-go's `KeyListerGetter`): the
/// informer's indexer, as the `DeltaFifo` sees it to detect deletions missed during a relist.
pub trait KnownObjects<T>: Send + Sync {
    /// Every known key.
    fn list_keys(&self) -> Vec<ObjectKey>;
    /// The known object under `key`, if any.
    fn get_by_key(&self, key: &ObjectKey) -> Option<Arc<T>>;
    /// The known keys for which `listed` answers false: what a relist left out. The default
    /// filters [`list_keys`](Self::list_keys); a store can answer without building a key for
    /// each listed one (after a relist, usually all of them).
    fn unlisted_keys(&self, listed: &dyn Fn(&str) -> bool) -> Vec<ObjectKey> {
        let mut keys = self.list_keys();
        keys.retain(|k| !listed(k.as_str()));
        keys
    }
}

impl<T, K: KnownObjects<T> + ?Sized> KnownObjects<T> for Arc<K> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        (**self).list_keys()
    }
    fn get_by_key(&self, key: &ObjectKey) -> Option<Arc<T>> {
        (**self).get_by_key(key)
    }
    fn unlisted_keys(&self, listed: &dyn Fn(&str) -> bool) -> Vec<ObjectKey> {
        (**self).unlisted_keys(listed)
    }
}
