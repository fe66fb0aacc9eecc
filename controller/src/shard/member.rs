//! [`Shard`]: keeps this replica's member record, lists the others, and drives the
//! [`ShardTable`] through joins, leaves, expiries and handovers.

use super::gate::ShardGate;
use super::ring::DEFAULT_VNODES;
use super::table::ShardTable;
use futures::future::{select, Either};
use kcache_core::{saturating_add, Clock, ResourceVersion, SystemClock};
use kcache_leaderelection::{LockError, MemberRecord, MemberStore, VersionedMember};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a sharding configuration was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardConfigError {
    /// The identity is empty.
    #[error("a shard member needs a non-empty identity")]
    EmptyIdentity,
    /// The durations are not `retry_period < renew_deadline < lease_duration`.
    #[error("need retry_period < renew_deadline < lease_duration, got {retry_period:?}, {renew_deadline:?}, {lease_duration:?}")]
    Durations {
        /// The lease duration.
        lease_duration: Duration,
        /// The renew deadline.
        renew_deadline: Duration,
        /// The retry period.
        retry_period: Duration,
    },
}

/// How a [`Shard`] member renews and judges leases.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    identity: String,
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
    vnodes: usize,
    clock: Arc<dyn Clock>,
}

impl ShardConfig {
    /// The member `identity` (unique per process), with a 15 s lease, a 10 s renew deadline, a
    /// 2 s retry period (client-go's leader election defaults), [`DEFAULT_VNODES`] points per
    /// member, the system clock.
    pub fn new(identity: impl Into<String>) -> Self {
        Self {
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            vnodes: DEFAULT_VNODES,
            clock: Arc::new(SystemClock),
        }
    }

