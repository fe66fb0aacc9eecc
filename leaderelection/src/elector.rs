//! [`LeaderElector`]: client-go's `LeaderElector`, campaigning on a [`Lock`].

use crate::config::{ConfigError, LeaderElectionConfig};
use crate::jitter::Jitter;
use crate::lock::{Lock, LockError};
use crate::record::LeaderElectionRecord;
use crate::status::{LeaderStatus, Leadership};
use kcache_core::{saturating_add, Clock, ResourceVersion, SystemClock};
use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a term of leadership ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TermEndReason {
    /// No renewal succeeded before the renew deadline (the store was unreachable, slow, or the
    /// process was paused).
    RenewDeadlineExceeded,
    /// The record names another holder: someone took the lease over.
    LeaseLost,
    /// The elector was stopped.
    Stopped,
}

/// A finished term, as reported to [`LeaderElector::on_stopped_leading`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TermEnd {
    /// The term's number.
    pub term: u64,
    /// The lock's version written by the acquisition that started it.
    pub version: ResourceVersion,
    /// When it started (the acquisition's write came back).
    pub started: Instant,
    /// When it ended: the renew deadline if that passed first (a paused process ends its term at
    /// the deadline, not when it wakes up), else the moment the elector ended it.
    pub ended: Instant,
    /// Why it ended.
    pub reason: TermEndReason,
}

type StartedFn = Box<dyn Fn(Leadership) + Send + Sync>;
type StoppedFn = Box<dyn Fn(&TermEnd) + Send + Sync>;
type NewLeaderFn = Box<dyn Fn(&str) + Send + Sync>;

/// The record as last read or written, and when this elector saw it change.
#[derive(Debug)]
struct Observed {
    record: LeaderElectionRecord,
    version: ResourceVersion,
    /// When this elector first saw this version (its own clock: the only time it trusts).
    at: Instant,
}

/// The outcome of one attempt to acquire or renew.
enum Attempt {
    /// The write succeeded; it was sent at `sent`.
    Won {
        sent: Instant,
        version: ResourceVersion,
    },
    /// Someone else holds an unexpired lease.
    HeldByOther,
    /// The store failed; try again later.
    Failed,
}

/// Campaigns for a lease on a [`Lock`] and keeps it renewed while leading: client-go's
/// `tools/leaderelection.LeaderElector`.
///
/// [`run`](Self::run) alternates two phases until it is stopped:
///
/// 1. **Acquire**: every `retry_period` (plus jitter) read the record; take it if nobody holds
///    it, if this candidate holds it, or if it has not changed for `lease_duration` *as measured
///    by this elector's clock since it first saw that version* (client-go's rule: the record's
///    own timestamps come from another machine's clock and are never compared with ours). The
///    write names the version read, so of two candidates racing, one wins.
/// 2. **Lead**: renew every `retry_period`. The term lasts until `renew_deadline` after the last
///    successful renewal was *sent*; if no renewal succeeds by then, or the record shows another
///    holder, the term ends and the elector campaigns again. Since a renewal lands in the store
///    after it was sent, and others wait `lease_duration > renew_deadline` after they see it,
///    this holder stops believing it leads at least `lease_duration - renew_deadline` before
///    anyone else may take over.
///
/// Unlike client-go's `Run`, which returns after the first term, `run` keeps campaigning after a
/// term ends (a controller with warm informers resumes work when leadership comes back). Stop it
/// with its `stop` future; exit the process from
/// [`on_stopped_leading`](Self::on_stopped_leading) if you want client-go's behaviour.
///
/// What the process sees: [`status`](Self::status) ([`LeaderStatus::is_leader`], the observed
/// leader, waits), and three callbacks run on the elector's task (keep them short; spawn longer
/// work): [`on_started_leading`](Self::on_started_leading) with a [`Leadership`] token that
/// resolves when the term is over, [`on_stopped_leading`](Self::on_stopped_leading), and
/// [`on_new_leader`](Self::on_new_leader).
///
/// All waiting goes through the [`Clock`], so tests run the state machine on a
/// [`FakeClock`](kcache_core::FakeClock).
///
/// # Examples
/// ```
/// use kcache_leaderelection::{InProcessLock, LeaderElectionConfig, LeaderElector};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), kcache_leaderelection::ConfigError> {
/// let elector = LeaderElector::new(InProcessLock::new("replica-a"), LeaderElectionConfig::new())?
///     .on_started_leading(|term| println!("leading, term {}", term.term()));
/// let status = elector.status();
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let run = tokio::spawn(elector.run(async { let _ = stopped.await; }));
///
/// let term = status.wait_for_leadership().await.expect("the only candidate leads");
/// assert!(status.is_leader());
/// assert_eq!(status.leader().as_deref(), Some("replica-a"));
///
/// let _ = stop.send(());
/// run.await.expect("the elector finished");
/// assert!(!term.is_held());
/// # Ok(())
/// # }
/// ```
pub struct LeaderElector<L> {
    lock: L,
    config: LeaderElectionConfig,
    clock: Arc<dyn Clock>,
    status: LeaderStatus,
    jitter: Jitter,
    observed: Option<Observed>,
    terms: u64,
    on_started: Option<StartedFn>,
    on_stopped: Option<StoppedFn>,
    on_new_leader: Option<NewLeaderFn>,
}

