//! [`CacheSyncCheck`]: readiness of informers, as a [`HealthCheck`] for `/readyz`.

use crate::registration::HasSynced;
use kcache_core::health::{CheckError, HealthCheck};
use std::fmt;
use std::sync::Arc;

/// The error of a failed [`CacheSyncCheck`]: the informers (or handler registrations) whose
/// caches have not synced yet, by the names they were added under.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not synced yet: {}", .unsynced.join(", "))]
#[non_exhaustive]
pub struct NotSyncedError {
    /// The names of the items not synced, in the order they were added.
    pub unsynced: Vec<String>,
}

/// A readiness check that passes once every item added to it has synced (its first list is in
/// the cache): what a controller's `/readyz` reports before it can answer from its caches, as
/// Kubernetes' `informer-sync` readiness check.
///
/// Add informers (any [`HasSynced`]: a [`SharedIndexInformer`](crate::SharedIndexInformer), a
/// handler's [`HandlerRegistration`](crate::HandlerRegistration)) under names of your choice, or
/// take every informer of a factory with
/// [`InformerFactory::sync_check`](crate::InformerFactory::sync_check). It implements
/// [`HealthCheck`] (name `informer-sync`), failing with a [`NotSyncedError`] naming the items not
/// synced yet. Reading it costs one flag per item; it never waits.
///
/// # Examples
/// ```
/// use futures::future::BoxFuture;
/// use kcache_core::health::HealthChecks;
/// use kcache_informer::{CacheSyncCheck, HasSynced};
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// struct Flag(AtomicBool);
/// impl HasSynced for Flag {
///     fn has_synced(&self) -> bool { self.0.load(Ordering::Relaxed) }
///     fn wait_synced(&self) -> BoxFuture<'_, bool> { Box::pin(async { true }) }
/// }
///
/// let pods = Arc::new(Flag(AtomicBool::new(true)));
/// let nodes = Arc::new(Flag(AtomicBool::new(false)));
/// let readyz = HealthChecks::new()
///     .with(CacheSyncCheck::new().with("pods", pods).with("nodes", nodes.clone()));
/// assert_eq!(
///     readyz.check().to_string(),
///     "[-]informer-sync failed: not synced yet: nodes\ncheck failed\n"
/// );
/// nodes.0.store(true, Ordering::Relaxed);
/// assert!(readyz.check().is_ok());
/// ```
#[derive(Clone, Default)]
pub struct CacheSyncCheck {
    items: Vec<(String, Arc<dyn HasSynced>)>,
}

impl CacheSyncCheck {
    /// A check of nothing yet (it passes until items are added).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `item` under `name`.
    pub fn with(mut self, name: impl Into<String>, item: Arc<dyn HasSynced>) -> Self {
        self.items.push((name.into(), item));
        self
    }

    /// The names of the items not synced yet, in the order they were added.
    pub fn unsynced(&self) -> Vec<String> {
        self.items
            .iter()
            .filter(|(_, item)| !item.has_synced())
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// `Ok` once every item has synced.
    ///
    /// # Errors
    /// [`NotSyncedError`] naming the items not synced yet.
    pub fn check(&self) -> Result<(), NotSyncedError> {
        let unsynced = self.unsynced();
        if unsynced.is_empty() {
            Ok(())
        } else {
            Err(NotSyncedError { unsynced })
        }
    }
}

impl HealthCheck for CacheSyncCheck {
    fn name(&self) -> &str {
        "informer-sync"
    }
    fn check(&self) -> Result<(), CheckError> {
        CacheSyncCheck::check(self).map_err(CheckError::from)
    }
}

impl fmt::Debug for CacheSyncCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.items.iter().map(|(n, i)| (n, i.has_synced())))
            .finish()
    }
}
