//! [`LeaderElectionConfig`]: the timings of an election, checked before it starts.

use std::time::Duration;

/// How an elector campaigns: client-go's `LeaderElectionConfig` timings.
///
/// - `lease_duration` (default 15 s): how long a candidate waits, after it last saw the record
///   change, before it takes the lease over. A holder that stopped renewing loses the lease to
///   others no sooner than this after its last renewal.
/// - `renew_deadline` (default 10 s): how long the holder keeps leading without a successful
///   renewal. It counts from the moment the last successful write was *sent*, so a holder stops
///   believing it leads `lease_duration - renew_deadline` before anyone else may take over.
/// - `retry_period` (default 2 s): the wait between attempts (renewals while leading, acquisition
///   attempts while not).
/// - `jitter_factor` (default 1.2): acquisition attempts wait `retry_period` plus a random part of
///   up to `jitter_factor × retry_period`, so candidates do not stampede. Zero means no jitter
///   (client-go would treat zero as 1.0).
/// - `release_on_cancel` (default off): when the elector is stopped while leading, it writes a
///   released record (no holder) so another candidate takes over at once instead of after
///   `lease_duration`.
///
/// [`LeaderElector::new`](crate::LeaderElector::new) checks the timings ([`ConfigError`]).
///
/// # Clock skew
/// Candidates never compare timestamps written by another machine; each measures elapsed time
/// on its own monotonic clock. What must hold is that clocks *run* at about the same rate: the
/// margin `lease_duration - renew_deadline` (5 s by default, a third of the lease) absorbs the
/// rate difference plus the time a renewal takes to reach the store.
///
/// # Examples
/// ```
/// use kcache_leaderelection::LeaderElectionConfig;
/// use std::time::Duration;
///
/// let config = LeaderElectionConfig::default()
///     .lease_duration(Duration::from_secs(4))
///     .renew_deadline(Duration::from_secs(3))
///     .retry_period(Duration::from_millis(500))
///     .release_on_cancel(true);
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderElectionConfig {
    pub(crate) lease_duration: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) retry_period: Duration,
    pub(crate) jitter_factor: f64,
    pub(crate) release_on_cancel: bool,
    pub(crate) name: String,
}

/// The jitter factor client-go uses (`JitterFactor`).
pub const DEFAULT_JITTER_FACTOR: f64 = 1.2;

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            jitter_factor: DEFAULT_JITTER_FACTOR,
            release_on_cancel: false,
            name: String::new(),
        }
    }
}

impl LeaderElectionConfig {
    /// client-go's defaults: lease 15 s, renew deadline 10 s, retry 2 s, jitter 1.2, no release.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long candidates wait for a silent holder (default 15 s).
    #[must_use]
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.lease_duration = d;
        self
    }

    /// How long the holder leads without a successful renewal (default 10 s).
    #[must_use]
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.renew_deadline = d;
        self
    }

    /// The wait between attempts (default 2 s).
    #[must_use]
    pub fn retry_period(mut self, d: Duration) -> Self {
        self.retry_period = d;
        self
    }

    /// The random extra wait of acquisition attempts, as a multiple of the retry period
    /// (default 1.2; zero for none).
    #[must_use]
    pub fn jitter_factor(mut self, factor: f64) -> Self {
        self.jitter_factor = factor;
        self
    }

    /// Whether stopping the elector while leading releases the lease (default off).
    #[must_use]
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// A name for logs (client-go's `Name`).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The lease duration.
    pub fn get_lease_duration(&self) -> Duration {
        self.lease_duration
    }

    /// The renew deadline.
    pub fn get_renew_deadline(&self) -> Duration {
        self.renew_deadline
    }

    /// The retry period.
    pub fn get_retry_period(&self) -> Duration {
        self.retry_period
    }

    /// Checks the timings as client-go's `NewLeaderElector` does.
    ///
    /// # Errors
    /// The first [`ConfigError`] found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.lease_duration.is_zero() {
            return Err(ConfigError::ZeroLeaseDuration);
        }
        if self.renew_deadline.is_zero() {
            return Err(ConfigError::ZeroRenewDeadline);
        }
        if self.retry_period.is_zero() {
            return Err(ConfigError::ZeroRetryPeriod);
        }
        if !self.jitter_factor.is_finite() || self.jitter_factor < 0.0 {
            return Err(ConfigError::BadJitterFactor(self.jitter_factor));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(ConfigError::LeaseNotLongerThanRenewDeadline {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        let jittered =
            Duration::try_from_secs_f64(self.retry_period.as_secs_f64() * self.jitter_factor)
                .unwrap_or(Duration::MAX);
        if self.renew_deadline <= jittered.max(self.retry_period) {
            return Err(ConfigError::RenewDeadlineNotLongerThanRetry {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
                jitter_factor: self.jitter_factor,
            });
        }
        Ok(())
    }
}

/// A configuration [`LeaderElector::new`](crate::LeaderElector::new) refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The lock's identity is empty: nobody could tell the holder from a released lease.
    #[error("the lock's identity is empty")]
    EmptyIdentity,
    /// A zero lease duration.
    #[error("the lease duration must be positive")]
    ZeroLeaseDuration,
    /// A zero renew deadline.
    #[error("the renew deadline must be positive")]
    ZeroRenewDeadline,
    /// A zero retry period (the elector would spin).
    #[error("the retry period must be positive")]
    ZeroRetryPeriod,
    /// A negative, infinite or NaN jitter factor.
    #[error("the jitter factor must be finite and not negative, got {0}")]
    BadJitterFactor(f64),
    /// The holder would lead past the moment others may take over.
    #[error("the lease duration ({lease_duration:?}) must be longer than the renew deadline ({renew_deadline:?})")]
    LeaseNotLongerThanRenewDeadline {
        /// The configured lease duration.
        lease_duration: Duration,
        /// The configured renew deadline.
        renew_deadline: Duration,
    },
    /// The holder would not get one retry in before its deadline.
    #[error("the renew deadline ({renew_deadline:?}) must be longer than the retry period ({retry_period:?}) times the jitter factor ({jitter_factor}) and than the retry period itself")]
    RenewDeadlineNotLongerThanRetry {
        /// The configured renew deadline.
        renew_deadline: Duration,
        /// The configured retry period.
        retry_period: Duration,
        /// The configured jitter factor.
        jitter_factor: f64,
    },
}
