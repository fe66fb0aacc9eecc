//! `NaiveStore`: client-go's `threadSafeMap` as a first Rust version would write it.

use parking_lot::RwLock;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

/// An index function of a [`NaiveStore`]: the one value (or none) an object is indexed under.
pub type NaiveIndexFn<T> = fn(&T) -> Option<String>;

/// A `parking_lot` `RwLock` around a std `HashMap<String, Arc<T>>` (std hasher) plus, per index, a
/// hand-maintained `HashMap<String, HashSet<String>>` from index value to keys: client-go's
/// `threadSafeMap` with its `indices`, ported as is.
///
/// # Examples
/// ```
/// use kcache_benches::naive::NaiveStore;
/// use std::sync::Arc;
///
/// // (key, colour)
/// let store = NaiveStore::new(|o: &(String, String)| o.0.clone(), vec![
///     ("colour", |o: &(String, String)| Some(o.1.clone())),
/// ]);
/// store.add(Arc::new(("a".into(), "red".into())));
/// store.add(Arc::new(("b".into(), "red".into())));
/// store.update(Arc::new(("a".into(), "blue".into())));
/// assert_eq!(store.by_index("colour", "red").len(), 1);
/// assert_eq!(store.list().len(), 2);
/// ```
pub struct NaiveStore<T> {
    key: fn(&T) -> String,
    index_fns: Vec<(&'static str, NaiveIndexFn<T>)>,
    inner: RwLock<Inner<T>>,
}

struct Inner<T> {
    items: HashMap<String, Arc<T>>,
    indices: Vec<HashMap<String, HashSet<String>>>,
}

impl<T> NaiveStore<T> {
    /// An empty store keyed by `key` with the named index functions `index_fns`.
    pub fn new(key: fn(&T) -> String, index_fns: Vec<(&'static str, NaiveIndexFn<T>)>) -> Self {
        let indices = index_fns.iter().map(|_| HashMap::new()).collect();
        Self {
            key,
            index_fns,
            inner: RwLock::new(Inner {
                items: HashMap::new(),
                indices,
            }),
        }
    }

    /// Adds or replaces `obj` (client-go's `Add`, which is `Update`).
    pub fn add(&self, obj: Arc<T>) {
        self.update(obj);
    }

    /// Adds or replaces `obj`, moving its key between index sets where its values changed.
    pub fn update(&self, obj: Arc<T>) {
        let key = (self.key)(&obj);
        let mut inner = self.inner.write();
        let Inner { items, indices } = &mut *inner;
        let old = items.insert(key.clone(), obj.clone());
        for ((_, f), index) in self.index_fns.iter().zip(indices.iter_mut()) {
            let new_value = f(&obj);
            let old_value = old.as_deref().and_then(f);
            if old_value == new_value {
                continue;
            }
            if let Some(v) = old_value {
                if let Some(set) = index.get_mut(&v) {
                    set.remove(&key);
                    if set.is_empty() {
                        index.remove(&v);
                    }
                }
            }
            if let Some(v) = new_value {
                index.entry(v).or_default().insert(key.clone());
            }
        }
    }

    /// The objects whose index `name` has `value` (empty for an unknown index).
    pub fn by_index(&self, name: &str, value: &str) -> Vec<Arc<T>> {
        let Some(pos) = self.index_fns.iter().position(|(n, _)| *n == name) else {
            return Vec::new();
        };
        let inner = self.inner.read();
        inner.indices[pos].get(value).map_or_else(Vec::new, |keys| {
            keys.iter()
                .filter_map(|k| inner.items.get(k).cloned())
                .collect()
        })
    }

    /// Every object.
    pub fn list(&self) -> Vec<Arc<T>> {
        self.inner.read().items.values().cloned().collect()
    }

    /// The object stored under `key`.
    pub fn get(&self, key: &str) -> Option<Arc<T>> {
        self.inner.read().items.get(key).cloned()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.inner.read().items.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> fmt::Debug for NaiveStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NaiveStore")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}
