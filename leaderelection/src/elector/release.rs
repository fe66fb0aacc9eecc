//! Giving the lease up: [`LeaderElector::release`].

use super::{ErrorChain, LeaderElector, TermEndReason};
use crate::lock::{Lock, LockError};
use crate::record::{LeaderElectionRecord, VersionedRecord};
use kcache_core::saturating_add;
use std::time::Duration;

/// How many conflicting writes a release reads past before it gives up (each conflict means the
/// record changed between its read and its write: an in-flight renewal of this candidate landing
/// late, typically once).
const RELEASE_CONFLICT_RETRIES: u32 = 8;

/// The outcome of a [`release`](LeaderElector::release) that did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
#[non_exhaustive]
pub enum Release {
    /// The record now names no holder: the next candidate may take it at once.
    Released,
    /// The record does not name this candidate (or there is none): nothing to give up.
    NotHeld {
        /// The holder the record names, `None` for a released lease or no record.
        holder: Option<String>,
    },
}

/// Why a [`release`](LeaderElector::release) failed. The lease then expires on its own after its
/// lease duration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReleaseError {
    /// Reading or writing the record failed.
    #[error("lock operation failed while releasing the lease")]
    Lock(#[from] LockError),
    /// Every write conflicted with another change of the record.
    #[error("the lock record kept changing under the release ({attempts} attempts)")]
    Conflicts {
        /// How many writes were tried.
        attempts: u32,
    },
    /// The release did not finish within the renew deadline.
    #[error("the release did not finish within the renew deadline")]
    TimedOut,
}

impl<L: Lock> LeaderElector<L> {
    /// Gives the lease up: writes a record naming no holder (lease duration 1 s), so another
    /// candidate can take it at once instead of waiting out the lease. client-go's `release`,
    /// public for callers that drive their own schedule with
    /// [`try_acquire_or_renew`](Self::try_acquire_or_renew); [`run`](Self::run) calls it when
    /// stopped if [`release_on_cancel`](crate::LeaderElectionConfig::release_on_cancel) is set.
    ///
    /// It reads the record first and releases only a record that names this candidate, over the
    /// version it read: a renewal of ours that was cancelled but still landed in the store has
    /// moved the version on, and a blind write would conflict and leave the lease held until it
    /// expires. A write that conflicts anyway is retried from a new read (client-go does the
    /// same since kubernetes #137988). The term, if any, ends
    /// ([`TermEndReason::Released`]) before the write is sent, so this process stops leading
    /// before anyone else can start. The whole release is given up after `renew_deadline`.
    ///
    /// # Errors
    /// [`ReleaseError`] when the lock fails, the record keeps changing, or the deadline passes.
    ///
    /// # Cancel safety
    /// Dropping the future may leave the term ended and the lease still held (it then expires).
    #[doc(alias = "tryRelease")]
    pub async fn release(&self) -> Result<Release, ReleaseError> {
        let _turn = self.ops.lock().await;
        let give_up = saturating_add(self.clock.now(), self.config.renew_deadline);
        tokio::select! {
            biased;
            result = self.release_inner() => result,
            () = self.clock.sleep_until_async(give_up) => {
                tracing::warn!(identity = %self.lock.identity(), "gave up releasing the lease after the renew deadline");
                Err(ReleaseError::TimedOut)
            }
        }
    }

    async fn release_inner(&self) -> Result<Release, ReleaseError> {
        for _ in 0..RELEASE_CONFLICT_RETRIES {
            let current = self.lock.get().await.inspect_err(|e| {
                tracing::warn!(identity = %self.lock.identity(), error = %ErrorChain(e), "cannot read the lock record to release it");
            })?;
            let Some(VersionedRecord { record, version }) = current else {
                return Ok(Release::NotHeld { holder: None });
            };
            let holds = record.holder_identity == self.lock.identity();
            let transitions = record.leader_transitions;
            self.with_state(|st, n| {
                if st.observed.as_ref().map(|o| &o.version) != Some(&version) {
                    self.observe(st, record.clone(), version.clone(), n);
                }
                let reason = if holds {
                    TermEndReason::Released
                } else {
                    TermEndReason::LeaseLost
                };
                self.end_term(st, reason, n);
            });
            if !holds {
                return Ok(Release::NotHeld {
                    holder: (!record.is_released()).then_some(record.holder_identity),
                });
            }
            let wall = self.clock.system_time();
            let released = LeaderElectionRecord {
                holder_identity: String::new(),
                lease_duration: Duration::from_secs(1),
                acquire_time: wall,
                renew_time: wall,
                leader_transitions: transitions,
            };
            match self.lock.update(&version, &released).await {
                Ok(v) => {
                    tracing::info!(identity = %self.lock.identity(), "leader election: released the lease");
                    self.with_state(|st, n| self.observe(st, released, v, n));
                    return Ok(Release::Released);
                }
                Err(LockError::Conflict) => {
                    tracing::debug!(identity = %self.lock.identity(), "the record changed while releasing it; reading it again");
                }
                Err(e) => {
                    tracing::warn!(identity = %self.lock.identity(), error = %ErrorChain(&e), "cannot release the lease");
                    return Err(ReleaseError::Lock(e));
                }
            }
        }
        Err(ReleaseError::Conflicts {
            attempts: RELEASE_CONFLICT_RETRIES,
        })
    }
}
