//! kcache on etcd: a [`ListWatcher`](kcache_reflector::ListWatcher) over an etcd key prefix, and a
//! writer for the same objects.
//!
//! etcd's model is the reflector's: a range read returns the state at a revision, a watch streams
//! the changes after a revision, and old revisions are compacted away. [`EtcdListWatcher`] maps
//! one onto the other, so a [`Reflector`](kcache_reflector::Reflector) (or an informer) keeps a
//! local cache of the objects under a prefix in step with etcd. [`EtcdObjects`] writes them, with
//! optimistic concurrency on the resource version.
//!
//! # Key layout
//! An object with key `"namespace/name"` (or `"name"` when cluster-scoped) is stored under
//! `prefix + key`, e.g. `/registry/pods/default/web` for prefix `/registry/pods/`. A `/` is
//! appended to a prefix that does not end with one, so `/registry/pods` never covers
//! `/registry/podtemplates/...`. Every key in the prefix's range must hold an object whose own key
//! (read through the [`Meta`](kcache_core::Meta) accessor) is the path below the prefix.
//!
//! # Objects and resource versions
//! Values are (de)serialized by a [`Codec`]; the default [`JsonCodec`] is `serde_json`. An
//! object's resource version is its key's `mod_revision` as decimal text. etcd does not store it
//! in the value: [`Codec::decode`] receives it and *stamps* it into the decoded object (the
//! [`JsonCodec`] through [`SetResourceVersion`]). A `Deleted` event carries the object's last state
//! stamped with the revision of the deletion, as Kubernetes does.
//!
//! # Listing
//! - `resource_version` `""` or `"0"`: the current revision (a linearizable read).
//! - `"N"` (match unset or `Exact`): the state at revision `N`: [`EtcdError::Compacted`]
//!   (Expired) if etcd has compacted it, [`EtcdError::FutureRevision`] (TooLargeResourceVersion)
//!   if etcd has not reached it. With `NotOlderThan`: the current revision, `FutureRevision` if it
//!   is older than `N`.
//! - `limit`: one page of at most `limit` objects in key order; the continue token holds the
//!   page's revision and the next key, so every page of one list is read at the same revision
//!   whatever is written in between (a page at a revision compacted meanwhile fails with
//!   `Compacted`, and the reflector falls back to a full list). Without `limit`, etcd is still
//!   read in pages ([`DEFAULT_INTERNAL_PAGE_SIZE`]) at one revision.
//!
//! # Watching
//! - from `"N"`: etcd's watch from revision `N + 1` over the prefix, with progress notifications:
//!   an etcd progress notification (sent only to a watcher that is in sync) becomes a
//!   [`Bookmark`](kcache_reflector::Bookmark) at its revision when bookmarks are allowed. `N`
//!   newer than etcd → `FutureRevision`. A deletion's last state is read at the revision before
//!   it (only for deletions: etcd 3.4's `prev_kv` would read one for every event and cap a watch
//!   at a few thousand events per second).
//! - from a compacted revision: etcd 3.4 does not fail the request; it creates the watch and then
//!   cancels it with `compact_revision` set. That cancellation becomes a [`EtcdError::Compacted`]
//!   item (kind Expired: the reflector relists), or the error of `watch` itself when it arrives
//!   before etcd confirms the watch.
//! - `send_initial_events` (streaming list): every object of a consistent read of now (never older
//!   than the requested version) as `Added`, a bookmark with `initial_events_end` at that read's
//!   revision, then the changes after it. A watch from `""` or `"0"` sends the same `Added` events
//!   (Kubernetes' synthetic adds), then a plain bookmark when bookmarks are allowed.
//! - `timeout`: the stream ends cleanly once it passes, on the list-watcher's
//!   [`Clock`](kcache_core::Clock).
//! - A broken connection or an unreachable server is an [`EtcdError::Unavailable`] (kind Retry):
//!   the reflector backs off on its clock and re-watches from its last version, which etcd replays.
//!   etcd cancelling the watch for another reason is [`EtcdError::WatchCanceled`] (kind Other).
//!
//! # Malformed values
//! A value under the prefix that the codec cannot decode (or whose object has another key, or no
//! stamped version) never panics and never stops the cache. It is skipped *and reported*, as one
//! [`EtcdError::Malformed`] error of kind Retry, which the reflector passes to its watch-error hook:
//! - a list leaves it out (the cache does not have the object) and records it; the next `watch`
//!   call on this list-watcher (or a clone) fails with the report, so the reflector reports it,
//!   backs off and re-watches from the list's version;
//! - a watch event whose new value is bad becomes a `Deleted` event for the previous (good) value,
//!   if any, so the cache never holds a state etcd no longer has; after the response's other events
//!   the stream sends a bookmark past them and then the report, and the reflector re-watches from
//!   there. The rest of the cache stays exactly in step with etcd; the bad key is absent from it
//!   until a decodable value is written.
//!
//! A deletion whose previous value etcd did not send (compacted) is an
//! [`EtcdError::DeletedWithoutPreviousValue`] (kind Other): the reflector relists.
//!
//! # Connecting
//! Endpoints, TLS (feature `tls`), user and password, timeouts and keep-alive are etcd-client's
//! [`ConnectOptions`](etcd_client::ConnectOptions), passed through by
//! [`EtcdListWatcher::connect`]; or build an [`etcd_client::Client`] yourself and use
//! [`EtcdListWatcher::new`]. etcd-client runs on tokio: list, watch and write inside a tokio
//! runtime.
//!
//! # Leader election
//! [`EtcdLock`] is a `kcache-leaderelection` lock on one key (compare-and-swap on `mod_revision`;
//! its docs say why not an etcd lease), so replicas of a controller elect a leader through the
//! etcd they already read. [`EtcdMembers`] keeps the member records of `kcache-controller`'s
//! active-active sharding under a key prefix (a `kcache-leaderelection` `MemberStore`).
//!
//! # Examples
//! A reflector keeping a store of jobs in step with `/jobs/` (needs a running etcd):
//! ```no_run
//! use kcache_core::{Object, ReflectorStore, ResourceVersion};
//! use kcache_etcd::{EtcdListWatcher, EtcdObjects, SetResourceVersion};
//! use kcache_reflector::Reflector;
//! use serde::{Deserialize, Serialize};
//! use std::collections::BTreeMap;
//! use std::sync::{Arc, Mutex};
//!
//! #[derive(Debug, Serialize, Deserialize)]
//! struct Job {
//!     name: String,
//!     schedule: String,
//!     #[serde(skip)]
//!     rv: ResourceVersion,
//! }
//!
//! impl Object for Job {
//!     fn namespace(&self) -> Option<&str> { None }
//!     fn name(&self) -> &str { &self.name }
//!     fn resource_version(&self) -> ResourceVersion { self.rv.clone() }
//! }
//! impl SetResourceVersion for Job {
//!     fn set_resource_version(&mut self, rv: ResourceVersion) { self.rv = rv; }
//! }
//!
//! /// The smallest store: name -> job.
//! #[derive(Default, Clone)]
//! struct Jobs(Arc<Mutex<BTreeMap<String, Arc<Job>>>>);
//!
//! impl ReflectorStore<Job> for Jobs {
//!     type Error = std::convert::Infallible;
//!     fn add(&self, j: Arc<Job>) -> Result<(), Self::Error> { self.update(j) }
//!     fn update(&self, j: Arc<Job>) -> Result<(), Self::Error> {
//!         self.0.lock().unwrap().insert(j.name.clone(), j);
//!         Ok(())
//!     }
//!     fn delete(&self, j: Arc<Job>) -> Result<(), Self::Error> {
//!         self.0.lock().unwrap().remove(&j.name);
//!         Ok(())
//!     }
//!     fn replace(&self, all: Vec<Arc<Job>>, _rv: ResourceVersion) -> Result<(), Self::Error> {
//!         *self.0.lock().unwrap() = all.into_iter().map(|j| (j.name.clone(), j)).collect();
//!         Ok(())
//!     }
//!     fn resync(&self) -> Result<(), Self::Error> { Ok(()) }
//! }
//!
//! # async fn demo() -> Result<(), kcache_etcd::EtcdError> {
//! let lw = EtcdListWatcher::<Job>::connect(["http://127.0.0.1:2379"], None, "/jobs/").await?;
//! let writer = EtcdObjects::for_list_watcher(&lw);
//! writer
//!     .create(&Job { name: "backup".into(), schedule: "@daily".into(), rv: Default::default() })
//!     .await?;
//!
//! let jobs = Jobs::default();
//! let reflector = Reflector::builder(lw, jobs.clone())
//!     .on_watch_error(|e| eprintln!("jobs reflector: {e}"))
//!     .build();
//! let handle = reflector.handle();
//! tokio::spawn(reflector.run());
//! // ... read `jobs` ...
//! handle.stop();
//! # Ok(()) }
//! ```

mod codec;
mod decoder;
mod error;
mod keys;
mod list_watcher;
mod lock;
mod members;
mod objects;
mod watch;

pub use codec::{Codec, CodecError, JsonCodec};
pub use error::{EtcdError, MalformedValue};
/// Re-exported from [`kcache_core`], where they live (shared with kcache-memory), so
/// `kcache_etcd::SetResourceVersion` keeps working.
pub use kcache_core::{MetaMut, SetResourceVersion};
pub use list_watcher::{EtcdListWatcher, DEFAULT_INTERNAL_PAGE_SIZE, DEFAULT_MAX_MESSAGE_SIZE};
pub use lock::EtcdLock;
pub use members::EtcdMembers;
pub use objects::EtcdObjects;

/// This crate's README.md, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
