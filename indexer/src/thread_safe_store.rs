//! `ThreadSafeStore`: keyed objects plus their secondary indexes, behind one lock.

mod invariants;
#[cfg(test)]
mod tests;

use crate::error::{AddIndexersError, IndexError, IndexFuncError, UnknownIndexError};
use crate::index::{Hasher, Index, Plan};
use crate::indexers::Indexers;
use crate::sync::{Arc, RwLock, RwLockReadGuard};
use kcache_core::{ObjectKey, ResourceVersion};
use std::collections::HashMap;
use std::fmt;

/// A concurrent map from [`ObjectKey`] to `Arc<T>` with multi-valued secondary indexes
/// (client-go's `ThreadSafeStore`).
///
/// Objects are stored as the `Arc` you hand in and handed back as clones of it: never copied.
/// Treat them as immutable; the indexes are recomputed only on writes.
///
/// # Consistency
/// Items, indexes and the last resource version live under one read-write lock: every call is
/// atomic, and no reader ever sees an object without its index entries or the other way round.
/// Reads share the lock; writes (and [`replace`](Self::replace), which rebuilds every index)
/// take it exclusively. There is no snapshot across calls.
///
/// # Index functions
/// A write first computes every index value of the new object; if an index function fails,
/// the write returns an [`IndexFuncError`] and changes nothing (client-go panics). Old entries
/// are found by calling the index function on the *stored* object, so a delete cleans up after
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
    pub(crate) items: HashMap<ObjectKey, Arc<T>, Hasher>,
    pub(crate) indexes: Vec<Index<T>>,
    rv: ResourceVersion,
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

    fn objects<'a>(&'a self, keys: impl Iterator<Item = &'a ObjectKey>) -> Vec<Arc<T>> {
        keys.filter_map(|k| self.items.get(k).cloned()).collect()
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
                items: HashMap::default(),
                indexes,
                rv: ResourceVersion::default(),
            }),
        }
    }

    /// Stores `obj` under `key` (the same as [`update`](Self::update)).
    ///
    /// # Errors
    /// An [`IndexFuncError`] if an index function fails on `obj`; the store is unchanged.
    pub fn add(&self, key: ObjectKey, obj: Arc<T>) -> Result<(), IndexFuncError> {
        self.write(key, obj, None)
    }

    /// Stores `obj` under `key`, replacing and re-indexing any object stored there.
    ///
    /// # Errors
    /// An [`IndexFuncError`] if an index function fails on `obj`; the store is unchanged.
    pub fn update(&self, key: ObjectKey, obj: Arc<T>) -> Result<(), IndexFuncError> {
        self.write(key, obj, None)
    }

    pub(crate) fn write(
        &self,
        key: ObjectKey,
        obj: Arc<T>,
        rv: Option<ResourceVersion>,
    ) -> Result<(), IndexFuncError> {
        let mut guard = self.state.write();
        let state = &mut *guard;
        let old = state.items.get(&key);
        let plans = state
            .indexes
            .iter()
            .map(|ix| ix.plan(&key, old.map(|o| &**o), Some(&*obj)))
            .collect::<Result<Vec<Plan>, _>>()?;
        for (ix, plan) in state.indexes.iter_mut().zip(plans) {
            ix.apply(&key, plan);
        }
        state.items.insert(key, obj);
        if let Some(rv) = rv {
            state.rv = rv;
        }
        Ok(())
    }

    /// Removes the object under `key` and its index entries (computed from the stored object),
    /// returning it. A missing key is not an error.
    pub fn delete<Q: AsRef<str> + ?Sized>(&self, key: &Q) -> Option<Arc<T>> {
        self.remove(key.as_ref(), None)
    }

    pub(crate) fn remove(&self, key: &str, rv: Option<ResourceVersion>) -> Option<Arc<T>> {
        let mut guard = self.state.write();
        let state = &mut *guard;
        let removed = state.items.remove_entry(key);
        if let Some((key, old)) = &removed {
            for ix in &mut state.indexes {
                // Never fails: there is no new object, and a failure on the old one plans a scan.
                if let Ok(plan) = ix.plan(key, Some(&**old), None) {
                    ix.apply(key, plan);
                }
            }
        }
        if let Some(rv) = rv {
            state.rv = rv;
        }
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
        let items: HashMap<ObjectKey, Arc<T>, Hasher> = items.into_iter().collect();
        let mut guard = self.state.write();
        let state = &mut *guard;
        let rebuilt = state
            .indexes
            .iter()
            .map(|ix| ix.build(items.iter()))
            .collect::<Result<Vec<_>, _>>()?;
        for (ix, values) in state.indexes.iter_mut().zip(rebuilt) {
            ix.set_values(values);
        }
        let old = std::mem::replace(&mut state.items, items);
        state.rv = rv;
        drop(guard);
        drop(old); // the old map (and maybe the last handles to old objects) freed unlocked
        Ok(())
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
        self.state.read().items.get(key.as_ref()).cloned()
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key<Q: AsRef<str> + ?Sized>(&self, key: &Q) -> bool {
        self.state.read().items.contains_key(key.as_ref())
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<T>> {
        self.state.read().items.values().cloned().collect()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.state.read().items.keys().cloned().collect()
    }

    /// How many objects are stored.
    pub fn len(&self) -> usize {
        self.state.read().items.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.state.read().items.is_empty()
    }

    /// The objects sharing at least one value with `obj` in index `name`, each once, in key order.
    ///
    /// # Errors
    /// [`IndexError::UnknownIndex`] for an unknown index; [`IndexError::IndexFunc`] if the index
    /// function fails on `obj`.
    pub fn index(&self, name: &str, obj: &T) -> Result<Vec<Arc<T>>, IndexError> {
        let state = self.state.read();
        let ix = state.index(name)?;
        let values = ix.compute(obj, None)?;
        let mut keys: Vec<&ObjectKey> = values
            .iter()
            .filter_map(|v| ix.keys(v))
            .flat_map(|set| set.iter())
            .collect();
        keys.sort_unstable();
        keys.dedup();
        Ok(state.objects(keys.into_iter()))
    }

    /// The keys indexed under `value` in index `name`, sorted (empty for an unknown value).
    ///
    /// # Errors
    /// [`UnknownIndexError`] for an unknown index.
    pub fn index_keys(&self, name: &str, value: &str) -> Result<Vec<ObjectKey>, UnknownIndexError> {
        let state = self.state.read();
        let mut keys: Vec<ObjectKey> = state
            .index(name)?
            .keys(value)
            .into_iter()
            .flat_map(|s| s.iter())
            .cloned()
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
        let keys = state
            .index(name)?
            .keys(value)
            .into_iter()
            .flat_map(|s| s.iter());
        Ok(state.objects(keys))
    }

    /// Every value that currently has objects in index `name`, sorted; empty for an unknown index
    /// (as in client-go).
    pub fn list_index_func_values(&self, name: &str) -> Vec<Arc<str>> {
        let state = self.state.read();
        let mut values: Vec<Arc<str>> = match state.index(name) {
            Ok(ix) => ix.values().cloned().collect(),
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
        for (name, func) in indexers.into_inner() {
            let mut ix = Index::new(name, func);
            let values = ix.build(state.items.iter())?;
            ix.set_values(values);
            built.push(ix);
        }
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
