//! [`LeaderElector`]: client-go's `LeaderElector`, campaigning on a [`Lock`].

mod attempt;
mod release;
mod run;

pub use attempt::{Attempt, AttemptError};
pub use release::{Release, ReleaseError};
pub use run::AlreadyRunning;

use crate::config::{ConfigError, LeaderElectionConfig};
use crate::jitter::Jitter;
use crate::lock::Lock;
use crate::record::{LeaderElectionRecord, VersionedRecord};
use crate::status::{LeaderStatus, Leadership};
use crate::sync::atomic::AtomicBool;
use crate::sync::Mutex;
use kcache_core::{Clock, ResourceVersion, SystemClock};
use std::fmt;
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
    /// [`LeaderElector::release`] gave the lease up.
    Released,
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
#[derive(Debug, Clone)]
struct Observed {
    record: LeaderElectionRecord,
    version: ResourceVersion,
    /// When this elector first saw this version (its own clock: the only time it trusts).
    at: Instant,
}

/// The term this elector leads now.
#[derive(Debug, Clone)]
struct Term {
    number: u64,
    version: ResourceVersion,
    started: Instant,
}

/// What the elector remembers between operations (never held across an await).
#[derive(Debug)]
struct State {
    observed: Option<Observed>,
    terms: u64,
    term: Option<Term>,
    /// How the last term ended, for the run loop.
    last_end: Option<TermEnd>,
    jitter: Jitter,
}

/// A callback to run once the state lock is released.
enum Notice {
    Started(Leadership),
    Stopped(TermEnd),
    NewLeader(String),
}

/// Campaigns for a lease on a [`Lock`] and keeps it renewed while leading: client-go's
/// `tools/leaderelection.LeaderElector`.
///
/// Three ways to drive it, all through `&self` (so an elector can be run again after it
/// returned, or shared in an `Arc`):
///
/// - [`run`](Self::run): campaign, lead, campaign again after a lost term, until stopped (a
///   controller with warm informers resumes work when leadership comes back);
/// - [`run_one_term`](Self::run_one_term): client-go's `Run`: campaign until leading, lead until
///   the term ends, return how it ended;
/// - your own schedule: [`try_acquire_or_renew`](Self::try_acquire_or_renew) makes one attempt,
///   [`release`](Self::release) gives the lease up. They keep the same
///   [`status`](Self::status) and callbacks as the loops do; calling them *while* a loop runs is
///   safe (operations take turns, every write is a compare-and-swap) but rarely what you want.
///
/// The rules, client-go's:
///
/// 1. **Acquire**: read the record; take it if nobody holds it, if this candidate holds it, or if
///    it has not changed for its `lease_duration` *as measured by this elector's clock since it
///    first saw that version* (the record's own timestamps come from another machine's clock and
///    are never compared with ours). The write names the version read, so of two candidates
///    racing, one wins.
/// 2. **Lead**: renew every `retry_period`. The term lasts until `renew_deadline` after the last
///    successful renewal was *sent*; if no renewal succeeds by then, or the record shows another
///    holder, the term ends. Since a renewal lands in the store after it was sent, and others wait
///    `lease_duration > renew_deadline` after they see it, this holder stops believing it leads at
///    least `lease_duration - renew_deadline` before anyone else may take over.
///
/// What the process sees: [`status`](Self::status) ([`LeaderStatus::is_leader`], the observed
/// leader, waits, the [health check](LeaderStatus::check)), and three callbacks run on the task
/// that drives the elector (keep them short; spawn longer work):
/// [`on_started_leading`](Self::on_started_leading) with a [`Leadership`] token that resolves when
/// the term is over, [`on_stopped_leading`](Self::on_stopped_leading), and
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
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let elector = LeaderElector::new(InProcessLock::new("replica-a"), LeaderElectionConfig::new())?
///     .on_started_leading(|term| println!("leading, term {}", term.term()));
/// let status = elector.status();
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let run = tokio::spawn(async move { elector.run(async { let _ = stopped.await; }).await });
///
/// let term = status.wait_for_leadership().await.ok_or("the only candidate leads")?;
/// assert!(status.is_leader());
/// assert_eq!(status.leader().as_deref(), Some("replica-a"));
///
/// let _ = stop.send(());
/// run.await??;
/// assert!(!term.is_held());
/// # Ok(())
/// # }
/// ```
pub struct LeaderElector<L> {
    lock: L,
    config: LeaderElectionConfig,
    clock: Arc<dyn Clock>,
    status: LeaderStatus,
    state: Mutex<State>,
    /// Operations on the lock take turns (an attempt, a release).
    ops: tokio::sync::Mutex<()>,
    running: AtomicBool,
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
            state: Mutex::new(State {
                observed: None,
                terms: 0,
                term: None,
                last_end: None,
                jitter: Jitter::new(config.jitter_factor, &identity),
            }),
            status: LeaderStatus::new(
                clock.clone(),
                identity,
                config.lease_duration,
                Arc::from(config.name.as_str()),
            ),
            lock,
            config,
            clock,
            ops: tokio::sync::Mutex::new(()),
            running: AtomicBool::new(false),
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

