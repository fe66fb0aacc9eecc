//! `Indexer`: a [`ThreadSafeStore`] that computes keys with a [`Meta`] accessor.

use crate::error::{AddIndexersError, IndexError, StoreError, UnknownIndexError};
use crate::indexers::Indexers;
use crate::sync::Arc;
use crate::thread_safe_store::{SwapOutcome, ThreadSafeStore};
use kcache_core::ResourceVersion;
use kcache_core::{
    KeyError, KeyText, KnownObjects, Meta, ObjectAccessor, ObjectKey, ReflectorStore,
};
use std::any::TypeId;
use std::fmt;
use std::marker::PhantomData;

/// An indexed object cache keyed by the accessor `M` (client-go's `cache.NewIndexer` /
/// `cache.NewStore` with `MetaNamespaceKeyFunc`).
///
/// It is what an informer keeps its objects in: a reflector writes into it through
/// [`ReflectorStore`], a `DeltaFifo` reads it through [`KnownObjects`], and controllers read it
/// through the listers ([`list_all`](Self::list_all), [`list_by_namespace`](Self::list_by_namespace))
/// and the index queries. Every write records the written object's resource version as the
/// store's [`last_store_sync_resource_version`](Self::last_store_sync_resource_version).
///
/// All the consistency rules of [`ThreadSafeStore`] apply: items and indexes change together,
/// a failing key accessor or index function changes nothing and is returned as a
/// [`StoreError`].
///
/// An `Indexer` is a handle: clones share one store (as copies of a client-go `cache.Indexer`
/// do). Hand a clone to a `Reflector` as its store and query through another.
///
/// # Examples
/// ```
/// use kcache_core::{Object, ResourceVersion};
/// use kcache_indexer::{Indexer, Indexers};
/// use std::sync::Arc;
///
/// struct Svc { ns: String, name: String, rv: u64, app: String }
/// impl Object for Svc {
///     fn namespace(&self) -> Option<&str> { Some(&self.ns) }
///     fn name(&self) -> &str { &self.name }
///     fn resource_version(&self) -> ResourceVersion { self.rv.into() }
/// }
///
/// let svcs: Indexer<Svc> =
///     Indexer::with_indexers(Indexers::new().with("by-app", |s: &Svc| Ok(vec![s.app.clone()])));
/// let web = Arc::new(Svc { ns: "prod".into(), name: "web".into(), rv: 7, app: "shop".into() });
/// svcs.add(web.clone())?;
///
/// assert!(Arc::ptr_eq(&svcs.get_by_key("prod/web").unwrap(), &web)); // shared, not copied
/// assert_eq!(svcs.by_index("by-app", "shop")?.len(), 1);
/// assert_eq!(svcs.last_store_sync_resource_version().as_str(), "7");
///
/// let writer = svcs.clone(); // the same store, as a reflector would hold it
/// writer.delete(&web)?;
/// assert!(svcs.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "Store")]
#[doc(alias = "cache")]
#[doc(alias = "NewIndexer")]
#[doc(alias = "NewStore")]
pub struct Indexer<T, M = ObjectAccessor> {
    store: Arc<ThreadSafeStore<T>>,
    accessor: PhantomData<fn() -> M>,
}

impl<T, M> Clone for Indexer<T, M> {
    /// Another handle on the same store.
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            accessor: PhantomData,
        }
    }
}

impl<T, M: Meta<T>> Indexer<T, M> {
    /// An empty indexer without indexes.
    pub fn new() -> Self {
        Self::with_indexers(Indexers::new())
    }

    /// An empty indexer maintaining `indexers`.
    pub fn with_indexers(indexers: Indexers<T>) -> Self {
        Self {
            store: Arc::new(ThreadSafeStore::with_indexers(indexers)),
            accessor: PhantomData,
        }
    }

    /// The underlying keyed store.
    pub fn thread_safe_store(&self) -> &ThreadSafeStore<T> {
        &self.store
    }

