//! kcache over Kubernetes, through kube-rs.
//!
//! Keep your `kube::Client`; get client-go's machinery (shared informers with late-joining
//! handlers, secondary indexes, tombstones for deletions missed while disconnected, a
//! rate-limited work queue with per-key backoff) on top of it:
//!
//! - [`KubeListWatcher`]: the [`ListWatcher`](kcache_reflector::ListWatcher) for a `kube::Api<K>`,
//!   typed, `DynamicObject` or `PartialObjectMeta<K>`, with label and field selectors;
//!   [`KubeMetadataListWatcher`] for metadata-only caches.
//! - [`KubeMeta`]: the [`Meta`](kcache_core::Meta) accessor for every `kube::Resource`
//!   (`"namespace/name"` keys, `metadata.resourceVersion`).
//! - [`KubeError`]: failures classified the way client-go's reflector reacts to them (410 Gone →
//!   relist, too-large resource version → relist from the latest, 429 and refused connections →
//!   retry the watch).
//!
//! - [`LeaseLock`]: a `kcache-leaderelection` lock on a `coordination.k8s.io/v1` Lease, so
//!   replicas of a controller elect a leader as client-go's do.
//! - [`LeaseMembers`]: the member records of `kcache-controller`'s active-active sharding, as
//!   Leases labelled with their group.
//!
//! Coming from kube-runtime? The [`migration`] page maps its watcher, reflector, `Store`,
//! `Controller` and scheduler to their kcache counterparts, with a complete controller.
//!
//! # Examples
//! An informer over every ConfigMap of the cluster:
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcache_informer::{HandlerFuncs, InformerOptions, SharedIndexInformer};
//! use kcache_kube::{KubeListWatcher, KubeMeta};
//! use kube::{Api, Client};
//! use std::sync::Arc;
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::try_default().await?;
//! let lw = KubeListWatcher::new(Api::<ConfigMap>::all(client));
//! let informer: Arc<SharedIndexInformer<ConfigMap, _, KubeMeta>> = Arc::new(
//!     SharedIndexInformer::with_accessor(lw, InformerOptions::new().name("configmaps")),
//! );
//! informer.add_event_handler(HandlerFuncs::new().add_func(|cm: &Arc<ConfigMap>, _initial| {
//!     println!("{:?}", cm.metadata.name);
//! }))?;
//! informer.run(std::future::pending()).await?;
//! # Ok(()) }
//! ```

mod endpoint;
mod error;
mod lease;
mod lease_members;
mod list_watcher;
mod meta;
mod metadata;
pub mod migration;

pub use endpoint::INITIAL_EVENTS_END_ANNOTATION;
pub use error::KubeError;
pub use lease::LeaseLock;
pub use lease_members::{
    LeaseMembers, SHARD_GROUP_LABEL, SHARD_VIEW_ANNOTATION, SHARD_VIEW_GENERATION_ANNOTATION,
};
pub use list_watcher::KubeListWatcher;
pub use meta::KubeMeta;
pub use metadata::KubeMetadataListWatcher;

/// This crate's README.md, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
