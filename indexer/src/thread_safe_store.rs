//! `ThreadSafeStore`: keyed objects plus their secondary indexes, behind one lock.

mod consistent;
mod invariants;
mod items;
mod slot_key;
mod swap;
#[cfg(test)]
mod tests;

use crate::error::{AddIndexersError, IndexError, IndexFuncError, UnknownIndexError};
use crate::id::Id;
use crate::index::{Index, KeySet, Scratch};
use crate::indexers::Indexers;
use crate::sync::{Arc, RwLock, RwLockReadGuard};
use kcache_core::{ObjectKey, ResourceVersion};
use std::any::TypeId;
use std::fmt;

pub(crate) use items::{Items, Slot};
pub(crate) use slot_key::{key_namespace, SlotKey};
pub use swap::{SwapOutcome, Swapped};

/// A concurrent map from [`ObjectKey`] to `Arc<T>` with multi-valued secondary indexes
/// (client-go's `ThreadSafeStore`).
///
/// Objects are stored as the `Arc` you hand in and handed back as clones of it: never copied.
/// Treat them as immutable; the indexes are recomputed only on writes. Keys are not: the store
/// copies a new key's text (keys of up to 22 bytes into the object's slot, longer ones into a
/// boxed `str`) and drops the [`ObjectKey`] it was given, which saves ~30 bytes an object.
///
/// # Consistency
/// Items, indexes and the last resource version live under one read-write lock: every call is
/// atomic, and no reader ever sees an object without its index entries or the other way round.
/// Reads share the lock; writes (and [`replace`](Self::replace), which rebuilds every index)
/// take it exclusively. There is no snapshot across calls.
///
/// # Index functions
/// A write first computes every index value of the new object; if an index function fails,
/// the write returns an [`IndexFuncError`] and changes nothing (client-go panics). The values an
/// object was indexed under are remembered, so replacing or deleting it removes exactly those
/// entries without calling any index function on the stored object: a delete cleans up after
/// what was stored, whatever object the caller holds. Index functions run under the write lock:
/// they must not call back into the store.
///
/// # Examples
/// ```
/// use kcache_core::{ObjectKey, ResourceVersion};
/// use kcache_indexer::{Indexers, ThreadSafeStore};
/// use std::sync::Arc;
///
/// let store = ThreadSafeStore::with_indexers(
///     Indexers::new().with("by-letter", |s: &String| Ok(s.chars().map(String::from).collect())),
/// );
/// store.add(ObjectKey::new("a")?, Arc::new("xy".to_string()))?;
/// store.add(ObjectKey::new("b")?, Arc::new("y".to_string()))?;
///
/// assert_eq!(store.index_keys("by-letter", "y")?, [ObjectKey::new("a")?, ObjectKey::new("b")?]);
/// store.delete("a");
/// assert!(store.index_keys("by-letter", "x")?.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "threadSafeMap")]
pub struct ThreadSafeStore<T> {
    state: RwLock<State<T>>,
}

pub(crate) struct State<T> {
    pub(crate) items: Items<T>,
    pub(crate) indexes: Vec<Index<T>>,
    rv: ResourceVersion,
    scratch: Scratch,
}

impl<T> State<T> {
    fn index(&self, name: &str) -> Result<&Index<T>, UnknownIndexError> {
        self.indexes
            .iter()
            .find(|ix| ix.name() == name)
            .ok_or_else(|| UnknownIndexError {
                name: name.to_owned(),
            })
    }

    fn objects(&self, ids: impl Iterator<Item = Id>) -> Vec<Arc<T>> {
        ids.filter_map(|id| self.items.obj(id).cloned()).collect()
    }

    /// Stages every index's values for `obj` into the scratch buffers.
    fn stage(
        &mut self,
        key: &str,
        obj: &T,
        accessor: Option<TypeId>,
    ) -> Result<(), IndexFuncError> {
        let State {
            indexes, scratch, ..
        } = self;
        scratch.clear();
        for ix in indexes.iter() {
            if let Err(e) = ix
                .data
                .stage(ix.func(), obj, accessor.map(|a| (key, a)), scratch)
            {
                scratch.clear();
                return Err(ix.error(Some(key), e));
            }
        }
        Ok(())
    }

