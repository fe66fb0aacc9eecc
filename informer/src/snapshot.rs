//! Snapshots of an informer's cache, for warm restarts (feature `snapshot`).
//!
//! [`CacheSnapshots`] writes the cache with the resource version it is consistent at into a
//! [`SnapshotFile`] (the file layer is the `kcache-snapshot` crate, re-exported here): on demand,
//! every period in the background, and once more when the informer stops. Objects are collected
//! as `Arc`s under one read of the cache; encoding and the file system work happen afterwards,
//! on a blocking thread, with no lock held.
//!
//! # Which version a snapshot is consistent at
//! A snapshot's version V promises: every change the source made up to V is in the snapshot,
//! and none made after V. The informer publishes V (the version all of whose events the cache
//! has applied) when it finds its queue idle. A capture reads V, then the objects and the cache's
//! own version (that of its last write) under one read lock; if the cache's version is not past
//! V, no write newer than V happened in between and the capture is taken at V. Otherwise the
//! cache is mid-change and the capture waits for the next publication.
//!
//! # Restoring (warm restart)
//! An informer built with
//! [`InformerOptions::restore_from`](crate::InformerOptions::restore_from) starts warm (kcache
//! only: client-go, controller-runtime and kube-runtime always list). When
//! [`run`](crate::SharedIndexInformer::run) starts, before the reflector does:
//! 1. the source is asked for its current resource version `T`
//!    ([`ListWatcher::current_resource_version`]); a source that cannot tell (or fails to, or
//!    whose versions are not decimal) gets the cold path;
//! 2. the snapshot is loaded and checked (see [`SnapshotFile::load`]); a refusal is logged and
//!    counted by the file's metrics, and the informer lists as without a snapshot. A snapshot
//!    newer than `T` is not used either ([`RefusalReason::AheadOfSource`]);
//! 3. the snapshot's objects enter the informer's queue as one list (a `ReplacedAll` entry): the
//!    cache and its indexes are filled in one step no reader sees half done, and every handler
//!    registered before `run` hears them as initial adds (`is_in_initial_list = true`);
//! 4. the reflector watches from the snapshot's version `N`
//!    ([`ReflectorBuilder::resume_from`](kcache_reflector::ReflectorBuilder::resume_from)): the
//!    changes made while the informer was down arrive as ordinary watch events (adds, updates,
//!    deletes). If the source says `N` is gone (expired, compacted), the reflector lists at once
//!    and the list is applied as any relist: snapshot objects it lacks reach the handlers as
//!    deletions with tombstones ([`DeletedObject::is_final_state_unknown`](crate::DeletedObject::is_final_state_unknown)).
//!
//! ## When a restored informer reports synced
//! [`has_synced`](crate::SharedIndexInformer::has_synced) waits until the cache has applied
//! every event of the source up to a version at least `T`: the informer's applied version (the
//! one [`wait_for_resource_version`](crate::SharedIndexInformer::wait_for_resource_version)
//! waits on) has reached `T`. That version moves with each event applied *and with each
//! bookmark* the watch delivers, which matters for a source whose versions count more than the
//! watched objects: etcd's revision is store-wide, so no event under the informer's prefix may
//! ever carry `T` itself. kcache-etcd turns etcd's watch progress notifications into bookmarks
//! (sent only to a watcher that has delivered everything up to their revision), so a quiet
//! prefix reports synced at the first progress notification after `T`; etcd sends them every
//! `--experimental-watch-progress-notify-interval` (10 minutes by default: lower it on servers
//! whose informers restart warm, or the first change under the prefix does it). After the
//! expired-version fallback, the relist (a list of the source's current state) or the watch
//! after it reaches `T`.

pub use crate::restore::RestoreOutcome;
pub use kcache_snapshot::*;

use crate::shared::Shared;
use crate::sync::Mutex;
use crate::SharedIndexInformer;
use futures::future::{select, Either};
use kcache_core::{Meta, ResourceVersion};
use kcache_reflector::ListWatcher;
use std::fmt;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

/// The cache's objects and the resource version they are consistent at (see the module docs).
#[derive(Debug, Clone)]
pub struct CacheCapture<T> {
    /// Every cached object.
    pub objects: Vec<Arc<T>>,
    /// The version they are consistent at.
    pub resource_version: ResourceVersion,
}

/// Why [`CacheSnapshots::write_now`] wrote nothing or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The informer has not synced: its cache is not a state of the source yet.
    #[error("the informer has not synced")]
    NotSynced,
    /// The informer stopped while its cache was between two consistent states (events queued
    /// but not applied); the previous snapshot is kept.
    #[error("the informer stopped with changes it had not applied")]
    Inconsistent,
    /// Writing failed; the previous snapshot is intact.
    #[error("cannot write the snapshot")]
    Write(#[from] WriteError),
    /// The blocking writer thread panicked (a panicking codec).
    #[error("the snapshot writer panicked")]
    Panicked,
}

