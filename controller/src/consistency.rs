//! [`ConsistencyStore`]: no reconcile on a cache older than the controller's own last writes
//! (KEP-5647's staleness mitigation).

use kcache_core::sync::Mutex;
use kcache_core::{Clock, Meta, ObjectKey, ResourceVersion, SystemClock};
use kcache_informer::{ResourceVersionError, SharedIndexInformer};
use kcache_reflector::ListWatcher;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// How long a key waits at most for the caches to reach its writes, by default.
pub const DEFAULT_MAX_STALENESS_WAIT: Duration = Duration::from_secs(30);

/// A cache whose progress can be asked about without waiting.
trait CacheVersion: Send + Sync {
    /// Whether the cache has applied everything up to `rv`.
    fn reached(&self, rv: &ResourceVersion) -> Result<bool, ResourceVersionError>;
    fn name(&self) -> &str;
}

struct InformerVersion<T, L: ListWatcher<T>, M>(Arc<SharedIndexInformer<T, L, M>>);

impl<T, L, M> CacheVersion for InformerVersion<T, L, M>
where
    T: Send + Sync + 'static,
    L: ListWatcher<T>,
    M: Meta<T>,
{
    fn reached(&self, rv: &ResourceVersion) -> Result<bool, ResourceVersionError> {
        // The informer's own read-your-writes wait, polled once: it resolves at once when the
        // cache is there (or cannot get there), and is pending otherwise.
        use futures::FutureExt;
        match self.0.wait_for_resource_version(rv).now_or_never() {
            Some(Ok(())) => Ok(true),
            Some(Err(e)) => Err(e),
            None => Ok(false),
        }
    }

    fn name(&self) -> &str {
        self.0.name()
    }
}

/// One write a key waits for.
struct Pending {
    cache: Arc<dyn CacheVersion>,
    rv: ResourceVersion,
    since: Instant,
}

struct Inner {
    pending: Mutex<HashMap<ObjectKey, Vec<Pending>>>,
    clock: Arc<dyn Clock>,
    /// In nanoseconds.
    max_wait: AtomicU64,
}

/// Why a write could not be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConsistencyError {
    /// The informer cannot order this resource version (it is not a decimal integer), so
    /// nobody could tell when its cache reached it.
    #[error("informer {informer:?} cannot order resource version {rv:?}")]
    Unordered {
        /// The informer's name.
        informer: String,
        /// The version given.
        rv: ResourceVersion,
    },
}

/// Whether a key may be reconciled now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Nothing recorded, or every recorded write is in the caches (or waited for too long).
    Ready,
    /// A recorded write is not in its cache yet.
    Stale,
}

/// The writes each key's last reconciles made, and whether the caches have seen them yet:
/// KEP-5647's consistency store (kube-controller-manager turned it on for its ReplicaSet,
/// DaemonSet, StatefulSet and Job controllers in 1.36).
///
/// A reconcile that writes (creates pods, updates its object's status) and is run again before
/// the watch events of those writes reached the informers reads a cache that does not show them
/// yet, and repeats them: a second set of pods. With a store, each reconcile records the
/// resource versions its writes returned through a [`WriteTracker`] (one per informer the writes
/// show up in), under the key being reconciled, the owner's key for owned objects. Before the
/// key's next reconcile, the controller's worker asks whether every informer involved has applied
/// those versions: if so the records are dropped and the reconcile runs; if not, the reconcile is
/// skipped and the key requeued through the rate limiter, as after an error (counted in
/// [`ControllerStats::stale_sync_skips`](crate::ControllerStats::stale_sync_skips)). A key waits at
/// most [`max_wait`](Self::max_wait) after its oldest unseen write (a write the informer never
/// sees, say to an object outside its selector, must not stall the key for good); then it is
/// reconciled anyway, with a warning.
///
/// Only keys with recorded writes are ever held back. Whether a cache has reached a version is
/// the informer's [`wait_for_resource_version`](SharedIndexInformer::wait_for_resource_version),
/// which orders versions as decimal integers
/// ([`ResourceVersion::cmp_decimal`](kcache_core::ResourceVersion::cmp_decimal)): a version that
/// is not one is refused at [`WriteTracker::record`] ([`ConsistencyError::Unordered`]).
///
/// # Examples
/// ```
/// use kcache_controller::{ConsistencyStore, Controller};
/// # use kcache_core::{Object, ResourceVersion};
/// # use kcache_informer::SharedIndexInformer;
/// # use kcache_memory::{MemorySource, SetResourceVersion};
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # #[derive(Clone, Debug)]
/// # struct Pod { name: String, rv: ResourceVersion }
/// # impl Object for Pod {
/// #     fn namespace(&self) -> Option<&str> { None }
/// #     fn name(&self) -> &str { &self.name }
/// #     fn resource_version(&self) -> ResourceVersion { self.rv.clone() }
/// # }
/// # impl SetResourceVersion for Pod {
/// #     fn set_resource_version(&mut self, rv: ResourceVersion) { self.rv = rv; }
/// # }
/// let pods = Arc::new(SharedIndexInformer::new(MemorySource::<Pod>::new(), Duration::ZERO));
/// let consistency = ConsistencyStore::new();
/// let pod_writes = consistency.tracker(&pods);
/// let controller = Controller::builder("replicasets")
///     .consistency_store(&consistency)
///     .build()?;
/// // In the reconcile of key `set`: after creating a pod that came back with version `rv`,
/// // `pod_writes.record(&set, &rv)?;`
/// # let _ = (controller, pod_writes);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ConsistencyStore {
    inner: Arc<Inner>,
}

