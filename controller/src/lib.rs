#![cfg_attr(kcache_loom, allow(dead_code, unused_imports))]
//! client-go's controller pattern for Rust: informers feed keys into a rate-limited work queue
//! (a priority queue by default: the initial list and resync rounds wait behind watched
//! changes, as in controller-runtime), and N workers reconcile one key at a time.
//!
//! # Which piece to use
//! - [`Controller`]: built with [`Controller::builder`] from the informers it
//!   [`watches`](ControllerBuilder::watches) (the primary type: an event enqueues the object's
//!   own key) and [`owns`](ControllerBuilder::owns) (secondary types: an event enqueues the keys of
//!   the object's owners). [`run`](Controller::run) starts worker threads calling a blocking
//!   `reconcile(key)`, [`run_async`](Controller::run_async) tokio tasks calling an async one.
//! - `reconcile` returns an [`Action`] (`Done`, `RequeueAfter(d)`, or `Requeue`: again after the
//!   rate limiter's delay, without counting an error) or an error, which retries
//!   the key after the rate limiter's delay (per-key exponential backoff by default, as
//!   client-go's `DefaultControllerRateLimiter`).
//! - The [`ControllerHandle`] that `run` returns shows the counters ([`ControllerStats`]) and
//!   shuts the workers down with a drain; its [`workers_check`](ControllerHandle::workers_check)
//!   is a `/healthz` check ([`WorkersCheck`]) that fails when a worker left or is stuck in one
//!   reconcile.
//! - With [`leader_election`](ControllerBuilder::leader_election), workers run only while this
//!   replica leads; the informers stay warm on standbys.
//! - With a [`ConsistencyStore`] ([`consistency_store`](ControllerBuilder::consistency_store)),
//!   a key whose last reconcile wrote something is not reconciled again until the informers have
//!   seen those writes (KEP-5647's staleness mitigation): no second set of pods created from a
//!   cache that does not show the first yet.
//! - With [`shard`](ControllerBuilder::shard), replicas run active-active: each reconciles the
//!   keys a consistent hash ring over the live replicas gives it, and a key is never reconciled
//!   by two replicas at once, also while keys move ([`shard`] module).
//!
//! Reconcile is level-triggered: it reads the current state from the informers' caches, never
//! from the event that enqueued the key, so bursts of events for one key coalesce into one call.
//!
//! Every difference from client-go, with its reason and its test, is on one page:
//! [`kcache_core::docs::client_go_differences`]; where each client-go name went:
//! [`kcache_core::docs::client_go_names`].
//!
//! # Examples
//! ```
//! use kcache_controller::{Action, Controller};
//! use kcache_core::{Object, ObjectKey, ResourceVersion};
//! use kcache_informer::SharedIndexInformer;
//! use kcache_memory::{MemorySource, SetResourceVersion};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! #[derive(Clone, Debug)]
//! struct Volume { name: String, rv: ResourceVersion }
//! impl Object for Volume {
//!     fn namespace(&self) -> Option<&str> { None }
//!     fn name(&self) -> &str { &self.name }
//!     fn resource_version(&self) -> ResourceVersion { self.rv.clone() }
//! }
//! impl SetResourceVersion for Volume {
//!     fn set_resource_version(&mut self, rv: ResourceVersion) { self.rv = rv; }
//! }
//!
//! let runtime = tokio::runtime::Runtime::new()?;
//! runtime.block_on(async {
//!     let source = MemorySource::<Volume>::new();
//!     source.create(Volume { name: "data".into(), rv: ResourceVersion::default() })?;
//!     let volumes = Arc::new(SharedIndexInformer::new(source.clone(), Duration::ZERO));
//!
//!     // One async worker; each reconcile reports the key it was given.
//!     let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
//!     let controller = Controller::builder("volumes").workers(1).watches(&volumes).build()?;
//!     let handle = controller.run_async(move |key: ObjectKey| {
//!         let seen_tx = seen_tx.clone();
//!         async move {
//!             seen_tx.send(key.to_string()).map_err(|_| "closed")?;
//!             Ok::<_, &str>(Action::Done)
//!         }
//!     })?;
//!
//!     let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//!     let informer = volumes.clone();
//!     let run = tokio::spawn(async move { informer.run(async { let _ = stopped.await; }).await });
//!     assert_eq!(seen.recv().await.as_deref(), Some("data"));
//!     let stats = handle.shutdown_async().await;
//!     assert_eq!(stats.successes, 1);
//!     let _ = stop.send(());
//!     run.await??;
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(not(kcache_loom))]
mod consistency;
#[cfg(not(kcache_loom))]
mod controller;
pub mod shard;
mod sync;

#[cfg(not(kcache_loom))]
pub use consistency::{
    ConsistencyError, ConsistencyStore, WriteTracker, DEFAULT_MAX_STALENESS_WAIT,
};
#[cfg(not(kcache_loom))]
pub use controller::{
    Action, Controller, ControllerBuilder, ControllerError, ControllerHandle, ControllerQueue,
    ControllerStats, WorkersCheck, WorkersError,
};

/// This crate's README.md, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