impl<L: Lock> LeaderElector<L> {
    /// An elector for the candidate `lock.identity()` on the system clock.
    ///
    /// # Errors
    /// [`ConfigError`] for an empty identity or timings client-go would refuse.
    pub fn new(lock: L, config: LeaderElectionConfig) -> Result<Self, ConfigError> {
        Self::with_clock(lock, config, Arc::new(SystemClock))
    }

    /// An elector on `clock` (a [`FakeClock`](kcache_core::FakeClock) in tests).
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_clock(
        lock: L,
        config: LeaderElectionConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ConfigError> {
        if lock.identity().is_empty() {
            return Err(ConfigError::EmptyIdentity);
        }
        config.validate()?;
        let identity: Arc<str> = Arc::from(lock.identity());
        Ok(Self {
            jitter: Jitter::new(config.jitter_factor, &identity),
            status: LeaderStatus::new(clock.clone(), identity),
            lock,
            config,
            clock,
            observed: None,
            terms: 0,
            on_started: None,
            on_stopped: None,
            on_new_leader: None,
        })
    }

    /// Called when a term starts, with its token (client-go's `OnStartedLeading`; its context is
    /// the token's [`Leadership::lost`]).
    #[must_use]
    pub fn on_started_leading(mut self, f: impl Fn(Leadership) + Send + Sync + 'static) -> Self {
        self.on_started = Some(Box::new(f));
        self
    }

    /// Called when a term ends (client-go's `OnStoppedLeading`).
    #[must_use]
    pub fn on_stopped_leading(mut self, f: impl Fn(&TermEnd) + Send + Sync + 'static) -> Self {
        self.on_stopped = Some(Box::new(f));
        self
    }

    /// Called when the observed holder changes to another non-empty identity, this candidate's
    /// own included (client-go's `OnNewLeader`).
    #[must_use]
    pub fn on_new_leader(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_new_leader = Some(Box::new(f));
        self
    }

    /// A view of this elector's state, for the rest of the process.
    pub fn status(&self) -> LeaderStatus {
        self.status.clone()
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    /// Campaigns, leads, campaigns again after a lost term, until `stop` completes. Stopped while
    /// leading, it ends the term first, then releases the lease if
    /// [`release_on_cancel`](LeaderElectionConfig::release_on_cancel) is set (one write, given up
    /// after `renew_deadline`).
    ///
    /// # Runtime
    /// Run it inside a tokio runtime: the etcd and Kubernetes locks need one, and so does waiting
    /// on the [`SystemClock`] (tokio's timer).
    ///
    /// # Cancel safety
    /// Dropping the future ends nothing cleanly: the status keeps its last term until its
    /// deadline passes. Stop it through `stop`.
    pub async fn run<S>(mut self, stop: S)
    where
        S: Future<Output = ()> + Send,
    {
        let mut stop = pin!(stop);
        tracing::info!(identity = %self.lock.identity(), lock = %self.lock.describe(), name = %self.config.name, "leader election: campaigning");
        'campaign: loop {
            // Acquire.
            let (sent, version) = loop {
                // An attempt that hangs (an unreachable store) is given up after the renew
                // deadline: it could not start a term any more.
                let give_up = self.clock.sleep_async(self.config.renew_deadline);
                tokio::select! {
                    biased;
                    () = &mut stop => break 'campaign,
                    () = give_up => {
                        tracing::warn!(identity = %self.lock.identity(), "an attempt to acquire the lease timed out");
                    }
                    attempt = self.try_acquire_or_renew() => {
                        if let Attempt::Won { sent, version } = attempt {
                            if self.clock.now() < saturating_add(sent, self.config.renew_deadline) {
                                break (sent, version);
                            }
                            tracing::warn!(identity = %self.lock.identity(), "acquired the lease too late to lead on it; trying again");
                        }
                    }
                }
                let wait = self.jitter.apply(self.config.retry_period);
                tokio::select! {
                    biased;
                    () = &mut stop => break 'campaign,
                    () = self.clock.sleep_async(wait) => {}
                }
            };
            let end = self.lead(sent, version, stop.as_mut()).await;
            if end.reason == TermEndReason::Stopped {
                if self.config.release_on_cancel {
                    self.release().await;
                }
                break 'campaign;
            }
        }
        self.status.finish();
        tracing::info!(identity = %self.lock.identity(), "leader election: stopped");
    }

    /// One term: renew until the deadline passes, the lease is lost or `stop` completes.
    async fn lead<S>(
        &mut self,
        sent: Instant,
        version: ResourceVersion,
        mut stop: std::pin::Pin<&mut S>,
    ) -> TermEnd
    where
        S: Future<Output = ()> + Send,
    {
        self.terms += 1;
        let term = self.terms;
        let started = self.clock.now();
        let deadline = saturating_add(sent, self.config.renew_deadline);
        self.status.start_term(term, deadline, version.clone());
        tracing::info!(identity = %self.lock.identity(), term, %version, "leader election: started leading");
        if let Some(f) = &self.on_started {
            if let Some(token) = self.status.leadership() {
                f(token);
            }
        }
        let reason = loop {
            let deadline = self.status.deadline().unwrap_or(started);
            let next = saturating_add(self.clock.now(), self.config.retry_period).min(deadline);
            tokio::select! {
                biased;
                () = stop.as_mut() => break TermEndReason::Stopped,
                () = self.clock.sleep_until_async(next) => {}
            }
            if self.clock.now() >= deadline {
                break TermEndReason::RenewDeadlineExceeded;
            }
            let attempt = tokio::select! {
                biased;
                () = stop.as_mut() => break TermEndReason::Stopped,
                () = self.clock.sleep_until_async(deadline) => break TermEndReason::RenewDeadlineExceeded,
                attempt = self.try_acquire_or_renew() => attempt,
            };
            match attempt {
                Attempt::Won { sent, .. } => self
                    .status
                    .extend_term(saturating_add(sent, self.config.renew_deadline)),
                Attempt::HeldByOther => break TermEndReason::LeaseLost,
                Attempt::Failed => {}
            }
        };
        let now = self.clock.now();
        let deadline = self.status.deadline().unwrap_or(now);
        self.status.end_term();
        let end = TermEnd {
            term,
            version,
            started,
            ended: now.min(deadline),
            reason,
        };
        match reason {
            TermEndReason::Stopped => {
                tracing::info!(identity = %self.lock.identity(), term, "leader election: stopped leading (stopped)")
            }
            _ => {
                tracing::warn!(identity = %self.lock.identity(), term, ?reason, "leader election: lost the lease")
            }
        }
        if let Some(f) = &self.on_stopped {
            f(&end);
        }
        end
    }

    /// client-go's `tryAcquireOrRenew`.
    async fn try_acquire_or_renew(&mut self) -> Attempt {
        let sent = self.clock.now();
        let wall = self.clock.system_time();
        let mut record = LeaderElectionRecord {
            holder_identity: self.lock.identity().to_owned(),
            lease_duration: self.config.lease_duration,
            acquire_time: wall,
            renew_time: wall,
            leader_transitions: 0,
        };

        // Fast path: while leading, write over the version we know without reading first.
        if self.status.is_leader() {
            if let Some(obs) = self.observed.as_ref().filter(|o| self.holds(o)) {
                record.acquire_time = obs.record.acquire_time;
                record.leader_transitions = obs.record.leader_transitions;
                let version = obs.version.clone();
                match self.lock.update(&version, &record).await {
                    Ok(v) => {
                        self.observe(record, v.clone());
                        return Attempt::Won { sent, version: v };
                    }
                    Err(e) => {
                        tracing::debug!(identity = %self.lock.identity(), error = %ErrorChain(&e), "renewal without a read failed; reading the record");
                    }
                }
            }
        }

        // Read (or create) the record.
        let current = match self.lock.get().await {
            Ok(Some(current)) => current,
            Ok(None) => {
                return match self.lock.create(&record).await {
                    Ok(v) => {
                        self.observe(record, v.clone());
                        Attempt::Won { sent, version: v }
                    }
                    Err(e) => {
                        tracing::warn!(identity = %self.lock.identity(), error = %ErrorChain(&e), "cannot create the lock record");
                        Attempt::Failed
                    }
                };
            }
            Err(e) => {
                tracing::warn!(identity = %self.lock.identity(), lock = %self.lock.describe(), error = %ErrorChain(&e), "cannot read the lock record");
                return Attempt::Failed;
            }
        };
        if self.observed.as_ref().map(|o| &o.version) != Some(&current.version) {
            self.observe(current.record.clone(), current.version.clone());
        }
        let Some(obs) = self.observed.as_ref() else {
            return Attempt::Failed;
        };
        let holds = self.holds(obs);
        let expired = saturating_add(obs.at, obs.record.lease_duration) < self.clock.now();
        if !obs.record.is_released() && !expired && !holds {
            tracing::debug!(identity = %self.lock.identity(), holder = %obs.record.holder_identity, "the lease is held by another candidate and has not expired");
            return Attempt::HeldByOther;
        }

        // Take it (or renew it).
        if holds {
            record.acquire_time = obs.record.acquire_time;
            record.leader_transitions = obs.record.leader_transitions;
        } else {
            record.leader_transitions = obs.record.leader_transitions.saturating_add(1);
        }
        match self.lock.update(&current.version, &record).await {
            Ok(v) => {
                self.observe(record, v.clone());
                Attempt::Won { sent, version: v }
            }
            Err(LockError::Conflict) => {
                tracing::debug!(identity = %self.lock.identity(), "another candidate wrote the lock record first");
                Attempt::Failed
            }
            Err(e) => {
                tracing::warn!(identity = %self.lock.identity(), error = %ErrorChain(&e), "cannot update the lock record");
                Attempt::Failed
            }
        }
    }

    /// client-go's `release`: a record with no holder, so the next candidate need not wait.
    async fn release(&mut self) {
        let Some(obs) = self.observed.as_ref().filter(|o| self.holds(o)) else {
            return;
        };
        let wall = self.clock.system_time();
        let record = LeaderElectionRecord {
            holder_identity: String::new(),
            lease_duration: Duration::from_secs(1),
            acquire_time: wall,
            renew_time: wall,
            leader_transitions: obs.record.leader_transitions,
        };
        let version = obs.version.clone();
        let give_up = saturating_add(self.clock.now(), self.config.renew_deadline);
        tokio::select! {
            biased;
            result = self.lock.update(&version, &record) => match result {
                Ok(v) => {
                    tracing::info!(identity = %self.lock.identity(), "leader election: released the lease");
                    self.observe(record, v);
                }
                Err(e) => tracing::warn!(identity = %self.lock.identity(), error = %ErrorChain(&e), "cannot release the lease"),
            },
            () = self.clock.sleep_until_async(give_up) => {
                tracing::warn!(identity = %self.lock.identity(), "gave up releasing the lease after the renew deadline");
            }
        }
    }

    fn holds(&self, obs: &Observed) -> bool {
        obs.record.holder_identity == self.lock.identity()
    }

    /// Records a new version of the record, seen now, and reports a change of holder.
    fn observe(&mut self, record: LeaderElectionRecord, version: ResourceVersion) {
        let holder_changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.record.holder_identity != record.holder_identity);
        let holder = (!record.is_released()).then(|| record.holder_identity.clone());
        self.observed = Some(Observed {
            record,
            version,
            at: self.clock.now(),
        });
        if holder_changed {
            self.status.set_leader(holder.as_deref());
            if let Some(h) = holder {
                tracing::info!(identity = %self.lock.identity(), leader = %h, "leader election: new leader observed");
                if let Some(f) = &self.on_new_leader {
                    f(&h);
                }
            }
        }
    }
}

impl<L: Lock> fmt::Debug for LeaderElector<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderElector")
            .field("identity", &self.lock.identity())
            .field("lock", &self.lock.describe())
            .field("config", &self.config)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

/// An error with its sources, for logs.
struct ErrorChain<'a>(&'a (dyn std::error::Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}
