//! The reflector: keeps a store in step with a source through list and watch, following
//! client-go's `tools/cache` reflector.
//!
//! A backend implements one trait, [`ListWatcher`]: list (pages at a resource version) and watch
//! (a stream of [`WatchEvent`]s after a resource version), with its errors classified by
//! [`ErrorKind`]. A [`Reflector`] drives it and writes into any
//! [`ReflectorStore`](kcache_core::ReflectorStore) (an indexer, a `DeltaFifo`, your own map):
//!
//! - list with resource version `"0"` first, then the last synced version, and `""` after an
//!   Expired or TooLargeResourceVersion answer; in pages of [`DEFAULT_PAGE_SIZE`] (by client-go's
//!   rule, a relist at a known version is not paged: see [`ReflectorBuilder::page_size`]), with
//!   one full list at the same version if a continue token expires; then
//!   `store.replace(items, list_rv)` once, or, for a store with a page-by-page form
//!   ([`PagedReplace`](kcache_core::PagedReplace), as the informer's queue has), each page as it
//!   arrives (the next one fetched only once the store took it) and `finish_list(list_rv)` at the
//!   end;
//! - watch from the last synced version with bookmarks and a timeout drawn from
//!   `[min, 2·min]`; every event goes to the store and records its version
//!   ([`ReflectorHandle::last_sync_resource_version`]);
//! - a clean close re-watches at once (after a backoff if several watches in a row lived less
//!   than a second); a [`ErrorKind::Retry`] error backs off and re-watches; any
//!   other error (and bad input, see [`BadInput`]) backs off and relists. Backoff is client-go's:
//!   800 ms doubling to 30 s with jitter, reset after 2 healthy minutes ([`BackoffConfig`]);
//! - a streaming list (watch-list) instead of the list when the backend serves one
//!   ([`ListWatcher::supports_watch_list`]; or as set with
//!   [`ReflectorBuilder::streaming_initial_list`]): the initial events become one list, applied
//!   as a list is at the end-of-initial-events bookmark, then the same stream goes on as the
//!   watch; a cycle whose stream the source refuses lists instead;
//! - a resync timer with `should_resync`, a watch-error hook, and a [`ReflectorHandle`] to stop
//!   it.
//!
//! No type to write for a quick backend: [`ListWatch`] builds a `ListWatcher` from a list closure
//! and a watch closure (client-go's `cache.ListWatch`), and [`PollingListWatcher`] turns a source
//! that can only be listed (a REST endpoint, a SQL table, a directory) into one, reporting the
//! difference between successive polls as watch events.
//!
//! Everything that waits goes through a [`Clock`](kcache_core::Clock), so tests run on a
//! [`FakeClock`](kcache_core::FakeClock) without sleeping. The protocol itself is a pure state
//! machine, tested without I/O. To test your own controller against a flaky source, wrap the
//! source in a [`FaultInjector`].
//!
//! Every difference from client-go, with its reason and its test, is on one page:
//! [`kcache_core::docs::client_go_differences`]; where each client-go name went:
//! [`kcache_core::docs::client_go_names`].
//!
//! # Examples
//! A reflector over the in-memory source (`kcache-memory`) into a map:
//! ```
//! use kcache_core::{Object, ObjectAccessor, ObjectKey, ReflectorStore, ResourceVersion};
//! use kcache_memory::{MemorySource, SetResourceVersion};
//! use kcache_reflector::Reflector;
//! use std::collections::BTreeMap;
//! use std::sync::{Arc, Mutex};
//!
//! #[derive(Clone, Debug)]
//! struct Job { name: String, rv: ResourceVersion }
//! impl Object for Job {
//!     fn namespace(&self) -> Option<&str> { None }
//!     fn name(&self) -> &str { &self.name }
//!     fn resource_version(&self) -> ResourceVersion { self.rv.clone() }
//! }
//! impl SetResourceVersion for Job {
//!     fn set_resource_version(&mut self, rv: ResourceVersion) { self.rv = rv; }
//! }
//!
//! /// The simplest store: a shared map.
//! #[derive(Clone, Default)]
//! struct Map(Arc<Mutex<BTreeMap<String, Arc<Job>>>>);
//! impl ReflectorStore<Job> for Map {
//!     type Error = std::convert::Infallible;
//!     fn add(&self, o: Arc<Job>) -> Result<(), Self::Error> { self.update(o) }
//!     fn update(&self, o: Arc<Job>) -> Result<(), Self::Error> {
//!         self.0.lock().unwrap().insert(o.name.clone(), o);
//!         Ok(())
//!     }
//!     fn delete(&self, o: Arc<Job>) -> Result<(), Self::Error> {
//!         self.0.lock().unwrap().remove(&o.name);
//!         Ok(())
//!     }
//!     fn replace(&self, all: Vec<Arc<Job>>, _rv: ResourceVersion) -> Result<(), Self::Error> {
//!         *self.0.lock().unwrap() = all.into_iter().map(|o| (o.name.clone(), o)).collect();
//!         Ok(())
//!     }
//!     fn resync(&self) -> Result<(), Self::Error> { Ok(()) }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let source: MemorySource<Job> = MemorySource::new();
//! source.create(Job { name: "nightly".into(), rv: ResourceVersion::default() }).unwrap();
//!
//! let map = Map::default();
//! let reflector = Reflector::builder(source.clone(), map.clone()).name("jobs").build();
//! let handle = reflector.handle();
//! let task = tokio::spawn(reflector.run());
//!
//! source.create(Job { name: "hourly".into(), rv: ResourceVersion::default() }).unwrap();
//! while map.0.lock().unwrap().len() < 2 {
//!     tokio::task::yield_now().await;
//! }
//! handle.stop();
//! task.await.unwrap();
//! assert!(map.0.lock().unwrap().contains_key("hourly"));
//! # }
//! ```

mod backoff;
mod builder;
mod defaults;
mod error;
mod fault;
mod handle;
mod list_watch;
mod list_watcher;
mod machine;
mod polling;
mod reflector;
mod sync;

pub use backoff::BackoffConfig;
pub use builder::ReflectorBuilder;
pub use defaults::{
    DEFAULT_MAX_LIST_OBJECTS, DEFAULT_MAX_LIST_PAGES, DEFAULT_MIN_WATCH_TIMEOUT, DEFAULT_PAGE_SIZE,
};
pub use error::{BadInput, ConfigError, ReflectorError, StoreOperation};
pub use fault::{
    FaultError, FaultHandle, FaultInjector, FaultPlan, FaultSite, FaultStats, InjectedFault,
};
pub use handle::ReflectorHandle;
pub use list_watch::ListWatch;
pub use list_watcher::{
    BackendError, Bookmark, ErrorKind, ListOptions, ListPage, ListWatcher, ResourceVersionMatch,
    WatchEvent, WatchOptions, WatchStream,
};
pub use polling::{content_fingerprint, PollError, PollingListWatcher, DEFAULT_POLL_PERIOD};
pub use reflector::Reflector;

/// This crate's README.md, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