    /// The key of `obj`, as this indexer computes it.
    ///
    /// # Errors
    /// The accessor's [`KeyError`].
    pub fn key_of(&self, obj: &T) -> Result<ObjectKey, KeyError> {
        M::key(obj)
    }

    fn recorded_rv(obj: &T) -> Option<ResourceVersion> {
        Some(M::resource_version(obj)).filter(|rv| !rv.is_empty())
    }

    /// Stores `obj` under its key (the same as [`update`](Self::update)).
    ///
    /// # Errors
    /// [`StoreError::Key`] or [`StoreError::IndexFunc`]; the store is unchanged.
    pub fn add(&self, obj: Arc<T>) -> Result<(), StoreError> {
        self.update(obj)
    }

    /// Stores `obj` under its key, replacing and re-indexing what was there, and records its
    /// resource version (if it has one).
    ///
    /// # Errors
    /// [`StoreError::Key`] or [`StoreError::IndexFunc`]; the store is unchanged.
    pub fn update(&self, obj: Arc<T>) -> Result<(), StoreError> {
        let key = M::key(&obj)?;
        self.insert_with_key(key, obj).map(drop)
    }

    /// [`update`](Self::update) with the key already computed, for a caller that has it (an
    /// informer applying a delta): `key` must be the accessor's key of `obj`, or later lookups by
    /// the object's own key will not find it.
    ///
    /// # Errors
    /// [`StoreError::IndexFunc`]; the store is unchanged.
    pub fn update_with_key(&self, key: ObjectKey, obj: Arc<T>) -> Result<(), StoreError> {
        self.insert_with_key(key, obj).map(drop)
    }

