//! An in-process, versioned object source with Kubernetes list/watch semantics.
//!
//! [`MemorySource`] keeps objects by key, gives every write the next resource version and keeps a
//! bounded history of changes, so it can be listed (with pages) and watched (from any recent
//! version) through [`kcache_reflector::ListWatcher`] exactly like an API server. Embed it where
//! the source of truth lives in your process: tests of controllers, simulations, single-process
//! applications. It is also meant as kcache's embedded default source and the test double of
//! its own tests.
//!
//! # Resource versions
//! A `u64` counter rendered as decimal text: a new source is at `"1"`, each write takes the next
//! number. The version is stamped into the stored object through [`MetaMut`] (for your own types:
//! implement [`kcache_core::Object`] and [`SetResourceVersion`], both from kcache-core and
//! re-exported here), so every reader sees the version of the write that made the object, as in
//! Kubernetes. The source stamps every created or updated object before it stores it (no copy:
//! the object is yours, passed by value), and a copy of the last state of a deleted object (the
//! `Deleted` event carries the deletion's version).
//!
//! # Listing
//! - `resource_version` `""` or `"0"`: the current state.
//! - a version `v`, match `NotOlderThan` or unset: the current state (never older than `v`);
//!   [`MemoryError::TooLargeResourceVersion`] if `v` is newer than the source.
//! - a version `v`, match `Exact`: the state at `v`, rebuilt from the history window;
//!   [`MemoryError::Expired`] before the window, `TooLargeResourceVersion` after now.
//! - `limit` (capped by [`MemoryConfig::with_page_size_limit`]) pages in key order. Every page of one
//!   list reports the same version and shows the state at that version, whatever was written
//!   between pages. A continue token older than the window gets `Expired`.
//!
//! # Watching
//! - from a version `v`: the changes after `v` from the history (in order), then live changes.
//!   `v` before the window: [`ListWatcher::watch`](kcache_reflector::ListWatcher::watch) itself
//!   returns [`MemoryError::Expired`] (never the stream); `v` after now: `TooLargeResourceVersion`.
//! - from `""` or `"0"`: every current object as `Added` (Kubernetes' synthetic events), then live
//!   changes.
//! - `send_initial_events` (watch-list): every object of a consistent snapshot as `Added`, then a
//!   bookmark with `initial_events_end` at the snapshot's version (sent whether or not bookmarks
//!   are allowed), then live changes. A version in the request is a lower bound (`NotOlderThan`).
//! - `allow_bookmarks`: a bookmark at the watcher's latest version after every
//!   [`MemoryConfig::with_bookmark_interval`] of the clock's time.
//! - `timeout`: the stream ends cleanly (returns `None`) once the clock passes it.
//! - A slow watcher never blocks writers: each has a bounded buffer
//!   ([`MemoryConfig::with_watcher_buffer`]); the write that would overflow it evicts the watcher,
//!   whose stream then yields [`MemoryError::Evicted`] (classified as expired: relist) and ends.
//!
//! Timeouts and bookmarks run on the configured [`kcache_core::Clock`]: with a
//! [`kcache_core::FakeClock`], `advance` drives them; with the real clock, streams that use them
//! must be polled inside a tokio runtime.
//!
//! # Examples
//! ```
//! use futures::{executor::block_on, StreamExt};
//! use kcache_core::{Object, ResourceVersion};
//! use kcache_memory::{MemoryError, MemorySource, SetResourceVersion};
//! use kcache_reflector::{ListOptions, ListWatcher, WatchEvent, WatchOptions};
//!
//! #[derive(Clone, Debug)]
//! struct Pod { namespace: String, name: String, image: String, rv: ResourceVersion }
//!
//! impl Object for Pod {
//!     fn namespace(&self) -> Option<&str> { Some(&self.namespace) }
//!     fn name(&self) -> &str { &self.name }
//!     fn resource_version(&self) -> ResourceVersion { self.rv.clone() }
//! }
//! impl SetResourceVersion for Pod {
//!     fn set_resource_version(&mut self, rv: ResourceVersion) { self.rv = rv; }
//! }
//!
//! let pod = |image: &str| Pod {
//!     namespace: "default".into(),
//!     name: "web".into(),
//!     image: image.into(),
//!     rv: ResourceVersion::default(),
//! };
//! let source = MemorySource::<Pod>::new();
//! let created = source.create(pod("nginx:1"))?;
//! assert_eq!(created.rv.as_str(), "2");
//!
//! block_on(async {
//!     let page = source.list(&ListOptions::default()).await?;
//!     assert_eq!(page.items.len(), 1);
//!     assert_eq!(page.resource_version.as_str(), "2");
//!
//!     let from = WatchOptions { resource_version: page.resource_version, ..Default::default() };
//!     let mut watch = source.watch(&from).await?;
//!     source.update(pod("nginx:2"))?;
//!     match watch.next().await {
//!         Some(Ok(WatchEvent::Modified(pod))) => {
//!             assert_eq!((pod.image.as_str(), pod.rv.as_str()), ("nginx:2", "3"))
//!         }
//!         other => panic!("expected the update, got {other:?}"),
//!     }
//!     Ok::<_, MemoryError>(())
//! })?;
//! # Ok::<(), MemoryError>(())
//! ```

mod config;
mod error;
mod history;
mod list_watch;
mod source;
mod sync;
mod watch;

pub use config::MemoryConfig;
pub use error::MemoryError;
/// Re-exported from [`kcache_core`], where they live, so `kcache_memory::SetResourceVersion`
/// keeps working.
pub use kcache_core::{MetaMut, SetResourceVersion};
pub use source::MemorySource;

/// This crate's README.md, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
