//! `Indexers`: the named index functions a store maintains.

use crate::error::BoxError;
use crate::namespace::NAMESPACE_INDEX;
use kcache_core::Meta;
use std::any::TypeId;
use std::collections::BTreeMap;
use std::fmt;

/// An index function: the zero or more values under which an object is indexed.
///
/// It should be total and deterministic (the same object always yields the same values); the store
/// calls it on every written object and remembers the values, so replacing or deleting the object
/// later removes exactly those entries without calling it again. A failure is reported to the writer as an [`IndexFuncError`](crate::IndexFuncError)
/// and the store is left unchanged.
pub type IndexFunc<T> = Box<dyn Fn(&T) -> Result<Vec<String>, BoxError> + Send + Sync + 'static>;

/// An index function that emits its values instead of returning them: it calls the given
/// closure once per value (repeats are ignored), so indexing allocates nothing for values the index
/// already holds. Install one with [`Indexers::with_each_value`].
///
/// It should be total and deterministic, as an [`IndexFunc`]. On failure, the values it emitted
/// are discarded and the write changes nothing.
pub type IndexValuesFunc<T> =
    Box<dyn Fn(&T, &mut dyn FnMut(&str)) -> Result<(), BoxError> + Send + Sync + 'static>;

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
pub(crate) type KeyHint<'a> = (&'a str, TypeId);

/// An installed index function, in one of its forms.
pub(crate) enum Func<T> {
    /// Returns its values as a list.
    Values(IndexFunc<T>),
    /// Emits its values.
    Each(IndexValuesFunc<T>),
    /// The namespace of the key computed by `accessor`: read from the key the object is stored
    /// under when that accessor computed it, from `fallback` otherwise.
    Namespace {
        fallback: IndexValuesFunc<T>,
        accessor: TypeId,
    },
}

impl<T> Func<T> {
    /// Calls `emit` with each value of `obj` (possibly repeated). On failure some values may have
    /// been emitted already.
    pub(crate) fn visit(
        &self,
        obj: &T,
        key: Option<KeyHint<'_>>,
        emit: &mut dyn FnMut(&str),
    ) -> Result<(), BoxError> {
        match self {
            Func::Values(f) => {
                for value in f(obj)? {
                    emit(&value);
                }
                Ok(())
            }
            Func::Each(f) => f(obj, emit),
            Func::Namespace { fallback, accessor } => match key {
                Some((key, by)) if by == *accessor => {
                    emit(crate::thread_safe_store::key_namespace(key));
                    Ok(())
                }
                _ => fallback(obj, emit),
            },
        }
    }

    fn into_index_func(self) -> Option<IndexFunc<T>> {
        match self {
            Func::Values(f) => Some(f),
            Func::Each(_) | Func::Namespace { .. } => None,
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

    /// Adds the index function `name`, returning the one it replaces, if any (an emitting function
    /// installed by [`with_each_value`](Self::with_each_value) or
    /// [`with_namespace_index`](Self::with_namespace_index) is replaced but not returned).
    pub fn insert<F>(&mut self, name: impl Into<String>, func: F) -> Option<IndexFunc<T>>
    where
        F: Fn(&T) -> Result<Vec<String>, BoxError> + Send + Sync + 'static,
    {
        self.funcs
            .insert(name.into(), Func::Values(Box::new(func)))
            .and_then(Func::into_index_func)
    }

    /// Adds (or replaces) the index function `name` in its emitting form, builder style: `func`
    /// calls its second argument with each value, so no `Vec<String>` is built per call.
    ///
    /// # Examples
    /// ```
    /// use kcache_indexer::{Indexers, ThreadSafeStore};
    /// use kcache_core::ObjectKey;
    /// use std::sync::Arc;
    ///
    /// struct Pod { node: Option<String> }
    ///
    /// let store = ThreadSafeStore::with_indexers(Indexers::new().with_each_value(
    ///     "by-node",
    ///     |p: &Pod, emit: &mut dyn FnMut(&str)| {
    ///         if let Some(node) = &p.node {
    ///             emit(node);
    ///         }
    ///         Ok(())
    ///     },
    /// ));
    /// store.add(ObjectKey::new("a")?, Arc::new(Pod { node: Some("n1".into()) }))?;
    /// assert_eq!(store.by_index("by-node", "n1")?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_each_value<F>(mut self, name: impl Into<String>, func: F) -> Self
    where
        F: Fn(&T, &mut dyn FnMut(&str)) -> Result<(), BoxError> + Send + Sync + 'static,
    {
        self.funcs.insert(name.into(), Func::Each(Box::new(func)));
        self
    }

    /// Adds (or replaces) [`NAMESPACE_INDEX`](crate::NAMESPACE_INDEX) with the values of
    /// [`namespace_index_fn::<T, M>`](crate::namespace_index_fn), builder style. Objects written
    /// through an [`Indexer<T, M>`](crate::Indexer) are indexed by the namespace of the key it
    /// already computed, without computing the key again or allocating.
    ///
    /// # Examples
    /// ```
    /// use kcache_core::{Object, ObjectAccessor, ResourceVersion};
    /// use kcache_indexer::{Indexer, Indexers, NAMESPACE_INDEX};
    /// use std::sync::Arc;
    ///
    /// struct Pod { ns: String, name: String }
    /// impl Object for Pod {
    ///     fn namespace(&self) -> Option<&str> { Some(&self.ns) }
    ///     fn name(&self) -> &str { &self.name }
    ///     fn resource_version(&self) -> ResourceVersion { ResourceVersion::default() }
    /// }
    ///
    /// let pods: Indexer<Pod> =
    ///     Indexer::with_indexers(Indexers::new().with_namespace_index::<ObjectAccessor>());
    /// pods.add(Arc::new(Pod { ns: "prod".into(), name: "web".into() }))?;
    /// assert_eq!(pods.by_index(NAMESPACE_INDEX, "prod")?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_namespace_index<M: Meta<T>>(mut self) -> Self
    where
        T: 'static,
    {
        let fallback: IndexValuesFunc<T> = Box::new(|obj: &T, emit: &mut dyn FnMut(&str)| {
            emit(M::key(obj)?.namespace().unwrap_or(""));
            Ok(())
        });
        self.funcs.insert(
            NAMESPACE_INDEX.to_owned(),
            Func::Namespace {
                fallback,
                accessor: TypeId::of::<M>(),
            },
        );
        self
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