    /// [`update_with_key`](Self::update_with_key) that returns the object it replaced, if any:
    /// one lookup and one lock where a [`get_by_key`](Self::get_by_key) then an update take two
    /// (an informer deciding between an add and an update).
    ///
    /// # Errors
    /// [`StoreError::IndexFunc`]; the store is unchanged.
    ///
    /// # Examples
    /// ```
    /// # use kcache_core::{Object, ObjectKey, ResourceVersion};
    /// # use kcache_indexer::Indexer;
    /// # use std::sync::Arc;
    /// # struct Pod(&'static str, u32);
    /// # impl Object for Pod {
    /// #     fn namespace(&self) -> Option<&str> { Some("default") }
    /// #     fn name(&self) -> &str { self.0 }
    /// #     fn resource_version(&self) -> ResourceVersion { self.1.to_string().into() }
    /// # }
    /// let cache: Indexer<Pod> = Indexer::new();
    /// let key = ObjectKey::new("default/web")?;
    /// assert!(cache.insert_with_key(key.clone(), Arc::new(Pod("web", 1)))?.is_none());
    /// let old = cache.insert_with_key(key, Arc::new(Pod("web", 2)))?;
    /// assert_eq!(old.map(|p| p.1), Some(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn insert_with_key(
        &self,
        key: ObjectKey,
        obj: Arc<T>,
    ) -> Result<Option<Arc<T>>, StoreError> {
        let rv = Self::recorded_rv(&obj);
        Ok(self.store.write(key, obj, rv, Some(TypeId::of::<M>()))?)
    }

    /// [`insert_with_key`](Self::insert_with_key) with the key as checked text (inline when
    /// short): no key allocation when `key` is already stored, which is the common case of an
    /// update. `key` must be the accessor's key of `obj`.
    ///
    /// # Errors
    /// [`StoreError::IndexFunc`]; the store is unchanged.
    ///
    /// # Examples
    /// ```
    /// # use kcache_core::{KeyText, Object, ResourceVersion};
    /// # use kcache_indexer::Indexer;
    /// # use std::sync::Arc;
    /// # struct Pod(&'static str, u32);
    /// # impl Object for Pod {
    /// #     fn namespace(&self) -> Option<&str> { Some("default") }
    /// #     fn name(&self) -> &str { self.0 }
    /// #     fn resource_version(&self) -> ResourceVersion { self.1.to_string().into() }
    /// # }
    /// let cache: Indexer<Pod> = Indexer::new();
    /// let key = KeyText::new("default/web")?;
    /// assert!(cache.insert_with_key_text(&key, Arc::new(Pod("web", 1)))?.is_none());
    /// let old = cache.insert_with_key_text(&key, Arc::new(Pod("web", 2)))?;
    /// assert_eq!(old.map(|p| p.1), Some(1));
    /// assert_eq!(cache.get_by_key("default/web").map(|p| p.1), Some(2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn insert_with_key_text(
        &self,
        key: &KeyText,
        obj: Arc<T>,
    ) -> Result<Option<Arc<T>>, StoreError> {
        let rv = Self::recorded_rv(&obj);
        Ok(self
            .store
            .write_str(key.as_str(), obj, rv, Some(TypeId::of::<M>()))?)
    }

    /// [`insert_with_key_text`](Self::insert_with_key_text) recording `rv` (if not empty) as
    /// the version of the write, for a caller that already read it (the version of the event
    /// that carried `obj`): the object's version is not read again.
    ///
    /// # Errors
    /// As [`insert_with_key_text`](Self::insert_with_key_text).
    pub fn insert_with_key_text_at(
        &self,
        key: &KeyText,
        obj: Arc<T>,
        rv: ResourceVersion,
    ) -> Result<Option<Arc<T>>, StoreError> {
        let rv = Some(rv).filter(|rv| !rv.is_empty());
        Ok(self
            .store
            .write_str(key.as_str(), obj, rv, Some(TypeId::of::<M>()))?)
    }

    /// Removes the object stored under `obj`'s key, with the index entries of the *stored*
    /// object, and records `obj`'s resource version (if it has one). Returns the removed object.
    ///
    /// # Errors
    /// The accessor's [`KeyError`]; the store is unchanged.
    pub fn delete(&self, obj: &T) -> Result<Option<Arc<T>>, KeyError> {
        let key = M::key(obj)?;
        Ok(self.store.remove(key.as_str(), Self::recorded_rv(obj)))
    }

    /// Replaces the whole content with `objects` as of list resource version `rv`, rebuilding
    /// every index. A later object with the same key wins.
    ///
    /// # Errors
    /// [`StoreError::Key`] if any object has no key, [`StoreError::IndexFunc`] if an index
    /// function fails on one; the store is then unchanged. (To store the rest anyway, use
    /// [`replace_skipping_refused`](Self::replace_skipping_refused).)
    pub fn replace(&self, objects: Vec<Arc<T>>, rv: ResourceVersion) -> Result<(), StoreError> {
        let items = objects
            .into_iter()
            .map(|obj| M::key(&obj).map(|key| (key, obj)))
            .collect::<Result<Vec<_>, _>>()?;
        self.store
            .replace_with(items, rv, Some(TypeId::of::<M>()), false)?;
        Ok(())
    }

    /// [`replace`](Self::replace), but an object whose key or index function fails is left
    /// out instead of failing the whole replace: every other object is stored, as of `rv`.
    /// The indexer's [`ReflectorStore`] implementation replaces this way, so a single bad object
    /// does not keep a reflector's whole cache stale (a relist would fail the same way).
    ///
    /// # Errors
    /// [`StoreError::Refused`] with one error per left-out object; the rest *was* stored.
    /// [`StoreError::IndexFunc`] if an index function failed during the rebuild but on no
    /// object when asked again (a function that is not deterministic); the store is then
    /// unchanged.
    ///
    /// # Examples
    /// ```
    /// # use kcache_core::{Object, ResourceVersion};
    /// # use kcache_indexer::{Indexer, Indexers, StoreError};
    /// # use std::sync::Arc;
    /// # struct Pod(&'static str, &'static str);
    /// # impl Object for Pod {
    /// #     fn namespace(&self) -> Option<&str> { Some("default") }
    /// #     fn name(&self) -> &str { self.0 }
    /// #     fn resource_version(&self) -> ResourceVersion { ResourceVersion::default() }
    /// # }
    /// let cache: Indexer<Pod> = Indexer::new();
    /// cache.add_indexers(Indexers::new().with("app", |p: &Pod| match p.1 {
    ///     "" => Err("no app label".into()),
    ///     app => Ok(vec![app.to_string()]),
    /// }))?;
    /// let listed = vec![Arc::new(Pod("a", "web")), Arc::new(Pod("b", ""))];
    /// let err = cache.replace_skipping_refused(listed, "7".into()).unwrap_err();
    /// assert!(matches!(err, StoreError::Refused { ref refused } if refused.len() == 1));
    /// assert!(cache.get_by_key("default/a").is_some());
    /// assert!(cache.get_by_key("default/b").is_none());
    /// assert_eq!(cache.last_store_sync_resource_version().as_str(), "7");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn replace_skipping_refused(
        &self,
        objects: Vec<Arc<T>>,
        rv: ResourceVersion,
    ) -> Result<(), StoreError> {
        let mut refused = Vec::new();
        let items: Vec<_> = objects
            .into_iter()
            .filter_map(|obj| match M::key(&obj) {
                Ok(key) => Some((key, obj)),
                Err(e) => {
                    refused.push(StoreError::Key(e));
                    None
                }
            })
            .collect();
        let failed = self
            .store
            .replace_with(items, rv, Some(TypeId::of::<M>()), true)?;
        refused.extend(failed.into_iter().map(StoreError::IndexFunc));
        if refused.is_empty() {
            Ok(())
        } else {
            Err(StoreError::Refused { refused })
        }
    }

    /// Makes the cache exactly `objects` (keyed by the accessor, see
    /// [`insert_with_key_text`](Self::insert_with_key_text)) as of list resource version `rv`,
    /// in one step no reader can see half done, and in place: keys not listed are removed, a
    /// listed `Arc` that is the one already cached is left alone (indexes included), every
    /// other object is written and re-indexed. Unlike [`replace`](Self::replace), the indexes
    /// are not rebuilt and no second map is built, so a relist that changed little costs
    /// little. An object an index function fails on is left out (and what its key held is
    /// removed).
    ///
    /// Returns what the swap did: the removed objects, and per listed object whether it was
    /// added or what it replaced (what an informer tells its handlers).
    ///
    /// # Examples
    /// ```
    /// # use kcache_core::{KeyText, Object, ResourceVersion};
    /// # use kcache_indexer::{Indexer, Swapped};
    /// # use std::sync::Arc;
    /// # struct Pod(&'static str, u32);
    /// # impl Object for Pod {
    /// #     fn namespace(&self) -> Option<&str> { None }
    /// #     fn name(&self) -> &str { self.0 }
    /// #     fn resource_version(&self) -> ResourceVersion { self.1.to_string().into() }
    /// # }
    /// let cache: Indexer<Pod> = Indexer::new();
    /// let a = Arc::new(Pod("a", 1));
    /// cache.add(a.clone())?;
    /// cache.add(Arc::new(Pod("b", 2)))?;
    /// let listed = vec![(KeyText::new("a")?, a.clone()), (KeyText::new("c")?, Arc::new(Pod("c", 3)))];
    /// let outcome = cache.swap_in(&listed, "3".into());
    /// assert_eq!(outcome.deleted.len(), 1); // b
    /// assert!(matches!(&outcome.listed[0], Swapped::Updated(old) if Arc::ptr_eq(old, &a)));
    /// assert!(matches!(outcome.listed[1], Swapped::Added));
    /// assert_eq!(cache.list_keys().len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn swap_in(&self, objects: &[(KeyText, Arc<T>)], rv: ResourceVersion) -> SwapOutcome<T> {
        self.store.swap_in(objects, rv, Some(TypeId::of::<M>()))
    }

    /// The stored object with the same key as `obj` (client-go's `Get`).
    ///
    /// # Errors
    /// The accessor's [`KeyError`].
    pub fn get(&self, obj: &T) -> Result<Option<Arc<T>>, KeyError> {
        Ok(self.store.get(&M::key(obj)?))
    }

    /// The object stored under `key`.
    pub fn get_by_key<Q: AsRef<str> + ?Sized>(&self, key: &Q) -> Option<Arc<T>> {
        self.store.get(key)
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<T>> {
        self.store.list()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.store.list_keys()
    }

    /// How many objects are stored.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether the indexer is empty.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// See [`ThreadSafeStore::index`].
    ///
    /// # Errors
    /// As [`ThreadSafeStore::index`].
    pub fn index(&self, name: &str, obj: &T) -> Result<Vec<Arc<T>>, IndexError> {
        self.store.index(name, obj)
    }

    /// See [`ThreadSafeStore::index_keys`] (sorted keys).
    ///
    /// # Errors
    /// [`UnknownIndexError`] for an unknown index.
    pub fn index_keys(&self, name: &str, value: &str) -> Result<Vec<ObjectKey>, UnknownIndexError> {
        self.store.index_keys(name, value)
    }

    /// See [`ThreadSafeStore::by_index`].
    ///
    /// # Errors
    /// [`UnknownIndexError`] for an unknown index.
    pub fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<T>>, UnknownIndexError> {
        self.store.by_index(name, value)
    }

    /// See [`ThreadSafeStore::list_index_func_values`].
    pub fn list_index_func_values(&self, name: &str) -> Vec<Arc<str>> {
        self.store.list_index_func_values(name)
    }

    /// See [`ThreadSafeStore::indexer_names`].
    #[doc(alias = "GetIndexers")]
    pub fn indexer_names(&self) -> Vec<String> {
        self.store.indexer_names()
    }

    /// See [`ThreadSafeStore::add_indexers`] (all or nothing, indexes existing objects).
    ///
    /// # Errors
    /// As [`ThreadSafeStore::add_indexers`].
    pub fn add_indexers(&self, indexers: Indexers<T>) -> Result<(), AddIndexersError> {
        self.store.add_indexers(indexers)
    }

    /// Records a watch bookmark's resource version.
    pub fn bookmark(&self, rv: ResourceVersion) {
        self.store.bookmark(rv);
    }

    /// See [`ThreadSafeStore::last_store_sync_resource_version`].
    pub fn last_store_sync_resource_version(&self) -> ResourceVersion {
        self.store.last_store_sync_resource_version()
    }
}