    /// How long others wait, after they last saw our record change, before they take our keys.
    #[must_use]
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.lease_duration = d;
        self
    }

    /// How long after the start of our last successful renewal we still start reconciles (less
    /// than the lease duration: the margin covers clocks running at slightly different rates).
    #[must_use]
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.renew_deadline = d;
        self
    }

    /// How often the record is renewed and the others listed.
    #[must_use]
    pub fn retry_period(mut self, d: Duration) -> Self {
        self.retry_period = d;
        self
    }

    /// Points per member on the hash ring; every member of a group must use the same number.
    #[must_use]
    pub fn vnodes(mut self, n: usize) -> Self {
        self.vnodes = n;
        self
    }

    /// The clock (a [`FakeClock`](kcache_core::FakeClock) in tests).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The configured identity.
    pub fn get_identity(&self) -> &str {
        &self.identity
    }

    /// The configured lease duration.
    pub fn get_lease_duration(&self) -> Duration {
        self.lease_duration
    }

    /// The configured retry period.
    pub fn get_retry_period(&self) -> Duration {
        self.retry_period
    }

    fn validate(&self) -> Result<(), ShardConfigError> {
        if self.identity.is_empty() {
            return Err(ShardConfigError::EmptyIdentity);
        }
        if !(self.retry_period < self.renew_deadline && self.renew_deadline < self.lease_duration) {
            return Err(ShardConfigError::Durations {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        Ok(())
    }
}

/// One replica of a sharded controller: it renews its member record in a [`MemberStore`],
/// lists the others' records, computes the live members (records seen changing within their
/// lease duration, on this replica's clock) and the hash ring over them, and hands keys over
/// through the records (see [`ShardTable`] for the rules that keep a key from being reconciled
/// by two replicas at once).
///
/// Give its [`gate`](Self::gate) to [`ControllerBuilder::shard`](crate::ControllerBuilder::shard),
/// then drive it with [`run`](Self::run) beside the controller; `run` leaves the group
/// gracefully when its stop future completes.
///
/// # Examples
/// ```
/// use kcache_controller::shard::{Shard, ShardConfig};
/// use kcache_core::FakeClock;
/// use kcache_leaderelection::InProcessMembers;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # futures::executor::block_on(async {
/// let store = InProcessMembers::new();
/// let clock = FakeClock::new();
/// let a = Shard::new(store.handle(), ShardConfig::new("a").clock(Arc::new(clock.clone())))?;
/// let b = Shard::new(store.handle(), ShardConfig::new("b").clock(Arc::new(clock.clone())))?;
/// for _ in 0..3 {
///     a.tick().await;
///     b.tick().await;
/// }
/// assert_eq!(a.gate().stats().members, ["a", "b"]);
/// let key = (0..100).map(|i| format!("ns/k{i}")).find(|k| a.gate().owns(k)).unwrap();
/// assert!(a.gate().try_start(&key).is_some());
/// assert!(b.gate().try_start(&key).is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct Shard<S> {
    store: S,
    config: ShardConfig,
    gate: ShardGate,
    state: futures::lock::Mutex<Driver>,
}

/// What the driver remembers between ticks.
#[derive(Default)]
struct Driver {
    /// Our record's version (None: not created, or unknown after a failed write).
    version: Option<ResourceVersion>,
    generation: u64,
    /// Each other record's version and when we first saw it.
    seen: HashMap<String, (ResourceVersion, Instant)>,
    /// The members of the last target, to count rebalances.
    last_target: Vec<String>,
    leaving: bool,
    /// The earliest moment a record now live expires, unless it changes first.
    next_expiry: Option<Instant>,
}

impl<S: MemberStore> Shard<S> {
    /// A member of the group whose records live in `store`. It joins at its first
    /// [`tick`](Self::tick).
    ///
    /// # Errors
    /// [`ShardConfigError`] for an empty identity or inconsistent durations.
    pub fn new(store: S, config: ShardConfig) -> Result<Self, ShardConfigError> {
        config.validate()?;
        let table = Arc::new(ShardTable::new(config.identity.clone(), config.vnodes));
        let gate = ShardGate::new(table, config.clock.clone(), config.retry_period);
        Ok(Self {
            store,
            config,
            gate,
            state: futures::lock::Mutex::new(Driver::default()),
        })
    }

    /// The gate the controller's workers ask before each reconcile (cheap to clone).
    pub fn gate(&self) -> ShardGate {
        self.gate.clone()
    }

    /// The configuration.
    pub fn config(&self) -> &ShardConfig {
        &self.config
    }

    /// Renews (or creates) our record, publishing a new view if the table is ready for one,
    /// then lists the others and updates the live members; repeats at once (up to three rounds)
    /// while a new view became publishable, so a handover that waits for nothing completes in
    /// one tick. [`run`](Self::run) calls it every retry period and when a draining key
    /// finishes; tests call it by hand.
    pub async fn tick(&self) {
        let mut driver = self.state.lock().await;
        for _ in 0..3 {
            if !self.round(&mut driver).await {
                break;
            }
        }
    }

    /// One write-then-list round. Returns whether another round could publish a new view.
    async fn round(&self, d: &mut Driver) -> bool {
        let table = self.gate.table();
        let clock = &self.config.clock;
        let now = clock.now();
        if table.lease_deadline().is_some_and(|dl| now >= dl) {
            tracing::warn!(identity = %self.config.identity, "shard lease lost: starting nothing until renewed");
            table.lease_lost();
        }
        let publishing = table.begin_publish();
        let view = publishing.clone().unwrap_or_else(|| table.claimed_view());
        let generation = d.generation + u64::from(publishing.is_some());
        let record = MemberRecord {
            holder_identity: self.config.identity.clone(),
            lease_duration: self.config.lease_duration,
            renew_time: clock.system_time(),
            view,
            view_generation: generation,
        };
        let sent = clock.now();
        match self.write(d, &record).await {
            Ok(version) => {
                d.version = Some(version);
                d.generation = generation;
                let deadline = saturating_add(sent, self.config.renew_deadline);
                table.publish_succeeded(deadline);
                if publishing.is_some() {
                    self.gate.counters().views_published.inc();
                    tracing::info!(identity = %self.config.identity, generation, view = ?record.view, "shard: published a new view");
                }
            }
            Err(e) => {
                let maybe_applied = matches!(e, LockError::Backend(_));
                if !maybe_applied {
                    d.version = None;
                }
                table.publish_failed(maybe_applied);
                tracing::warn!(identity = %self.config.identity, error = %e, "shard: could not write the member record");
                return false;
            }
        }
        let listed = match self.store.list().await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(identity = %self.config.identity, error = %e, "shard: could not list the member records");
                return false;
            }
        };
        let now = clock.now();
        let live = self.live(d, listed, now);
        let mut members: Vec<String> = live.iter().map(|(id, _)| id.clone()).collect();
        if !d.leaving && table.lease_deadline().is_some_and(|dl| now < dl) {
            members.push(self.config.identity.clone());
        }
        members.sort();
        table.listed(live);
        if table.set_target(&members) {
            if d.last_target != members {
                self.gate.counters().rebalances.inc();
                tracing::info!(identity = %self.config.identity, ?members, "shard: membership changed, rebalancing");
            }
            d.last_target = members;
        }
        self.gate.changed();
        table.publish_ready()
    }

    /// The others' records that are live: seen changing within their lease duration.
    fn live(
        &self,
        d: &mut Driver,
        listed: Vec<VersionedMember>,
        now: Instant,
    ) -> Vec<(String, Vec<String>)> {
        let mut live = Vec::new();
        let mut present = Vec::with_capacity(listed.len());
        d.next_expiry = None;
        for VersionedMember { record, version } in listed {
            if record.holder_identity == self.config.identity {
                continue;
            }
            present.push(record.holder_identity.clone());
            let seen = d
                .seen
                .entry(record.holder_identity.clone())
                .or_insert_with(|| (version.clone(), now));
            if seen.0 != version {
                *seen = (version, now);
            }
            let expiry = saturating_add(seen.1, record.lease_duration);
            if now < expiry {
                d.next_expiry = Some(d.next_expiry.map_or(expiry, |e| e.min(expiry)));
                live.push((record.holder_identity, record.view));
            }
        }
        d.seen.retain(|id, _| present.contains(id));
        live
    }

    /// Creates or updates our record, recovering our version after a conflict.
    async fn write(
        &self,
        d: &mut Driver,
        record: &MemberRecord,
    ) -> Result<ResourceVersion, LockError> {
        let version = match &d.version {
            Some(v) => v.clone(),
            None => match self.store.create(record).await {
                Err(LockError::AlreadyExists) => self.own_version().await?,
                other => return other,
            },
        };
        match self.store.update(&version, record).await {
            Err(LockError::NotFound) => self.store.create(record).await,
            other => other,
        }
    }

    async fn own_version(&self) -> Result<ResourceVersion, LockError> {
        self.store
            .list()
            .await?
            .into_iter()
            .find(|m| m.record.holder_identity == self.config.identity)
            .map(|m| m.version)
            .ok_or(LockError::NotFound)
    }

    /// How long [`run`](Self::run) waits before its next tick: the retry period, or less if a
    /// live member's lease expires sooner (unless its record changes meanwhile), so a dead
    /// member's keys move at its lease's expiry rather than up to a retry period later.
    pub async fn next_tick_in(&self) -> Duration {
        let now = self.config.clock.now();
        let expiry = self.state.lock().await.next_expiry;
        let until_expiry = expiry.map(|e| e.saturating_duration_since(now));
        until_expiry.map_or(self.config.retry_period, |d| {
            d.min(self.config.retry_period)
        })
    }

    /// Ticks every retry period, at a live member's lease expiry if that comes first (see
    /// [`next_tick_in`](Self::next_tick_in)), and when a draining key's reconcile finishes,
    /// until `stop` completes, then [`leave`](Self::leave)s.
    ///
    /// # Runtime
    /// Inside a tokio runtime when the store or the [`SystemClock`] need one (etcd, Kubernetes).
    pub async fn run<F>(&self, stop: F)
    where
        F: Future<Output = ()> + Send,
    {
        tracing::info!(identity = %self.config.identity, store = %self.store.describe(), "shard: joining");
        let mut stop = pin!(stop);
        loop {
            self.tick().await;
            let pause = self.next_tick_in().await;
            let wait = pin!(self.config.clock.sleep_async(pause));
            let woken = pin!(self.gate.drained());
            let next = select(wait, woken);
            if let Either::Left(_) = select(stop.as_mut(), next).await {
                break;
            }
        }
        self.leave().await;
    }

    /// Leaves the group gracefully: stops taking keys, waits (up to a lease duration) for the
    /// reconciles in flight, publishes an empty view and deletes the record, so the others take
    /// our keys at their next tick instead of after a lease duration. Stop the controller's
    /// workers first, or they keep being refused keys meanwhile.
    pub async fn leave(&self) {
        let table = self.gate.table();
        {
            let mut d = self.state.lock().await;
            d.leaving = true;
        }
        table.set_target(&[]);
        let give_up = saturating_add(self.config.clock.now(), self.config.lease_duration);
        while table.in_flight() > 0 && self.config.clock.now() < give_up {
            let wait = pin!(self.config.clock.sleep_async(self.config.retry_period));
            let woken = pin!(self.gate.drained());
            let _ = select(wait, woken).await;
        }
        self.tick().await;
        let mut d = self.state.lock().await;
        if let Some(v) = d.version.take() {
            match self.store.delete(&self.config.identity, &v).await {
                Ok(()) => tracing::info!(identity = %self.config.identity, "shard: left the group"),
                Err(e) => {
                    tracing::warn!(identity = %self.config.identity, error = %e, "shard: could not delete the member record; others take our keys when it expires")
                }
            }
        }
        table.lease_lost();
    }
}

impl<S: MemberStore> fmt::Debug for Shard<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shard")
            .field("identity", &self.config.identity)
            .field("store", &self.store.describe())
            .finish_non_exhaustive()
    }
}