    /// Stores `obj` under `key` (a new key's text is copied into its slot), returning the object
    /// it replaces (to be dropped unlocked).
    fn write(
        &mut self,
        key: &str,
        obj: Arc<T>,
        accessor: Option<TypeId>,
    ) -> Result<Option<Arc<T>>, IndexFuncError> {
        let found = self.items.find(key);
        self.stage(key, &obj, accessor)?;
        let (id, old) = match found {
            Some(id) => (id, self.items.replace_obj(id, obj)),
            None => (self.items.insert_new(key, obj), None),
        };
        let State {
            indexes, scratch, ..
        } = self;
        for (i, ix) in indexes.iter_mut().enumerate() {
            ix.data.set(id, scratch, i);
        }
        scratch.clear();
        Ok(old)
    }
}

impl<T> ThreadSafeStore<T> {
    /// An empty store without indexes.
    #[doc(alias = "NewThreadSafeStore")]
    pub fn new() -> Self {
        Self::with_indexers(Indexers::new())
    }

    /// An empty store maintaining `indexers`.
    pub fn with_indexers(indexers: Indexers<T>) -> Self {
        let indexes = indexers
            .into_inner()
            .into_iter()
            .map(|(n, f)| Index::new(n, f))
            .collect();
        Self {
            state: RwLock::new(State {
                items: Items::new(),
                indexes,
                rv: ResourceVersion::default(),
                scratch: Scratch::default(),
            }),
        }
    }

    /// Stores `obj` under `key` (the same as [`update`](Self::update)).
    ///
    /// # Errors
    /// An [`IndexFuncError`] if an index function fails on `obj`; the store is unchanged.
    pub fn add(&self, key: ObjectKey, obj: Arc<T>) -> Result<(), IndexFuncError> {
        self.write(key, obj, None, None).map(drop)
    }

    /// Stores `obj` under `key`, replacing and re-indexing any object stored there.
    ///
    /// # Errors
    /// An [`IndexFuncError`] if an index function fails on `obj`; the store is unchanged.
    pub fn update(&self, key: ObjectKey, obj: Arc<T>) -> Result<(), IndexFuncError> {
        self.write(key, obj, None, None).map(drop)
    }

    /// Writes `obj` under `key`; `accessor` names the [`Meta`](kcache_core::Meta) that computed
    /// `key` from `obj`, if one did.
    pub(crate) fn write(
        &self,
        key: ObjectKey,
        obj: Arc<T>,
        rv: Option<ResourceVersion>,
        accessor: Option<TypeId>,
    ) -> Result<Option<Arc<T>>, IndexFuncError> {
        let old = self.write_str(key.as_str(), obj, rv, accessor);
        drop(key); // the store keeps a copy of the text: the caller's key is freed unlocked
        old
    }

    /// [`write`](Self::write) with the key as text.
    pub(crate) fn write_str(
        &self,
        key: &str,
        obj: Arc<T>,
        rv: Option<ResourceVersion>,
        accessor: Option<TypeId>,
    ) -> Result<Option<Arc<T>>, IndexFuncError> {
        let mut guard = self.state.write();
        let old = guard.write(key, obj, accessor)?;
        if let Some(rv) = rv {
            guard.rv = rv;
        }
        drop(guard);
        Ok(old)
    }

    /// Removes the object under `key` and its index entries (the ones recorded when it was
    /// stored), returning it. A missing key is not an error.
    pub fn delete<Q: AsRef<str> + ?Sized>(&self, key: &Q) -> Option<Arc<T>> {
        self.remove(key.as_ref(), None)
    }

    pub(crate) fn remove(&self, key: &str, rv: Option<ResourceVersion>) -> Option<Arc<T>> {
        let mut guard = self.state.write();
        let state = &mut *guard;
        let removed = state.items.find(key).and_then(|id| {
            for ix in &mut state.indexes {
                ix.data.clear(id);
            }
            state.items.remove(id)
        });
        if let Some(rv) = rv {
            state.rv = rv;
        }
        drop(guard);
        removed.map(|(_, obj)| obj)
    }

    /// Replaces the whole content with `items` (a later duplicate key wins) as of resource version
    /// `rv`, rebuilding every index from scratch.
    ///
    /// # Errors
    /// An [`IndexFuncError`] if an index function fails on any of the new objects; the store,
    /// including its resource version, is then unchanged.
    pub fn replace<I>(&self, items: I, rv: ResourceVersion) -> Result<(), IndexFuncError>
    where
        I: IntoIterator<Item = (ObjectKey, Arc<T>)>,
    {
        self.replace_with(items, rv, None, false).map(drop)
    }

