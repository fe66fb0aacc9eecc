//! client-go's `SharedIndexInformer` for Rust: one list+watch of a source, one indexed cache, any
//! number of event handlers.
//!
//! # Which piece to use
//! - [`SharedIndexInformer`]: give it a [`ListWatcher`](kcache_reflector::ListWatcher) (the
//!   in-process `kcache-memory` source, etcd, Kubernetes through kube-rs, your own) and
//!   [`run`](SharedIndexInformer::run) it. It keeps the cache in step with the source and tells
//!   every registered handler about every change. Read the cache through
//!   [`indexer()`](SharedIndexInformer::indexer) (a cheap [`CacheReader`] with listers and
//!   index queries).
//! - A handler is anything that implements [`ResourceEventHandler`] (`on_add`, `on_update`,
//!   `on_delete`), or closures in a [`HandlerFuncs`], optionally behind a [`FilteringHandler`].
//!   Async code can take an [`EventStream`] instead
//!   ([`event_stream`](SharedIndexInformer::event_stream)).
//! - Every handler gets a [`HandlerRegistration`]: its own
//!   [`has_synced`](HandlerRegistration::has_synced) (true only once *this* handler received
//!   its whole initial list), its backlog ([`pending`](HandlerRegistration::pending)), and
//!   [`remove`](HandlerRegistration::remove).
//! - A controller waits for several informers and handlers with [`wait_for_cache_sync`], reads
//!   listers, and after its own writes waits with
//!   [`wait_for_resource_version`](SharedIndexInformer::wait_for_resource_version).
//! - `/readyz`: a [`CacheSyncCheck`] (or [`InformerFactory::sync_check`]) reports which caches
//!   have not synced yet, as a `kcache_core::health::HealthCheck`.
//! - With feature `snapshot`, the `snapshot` module writes the cache to a file as the informer
//!   runs, and `InformerOptions::restore_from` starts an informer from such a file and watches
//!   from its version instead of listing everything again (a warm restart).
//!
//! # The rules (client-go 1.36's in-order informers, with the differences marked)
//! - Events reach the cache and the handlers in the order the source sent them: the informer's
//!   queue is a [`RealFifo`](kcache_deltafifo::RealFifo) (client-go's `RealFIFO`), one entry
//!   per event, several per key, never regrouped by key. The queue's lock is not held while the
//!   informer applies a batch of entries (up to 1,000, under one dispatch lock), so the source
//!   never waits for processing. While the queue is caught up, a watch add or update skips it
//!   and is applied at once, which keeps the order.
//! - A watch event is applied as client-go's `processDeltas` does: an object already cached is
//!   updated (`on_update(old, new)`), otherwise added (`on_add`); a deletion removes it and calls
//!   `on_delete` (also for a key the cache never held, as client-go does). The cache is written
//!   before any handler hears of the change.
//! - A list or relist is one entry (client-go's `ReplacedAll`): nothing of it is visible until
//!   its last page arrived; then the cache is swapped to exactly the list in one step that no
//!   reader can see half done, and only then are the handlers told, against the state before
//!   the list: deletions the list reveals first (tombstones,
//!   [`DeletedObject::is_final_state_unknown`], with the last cached state), then an update or
//!   an add for each listed object, in list order (client-go's `processReplacedAllInfo`). A
//!   relist queued behind watch events is diffed after them. A list that fails or never
//!   completes changes nothing a reader can see. The swap is done in place: only changed
//!   objects are written and re-indexed, and a listed object whose resource version equals the
//!   cached one is staged as the cached `Arc` (the new copy is dropped as its page arrives), so
//!   a relist that finds little changed holds little beside the cache (kcache only: client-go
//!   and kube-runtime hold the whole new list until the swap).
//!   [`replace_all`](SharedIndexInformer::replace_all) applies a list handed in from elsewhere
//!   (a snapshot) the same way.
//! - A resync is one entry (client-go's `SyncAll`): `on_update(o, o)` for every cached object.
//! - An update that does not change the resource version (a resync, or an unchanged object seen
//!   again in a relist) reaches a handler only while it is flagged as *syncing*. As in client-go,
//!   every handler starts flagged, and the informer's resync check (every check period) re-flags
//!   exactly the handlers whose resync period has elapsed. So before the first check, and always
//!   in an informer without resync (it never checks), every handler receives such updates: each
//!   relist's unchanged objects arrive as `on_update(old, new)` with equal versions. Periods follow
//!   client-go's rules (1 s minimum, the informer's check period, nothing when the informer has no
//!   resync).
//! - A handler that joins a running informer first receives the whole cache as adds with
//!   `is_in_initial_list = true`.
//! - Each handler has its own buffer and delivery thread: a slow handler delays nobody else.
//!   Buffers are ordered and lossless by default; [`BufferMode::Coalescing`] keeps at most one
//!   pending notification per key (kcache only). A panicking handler is reported and goes on.
//! - [`has_synced`](SharedIndexInformer::has_synced) means the first list reached the cache; a
//!   registration's `has_synced` means it reached that handler (client-go only has the former
//!   per registration since 1.27, and counts differently for late handlers).
//! - [`wait_for_resource_version`](SharedIndexInformer::wait_for_resource_version): a version
//!   once reached stays reached, even if the source's versions later go down (kcache only).
//! - Warm restarts (feature `snapshot`, kcache only: client-go always starts with a list): an
//!   informer built with `InformerOptions::restore_from` fills its cache from a snapshot
//!   (written by `CacheSnapshots`) in one step, hands the handlers its objects as initial adds,
//!   and watches from the snapshot's resource version; the changes it missed arrive as watch
//!   events, or, if the source no longer has that version, a relist settles them (tombstones for
//!   what vanished). [`has_synced`](SharedIndexInformer::has_synced) then waits until the cache
//!   reached the source's version as of the restart. See the `snapshot` module.
//!
//! Every difference from client-go, with its reason and its test, is on one page:
//! [`kcache_core::docs::client_go_differences`]; where each client-go name went:
//! [`kcache_core::docs::client_go_names`].
//!
//! # Examples
//! ```
//! use kcache_core::{Object, ResourceVersion};
//! use kcache_informer::{HandlerFuncs, SharedIndexInformer};
//! use kcache_memory::{MemorySource, SetResourceVersion};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! #[derive(Clone, Debug)]
//! struct Deployment { name: String, replicas: u32, rv: ResourceVersion }
//! impl Object for Deployment {
//!     fn namespace(&self) -> Option<&str> { Some("default") }
//!     fn name(&self) -> &str { &self.name }
//!     fn resource_version(&self) -> ResourceVersion { self.rv.clone() }
//! }
//! impl SetResourceVersion for Deployment {
//!     fn set_resource_version(&mut self, rv: ResourceVersion) { self.rv = rv; }
//! }
//! let web = |replicas| Deployment { name: "web".into(), replicas, rv: ResourceVersion::default() };
//!
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! runtime.block_on(async {
//!     let source = MemorySource::<Deployment>::new();
//!     source.create(web(1))?;
//!
//!     let informer = SharedIndexInformer::new(source.clone(), Duration::ZERO);
//!     let (seen_tx, seen) = std::sync::mpsc::channel();
//!     let seen_tx = std::sync::Mutex::new(seen_tx);
//!     let registration = informer.add_event_handler(
//!         HandlerFuncs::new()
//!             .add_func(move |d: &Arc<Deployment>, initial| {
//!                 let _ = seen_tx.lock().unwrap().send((d.replicas, initial));
//!             }),
//!     )?;
//!
//!     let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//!     let run = informer.run(async { let _ = stopped.await; });
//!     let work = async {
//!         assert!(informer.wait_for_cache_sync().await);
//!         assert!(registration.synced().await); // this handler saw the initial list
//!
//!         // Read your own write: wait until the cache holds it.
//!         let written = source.update(web(3))?;
//!         informer.wait_for_resource_version(&written.rv).await?;
//!         assert_eq!(informer.indexer().get_by_key("default/web").unwrap().replicas, 3);
//!
//!         let _ = stop.send(());
//!         Ok::<_, Box<dyn std::error::Error>>(())
//!     };
//!     let (ran, worked) = tokio::join!(run, work);
//!     ran?;
//!     worked?;
//!     assert_eq!(seen.recv()?, (1, true));
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// Loom builds keep only the dispatch core (see Cargo.toml); the rest of it is unused there.
#![cfg_attr(kcache_loom, allow(dead_code, unused_imports))]

#[cfg(not(kcache_loom))]
mod apply;
mod buffer;
mod error;
mod event;
#[cfg(not(kcache_loom))]
mod factory;
mod filtering;
mod handler;
mod health;
#[cfg(not(kcache_loom))]
mod informer;
mod listener;
mod metrics;
#[cfg(not(kcache_loom))]
mod options;
mod processor;
#[cfg(not(kcache_loom))]
mod reader;
mod registration;
#[cfg(not(kcache_loom))]
mod replace_all;
#[cfg(all(feature = "snapshot", not(kcache_loom)))]
mod restore;
mod resync;
#[cfg(not(kcache_loom))]
mod run;
#[cfg(not(kcache_loom))]
mod shared;
#[cfg(not(kcache_loom))]
mod sink;
#[cfg(all(feature = "snapshot", not(kcache_loom)))]
pub mod snapshot;
#[cfg(not(kcache_loom))]
mod stop;
mod stream;
mod sync;

#[cfg(kcache_loom)]
#[doc(hidden)]
pub mod loom_support;

pub use buffer::BufferMode;
pub use error::{InformerError, ReplaceAllError, ResourceVersionError, WaitError};
pub use event::{DeletedObject, Event};
#[cfg(not(kcache_loom))]
pub use factory::{FactoryError, InformerFactory};
pub use filtering::FilteringHandler;
pub use handler::{HandlerFuncs, ResourceEventHandler};
pub use health::{CacheSyncCheck, NotSyncedError};
#[cfg(not(kcache_loom))]
pub use informer::{SharedIndexInformer, WatchErrorHandler};
#[cfg(feature = "prometheus")]
pub use metrics::PrometheusInformerMetrics;
pub use metrics::{GaugeMetric, HistogramMetric, InformerMetricsProvider};
#[cfg(not(kcache_loom))]
pub use options::{InformerOptions, DEFAULT_BATCH_SIZE};
#[cfg(not(kcache_loom))]
pub use reader::CacheReader;
pub use registration::{wait_for_cache_sync, HandlerOptions, HandlerRegistration, HasSynced};
#[cfg(not(kcache_loom))]
pub use stop::StopHandle;
pub use stream::EventStream;

/// This crate's README.md, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