impl<T, M: Meta<T>> Default for Indexer<T, M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, M> fmt::Debug for Indexer<T, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Indexer").field(&self.store).finish()
    }
}

impl<T: Send + Sync, M: Meta<T>> ReflectorStore<T> for Indexer<T, M> {
    type Error = StoreError;

    fn add(&self, obj: Arc<T>) -> Result<(), StoreError> {
        Indexer::add(self, obj)
    }

    fn update(&self, obj: Arc<T>) -> Result<(), StoreError> {
        Indexer::update(self, obj)
    }

    fn delete(&self, obj: Arc<T>) -> Result<(), StoreError> {
        Indexer::delete(self, &obj)?;
        Ok(())
    }

    /// [`replace_skipping_refused`](Indexer::replace_skipping_refused): objects the indexer
    /// cannot store are left out and reported ([`replace_applied`](Self::replace_applied)
    /// tells the reflector the rest was stored, so it goes on watching).
    fn replace(&self, objects: Vec<Arc<T>>, rv: ResourceVersion) -> Result<(), StoreError> {
        Indexer::replace_skipping_refused(self, objects, rv)
    }

    fn replace_applied(&self, error: &StoreError) -> bool {
        matches!(error, StoreError::Refused { .. })
    }

    /// A no-op, as in client-go: the store has nothing to resync.
    fn resync(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn bookmark(&self, rv: ResourceVersion) -> Result<(), StoreError> {
        Indexer::bookmark(self, rv);
        Ok(())
    }
}

impl<T: Send + Sync, M: Meta<T>> KnownObjects<T> for Indexer<T, M> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.store.list_keys()
    }

    fn get_by_key(&self, key: &ObjectKey) -> Option<Arc<T>> {
        self.store.get(key)
    }

    fn unlisted_keys(&self, listed: &dyn Fn(&str) -> bool) -> Vec<ObjectKey> {
        self.store.unlisted_keys(listed)
    }
}
