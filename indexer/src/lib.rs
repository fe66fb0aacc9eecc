//! client-go's `ThreadSafeStore` and `Indexer` for Rust: a concurrent object cache with
//! multi-valued secondary indexes.
//!
//! - [`ThreadSafeStore`]: a map from [`ObjectKey`](kcache_core::ObjectKey) to `Arc<T>` plus
//!   named indexes, all behind one read-write lock, so readers never see an object without its
//!   index entries.
//! - [`Indexer`]: the same, keyed by a [`Meta`](kcache_core::Meta) accessor. It is the informer's
//!   cache: a reflector writes into it ([`ReflectorStore`](kcache_core::ReflectorStore)), a
//!   `DeltaFifo` reads it ([`KnownObjects`](kcache_core::KnownObjects)), controllers list it.
//! - [`Indexers`]: named [`IndexFunc`]s, each giving zero or more values per object.
//!   [`NAMESPACE_INDEX`] with [`namespace_index_fn`] is the one every informer installs.
//!
//! Where client-go panics (an index function failing), kcache returns a typed error and leaves
//! the store unchanged. Indexes can be added to a populated store ([`Indexer::add_indexers`]),
//! all or nothing. Every difference from client-go:
//! [`kcache_core::docs::client_go_differences`]; the name map:
//! [`kcache_core::docs::client_go_names`].
//!
//! # Examples
//! A cache of pods indexed by namespace and by the nodes they run on:
//! ```
//! use kcache_core::{Object, ObjectAccessor, ReflectorStore, ResourceVersion};
//! use kcache_indexer::{namespace_index_fn, Indexer, Indexers, NAMESPACE_INDEX};
//! use std::sync::Arc;
//!
//! struct Pod { ns: String, name: String, rv: u64, node: Option<String> }
//! impl Object for Pod {
//!     fn namespace(&self) -> Option<&str> { Some(&self.ns) }
//!     fn name(&self) -> &str { &self.name }
//!     fn resource_version(&self) -> ResourceVersion { self.rv.into() }
//! }
//! let pod = |ns: &str, name: &str, rv: u64, node: Option<&str>| {
//!     Arc::new(Pod { ns: ns.into(), name: name.into(), rv, node: node.map(Into::into) })
//! };
//!
//! let pods: Indexer<Pod> = Indexer::with_indexers(
//!     Indexers::new()
//!         .with(NAMESPACE_INDEX, namespace_index_fn::<Pod, ObjectAccessor>)
//!         // Unscheduled pods are in no node's list: zero values.
//!         .with("by-node", |p: &Pod| Ok(p.node.iter().cloned().collect())),
//! );
//!
//! // A reflector's initial list, then watch events.
//! pods.replace(vec![pod("prod", "web-1", 10, Some("n1")), pod("dev", "web-2", 11, None)], "12".into())?;
//! pods.update(pod("dev", "web-2", 13, Some("n1")))?;
//! ReflectorStore::delete(&pods, pod("prod", "web-1", 14, Some("n1")))?;
//!
//! let on_n1 = pods.index_keys("by-node", "n1")?;
//! assert_eq!(on_n1.iter().map(|k| k.as_str()).collect::<Vec<_>>(), ["dev/web-2"]);
//! assert_eq!(pods.list_by_namespace("dev", |p| p.node.is_some()).len(), 1);
//! assert_eq!(pods.last_store_sync_resource_version().as_str(), "14");
//!
//! // Another index, on the populated cache.
//! pods.add_indexers(Indexers::new().with("by-name", |p: &Pod| Ok(vec![p.name.clone()])))?;
//! assert_eq!(pods.by_index("by-name", "web-2")?.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod column;
mod error;
mod id;
mod index;
mod indexer;
mod indexers;
mod lister;
mod namespace;
mod sync;
mod thread_safe_store;

#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub mod fuzz;

/// The hasher of every map in the crate.
type Hasher = foldhash::fast::RandomState;

pub use error::{
    AddIndexersError, BoxError, IndexError, IndexFuncError, StoreError, UnknownIndexError,
};
pub use indexer::Indexer;
pub use indexers::{IndexFunc, IndexValuesFunc, Indexers};
pub use namespace::{namespace_index_fn, NAMESPACE_INDEX};
pub use thread_safe_store::{SwapOutcome, Swapped, ThreadSafeStore};

/// This crate's README.md, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
