//! [`ShardGate`]: what a controller's workers ask before each reconcile, and the sharding
//! counters.

use super::ring::ShardRange;
use super::table::{ShardTable, Start};
use kcache_core::Clock;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// A snapshot of one member's sharding state and counters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardStats {
    /// This member.
    pub identity: String,
    /// The live members (this one included while its lease is current), sorted.
    pub members: Vec<String>,
    /// The hash ranges this member owns under them.
    pub owned_ranges: Vec<ShardRange>,
    /// Whether this member's lease is current.
    pub lease_held: bool,
    /// Reconciles in flight here.
    pub in_flight: u64,
    /// Keys a worker took and skipped because another member owns them.
    pub skipped_not_owned: u64,
    /// Keys a worker took and put back for later because they were not yet startable (a
    /// handover in progress, or our lease not current).
    pub deferred: u64,
    /// How many times the live members changed.
    pub rebalances: u64,
    /// How many new views this member published.
    pub views_published: u64,
}

/// One counter (plain statistics).
#[derive(Debug, Default)]
pub(crate) struct Count(AtomicU64);

impl Count {
    pub(crate) fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) skipped_not_owned: Count,
    pub(crate) deferred: Count,
    pub(crate) rebalances: Count,
    pub(crate) views_published: Count,
}

type Hook = Box<dyn Fn() + Send + Sync>;

struct Inner {
    table: Arc<ShardTable>,
    clock: Arc<dyn Clock>,
    retry_period: Duration,
    counters: Counters,
    drained: Notify,
    hooks: Mutex<Vec<Hook>>,
    last_epoch: AtomicU64,
}

/// The handle a sharded controller's workers ask before each reconcile: cheap to clone, made by
/// [`Shard::gate`](super::Shard::gate).
#[derive(Clone)]
pub struct ShardGate(Arc<Inner>);

/// A key in flight on this member: dropping it marks the reconcile finished (and wakes the
/// shard's driver if a handover waited for it).
#[must_use = "the key counts as in flight until the claim is dropped"]
pub struct ShardClaim {
    gate: ShardGate,
    key: String,
}

impl Drop for ShardClaim {
    fn drop(&mut self) {
        if self.gate.0.table.finish(&self.key) {
            self.gate.0.drained.notify_one();
        }
    }
}

impl fmt::Debug for ShardClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardClaim")
            .field("key", &self.key)
            .finish()
    }
}

impl ShardGate {
    pub(crate) fn new(
        table: Arc<ShardTable>,
        clock: Arc<dyn Clock>,
        retry_period: Duration,
    ) -> Self {
        Self(Arc::new(Inner {
            table,
            clock,
            retry_period,
            counters: Counters::default(),
            drained: Notify::new(),
            hooks: Mutex::new(Vec::new()),
            last_epoch: AtomicU64::new(0),
        }))
    }

    pub(crate) fn table(&self) -> &ShardTable {
        &self.0.table
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.0.counters
    }

    /// The handshake's decision for `key` (counted), with the claim when it may start.
    pub(crate) fn start(&self, key: &str) -> Result<ShardClaim, Start> {
        match self.0.table.try_start(key, self.0.clock.now()) {
            Start::Started => Ok(ShardClaim {
                gate: self.clone(),
                key: key.to_owned(),
            }),
            Start::NotOwned => {
                self.0.counters.skipped_not_owned.inc();
                Err(Start::NotOwned)
            }
            Start::Blocked => {
                self.0.counters.deferred.inc();
                Err(Start::Blocked)
            }
        }
    }

    /// Claims `key` for one reconcile if this member may start it now (see
    /// [`ShardTable`](super::ShardTable)); `None` if another member owns it or a handover has
    /// not finished.
    pub fn try_start(&self, key: &str) -> Option<ShardClaim> {
        self.start(key).ok()
    }

    /// Whether `key` is this member's under the current live members (a worker that takes it
    /// may still have to wait for the handover).
    pub fn owns(&self, key: &str) -> bool {
        self.0.table.owns_target(key)
    }

    /// How long a key that is not yet startable waits before it is tried again.
    pub fn retry_period(&self) -> Duration {
        self.0.retry_period
    }

    /// Runs `hook` whenever the keys this member may start may have grown (a membership change,
    /// a published view, a renewed lease): a controller enqueues its keys again then.
    pub fn on_change(&self, hook: impl Fn() + Send + Sync + 'static) {
        if let Ok(mut hooks) = self.0.hooks.lock() {
            hooks.push(Box::new(hook));
        }
    }

    /// Runs the hooks if the table's epoch moved since the last call.
    pub(crate) fn changed(&self) {
        let epoch = self.0.table.epoch();
        if self.0.last_epoch.swap(epoch, Ordering::SeqCst) == epoch {
            return;
        }
        if let Ok(hooks) = self.0.hooks.lock() {
            for hook in hooks.iter() {
                hook();
            }
        }
    }

    /// Completes when a claim was dropped while a handover waited for reconciles to finish.
    pub(crate) async fn drained(&self) {
        self.0.drained.notified().await;
    }

    /// Whether this member's lease is current now (it may start keys).
    pub fn lease_held(&self) -> bool {
        self.0
            .table
            .lease_deadline()
            .is_some_and(|d| self.0.clock.now() < d)
    }

    /// The sharding state and counters now.
    pub fn stats(&self) -> ShardStats {
        let t = &self.0.table;
        let c = &self.0.counters;
        ShardStats {
            identity: t.identity().to_owned(),
            members: t.target_members(),
            owned_ranges: t.owned_ranges(),
            lease_held: self.lease_held(),
            in_flight: t.in_flight() as u64,
            skipped_not_owned: c.skipped_not_owned.get(),
            deferred: c.deferred.get(),
            rebalances: c.rebalances.get(),
            views_published: c.views_published.get(),
        }
    }
}

impl fmt::Debug for ShardGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardGate")
            .field("identity", &self.0.table.identity())
            .finish_non_exhaustive()
    }
}