    /// [`replace`](Self::replace). When `refuse` is set, objects an index function fails on
    /// are left out instead (the rest is stored) and their failures returned.
    pub(crate) fn replace_with<I>(
        &self,
        items: I,
        rv: ResourceVersion,
        accessor: Option<TypeId>,
        refuse: bool,
    ) -> Result<Vec<IndexFuncError>, IndexFuncError>
    where
        I: IntoIterator<Item = (ObjectKey, Arc<T>)>,
    {
        let mut new = Items::new();
        let mut replaced = Vec::new();
        for (key, obj) in items {
            match new.find(key.as_str()) {
                Some(id) => replaced.extend(new.replace_obj(id, obj)),
                None => {
                    new.insert_new(key.as_str(), obj);
                }
            }
        }
        let mut refused = Vec::new();
        let mut guard = self.state.write();
        let state = &mut *guard;
        let mut scratch = std::mem::take(&mut state.scratch);
        let rebuilt = loop {
            let rebuilt = state
                .indexes
                .iter()
                .map(|ix| {
                    let slots = new.iter().map(|(id, s)| (id, s.key.as_str(), s.obj));
                    ix.build(slots, accessor, &mut scratch)
                })
                .collect::<Result<Vec<_>, _>>();
            match rebuilt {
                Err(e) if refuse && refused.is_empty() => {
                    // The failure path only: find every object some index function fails on,
                    // leave them out, and build once more.
                    let failing: Vec<(Id, IndexFuncError)> = new
                        .iter()
                        .filter_map(|(id, s)| {
                            let key = Some(s.key.as_str());
                            let failed = state
                                .indexes
                                .iter()
                                .find_map(|ix| ix.compute(s.obj, key).err());
                            failed.map(|e| (id, e))
                        })
                        .collect();
                    if failing.is_empty() {
                        // The function failed only once: nothing to leave out.
                        break Err(e);
                    }
                    for (id, error) in failing {
                        replaced.extend(new.remove(id).map(|(_, obj)| obj));
                        refused.push(error);
                    }
                }
                other => break other,
            }
        };
        state.scratch = scratch;
        let rebuilt = match rebuilt {
            Ok(rebuilt) => rebuilt,
            Err(e) => {
                drop(guard);
                return Err(e);
            }
        };
        for (ix, data) in state.indexes.iter_mut().zip(rebuilt) {
            ix.data = data;
        }
        let old = std::mem::replace(&mut state.items, new);
        state.rv = rv;
        drop(guard);
        drop(old); // the old items (and maybe the last handles to old objects) freed unlocked
        drop(replaced);
        Ok(refused)
    }

    /// Records that the source reached `rv` with nothing to change (a watch bookmark).
    pub fn bookmark(&self, rv: ResourceVersion) {
        self.state.write().rv = rv;
    }

    /// The resource version the store last caught up with: the last replace's list version, the
    /// last bookmark, or the version of the last object written through an
    /// [`Indexer`](crate::Indexer) (client-go 1.36's `LastStoreSyncResourceVersion`). Empty until
    /// then.
    pub fn last_store_sync_resource_version(&self) -> ResourceVersion {
        self.state.read().rv.clone()
    }