/// Writes snapshots of one informer's cache (see the [module docs](self)).
///
/// # Examples
/// ```
/// use kcache_core::{Object, ResourceVersion};
/// use kcache_informer::snapshot::{PostcardCodec, SnapshotFile};
/// use kcache_informer::SharedIndexInformer;
/// use kcache_memory::{MemorySource, SetResourceVersion};
/// use std::time::Duration;
///
/// #[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
/// struct Cm { name: String, rv: String }
/// impl Object for Cm {
///     fn namespace(&self) -> Option<&str> { None }
///     fn name(&self) -> &str { &self.name }
///     fn resource_version(&self) -> ResourceVersion { ResourceVersion::new(&self.rv) }
/// }
/// impl SetResourceVersion for Cm {
///     fn set_resource_version(&mut self, rv: ResourceVersion) { self.rv = rv.as_str().into(); }
/// }
///
/// # let dir = std::env::temp_dir().join(format!("kcache-informer-snap-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
/// runtime.block_on(async {
///     let source = MemorySource::<Cm>::new();
///     source.create(Cm { name: "a".into(), rv: String::new() })?;
///     let informer = SharedIndexInformer::new(source.clone(), Duration::ZERO);
///     let snapshots = informer.snapshots(SnapshotFile::new(dir.join("cm.snap"), PostcardCodec::named("Cm/v1")));
///
///     let stop = informer.stop_handle();
///     let run = informer.run(std::future::pending());
///     let work = async {
///         assert!(informer.wait_for_cache_sync().await);
///         let stats = snapshots.write_now().await?;
///         assert_eq!(stats.objects, 1);
///         stop.stop();
///         Ok::<_, Box<dyn std::error::Error>>(())
///     };
///     let (ran, worked) = tokio::join!(run, work);
///     ran?;
///     worked?;
///     let loaded = snapshots.file().load()?;
///     assert_eq!(loaded.header.resource_version, source.resource_version());
///     Ok::<_, Box<dyn std::error::Error>>(())
/// })?;
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CacheSnapshots<T, M, C> {
    shared: Arc<Shared<T, M>>,
    file: Arc<SnapshotFile<T, C>>,
    last_written: Mutex<Option<ResourceVersion>>,
}

impl<T, L, M> SharedIndexInformer<T, L, M>
where
    T: Send + Sync + 'static,
    L: ListWatcher<T>,
    M: Meta<T>,
{
    /// Snapshots of this informer's cache into `file` (see [`CacheSnapshots`]).
    pub fn snapshots<C>(&self, file: SnapshotFile<T, C>) -> CacheSnapshots<T, M, C>
    where
        C: SnapshotCodec<T> + 'static,
    {
        CacheSnapshots {
            shared: self.shared.clone(),
            file: Arc::new(file),
            last_written: Mutex::new(None),
        }
    }
}