    /// The lock.
    pub fn lock(&self) -> &L {
        &self.lock
    }

    /// The record as this elector last read or wrote it, with its version (client-go's
    /// observed record); `None` before the first successful read or write.
    pub fn observed_record(&self) -> Option<VersionedRecord> {
        self.state
            .lock()
            .observed
            .as_ref()
            .map(|o| VersionedRecord {
                record: o.record.clone(),
                version: o.version.clone(),
            })
    }

    /// Whether the last observed record names this candidate as holder (client-go's
    /// `IsLeader`). This is the elector's bookkeeping; whether the process may act as leader is
    /// [`LeaderStatus::is_leader`], which also honours the renew deadline.
    pub fn holds_lease(&self) -> bool {
        self.state
            .lock()
            .observed
            .as_ref()
            .is_some_and(|o| self.holds(o))
    }

    /// client-go's `Check`: see [`LeaderStatus::check`].
    ///
    /// # Errors
    /// [`HealthCheckError`](crate::HealthCheckError) when this candidate holds the lease but has
    /// not renewed it for longer than the lease duration plus `tolerance`.
    pub fn check(&self, tolerance: Duration) -> Result<(), crate::HealthCheckError> {
        self.status.check(tolerance)
    }

    fn holds(&self, obs: &Observed) -> bool {
        obs.record.holder_identity == self.lock.identity()
    }

    /// Records a version of the record, seen now; reports a change of holder.
    fn observe(
        &self,
        st: &mut State,
        record: LeaderElectionRecord,
        version: ResourceVersion,
        notices: &mut Vec<Notice>,
    ) {
        let holder_changed = st
            .observed
            .as_ref()
            .is_none_or(|o| o.record.holder_identity != record.holder_identity);
        let holder = (!record.is_released()).then(|| record.holder_identity.clone());
        let now = self.clock.now();
        let holder_is_self = record.holder_identity == self.lock.identity();
        st.observed = Some(Observed {
            record,
            version,
            at: now,
        });
        self.status.observed(now, holder_is_self);
        if holder_changed {
            self.status.set_leader(holder.as_deref());
            if let Some(h) = holder {
                tracing::info!(identity = %self.lock.identity(), leader = %h, "leader election: new leader observed");
                notices.push(Notice::NewLeader(h));
            }
        }
    }

    /// Starts a term whose renew deadline is `deadline`.
    fn start_term(
        &self,
        st: &mut State,
        version: ResourceVersion,
        deadline: Instant,
        notices: &mut Vec<Notice>,
    ) {
        st.terms += 1;
        let number = st.terms;
        st.term = Some(Term {
            number,
            version: version.clone(),
            started: self.clock.now(),
        });
        st.last_end = None;
        self.status.start_term(number, deadline, version.clone());
        tracing::info!(identity = %self.lock.identity(), term = number, %version, "leader election: started leading");
        if let Some(token) = self.status.leadership() {
            notices.push(Notice::Started(token));
        }
    }

    /// Ends the current term, if any.
    fn end_term(&self, st: &mut State, reason: TermEndReason, notices: &mut Vec<Notice>) {
        let Some(term) = st.term.take() else {
            return;
        };
        let now = self.clock.now();
        let deadline = self.status.deadline().unwrap_or(now);
        self.status.end_term();
        let end = TermEnd {
            term: term.number,
            version: term.version,
            started: term.started,
            ended: now.min(deadline),
            reason,
        };
        match reason {
            TermEndReason::Stopped | TermEndReason::Released => {
                tracing::info!(identity = %self.lock.identity(), term = end.term, ?reason, "leader election: stopped leading")
            }
            _ => {
                tracing::warn!(identity = %self.lock.identity(), term = end.term, ?reason, "leader election: lost the lease")
            }
        }
        st.last_end = Some(end.clone());
        notices.push(Notice::Stopped(end));
    }

    /// Ends the current term if its renew deadline has passed.
    fn end_term_if_expired(&self, st: &mut State, notices: &mut Vec<Notice>) {
        if st.term.is_some()
            && self
                .status
                .deadline()
                .is_none_or(|deadline| self.clock.now() >= deadline)
        {
            self.end_term(st, TermEndReason::RenewDeadlineExceeded, notices);
        }
    }

    /// Runs `f` on the state, then the callbacks it asked for (outside the state lock).
    fn with_state<R>(&self, f: impl FnOnce(&mut State, &mut Vec<Notice>) -> R) -> R {
        let mut notices = Vec::new();
        let r = {
            let mut st = self.state.lock();
            f(&mut st, &mut notices)
        };
        for notice in notices {
            match notice {
                Notice::Started(token) => {
                    if let Some(f) = &self.on_started {
                        f(token);
                    }
                }
                Notice::Stopped(end) => {
                    if let Some(f) = &self.on_stopped {
                        f(&end);
                    }
                }
                Notice::NewLeader(h) => {
                    if let Some(f) = &self.on_new_leader {
                        f(&h);
                    }
                }
            }
        }
        r
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
