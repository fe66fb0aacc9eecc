//! `--shard`: the demo as one replica of an active-active sharded controller.
//!
//! Every replica renews a member record (kcache-controller's [`Shard`]) beside the world; the
//! controller's workers reconcile only the sets this replica owns on the hash ring over the live
//! replicas, and a set moves only once its old owner let go of it or died a lease ago. One
//! replica (`--user`) also runs the user and leaves a marker when it has finished; every
//! replica exits once it sees the marker and the world has converged.

use futures::future::BoxFuture;
use kcache_controller::shard::{Shard, ShardConfig, ShardGate, ShardStats};
use kcache_core::Clock;
use kcache_leaderelection::MemberStore;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// How long the user waits for `--members` replicas.
const MEMBERS_LIMIT: Duration = Duration::from_secs(60);
/// How long a replica without the user waits for the user's marker beyond the user phase.
const MARKER_SLACK: Duration = Duration::from_secs(120);
/// How often a replica without the user looks for the marker.
const MARKER_EVERY: Duration = Duration::from_millis(100);

/// The markers the replicas of one world share (etcd keys beside the world).
pub(crate) trait Markers: Send + Sync + 'static {
    /// Claims the user for `identity`; an error if another replica has it.
    fn claim_user<'a>(&'a self, identity: &'a str) -> BoxFuture<'a, Result<(), String>>;
    /// Marks that the user has finished.
    fn mark_user_done(&self) -> BoxFuture<'_, Result<(), String>>;
    /// Whether the user has finished.
    fn user_done(&self) -> BoxFuture<'_, Result<bool, String>>;
}

/// The shard timings for a lease of `lease_secs`: the same proportions as `--leader-elect`
/// (client-go's 15 s / 10 s / 2 s, scaled).
#[cfg_attr(not(feature = "etcd"), allow(dead_code))]
pub(crate) fn config(identity: &str, lease_secs: u64, clock: Arc<dyn Clock>) -> ShardConfig {
    let lease = Duration::from_secs(lease_secs);
    ShardConfig::new(identity)
        .lease_duration(lease)
        .renew_deadline(lease * 2 / 3)
        .retry_period(lease * 2 / 15)
        .clock(clock)
}

/// A running shard member.
pub(crate) struct Sharded {
    identity: String,
    gate: ShardGate,
    markers: Box<dyn Markers>,
    user: bool,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// Set on SIGTERM: the replica stops and leaves the group gracefully.
    terminated: Arc<AtomicBool>,
}

#[cfg_attr(not(feature = "etcd"), allow(dead_code))]
impl Sharded {
    /// Joins the group whose records live in `store` (on the current tokio runtime); `user`:
    /// this replica runs the user.
    pub(crate) fn spawn<S: MemberStore>(
        store: S,
        config: ShardConfig,
        markers: impl Markers,
        user: bool,
    ) -> Result<Self, String> {
        let identity = config_identity(&config);
        let shard = Shard::new(store, config).map_err(|e| format!("shard: {e}"))?;
        let terminated = Arc::new(AtomicBool::new(false));
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let mut term = signal(SignalKind::terminate())
                .map_err(|e| format!("cannot listen for SIGTERM: {e}"))?;
            let flag = terminated.clone();
            tokio::spawn(async move {
                if term.recv().await.is_some() {
                    flag.store(true, Relaxed);
                }
            });
        }
        let gate = shard.gate();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            shard
                .run(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Self {
            identity,
            gate,
            markers: Box::new(markers),
            user,
            stop: Some(stop),
            task: Some(task),
            terminated,
        })
    }

    /// The gate for the controller.
    pub(crate) fn gate(&self) -> ShardGate {
        self.gate.clone()
    }

    /// This replica's identity.
    pub(crate) fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether this replica runs the user.
    pub(crate) fn runs_user(&self) -> bool {
        self.user
    }

    /// Whether SIGTERM asked this replica to stop (it then leaves without waiting for the
    /// world to converge).
    pub(crate) fn terminated(&self) -> bool {
        self.terminated.load(Relaxed)
    }

    /// With `--user`: claims the user (refused if another replica has it), then waits for
    /// `members` live replicas.
    pub(crate) async fn prepare_user(
        &self,
        members: usize,
        clock: &dyn Clock,
    ) -> Result<(), String> {
        self.markers.claim_user(&self.identity).await?;
        self.wait_for_members(members, clock, MEMBERS_LIMIT).await
    }

    /// After the user phase: the user's replica marks that the user has finished; the others
    /// wait for that mark (calling `tick` between looks) for up to `user_phase` plus a slack, or
    /// until SIGTERM. Errors: the mark could not be written, or did not appear in time.
    pub(crate) async fn user_finished(
        &self,
        clock: &dyn Clock,
        user_phase: Duration,
        tick: impl Fn(),
    ) -> Result<(), String> {
        if self.user {
            return self.markers.mark_user_done().await;
        }
        let start = clock.now();
        let mut last_error = None;
        while !self.terminated() {
            match self.markers.user_done().await {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                // A failed read is retried until the limit; reported if it lasts.
                Err(e) => last_error = Some(e),
            }
            if clock.now().saturating_duration_since(start) > user_phase + MARKER_SLACK {
                let why = last_error
                    .map(|e| format!(" (last error: {e})"))
                    .unwrap_or_default();
                return Err(format!(
                    "the user's marker did not appear within {:?}{why}",
                    user_phase + MARKER_SLACK
                ));
            }
            tick();
            clock.sleep_async(MARKER_EVERY).await;
        }
        Ok(())
    }

    /// Waits until at least `n` replicas are live members (this one included), for at most
    /// `limit` on `clock`.
    pub(crate) async fn wait_for_members(
        &self,
        n: usize,
        clock: &dyn Clock,
        limit: Duration,
    ) -> Result<(), String> {
        let start = clock.now();
        loop {
            let stats = self.gate.stats();
            if stats.lease_held && stats.members.len() >= n {
                println!(
                    "kcache-demo[{}]: {} members: {}",
                    self.identity,
                    stats.members.len(),
                    stats.members.join(", ")
                );
                return Ok(());
            }
            if clock.now().saturating_duration_since(start) > limit {
                return Err(format!(
                    "only {} of {n} replicas joined within {limit:?}: {:?}",
                    stats.members.len(),
                    stats.members
                ));
            }
            clock.sleep_async(Duration::from_millis(50)).await;
        }
    }

    /// Leaves the group (stop the controller first): publishes an empty view and deletes the
    /// record, so the others take this replica's sets at once. Returns the final stats.
    pub(crate) async fn leave(mut self) -> ShardStats {
        let stats = self.gate.stats();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        stats
    }
}

impl Drop for Sharded {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn config_identity(config: &ShardConfig) -> String {
    config.get_identity().to_owned()
}

/// The report's line for a member's final stats.
pub(crate) fn stats_line(stats: &ShardStats) -> String {
    let owned: u128 = stats.owned_ranges.iter().map(|r| r.len()).sum();
    format!(
        "{}: members {:?}, owned {:.1} % of the ring in {} ranges; {} keys skipped as not owned, {} deferred in handovers, {} rebalances, {} views published",
        stats.identity,
        stats.members,
        owned as f64 / 2f64.powi(64) * 100.0,
        stats.owned_ranges.len(),
        stats.skipped_not_owned,
        stats.deferred,
        stats.rebalances,
        stats.views_published
    )
}
