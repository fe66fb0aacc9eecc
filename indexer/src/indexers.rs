//! `Indexers`: the named index functions a store maintains.

use crate::error::BoxError;
use kcache_core::ObjectKey;
use std::any::TypeId;
use std::collections::BTreeMap;
use std::fmt;

/// An index function: the zero or more values under which an object is indexed.
///
/// It should be total and deterministic (the same object always yields the same values); the store
/// calls it on every write, and again on the stored object when that object is replaced or
/// deleted. A failure is reported to the writer as an [`IndexFuncError`](crate::IndexFuncError)
/// and the store is left unchanged.
pub type IndexFunc<T> = Box<dyn Fn(&T) -> Result<Vec<String>, BoxError> + Send + Sync + 'static>;

/// Named index functions (client-go's `Indexers`, a map from index name to [`IndexFunc`]).
///
/// # Examples
/// ```
/// use kcache_indexer::Indexers;
///
/// struct Pod { node: String, volumes: Vec<String> }
///
/// let indexers = Indexers::new()
///     .with("by-node", |p: &Pod| Ok(vec![p.node.clone()]))
///     .with("by-volume", |p: &Pod| Ok(p.volumes.clone()));
/// assert_eq!(indexers.names().collect::<Vec<_>>(), ["by-node", "by-volume"]);
/// ```
pub struct Indexers<T> {
    funcs: BTreeMap<String, Func<T>>,
}

/// The key a write is stored under, with the accessor that computed it from the object (so an
/// index that only needs the key's parts can read them instead of computing the key again).
pub(crate) type KeyHint<'a> = (&'a ObjectKey, TypeId);

/// An installed index function, in one of its forms.
pub(crate) enum Func<T> {
    /// Returns its values as a list.
    Values(IndexFunc<T>),
}

impl<T> Func<T> {
    /// Calls `emit` with each value of `obj` (possibly repeated). On failure some values may have
    /// been emitted already.
    pub(crate) fn visit(
        &self,
        obj: &T,
        _key: Option<KeyHint<'_>>,
        emit: &mut dyn FnMut(&str),
    ) -> Result<(), BoxError> {
        match self {
            Func::Values(f) => {
                for value in f(obj)? {
                    emit(&value);
                }
                Ok(())
            }
        }
    }

    fn into_index_func(self) -> Option<IndexFunc<T>> {
        match self {
            Func::Values(f) => Some(f),
        }
    }
}

impl<T> Indexers<T> {
    /// No index functions.
    pub fn new() -> Self {
        Self {
            funcs: BTreeMap::new(),
        }
    }

    /// Adds (or replaces) the index function `name`, builder style.
    #[must_use]
    pub fn with<F>(mut self, name: impl Into<String>, func: F) -> Self
    where
        F: Fn(&T) -> Result<Vec<String>, BoxError> + Send + Sync + 'static,
    {
        self.insert(name, func);
        self
    }

    /// Adds the index function `name`, returning the one it replaces, if any.
    pub fn insert<F>(&mut self, name: impl Into<String>, func: F) -> Option<IndexFunc<T>>
    where
        F: Fn(&T) -> Result<Vec<String>, BoxError> + Send + Sync + 'static,
    {
        self.funcs
            .insert(name.into(), Func::Values(Box::new(func)))
            .and_then(Func::into_index_func)
    }

    /// The names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.funcs.keys().map(String::as_str)
    }

    /// How many index functions there are.
    pub fn len(&self) -> usize {
        self.funcs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty()
    }

    pub(crate) fn into_inner(self) -> BTreeMap<String, Func<T>> {
        self.funcs
    }
}

impl<T> Default for Indexers<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for Indexers<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.names()).finish()
    }
}