impl Default for ConsistencyStore {
    fn default() -> Self {
        Self::new()
    }
}

impl ConsistencyStore {
    /// An empty store on the system clock, waiting at most
    /// [`DEFAULT_MAX_STALENESS_WAIT`] (30 s) for a key's writes.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// An empty store on `clock` (a [`FakeClock`](kcache_core::FakeClock) in tests).
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self {
            inner: Arc::new(Inner {
                pending: Mutex::new(HashMap::new()),
                clock,
                max_wait: AtomicU64::new(nanos(DEFAULT_MAX_STALENESS_WAIT)),
            }),
        }
    }

    /// How long a key is held back at most after its oldest write the caches have not shown
    /// yet (default 30 s; it applies to every clone of the store).
    #[must_use]
    pub fn max_wait(self, max_wait: Duration) -> Self {
        self.inner
            .max_wait
            .store(nanos(max_wait), Ordering::Relaxed);
        self
    }

    fn max_wait_now(&self) -> Duration {
        Duration::from_nanos(self.inner.max_wait.load(Ordering::Relaxed))
    }

    /// A handle for recording writes that show up in `informer`'s cache. Cheap to clone; give
    /// one to the reconcile function.
    pub fn tracker<T, L, M>(&self, informer: &Arc<SharedIndexInformer<T, L, M>>) -> WriteTracker
    where
        T: Send + Sync + 'static,
        L: ListWatcher<T>,
        M: Meta<T>,
    {
        WriteTracker {
            store: self.clone(),
            cache: Arc::new(InformerVersion(informer.clone())),
        }
    }

    /// Whether `key` may be reconciled now: no recorded write of it is missing from its cache
    /// (client-go's `isReady`). Drops the records the caches have reached.
    pub fn is_ready(&self, key: &ObjectKey) -> bool {
        self.check(key) == Freshness::Ready
    }

    /// How many recorded writes of `key` the caches have not shown yet (as of the last check).
    pub fn pending(&self, key: &ObjectKey) -> usize {
        self.inner.pending.lock().get(key).map_or(0, Vec::len)
    }

    /// Forgets what was recorded for `key` (its object was deleted, say).
    pub fn forget(&self, key: &ObjectKey) {
        self.inner.pending.lock().remove(key);
    }

    /// The worker's question before a reconcile of `key`.
    pub(crate) fn check(&self, key: &ObjectKey) -> Freshness {
        let mut map = self.inner.pending.lock();
        let Some(list) = map.get_mut(key) else {
            return Freshness::Ready;
        };
        // A cache that cannot answer (stopped, unordered) holds nothing back.
        list.retain(|p| matches!(p.cache.reached(&p.rv), Ok(false)));
        let Some(oldest) = list.iter().map(|p| p.since).min() else {
            map.remove(key);
            return Freshness::Ready;
        };
        let waited = self.inner.clock.now().saturating_duration_since(oldest);
        if waited >= self.max_wait_now() {
            let missing: Vec<String> = list
                .iter()
                .map(|p| format!("{}@{}", p.cache.name(), p.rv))
                .collect();
            tracing::warn!(%key, ?waited, ?missing, "the caches have not shown this key's writes within the staleness wait; reconciling anyway");
            map.remove(key);
            return Freshness::Ready;
        }
        Freshness::Stale
    }

    fn record(
        &self,
        cache: &Arc<dyn CacheVersion>,
        key: &ObjectKey,
        rv: &ResourceVersion,
    ) -> Result<(), ConsistencyError> {
        match cache.reached(rv) {
            Ok(true) | Err(ResourceVersionError::Stopped) => return Ok(()),
            Ok(false) => {}
            Err(_) => {
                return Err(ConsistencyError::Unordered {
                    informer: cache.name().to_owned(),
                    rv: rv.clone(),
                })
            }
        }
        let since = self.inner.clock.now();
        let mut map = self.inner.pending.lock();
        let list = map.entry(key.clone()).or_default();
        if !list
            .iter()
            .any(|p| Arc::ptr_eq(&p.cache, cache) && p.rv == *rv)
        {
            list.push(Pending {
                cache: cache.clone(),
                rv: rv.clone(),
                since,
            });
        }
        Ok(())
    }
}

impl fmt::Debug for ConsistencyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsistencyStore")
            .field("keys", &self.inner.pending.lock().len())
            .field("max_wait", &self.max_wait_now())
            .finish()
    }
}

/// Records writes whose events reach one informer, under the key of the reconcile that made
/// them (see [`ConsistencyStore`]). Cheap to clone.
#[derive(Clone)]
pub struct WriteTracker {
    store: ConsistencyStore,
    cache: Arc<dyn CacheVersion>,
}

impl WriteTracker {
    /// Records that the reconcile of `key` wrote something this tracker's informer will see at
    /// resource version `rv` (the version the write returned): the key's next reconcile waits
    /// until the informer's cache has reached it. For an owned object, `key` is its owner's key.
    /// Recording a version the cache has already reached records nothing.
    ///
    /// # Errors
    /// [`ConsistencyError::Unordered`] if the informer cannot order `rv`.
    pub fn record(&self, key: &ObjectKey, rv: &ResourceVersion) -> Result<(), ConsistencyError> {
        self.store.record(&self.cache, key, rv)
    }

    /// The store this tracker records into.
    pub fn store(&self) -> &ConsistencyStore {
        &self.store
    }
}

impl fmt::Debug for WriteTracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteTracker")
            .field("informer", &self.cache.name())
            .finish_non_exhaustive()
    }
}
