//! Warm restart (feature `snapshot`): an informer that starts from a snapshot of its cache and
//! watches from the snapshot's resource version instead of listing everything again.
//!
//! What happens, and when a restored informer reports synced: see the `snapshot` module's
//! documentation.

use crate::shared::Shared;
use crate::snapshot::{LoadError, RefusalReason, Snapshot, SnapshotCodec, SnapshotFile};
use kcache_core::{KeyText, Meta, ResourceVersion};
use kcache_deltafifo::RealFifo;
use kcache_reflector::ListWatcher;
use std::fmt;
use std::sync::Arc;

/// What loads (and refuses) the snapshot of a restore: a [`SnapshotFile`] behind a trait object,
/// so [`InformerOptions`](crate::InformerOptions) needs no codec type.
pub(crate) trait SnapshotLoader<T>: Send + Sync {
    fn load(&self) -> Result<Snapshot<Arc<T>>, LoadError>;
    fn refuse(&self, reason: RefusalReason, detail: &str);
    fn describe(&self) -> String;
}

impl<T, C> SnapshotLoader<T> for SnapshotFile<T, C>
where
    T: 'static,
    C: SnapshotCodec<T> + 'static,
{
    fn load(&self) -> Result<Snapshot<Arc<T>>, LoadError> {
        SnapshotFile::load_with(self, Arc::new)
    }
    fn refuse(&self, reason: RefusalReason, detail: &str) {
        SnapshotFile::refuse(self, reason, detail);
    }
    fn describe(&self) -> String {
        self.path().display().to_string()
    }
}

/// The restore an informer was built with (see [`InformerOptions::restore_from`](crate::InformerOptions::restore_from)).
pub(crate) struct Restore<T>(pub(crate) Arc<dyn SnapshotLoader<T>>);

impl<T> Clone for Restore<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> fmt::Debug for Restore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Restore").field(&self.0.describe()).finish()
    }
}

/// How an informer built with a snapshot to restore from started
/// ([`SharedIndexInformer::restore_outcome`](crate::SharedIndexInformer::restore_outcome)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RestoreOutcome {
    /// No restore was configured, or `run` has not reached it yet.
    NotAttempted,
    /// The cache was filled from the snapshot and the informer watches from its version.
    Restored {
        /// Objects restored.
        objects: u64,
        /// The snapshot's resource version (the watch resumes from it).
        resource_version: ResourceVersion,
        /// The source's version when the informer started: it reports synced once its cache
        /// has applied everything up to it.
        target: ResourceVersion,
    },
    /// The snapshot was missing or not used, for `reason` (logged and counted by the file's
    /// metrics); the informer listed as without one.
    Cold(RefusalReason),
}

/// Restores the informer's cache from the snapshot, if it can be used (see the module docs):
/// queues its objects as one list and returns the version to watch from. `None`: start cold.
pub(crate) async fn restore<T, L, M>(
    shared: &Shared<T, M>,
    lw: &L,
    fifo: &RealFifo<T, M>,
    restore: Restore<T>,
) -> Option<ResourceVersion>
where
    T: Send + Sync + 'static,
    L: ListWatcher<T>,
    M: Meta<T>,
{
    let loader = restore.0;
    let cold = |reason: RefusalReason| {
        *shared.restore_outcome.lock() = RestoreOutcome::Cold(reason);
        None
    };
    // The source's version first: if it cannot tell, the snapshot is not even read.
    let target = match lw.current_resource_version().await {
        Ok(Some(t)) if t.is_decimal() => t,
        Ok(Some(t)) => {
            let detail = format!("the source's resource version {t} is not a decimal number");
            loader.refuse(RefusalReason::NoSourceVersion, &detail);
            return cold(RefusalReason::NoSourceVersion);
        }
        Ok(None) => {
            loader.refuse(
                RefusalReason::NoSourceVersion,
                "the source cannot report its current resource version",
            );
            return cold(RefusalReason::NoSourceVersion);
        }
        Err(error) => {
            let detail = format!("cannot read the source's current resource version: {error}");
            loader.refuse(RefusalReason::NoSourceVersion, &detail);
            return cold(RefusalReason::NoSourceVersion);
        }
    };
    let snapshot = match load(loader.clone()).await {
        Ok(s) => s,
        // The file logged and counted it.
        Err(e) => return cold(e.reason()),
    };
    let rv = snapshot.header.resource_version.clone();
    let ordered = rv.cmp_decimal(&target);
    match ordered {
        None => {
            let detail = format!("the snapshot's resource version {rv} is not a decimal number");
            loader.refuse(RefusalReason::NoSourceVersion, &detail);
            return cold(RefusalReason::NoSourceVersion);
        }
        Some(std::cmp::Ordering::Greater) => {
            let detail = format!("snapshot at {rv}, the source is at {target}");
            loader.refuse(RefusalReason::AheadOfSource, &detail);
            return cold(RefusalReason::AheadOfSource);
        }
        Some(_) => {}
    }
    let mut keyed = Vec::with_capacity(snapshot.objects.len());
    for obj in snapshot.objects {
        match M::key(&obj) {
            Ok(key) => keyed.push((KeyText::from(key), obj)),
            Err(error) => {
                let detail = format!("a snapshot object has no key: {error}");
                loader.refuse(RefusalReason::Malformed, &detail);
                return cold(RefusalReason::Malformed);
            }
        }
    }
    let objects = keyed.len() as u64;
    // Synced waits for the target from here on (see `Shared::set_synced`).
    *shared.catch_up.lock() = Some(target.clone());
    fifo.replace_keyed(keyed, rv.clone());
    shared.received(rv.clone());
    tracing::info!(informer = %shared.name, snapshot = %loader.describe(), objects, %rv, %target, "cache restored from a snapshot; watching from its version");
    *shared.restore_outcome.lock() = RestoreOutcome::Restored {
        objects,
        resource_version: rv.clone(),
        target,
    };
    Some(rv)
}

/// Loads on a blocking thread when a tokio runtime is there (decoding a large snapshot takes a
/// while), else inline.
async fn load<T: Send + Sync + 'static>(
    loader: Arc<dyn SnapshotLoader<T>>,
) -> Result<Snapshot<Arc<T>>, LoadError> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            let task = handle.spawn_blocking({
                let loader = loader.clone();
                move || loader.load()
            });
            match task.await {
                Ok(loaded) => loaded,
                Err(e) => {
                    let detail = format!("the snapshot loader panicked: {e}");
                    loader.refuse(RefusalReason::Io, &detail);
                    Err(LoadError::Io(std::io::Error::other(detail)))
                }
            }
        }
        Err(_) => loader.load(),
    }
}
