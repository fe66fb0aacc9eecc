//! One attempt to acquire or renew: [`LeaderElector::try_acquire_or_renew`].

use super::{ErrorChain, LeaderElector, Notice, State, TermEndReason};
use crate::lock::{Lock, LockError};
use crate::record::LeaderElectionRecord;
use crate::status::Leadership;
use kcache_core::{saturating_add, ResourceVersion};
use std::time::Instant;

/// The outcome of one [`try_acquire_or_renew`](LeaderElector::try_acquire_or_renew).
#[derive(Debug)]
#[must_use]
#[non_exhaustive]
pub enum Attempt {
    /// The lease is this candidate's: a term started, or the current one was extended to
    /// `renew_deadline` after this attempt was sent. The token is the current term.
    Leading(Leadership),
    /// Another candidate holds the lease and it has not expired (by this elector's clock). A term
    /// this candidate was leading has ended ([`TermEndReason::LeaseLost`]).
    HeldByOther {
        /// The holder named by the record.
        holder: String,
    },
    /// The attempt failed; try again after the retry period. A term still runs until its renew
    /// deadline.
    Failed(AttemptError),
}

impl Attempt {
    /// Whether this candidate leads after the attempt (client-go's `tryAcquireOrRenew` result).
    pub fn succeeded(&self) -> bool {
        matches!(self, Self::Leading(_))
    }

    /// The term, if this candidate leads after the attempt.
    pub fn leadership(&self) -> Option<&Leadership> {
        match self {
            Self::Leading(term) => Some(term),
            _ => None,
        }
    }
}

/// Why an attempt failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttemptError {
    /// Reading or writing the record failed (a [`LockError::Conflict`] means another candidate
    /// wrote first).
    #[error("lock operation failed")]
    Lock(#[from] LockError),
    /// The write succeeded but came back after its renew deadline: the term it would start is
    /// already over. The record names this candidate, so the next attempt renews it.
    #[error("the lease was written but the write came back after the renew deadline")]
    TooLate,
}

/// What the lock said, before the elector's term bookkeeping.
enum Raw {
    Won(ResourceVersion),
    HeldByOther(String),
    Failed(LockError),
}

impl<L: Lock> LeaderElector<L> {
    /// One attempt to acquire the lease, or renew it if this candidate holds it: client-go's
    /// `tryAcquireOrRenew`, public for callers that drive their own schedule (their own retry
    /// loop, a test stepping the election). [`run`](Self::run) and
    /// [`run_one_term`](Self::run_one_term) are loops of these.
    ///
    /// The attempt:
    /// 1. while leading, writes the renewal over the version it last saw without reading first
    ///    (client-go's fast path); if that fails,
    /// 2. reads the record, creating it if there is none;
    /// 3. gives up if another candidate holds it and it has not been seen unchanged for its
    ///    lease duration on this elector's clock ([`Attempt::HeldByOther`]);
    /// 4. writes this candidate as holder over the version read (keeping the acquire time and
    ///    transition count on a renewal, counting one more transition on a takeover).
    ///
    /// It keeps the [`status`](Self::status) and callbacks as the loops do: a success starts a
    /// term or extends it to `renew_deadline` after the attempt was sent; a term whose deadline
    /// passed is ended at the next attempt; another holder ends it. Nothing here waits on a
    /// timer: bound a slow store yourself (the loops give an attempt `renew_deadline`).
    ///
    /// # Cancel safety
    /// Dropping the future abandons the attempt; a write it sent may still land. The term
    /// bookkeeping is untouched, and the next attempt or [`release`](Self::release) reads the
    /// record again.
    #[doc(alias = "tryAcquireOrRenew")]
    pub async fn try_acquire_or_renew(&self) -> Attempt {
        let _turn = self.ops.lock().await;
        self.with_state(|st, notices| self.end_term_if_expired(st, notices));
        let sent = self.clock.now();
        let raw = self.attempt().await;
        self.with_state(|st, notices| self.settle(st, sent, raw, notices))
    }

