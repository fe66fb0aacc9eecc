//! Coming from kube-runtime: the same jobs, the kcache way.
//!
//! Keep your `kube::Client`, your `Api<K>`s and your k8s-openapi / `CustomResource` types; replace
//! the runtime layer. kcache follows client-go's `tools/cache` and `util/workqueue`, so the pieces
//! are split differently from kube-runtime's streams:
//!
//! | kube-runtime | kcache | what changes |
//! |---|---|---|
//! | `watcher(api, watcher::Config)`: a stream of `Init` / `InitApply` / `InitDone` / `Apply` / `Delete` | [`KubeListWatcher::new(api)`](crate::KubeListWatcher) driven by a [`kcache_reflector::Reflector`] | the reflector owns the list/watch protocol: paging (500), bookmarks, relist on 410, backoff (800 ms → 30 s, jitter, reset after 2 min) built in, not opt-in; `last_sync_resource_version()`, a watch-error hook, periodic resync |
//! | `watcher::Config::labels` / `fields` | [`KubeListWatcher::labels`](crate::KubeListWatcher::labels) / [`fields`](crate::KubeListWatcher::fields) | same selectors, on lists and watches |
//! | `InitialListStrategy::StreamingList` | the default (`ReflectorBuilder::streaming_initial_list(false)` lists instead) | falls back to a paged list for a cycle whose stream the server refuses |
//! | `metadata_watcher` / `Api<PartialObjectMeta<K>>` | [`KubeMetadataListWatcher`](crate::KubeMetadataListWatcher) | the cache holds `PartialObjectMeta<K>` |
//! | `reflector(writer, stream)` + `Store<K>` (`get`, `state`, `find`) | `kcache_informer::SharedIndexInformer` and its `CacheReader` (`get_by_key`, `list`, `list_by_namespace`, `by_index`) | secondary indexes (`add_indexers` / `by_index`) instead of linear `find`; keys are `"namespace/name"` strings; objects are `Arc<K>`, never deep-cloned |
//! | `Store::wait_until_ready` | `has_synced` / `wait_for_cache_sync` | per handler too: a handler's registration is synced once its initial events were delivered |
//! | `store_shared` + `reflect_shared` + `subscribe()` (unstable) | `add_event_handler` on one shared informer | handlers can join late (they get the cache replayed), receive deletes with the last state and old/new pairs on update, each with its own buffer so a slow one never holds back the others |
//! | `WatchStreamExt::modify` | `SharedIndexInformer::set_transform` | strip `managedFields` before caching |
//! | `Controller::new(api, cfg).owns(..).watches(..).run(reconcile, error_policy, ctx)` | `kcache_controller::Controller``::builder(name).watches(&informer).owns(&informer, map).workers(n).build()?.run(reconcile)` | workers pull keys from a rate-limited work queue; `reconcile(key)` reads the cache and may find the object gone (handle deletion there, no `ObjectNotFound` error) |
//! | `Action::requeue(d)` / `Action::await_change()` | `Action::RequeueAfter(d)` / `Action::Done` | |
//! | `error_policy(obj, err, ctx) -> Action` | return `Err(e)` | per-key exponential backoff (5 ms … 1000 s) plus an overall token bucket, reset when the key succeeds (`forget`); `max_retries` drops a key after N failures in a row |
//! | `Config::concurrency(n)` (default unbounded, all in one task) | `.workers(n)` | N threads (`run`) or N tokio tasks (`run_async`); a key is never reconciled by two workers at once |
//! | `scheduler` / `debounced_scheduler` (`DelayQueue`, earliest deadline wins) | `kcache_workqueue::RateLimitingQueue`: `add`, `add_after`, `add_rate_limited`, `forget`, `num_requeues`, `shut_down_with_drain` | the client-go queue, shared by many workers, with client-go's metric names |
//! | no metrics | `MetricsProvider` (workqueue) and `InformerMetricsProvider` | queue depth, latency, work duration, retries; handler buffer gauges |
//!
//! Two settings to review when you switch:
//! - kube-rs' client retries 429/503/504 on its own (`Config::default_retry`, on by default). The
//!   reflector already backs off and classifies those answers ([`KubeError`](crate::KubeError));
//!   turn the client's retries off to keep one backoff.
//! - The reflector's first list asks for `resourceVersion=0` like client-go; kube-rs sends a paged
//!   list without it, so it is a consistent read served by etcd (kube-runtime's default too).
//!
//! # A complete controller
//! Reconciles every ConfigMap labelled `app=web` with 4 workers and per-key retries; deletions
//! arrive as keys whose object is no longer in the cache.
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcache_core::ObjectKey;
//! use kcache_controller::{Action, Controller};
//! use kcache_informer::{InformerOptions, SharedIndexInformer};
//! use kcache_kube::{KubeListWatcher, KubeMeta};
//! use kube::{Api, Client, Config};
//! use std::{sync::Arc, time::Duration};
//!
//! #[derive(Debug)]
//! struct Error(String);
//! impl std::fmt::Display for Error {
//!     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
//!         f.write_str(&self.0)
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let mut config = Config::infer().await?;
//!     config.default_retry = false; // the reflector backs off by itself
//!     let client = Client::try_from(config)?;
//!
//!     // One shared, indexed cache of the ConfigMaps labelled app=web.
//!     let lw = KubeListWatcher::new(Api::<ConfigMap>::all(client.clone())).labels("app=web");
//!     let options = InformerOptions::new().name("web-configmaps");
//!     let informer = Arc::new(SharedIndexInformer::<_, _, KubeMeta>::with_accessor(lw, options));
//!
//!     // Keys of changed objects go to a rate-limited queue; 4 workers reconcile them.
//!     let cache = informer.indexer();
//!     let controller = Controller::builder("web").workers(4).watches(&informer).build()?;
//!     let handle = controller.run_async(move |key: ObjectKey| {
//!         let cached = cache.get_by_key(&key);
//!         async move {
//!             let Some(cm) = cached else {
//!                 println!("{key} is gone: clean up");
//!                 return Ok(Action::Done);
//!             };
//!             let entries = cm.data.as_ref().map_or(0, |d| d.len());
//!             if entries == 0 {
//!                 return Err(Error(format!("{key} has no data yet"))); // retried with backoff
//!             }
//!             println!("{key}: {entries} entries");
//!             Ok(Action::RequeueAfter(Duration::from_secs(300)))
//!         }
//!     })?;
//!
//!     // Run the informer until Ctrl-C, then drain the queue.
//!     informer.run(async { let _ = tokio::signal::ctrl_c().await; }).await?;
//!     handle.shutdown_async().await;
//!     Ok(())
//! }
//! ```