impl<T, M, C> CacheSnapshots<T, M, C>
where
    T: Send + Sync + 'static,
    M: Meta<T>,
    C: SnapshotCodec<T> + 'static,
{
    /// The snapshot file.
    pub fn file(&self) -> &SnapshotFile<T, C> {
        &self.file
    }

    /// The cache's objects at a consistent version, if the cache is at one now (the informer
    /// synced and no applied change is newer than its published version); `None` otherwise.
    pub fn capture(&self) -> Option<CacheCapture<T>> {
        if !self.shared.lifecycle.borrow().synced {
            return None;
        }
        // Read before the cache: every event up to `applied` is in the cache from here on.
        let applied = self.shared.applied_rv.borrow().clone();
        if applied.is_empty() {
            return None;
        }
        let (objects, cached) = self
            .shared
            .indexer
            .thread_safe_store()
            .list_with_resource_version();
        not_past(&cached, &applied).then_some(CacheCapture {
            objects,
            resource_version: applied,
        })
    }

    /// Waits for a consistent capture: at once if the cache is at one, else until the informer
    /// publishes its next applied version (or stops).
    pub async fn consistent_capture(&self) -> Result<CacheCapture<T>, SnapshotError> {
        let mut applied = self.shared.applied_rv.subscribe();
        let mut lifecycle = self.shared.lifecycle.subscribe();
        loop {
            applied.borrow_and_update();
            if let Some(capture) = self.capture() {
                return Ok(capture);
            }
            let l = *lifecycle.borrow_and_update();
            if l.stopped {
                return Err(if l.synced {
                    SnapshotError::Inconsistent
                } else {
                    SnapshotError::NotSynced
                });
            }
            if !l.synced {
                if lifecycle.changed().await.is_err() {
                    return Err(SnapshotError::NotSynced);
                }
                continue;
            }
            let changed = match select(pin!(applied.changed()), pin!(lifecycle.changed())).await {
                Either::Left((changed, _)) | Either::Right((changed, _)) => changed,
            };
            if changed.is_err() {
                return Err(SnapshotError::Inconsistent);
            }
        }
    }

    /// Writes a snapshot now: waits for a consistent capture, then encodes and writes it on a
    /// blocking thread.
    pub async fn write_now(&self) -> Result<WriteStats, SnapshotError> {
        let capture = self.consistent_capture().await?;
        self.write(capture).await
    }

    async fn write(&self, capture: CacheCapture<T>) -> Result<WriteStats, SnapshotError> {
        let file = self.file.clone();
        let rv = capture.resource_version.clone();
        let stats = tokio::task::spawn_blocking(move || {
            file.write(
                &capture.resource_version,
                capture.objects.iter().map(|o| &**o),
            )
        })
        .await
        .map_err(|_| SnapshotError::Panicked)??;
        *self.last_written.lock() = Some(rv);
        Ok(stats)
    }

    /// Writes a snapshot every `period` (by the informer's clock) when the cache's version moved
    /// since the last one, and once more when the informer stops; returns then. Failures are
    /// logged (and counted by the file's metrics); the next period tries again.
    pub async fn run(&self, period: Duration) {
        let mut lifecycle = self.shared.lifecycle.subscribe();
        loop {
            let tick = self.shared.clock.sleep_async(period);
            let stopped = async {
                while !lifecycle.borrow_and_update().stopped {
                    if lifecycle.changed().await.is_err() {
                        return;
                    }
                }
            };
            let stopping = matches!(select(tick, pin!(stopped)).await, Either::Right(_));
            if stopping {
                // The cache no longer changes: it is at a consistent version or never will be.
                match self.capture() {
                    Some(c) if !self.written_at(&c.resource_version) => {
                        self.log(self.write(c).await)
                    }
                    Some(_) => {}
                    None => {
                        tracing::warn!(informer = %self.shared.name, "no snapshot on stop: the cache was not at a consistent version")
                    }
                }
                return;
            }
            if self.shared.applied_rv.borrow().is_empty()
                || self.written_at(&self.shared.applied_rv.borrow())
            {
                continue;
            }
            let written = async {
                let capture = self.consistent_capture().await?;
                if self.written_at(&capture.resource_version) {
                    return Ok(None);
                }
                self.write(capture).await.map(Some)
            };
            match written.await {
                Ok(Some(stats)) => self.log(Ok(stats)),
                Ok(None) => {}
                // Stopped while waiting: the loop's next turn writes the final snapshot.
                Err(SnapshotError::Inconsistent | SnapshotError::NotSynced) => {}
                Err(e) => self.log(Err(e)),
            }
        }
    }

    fn written_at(&self, rv: &ResourceVersion) -> bool {
        self.last_written.lock().as_ref() == Some(rv)
    }

    fn log(&self, result: Result<WriteStats, SnapshotError>) {
        match result {
            Ok(stats) => {
                tracing::debug!(informer = %self.shared.name, objects = stats.objects, bytes = stats.bytes, "cache snapshot written")
            }
            Err(e) => {
                tracing::warn!(informer = %self.shared.name, error = %e, "cache snapshot not written")
            }
        }
    }
}

/// Whether the cache's version `cached` is not past `applied`: equal, or both decimal and not
/// greater ([`ResourceVersion::cmp_decimal`]). An empty `cached` (nothing written since the last
/// list) is not past anything.
fn not_past(cached: &ResourceVersion, applied: &ResourceVersion) -> bool {
    cached.is_empty()
        || cached == applied
        || cached
            .cmp_decimal(applied)
            .is_some_and(|order| order != std::cmp::Ordering::Greater)
}

impl<T, M, C: fmt::Debug> fmt::Debug for CacheSnapshots<T, M, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheSnapshots")
            .field("informer", &self.shared.name)
            .field("file", &self.file)
            .field("last_written", &*self.last_written.lock())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::not_past;
    use kcache_core::ResourceVersion;

    #[test]
    fn a_cache_version_is_past_the_applied_one_only_when_newer_or_incomparable() {
        let rv = ResourceVersion::new;
        assert!(not_past(&rv(""), &rv("5")));
        assert!(not_past(&rv("5"), &rv("5")));
        assert!(not_past(&rv("4"), &rv("10")));
        assert!(!not_past(&rv("11"), &rv("10")));
        assert!(not_past(&rv("x"), &rv("x")));
        assert!(!not_past(&rv("x"), &rv("y")));
        // Ordered as ResourceVersion::cmp_decimal orders: any length, no sign.
        assert!(not_past(
            &rv("99999999999999999999"),
            &rv("100000000000000000000")
        ));
        assert!(!not_past(&rv("+3"), &rv("5")));
    }
}