    /// The term bookkeeping of an attempt sent at `sent`.
    fn settle(
        &self,
        st: &mut State,
        sent: Instant,
        raw: Raw,
        notices: &mut Vec<Notice>,
    ) -> Attempt {
        match raw {
            Raw::Won(version) => {
                let deadline = saturating_add(sent, self.config.renew_deadline);
                if st.term.is_some() {
                    self.end_term_if_expired(st, notices);
                }
                if st.term.is_some() {
                    self.status.extend_term(deadline);
                } else if self.clock.now() < deadline {
                    self.start_term(st, version, deadline, notices);
                } else {
                    tracing::warn!(identity = %self.lock.identity(), "acquired the lease too late to lead on it");
                    return Attempt::Failed(AttemptError::TooLate);
                }
                match self.status.leadership() {
                    Some(term) => Attempt::Leading(term),
                    None => Attempt::Failed(AttemptError::TooLate),
                }
            }
            Raw::HeldByOther(holder) => {
                self.end_term(st, TermEndReason::LeaseLost, notices);
                Attempt::HeldByOther { holder }
            }
            Raw::Failed(e) => {
                self.end_term_if_expired(st, notices);
                Attempt::Failed(AttemptError::Lock(e))
            }
        }
    }

    /// The lock operations of one attempt.
    async fn attempt(&self) -> Raw {
        let wall = self.clock.system_time();
        let mut record = LeaderElectionRecord {
            holder_identity: self.lock.identity().to_owned(),
            lease_duration: self.config.lease_duration,
            acquire_time: wall,
            renew_time: wall,
            leader_transitions: 0,
        };

        // Fast path: while leading, write over the version we know without reading first.
        let known = if self.status.is_leader() {
            self.state
                .lock()
                .observed
                .as_ref()
                .filter(|o| self.holds(o))
                .cloned()
        } else {
            None
        };
        if let Some(obs) = known {
            record.acquire_time = obs.record.acquire_time;
            record.leader_transitions = obs.record.leader_transitions;
            match self.lock.update(&obs.version, &record).await {
                Ok(v) => {
                    self.with_state(|st, n| self.observe(st, record, v.clone(), n));
                    return Raw::Won(v);
                }
                Err(e) => {
                    tracing::debug!(identity = %self.lock.identity(), error = %ErrorChain(&e), "renewal without a read failed; reading the record");
                }
            }
        }

        // Read (or create) the record.
        let current = match self.lock.get().await {
            Ok(Some(current)) => current,
            Ok(None) => {
                return match self.lock.create(&record).await {
                    Ok(v) => {
                        self.with_state(|st, n| self.observe(st, record, v.clone(), n));
                        Raw::Won(v)
                    }
                    Err(e) => {
                        tracing::warn!(identity = %self.lock.identity(), error = %ErrorChain(&e), "cannot create the lock record");
                        Raw::Failed(e)
                    }
                };
            }
            Err(e) => {
                tracing::warn!(identity = %self.lock.identity(), lock = %self.lock.describe(), error = %ErrorChain(&e), "cannot read the lock record");
                return Raw::Failed(e);
            }
        };
        let obs = self.with_state(|st, n| {
            if st.observed.as_ref().map(|o| &o.version) != Some(&current.version) {
                self.observe(st, current.record.clone(), current.version.clone(), n);
            }
            st.observed.clone()
        });
        let Some(obs) = obs else {
            return Raw::Failed(LockError::Malformed("no record observed".into()));
        };
        let holds = self.holds(&obs);
        let expired = saturating_add(obs.at, obs.record.lease_duration) <= self.clock.now();
        if !obs.record.is_released() && !expired && !holds {
            tracing::debug!(identity = %self.lock.identity(), holder = %obs.record.holder_identity, "the lease is held by another candidate and has not expired");
            return Raw::HeldByOther(obs.record.holder_identity);
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
                self.with_state(|st, n| self.observe(st, record, v.clone(), n));
                Raw::Won(v)
            }
            Err(e) => {
                match &e {
                    LockError::Conflict => {
                        tracing::debug!(identity = %self.lock.identity(), "another candidate wrote the lock record first")
                    }
                    _ => {
                        tracing::warn!(identity = %self.lock.identity(), error = %ErrorChain(&e), "cannot update the lock record")
                    }
                }
                Raw::Failed(e)
            }
        }
    }
}
