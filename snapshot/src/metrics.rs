//! What a snapshot file reports: the [`SnapshotMetrics`] hooks and the [`SnapshotCounters`]
//! that implement them with atomic counters.

use crate::sync::atomic::{AtomicU64, Ordering};
use crate::RefusalReason;
use std::fmt;
use std::time::Duration;

/// Called by a [`SnapshotFile`](crate::SnapshotFile) after each write and load; every method
/// defaults to doing nothing. Implement it to feed your metrics system (labels: the snapshot's
/// name, the [`RefusalReason::as_str`] label).
pub trait SnapshotMetrics: Send + Sync + 'static {
    /// A snapshot of `objects` objects, `bytes` long, was written (encoding and file system
    /// steps took `took`).
    fn written(&self, objects: u64, bytes: u64, took: Duration) {
        let _ = (objects, bytes, took);
    }
    /// A write failed; the previous snapshot is intact.
    fn write_failed(&self) {}
    /// A snapshot of `objects` objects, `bytes` long, was loaded and accepted.
    fn loaded(&self, objects: u64, bytes: u64) {
        let _ = (objects, bytes);
    }
    /// A snapshot was not loaded, for `reason` ([`RefusalReason::Missing`] when there was none).
    fn refused(&self, reason: RefusalReason) {
        let _ = reason;
    }
}

/// [`SnapshotMetrics`] as atomic counters, to read directly or export.
///
/// # Examples
/// ```
/// use kcache_snapshot::{RefusalReason, SnapshotCounters, SnapshotMetrics};
///
/// let counters = SnapshotCounters::default();
/// counters.refused(RefusalReason::Checksum);
/// assert_eq!(counters.refusals(RefusalReason::Checksum), 1);
/// assert_eq!(counters.refusals(RefusalReason::TooOld), 0);
/// ```
#[derive(Default)]
pub struct SnapshotCounters {
    writes: AtomicU64,
    write_failures: AtomicU64,
    last_write_bytes: AtomicU64,
    last_write_micros: AtomicU64,
    loads: AtomicU64,
    refusals: [AtomicU64; RefusalReason::ALL.len()],
}

impl SnapshotCounters {
    /// Snapshots written.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }
    /// Writes that failed.
    pub fn write_failures(&self) -> u64 {
        self.write_failures.load(Ordering::Relaxed)
    }
    /// The size of the last snapshot written, in bytes.
    pub fn last_write_bytes(&self) -> u64 {
        self.last_write_bytes.load(Ordering::Relaxed)
    }
    /// How long the last write took.
    pub fn last_write_duration(&self) -> Duration {
        Duration::from_micros(self.last_write_micros.load(Ordering::Relaxed))
    }
    /// Snapshots loaded and accepted.
    pub fn loads(&self) -> u64 {
        self.loads.load(Ordering::Relaxed)
    }
    /// Loads refused (or without a file) for `reason`.
    pub fn refusals(&self, reason: RefusalReason) -> u64 {
        self.refusals[reason.index()].load(Ordering::Relaxed)
    }
}

impl SnapshotMetrics for SnapshotCounters {
    fn written(&self, _objects: u64, bytes: u64, took: Duration) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.last_write_bytes.store(bytes, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.last_write_micros.store(micros, Ordering::Relaxed);
    }
    fn write_failed(&self) {
        self.write_failures.fetch_add(1, Ordering::Relaxed);
    }
    fn loaded(&self, _objects: u64, _bytes: u64) {
        self.loads.fetch_add(1, Ordering::Relaxed);
    }
    fn refused(&self, reason: RefusalReason) {
        self.refusals[reason.index()].fetch_add(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for SnapshotCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("SnapshotCounters");
        d.field("writes", &self.writes())
            .field("write_failures", &self.write_failures())
            .field("loads", &self.loads());
        for reason in RefusalReason::ALL {
            let n = self.refusals(reason);
            if n > 0 {
                d.field(reason.as_str(), &n);
            }
        }
        d.finish()
    }
}
