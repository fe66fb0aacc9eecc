//! [`LeaderStatus`] and [`Leadership`]: what the rest of the process sees of an election.

use crate::health::HealthCheckError;
use crate::sync::Mutex;
use futures::future::BoxFuture;
use kcache_core::{Clock, ResourceVersion};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// A snapshot of an elector's view of the election.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderState {
    /// The number of the term this elector leads now (1 for its first), `None` when it does not
    /// lead.
    pub term: Option<u64>,
    /// The holder of the lease as last observed (this elector's identity while it leads), `None`
    /// before the first read or when the lease was released.
    pub leader: Option<String>,
    /// Whether the elector's `run` has returned.
    pub finished: bool,
}

/// The lease deadline of the current term.
#[derive(Debug, Clone)]
struct TermDeadline {
    term: u64,
    deadline: Instant,
    version: ResourceVersion,
}

/// When this elector last saw the record change, and whether it named this candidate: what the
/// health check judges.
#[derive(Debug, Clone, Copy)]
struct Observation {
    at: Instant,
    holder_is_self: bool,
}

pub(crate) struct Shared {
    state: watch::Sender<LeaderState>,
    deadline: Mutex<Option<TermDeadline>>,
    observation: Mutex<Option<Observation>>,
    clock: Arc<dyn Clock>,
    identity: Arc<str>,
    lease_duration: Duration,
    name: Arc<str>,
}

/// A cheap, cloneable view of one [`LeaderElector`](crate::LeaderElector): whether this process
/// leads, who leads, and waits for either to change.
///
/// [`is_leader`](Self::is_leader) is judged on the clock at the moment of the call: it turns false
/// at the renew deadline even if the elector's task has not run since (a starved or paused
/// process never acts on a lease it may have lost).
#[derive(Clone)]
pub struct LeaderStatus {
    shared: Arc<Shared>,
}

impl LeaderStatus {
    pub(crate) fn new(
        clock: Arc<dyn Clock>,
        identity: Arc<str>,
        lease_duration: Duration,
        name: Arc<str>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: watch::Sender::new(LeaderState::default()),
                deadline: Mutex::new(None),
                observation: Mutex::new(None),
                clock,
                identity,
                lease_duration,
                name,
            }),
        }
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.shared.identity
    }

    /// Whether this process leads now: it holds a term and the term's renew deadline has not
    /// passed.
    pub fn is_leader(&self) -> bool {
        match self.shared.deadline.lock().as_ref() {
            Some(d) => self.shared.clock.now() < d.deadline,
            None => false,
        }
    }

    /// The holder of the lease as last observed (client-go's `GetLeader`).
    pub fn leader(&self) -> Option<String> {
        self.shared.state.borrow().leader.clone()
    }

    /// The current snapshot.
    pub fn state(&self) -> LeaderState {
        self.shared.state.borrow().clone()
    }

    /// A receiver of every change of the snapshot.
    pub fn watch(&self) -> watch::Receiver<LeaderState> {
        self.shared.state.subscribe()
    }

    /// The current term, if this process leads.
    pub fn leadership(&self) -> Option<Leadership> {
        let term = self.shared.deadline.lock().clone()?;
        (self.shared.clock.now() < term.deadline).then(|| Leadership {
            term: term.term,
            version: term.version,
            status: self.clone(),
        })
    }

    /// Resolves with the term once this process leads, or `None` once the elector has finished
    /// without leading again.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_for_leadership(&self) -> Option<Leadership> {
        let mut rx = self.shared.state.subscribe();
        loop {
            if let Some(l) = self.leadership() {
                return Some(l);
            }
            if rx.borrow_and_update().finished {
                return None;
            }
            if rx.changed().await.is_err() {
                return self.leadership();
            }
        }
    }

    /// Resolves once this process does not lead (at once if it does not lead now).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_not_leading(&self) {
        if let Some(l) = self.leadership() {
            l.lost().await;
        }
    }

    /// client-go's `LeaderElector.Check`: fails when the lease was last observed naming this
    /// candidate more than `lease_duration + tolerance` ago, i.e. this process leads (or believes
    /// it does) but has not renewed for longer than anyone would wait for it.
    ///
    /// A candidate that does not hold the lease, or has not read it yet, is healthy: a standby is
    /// not the leader's problem. See [`LeaderHealthCheck`](crate::LeaderHealthCheck) for a check
    /// that can be created before the elector.
    ///
    /// # Errors
    /// [`HealthCheckError`] naming the election and how long ago the last renewal was observed.
    #[doc(alias = "Check")]
    pub fn check(&self, tolerance: Duration) -> Result<(), HealthCheckError> {
        let Some(obs) = *self.shared.observation.lock() else {
            return Ok(());
        };
        if !obs.holder_is_self {
            return Ok(());
        }
        let since = self.shared.clock.now().saturating_duration_since(obs.at);
        if since > self.shared.lease_duration.saturating_add(tolerance) {
            return Err(HealthCheckError {
                name: self.shared.name.to_string(),
                identity: self.shared.identity.to_string(),
                since,
            });
        }
        Ok(())
    }

    pub(crate) fn observed(&self, at: Instant, holder_is_self: bool) {
        *self.shared.observation.lock() = Some(Observation { at, holder_is_self });
    }

    /// A restarted `run`: the status is live again.
    pub(crate) fn restart(&self) {
        self.shared
            .state
            .send_if_modified(|s| std::mem::take(&mut s.finished));
    }

    pub(crate) fn start_term(&self, term: u64, deadline: Instant, version: ResourceVersion) {
        *self.shared.deadline.lock() = Some(TermDeadline {
            term,
            deadline,
            version,
        });
        let identity = self.shared.identity.to_string();
        self.shared.state.send_modify(|s| {
            s.term = Some(term);
            s.leader = Some(identity);
        });
    }

    pub(crate) fn extend_term(&self, deadline: Instant) {
        if let Some(d) = self.shared.deadline.lock().as_mut() {
            d.deadline = d.deadline.max(deadline);
        }
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.shared.deadline.lock().as_ref().map(|d| d.deadline)
    }

    pub(crate) fn end_term(&self) {
        *self.shared.deadline.lock() = None;
        self.shared
            .state
            .send_if_modified(|s| s.term.take().is_some());
    }

    pub(crate) fn set_leader(&self, leader: Option<&str>) {
        self.shared.state.send_if_modified(|s| {
            let changed = s.leader.as_deref() != leader;
            if changed {
                s.leader = leader.map(str::to_owned);
            }
            changed
        });
    }

    pub(crate) fn finish(&self) {
        *self.shared.deadline.lock() = None;
        self.shared.state.send_modify(|s| {
            s.term = None;
            s.finished = true;
        });
    }

    fn term_deadline(&self, term: u64) -> Option<Instant> {
        match self.shared.deadline.lock().as_ref() {
            Some(d) if d.term == term => Some(d.deadline),
            _ => None,
        }
    }
}

