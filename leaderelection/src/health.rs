//! [`LeaderHealthCheck`]: client-go's `HealthzAdaptor`, for whoever serves `/healthz`.

use crate::status::LeaderStatus;
use crate::sync::Mutex;
use kcache_core::health::{CheckError, HealthCheck};
use std::fmt;
use std::time::Duration;

/// The error of a failed health check: this candidate holds the lease but has not renewed it for
/// longer than the lease duration plus the tolerance.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "leader election {name:?}: {identity} holds the lease but has not renewed it for {since:?}"
)]
#[non_exhaustive]
pub struct HealthCheckError {
    /// The election's name ([`LeaderElectionConfig::name`](crate::LeaderElectionConfig::name)).
    pub name: String,
    /// This candidate.
    pub identity: String,
    /// How long ago this elector last saw the record change (its last successful renewal).
    pub since: Duration,
}

/// A liveness check of a leader election: client-go's `HealthzAdaptor`.
///
/// A leader that keeps running after it stopped renewing its lease (a deadlocked task, a store
/// it can no longer reach while it still believes the record is its own) should be restarted by
/// whoever supervises the process. This check fails once the lease was last observed naming this
/// candidate more than `lease_duration + tolerance` ago; it passes for a standby, for a candidate
/// that has not read the lease yet, and before an election is attached.
///
/// It serves nothing itself: call [`check`](Self::check) from the `/healthz` (or liveness)
/// handler of your HTTP server, or add it to the
/// [`HealthChecks`](kcache_core::health::HealthChecks) that handler runs (it implements
/// [`HealthCheck`], named `leaderElection`, failing with a [`HealthCheckError`]). It can be created before the elector exists (a server is often
/// set up first) and attached later with [`set_leader_election`](Self::set_leader_election).
/// [`LeaderStatus::check`] is the same check without the indirection.
///
/// # Examples
/// ```
/// use kcache_core::{Clock, FakeClock};
/// use kcache_leaderelection::{
///     InProcessLock, LeaderElectionConfig, LeaderElector, LeaderHealthCheck,
/// };
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let health = LeaderHealthCheck::new(Duration::from_secs(20));
/// assert!(health.check().is_ok()); // nothing attached yet
///
/// let clock = FakeClock::new();
/// let lock = InProcessLock::new("a");
/// let elector = LeaderElector::with_clock(lock.clone(), LeaderElectionConfig::new(), Arc::new(clock.clone()))?;
/// health.set_leader_election(elector.status());
/// assert!(elector.try_acquire_or_renew().await.succeeded());
///
/// lock.set_available(false); // no renewal gets through any more
/// clock.advance(Duration::from_secs(15 + 20));
/// assert!(health.check().is_ok(), "inside the tolerance");
/// clock.advance(Duration::from_secs(1));
/// assert!(health.check().is_err(), "lease + tolerance passed without a renewal");
/// # Ok(()) }
/// ```
#[doc(alias = "HealthzAdaptor")]
pub struct LeaderHealthCheck {
    status: Mutex<Option<LeaderStatus>>,
    tolerance: Duration,
}

impl LeaderHealthCheck {
    /// A check that tolerates `tolerance` past the lease's expiry before it fails (client-go's
    /// `NewLeaderHealthzAdaptor(timeout)`).
    #[doc(alias = "NewLeaderHealthzAdaptor")]
    pub fn new(tolerance: Duration) -> Self {
        Self {
            status: Mutex::new(None),
            tolerance,
        }
    }

    /// Attaches the election to watch (its elector's [`status`](crate::LeaderElector::status)).
    #[doc(alias = "SetLeaderElection")]
    pub fn set_leader_election(&self, status: LeaderStatus) {
        *self.status.lock() = Some(status);
    }

    /// The check's name, `"leaderElection"` (what client-go's adaptor reports).
    pub fn name(&self) -> &'static str {
        "leaderElection"
    }

    /// The tolerance past the lease's expiry.
    pub fn tolerance(&self) -> Duration {
        self.tolerance
    }

    /// Passes unless an attached election's holder has not renewed for longer than its lease
    /// duration plus the tolerance.
    ///
    /// # Errors
    /// [`HealthCheckError`] when it fails.
    pub fn check(&self) -> Result<(), HealthCheckError> {
        let status = self.status.lock().clone();
        match status {
            Some(status) => status.check(self.tolerance),
            None => Ok(()),
        }
    }
}

impl HealthCheck for LeaderHealthCheck {
    fn name(&self) -> &str {
        LeaderHealthCheck::name(self)
    }
    fn check(&self) -> Result<(), CheckError> {
        LeaderHealthCheck::check(self).map_err(CheckError::from)
    }
}

impl fmt::Debug for LeaderHealthCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderHealthCheck")
            .field("tolerance", &self.tolerance)
            .field("status", &*self.status.lock())
            .finish()
    }
}