    /// The object under `key`.
    pub fn get<Q: AsRef<str> + ?Sized>(&self, key: &Q) -> Option<Arc<T>> {
        let state = self.state.read();
        let id = state.items.find(key.as_ref())?;
        state.items.obj(id).cloned()
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key<Q: AsRef<str> + ?Sized>(&self, key: &Q) -> bool {
        self.state.read().items.find(key.as_ref()).is_some()
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<T>> {
        let state = self.state.read();
        let mut out = Vec::with_capacity(state.items.len());
        out.extend(state.items.objs().cloned());
        out
    }

    /// Every key, in no particular order.
    ///
    /// The store keeps a copy of each key's text (inline in the object's slot when short), not the
    /// [`ObjectKey`] it was given, so every returned key is built anew: an allocation per key.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        let state = self.state.read();
        let mut out = Vec::with_capacity(state.items.len());
        out.extend(state.items.iter().filter_map(|(_, s)| s.key.to_key()));
        out
    }

    /// The stored keys for which `listed` answers false (what a relist left out), under one
    /// read lock; a key is built only for those.
    pub(crate) fn unlisted_keys(&self, listed: &dyn Fn(&str) -> bool) -> Vec<ObjectKey> {
        let state = self.state.read();
        state
            .items
            .iter()
            .filter(|(_, s)| !listed(s.key.as_str()))
            .filter_map(|(_, s)| s.key.to_key())
            .collect()
    }

    /// How many objects are stored.
    pub fn len(&self) -> usize {
        self.state.read().items.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The objects sharing at least one value with `obj` in index `name`, each once, in key order.
    ///
    /// # Errors
    /// [`IndexError::UnknownIndex`] for an unknown index; [`IndexError::IndexFunc`] if the index
    /// function fails on `obj`.
    pub fn index(&self, name: &str, obj: &T) -> Result<Vec<Arc<T>>, IndexError> {
        let state = self.state.read();
        let ix = state.index(name)?;
        let mut ids: Vec<Id> = Vec::new();
        ix.func()
            .visit(obj, None, &mut |v| {
                ids.extend(ix.data.keys(v).into_iter().flat_map(KeySet::iter));
            })
            .map_err(|e| ix.error(None, e))?;
        let mut slots: Vec<Slot<'_, T>> =
            ids.iter().filter_map(|&id| state.items.slot(id)).collect();
        slots.sort_unstable_by(|a, b| a.key.cmp(b.key));
        slots.dedup_by(|a, b| a.key == b.key);
        Ok(slots.into_iter().map(|s| s.obj.clone()).collect())
    }

    /// The keys indexed under `value` in index `name`, sorted (empty for an unknown value).
    /// Like [`list_keys`](Self::list_keys), each key is built anew from the stored text.
    ///
    /// # Errors
    /// [`UnknownIndexError`] for an unknown index.
    pub fn index_keys(&self, name: &str, value: &str) -> Result<Vec<ObjectKey>, UnknownIndexError> {
        let state = self.state.read();
        let mut keys: Vec<ObjectKey> = state
            .index(name)?
            .data
            .keys(value)
            .into_iter()
            .flat_map(KeySet::iter)
            .filter_map(|id| state.items.slot(id)?.key.to_key())
            .collect();
        drop(state);
        keys.sort_unstable();
        Ok(keys)
    }

    /// The objects indexed under `value` in index `name`, in no particular order (empty for an
    /// unknown value).
    ///
    /// # Errors
    /// [`UnknownIndexError`] for an unknown index.
    pub fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<T>>, UnknownIndexError> {
        let state = self.state.read();
        let ids = state
            .index(name)?
            .data
            .keys(value)
            .into_iter()
            .flat_map(KeySet::iter);
        Ok(state.objects(ids))
    }

    /// Every value that currently has objects in index `name`, sorted; empty for an unknown index
    /// (as in client-go).
    pub fn list_index_func_values(&self, name: &str) -> Vec<Arc<str>> {
        let state = self.state.read();
        let mut values: Vec<Arc<str>> = match state.index(name) {
            Ok(ix) => ix.data.values().cloned().collect(),
            Err(_) => Vec::new(),
        };
        drop(state);
        values.sort_unstable();
        values
    }

    /// The names of the installed indexes, sorted.
    #[doc(alias = "GetIndexers")]
    pub fn indexer_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .state
            .read()
            .indexes
            .iter()
            .map(|ix| ix.name().to_owned())
            .collect();
        names.sort_unstable();
        names
    }

    /// Installs more indexes, indexing the objects already stored (client-go ≥ 1.30).
    ///
    /// All or nothing: if a name is already installed, or a new index function fails on a stored
    /// object, none of `indexers` is installed.
    ///
    /// # Errors
    /// [`AddIndexersError::Conflict`] naming every clashing index, or
    /// [`AddIndexersError::IndexFunc`].
    pub fn add_indexers(&self, indexers: Indexers<T>) -> Result<(), AddIndexersError> {
        let mut guard = self.state.write();
        let state = &mut *guard;
        let conflicts: Vec<String> = indexers
            .names()
            .filter(|n| state.indexes.iter().any(|ix| ix.name() == *n))
            .map(str::to_owned)
            .collect();
        if !conflicts.is_empty() {
            return Err(AddIndexersError::Conflict { names: conflicts });
        }
        let mut built = Vec::with_capacity(indexers.len());
        let mut scratch = std::mem::take(&mut state.scratch);
        for (name, func) in indexers.into_inner() {
            let mut ix = Index::new(name, func);
            let slots = state
                .items
                .iter()
                .map(|(id, s)| (id, s.key.as_str(), s.obj));
            match ix.build(slots, None, &mut scratch) {
                Ok(data) => ix.data = data,
                Err(e) => {
                    state.scratch = scratch;
                    return Err(e.into());
                }
            }
            built.push(ix);
        }
        state.scratch = scratch;
        state.indexes.extend(built);
        Ok(())
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, State<T>> {
        self.state.read()
    }
}

impl<T> Default for ThreadSafeStore<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for ThreadSafeStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.read();
        f.debug_struct("ThreadSafeStore")
            .field("len", &state.items.len())
            .field(
                "indexes",
                &state.indexes.iter().map(Index::name).collect::<Vec<_>>(),
            )
            .field("resource_version", &state.rv)
            .finish()
    }
}