impl fmt::Debug for LeaderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderStatus")
            .field("identity", &self.shared.identity)
            .field("is_leader", &self.is_leader())
            .field("state", &*self.shared.state.borrow())
            .finish()
    }
}

/// One term of leadership of this process: a token that tells when it is over.
///
/// Handed to [`LeaderElector::on_started_leading`](crate::LeaderElector::on_started_leading) and
/// returned by [`LeaderStatus::wait_for_leadership`]; client-go passes a context that is cancelled
/// when leadership is lost, this is the same signal.
#[derive(Clone)]
pub struct Leadership {
    term: u64,
    version: ResourceVersion,
    status: LeaderStatus,
}

impl Leadership {
    /// The term's number (1 for the elector's first term, then 2, …).
    pub fn term(&self) -> u64 {
        self.term
    }

    /// The lock's version written by the acquisition that started the term (etcd's revision):
    /// terms of all candidates are ordered by it.
    pub fn version(&self) -> &ResourceVersion {
        &self.version
    }

    /// Whether the term still holds (not ended and its renew deadline not passed).
    pub fn is_held(&self) -> bool {
        match self.status.term_deadline(self.term) {
            Some(deadline) => self.status.shared.clock.now() < deadline,
            None => false,
        }
    }

    /// Resolves once the term is over: the elector ended it, or its renew deadline passed (on the
    /// elector's clock, even if the elector's task has not run since).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(&self) {
        let mut rx = self.status.shared.state.subscribe();
        loop {
            rx.borrow_and_update();
            let Some(deadline) = self.status.term_deadline(self.term) else {
                return;
            };
            let clock = &self.status.shared.clock;
            if clock.now() >= deadline {
                return;
            }
            tokio::select! {
                biased;
                changed = rx.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                () = clock.sleep_until_async(deadline) => {}
            }
        }
    }

    /// The status this term belongs to.
    pub fn status(&self) -> &LeaderStatus {
        &self.status
    }
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("term", &self.term)
            .field("identity", &self.status.shared.identity)
            .field("held", &self.is_held())
            .finish()
    }
}

/// What a component that works only while leading needs from an election: the seam between
/// `kcache-controller`'s `Controller` and an elector. [`LeaderStatus`] implements it; implement it
/// for another election mechanism to drive a controller with it.
pub trait LeaderGate: Send + Sync + fmt::Debug + 'static {
    /// Whether this process leads at this moment.
    fn is_leader(&self) -> bool;

    /// Resolves `true` once this process leads, `false` if it never will again (the election is
    /// over).
    fn wait_leading(&self) -> BoxFuture<'_, bool>;

    /// Resolves once this process does not lead.
    fn wait_not_leading(&self) -> BoxFuture<'_, ()>;
}

impl LeaderGate for LeaderStatus {
    fn is_leader(&self) -> bool {
        LeaderStatus::is_leader(self)
    }

    fn wait_leading(&self) -> BoxFuture<'_, bool> {
        Box::pin(async move { self.wait_for_leadership().await.is_some() })
    }

    fn wait_not_leading(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.wait_not_leading())
    }
}
