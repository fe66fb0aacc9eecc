//! The loops: [`LeaderElector::run`] and [`LeaderElector::run_one_term`].

use super::{Attempt, LeaderElector, TermEnd, TermEndReason};
use crate::lock::Lock;
use crate::sync::atomic::Ordering;
use kcache_core::saturating_add;
use std::future::Future;
use std::pin::{pin, Pin};

/// The error of a second [`run`](LeaderElector::run) (or
/// [`run_one_term`](LeaderElector::run_one_term)) of an elector that is already running.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("this leader elector is already running")]
pub struct AlreadyRunning;

/// Clears the running flag when a run ends, however it ends.
struct Running<'a, L: Lock>(&'a LeaderElector<L>);

impl<L: Lock> Drop for Running<'_, L> {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::SeqCst);
    }
}

impl<L: Lock> LeaderElector<L> {
    /// Campaigns, leads, campaigns again after a lost term, until `stop` completes. Stopped while
    /// leading, it ends the term first, then releases the lease if
    /// [`release_on_cancel`](crate::LeaderElectionConfig::release_on_cancel) is set.
    ///
    /// Unlike client-go's `Run`, which returns after the first term (that is
    /// [`run_one_term`](Self::run_one_term)), this keeps campaigning: a controller with warm
    /// informers resumes work when leadership comes back. After it returns, the elector can be
    /// run again.
    ///
    /// # Errors
    /// [`AlreadyRunning`] if another `run` or `run_one_term` of this elector is in progress.
    ///
    /// # Runtime
    /// Run it inside a tokio runtime: the etcd and Kubernetes locks need one, and so does waiting
    /// on the [`SystemClock`](kcache_core::SystemClock) (tokio's timer).
    ///
    /// # Cancel safety
    /// Dropping the future ends nothing cleanly: the status keeps its last term until its
    /// deadline passes. Stop it through `stop`.
    pub async fn run<S>(&self, stop: S) -> Result<(), AlreadyRunning>
    where
        S: Future<Output = ()> + Send,
    {
        let _running = self.start_running()?;
        let mut stop = pin!(stop);
        tracing::info!(identity = %self.lock.identity(), lock = %self.lock.describe(), name = %self.config.name, "leader election: campaigning");
        loop {
            if !self.acquire(stop.as_mut()).await {
                break;
            }
            let end = self.lead(stop.as_mut()).await;
            if end.is_some_and(|e| e.reason == TermEndReason::Stopped) {
                self.release_after_stop().await;
                break;
            }
        }
        self.status.finish();
        tracing::info!(identity = %self.lock.identity(), "leader election: stopped");
        Ok(())
    }

    /// client-go's `Run`: campaigns until this candidate leads, leads until the term ends, and
    /// returns how it ended; `None` if `stop` completed before it led. With
    /// [`release_on_cancel`](crate::LeaderElectionConfig::release_on_cancel), the lease is
    /// released when the term ends, as client-go does (a record this candidate no longer holds is
    /// left alone).
    ///
    /// For a process that exits when it loses leadership (client-go's usual pattern) this needs
    /// no callback: the term is over when this returns. The elector can be run again afterwards.
    ///
    /// # Errors
    /// [`AlreadyRunning`] if another `run` or `run_one_term` of this elector is in progress.
    ///
    /// # Cancel safety
    /// As [`run`](Self::run).
    #[doc(alias = "Run")]
    pub async fn run_one_term<S>(&self, stop: S) -> Result<Option<TermEnd>, AlreadyRunning>
    where
        S: Future<Output = ()> + Send,
    {
        let _running = self.start_running()?;
        let mut stop = pin!(stop);
        let end = if self.acquire(stop.as_mut()).await {
            let end = self.lead(stop.as_mut()).await;
            self.release_after_stop().await;
            end
        } else {
            None
        };
        self.status.finish();
        Ok(end)
    }

    fn start_running(&self) -> Result<Running<'_, L>, AlreadyRunning> {
        if self.running.swap(true, Ordering::SeqCst) {
            return Err(AlreadyRunning);
        }
        self.status.restart();
        Ok(Running(self))
    }

    async fn release_after_stop(&self) {
        if self.config.release_on_cancel {
            if let Err(e) = self.release().await {
                tracing::warn!(identity = %self.lock.identity(), error = %e, "the lease was not released; it expires on its own");
            }
        }
    }

    /// Attempts every `retry_period` (plus jitter) until this candidate leads (`true`) or `stop`
    /// completes (`false`).
    async fn acquire<S>(&self, mut stop: Pin<&mut S>) -> bool
    where
        S: Future<Output = ()> + Send,
    {
        loop {
            // An attempt that hangs (an unreachable store) is given up after the renew deadline:
            // it could not start a term any more.
            let give_up = self.clock.sleep_async(self.config.renew_deadline);
            tokio::select! {
                biased;
                () = stop.as_mut() => return false,
                () = give_up => {
                    tracing::warn!(identity = %self.lock.identity(), "an attempt to acquire the lease timed out");
                }
                attempt = self.try_acquire_or_renew() => {
                    if attempt.succeeded() {
                        return true;
                    }
                }
            }
            let wait = self.state.lock().jitter.apply(self.config.retry_period);
            tokio::select! {
                biased;
                () = stop.as_mut() => return false,
                () = self.clock.sleep_async(wait) => {}
            }
        }
    }

    /// Renews the current term every `retry_period` until it ends; returns how it ended.
    async fn lead<S>(&self, mut stop: Pin<&mut S>) -> Option<TermEnd>
    where
        S: Future<Output = ()> + Send,
    {
        let reason = loop {
            let Some(deadline) = self.status.deadline() else {
                break None; // ended by an attempt (another holder, too late)
            };
            let next = saturating_add(self.clock.now(), self.config.retry_period).min(deadline);
            tokio::select! {
                biased;
                () = stop.as_mut() => break Some(TermEndReason::Stopped),
                () = self.clock.sleep_until_async(next) => {}
            }
            if self.clock.now() >= deadline {
                break Some(TermEndReason::RenewDeadlineExceeded);
            }
            tokio::select! {
                biased;
                () = stop.as_mut() => break Some(TermEndReason::Stopped),
                () = self.clock.sleep_until_async(deadline) => break Some(TermEndReason::RenewDeadlineExceeded),
                attempt = self.try_acquire_or_renew() => match attempt {
                    Attempt::Leading(_) | Attempt::Failed(_) => {}
                    Attempt::HeldByOther { .. } => break None,
                },
            }
        };
        self.with_state(|st, n| {
            if let Some(reason) = reason {
                self.end_term(st, reason, n);
            }
            // The term ended here or in an attempt; either way `end_term` recorded how.
            st.last_end.take()
        })
    }
}
