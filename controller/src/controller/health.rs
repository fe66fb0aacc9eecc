//! [`WorkersCheck`]: whether a controller's workers are all running and none is stuck in one
//! reconcile, as a [`HealthCheck`] for `/healthz`.

use super::worker::Core;
use crate::sync::Mutex;
use kcache_core::health::{CheckError, HealthCheck};
use kcache_core::ObjectKey;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a [`WorkersCheck`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkersError {
    /// The controller is shutting down (its queue was shut down): its workers are leaving.
    #[error("controller {controller:?} is shutting down")]
    ShuttingDown {
        /// The controller's name.
        controller: String,
    },
    /// Fewer workers run than were started: they left while the controller was not shutting
    /// down (a watched informer stopped before its cache synced, so the workers never started).
    #[error("controller {controller:?}: {running} of {workers} workers are running")]
    WorkersExited {
        /// The controller's name.
        controller: String,
        /// The workers still running.
        running: usize,
        /// The workers the controller was started with.
        workers: usize,
    },
    /// A worker has been inside one reconcile for longer than the check allows (a deadlock, a
    /// call without a timeout): its key is held and no other worker can take it.
    #[error("controller {controller:?}: worker {worker} has been reconciling {key} for {busy_for:?} (limit {limit:?})")]
    Stuck {
        /// The controller's name.
        controller: String,
        /// The worker's index (0-based).
        worker: usize,
        /// The key it is reconciling.
        key: String,
        /// How long the reconcile has been running, on the controller's clock.
        busy_for: Duration,
        /// The check's limit.
        limit: Duration,
    },
}

/// Per worker: whether it runs, and since when it has been in which reconcile.
pub(crate) struct WorkerStates {
    running: AtomicUsize,
    busy: Vec<Mutex<Option<(Instant, ObjectKey)>>>,
}

impl WorkerStates {
    pub(crate) fn new(workers: usize) -> Self {
        Self {
            running: AtomicUsize::new(0),
            busy: (0..workers).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// Marks worker `index` as inside the reconcile of `key` from now until the guard drops.
    pub(crate) fn busy<'a>(&'a self, index: usize, key: &ObjectKey, now: Instant) -> Busy<'a> {
        let slot = self.busy.get(index);
        if let Some(slot) = slot {
            *slot.lock() = Some((now, key.clone()));
        }
        Busy(slot)
    }
}

/// A worker inside a reconcile (clears its slot when dropped).
pub(crate) struct Busy<'a>(Option<&'a Mutex<Option<(Instant, ObjectKey)>>>);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.0 {
            *slot.lock() = None;
        }
    }
}

/// A running worker: counted from before its thread or task is spawned until it ends (or its
/// task is dropped unpolled), so the count never dips while workers start.
pub(crate) struct Running(Arc<Core>);

impl Running {
    pub(crate) fn new(core: &Arc<Core>) -> Self {
        core.workers.running.fetch_add(1, Ordering::Relaxed);
        Self(core.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.workers.running.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A liveness check of one controller: it fails when the controller is shutting down, when
/// fewer of its workers run than it was started with, or when a worker has been inside one
/// reconcile for longer than `limit` on the controller's clock (a wedged worker holds its key
/// forever; the workqueue's `workqueue_longest_running_processor_seconds` shows the same from
/// the outside).
///
/// Get it from [`ControllerHandle::workers_check`](super::ControllerHandle::workers_check) and add
/// it to the [`HealthChecks`](kcache_core::health::HealthChecks) your `/healthz` handler runs. It
/// is named `NAME-workers` after the controller, and fails with a [`WorkersError`]. Before the
/// caches synced the workers wait, alive: the check passes (readiness is the informers'
/// [`CacheSyncCheck`](kcache_informer::CacheSyncCheck)).
#[derive(Clone)]
pub struct WorkersCheck {
    core: Arc<Core>,
    name: String,
    workers: usize,
    limit: Duration,
}

impl WorkersCheck {
    pub(crate) fn new(core: Arc<Core>, limit: Duration) -> Self {
        let name = format!("{}-workers", core.name);
        let workers = core.workers.busy.len();
        Self {
            core,
            name,
            workers,
            limit,
        }
    }

    /// How long one reconcile may run before the check fails.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// `Ok` while every worker runs and none is stuck.
    ///
    /// # Errors
    /// [`WorkersError`] saying which condition failed (the longest-running stuck worker, if
    /// several are).
    pub fn check(&self) -> Result<(), WorkersError> {
        let controller = || self.core.name.to_string();
        if self.core.queue.is_shutting_down() {
            return Err(WorkersError::ShuttingDown {
                controller: controller(),
            });
        }
        let running = self.core.workers.running.load(Ordering::Relaxed);
        if running < self.workers {
            return Err(WorkersError::WorkersExited {
                controller: controller(),
                running,
                workers: self.workers,
            });
        }
        let now = self.core.clock.now();
        let mut worst: Option<(usize, Duration, ObjectKey)> = None;
        for (worker, slot) in self.core.workers.busy.iter().enumerate() {
            if let Some((since, key)) = &*slot.lock() {
                let busy_for = now.saturating_duration_since(*since);
                if busy_for > self.limit && worst.as_ref().is_none_or(|w| busy_for > w.1) {
                    worst = Some((worker, busy_for, key.clone()));
                }
            }
        }
        match worst {
            Some((worker, busy_for, key)) => Err(WorkersError::Stuck {
                controller: controller(),
                worker,
                key: key.to_string(),
                busy_for,
                limit: self.limit,
            }),
            None => Ok(()),
        }
    }
}

impl HealthCheck for WorkersCheck {
    fn name(&self) -> &str {
        &self.name
    }
    fn check(&self) -> Result<(), CheckError> {
        WorkersCheck::check(self).map_err(CheckError::from)
    }
}

impl fmt::Debug for WorkersCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkersCheck")
            .field("name", &self.name)
            .field("workers", &self.workers)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}
