//! Leader election for kcache controllers: client-go's `tools/leaderelection` in Rust.
//!
//! Production controllers run as two or more replicas with one leader. Each replica runs a
//! [`LeaderElector`] on a shared [`Lock`]; one of them holds the lease and works, the others wait
//! (with warm caches) and take over when the leader stops renewing.
//!
//! - [`LeaderElector`]: campaigns, leads, renews; callbacks for started and stopped leading and
//!   for a new leader; [`LeaderStatus`] for the rest of the process (`is_leader`, the observed
//!   leader, waits) and a [`Leadership`] token per term that resolves when the term is over.
//!   Driven by [`run`](LeaderElector::run) (campaign until stopped),
//!   [`run_one_term`](LeaderElector::run_one_term) (client-go's `Run`: return when the term
//!   ends), or by the caller's own schedule: one [`try_acquire_or_renew`](LeaderElector::try_acquire_or_renew)
//!   at a time and [`release`](LeaderElector::release).
//! - [`LeaderHealthCheck`]: client-go's `HealthzAdaptor`, a liveness check for whoever serves
//!   `/healthz`: it fails once the leader has not renewed for the lease duration plus a
//!   tolerance.
//! - [`LeaderElectionConfig`]: client-go's timings (lease 15 s, renew deadline 10 s, retry 2 s,
//!   jitter 1.2) and `release_on_cancel`, checked at construction ([`ConfigError`]).
//! - [`Lock`]: get / create / update with optimistic concurrency of a [`LeaderElectionRecord`]
//!   (client-go's `resourcelock.Interface`). Locks live with the stores: [`InProcessLock`] here
//!   (tests, demos), `EtcdLock` in `kcache-etcd`, `LeaseLock` (a `coordination.k8s.io/v1` Lease)
//!   in `kcache-kube`.
//! - [`LeaderGate`]: the small trait through which `kcache-controller`'s `Controller` follows an
//!   election (its workers take keys only while leading).
//! - [`MemberStore`]: the member records of `kcache-controller`'s active-active sharding (every
//!   replica works, each on its share of the keys), compare-and-swap on a version as a lock is:
//!   [`InProcessMembers`] here, `EtcdMembers` in `kcache-etcd`, `LeaseMembers` in `kcache-kube`.
//!
//! Time is read and waited on through kcache's [`Clock`](kcache_core::Clock), so the whole state
//! machine runs on a [`FakeClock`](kcache_core::FakeClock) in tests.
//!
//! # The guarantee, and what it assumes
//! A holder stops believing it leads `renew_deadline` after its last successful renewal was
//! *sent*; a candidate takes over only after it has seen the record unchanged for
//! `lease_duration`, measured on its own clock from when it saw it. Candidates never compare
//! another machine's timestamps, so clock *offsets* do not matter; clock *rates* must agree to
//! within the margin `lease_duration - renew_deadline`. Within that assumption two candidates never
//! both believe they lead. [`LeaderStatus::is_leader`] is judged on the clock at each call, so it
//! turns false at the deadline even in a process that was paused.
//!
//! Every difference from client-go, with its reason and its test, is on one page:
//! [`kcache_core::docs::client_go_differences`]; where each client-go name went:
//! [`kcache_core::docs::client_go_names`].
//!
//! # Examples
//! Two candidates on one lock; the leader's lock becomes unreachable, it stops leading at its
//! renew deadline, and the other takes over once the lease has expired:
//! ```
//! use kcache_core::{Clock, FakeClock};
//! use kcache_leaderelection::{InProcessLock, LeaderElectionConfig, LeaderElector};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let clock = FakeClock::new();
//! let config = LeaderElectionConfig::new().jitter_factor(0.0);
//! let lock_a = InProcessLock::new("a");
//! let lock_b = lock_a.for_identity("b");
//!
//! let a = LeaderElector::with_clock(lock_a.clone(), config.clone(), Arc::new(clock.clone()))?;
//! let b = LeaderElector::with_clock(lock_b.clone(), config, Arc::new(clock.clone()))?;
//! let (status_a, status_b) = (a.status(), b.status());
//! let (stop, stopped) = tokio::sync::watch::channel(false);
//! let until_stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
//!     let _ = rx.wait_for(|s| *s).await;
//! };
//! let stop_a = until_stopped(stopped.clone());
//! tokio::spawn(async move { a.run(stop_a).await });
//! let term_a = status_a.wait_for_leadership().await.ok_or("a never led")?;
//! tokio::spawn(async move { b.run(until_stopped(stopped)).await });
//!
//! // Let time pass in small steps (a yield lets both electors act at each step).
//! let step = |clock: FakeClock, secs: u64| async move {
//!     for _ in 0..secs * 4 {
//!         clock.advance(Duration::from_millis(250));
//!         for _ in 0..8 { tokio::task::yield_now().await; }
//!     }
//! };
//! step(clock.clone(), 5).await;
//! assert!(status_a.is_leader() && !status_b.is_leader());
//! assert_eq!(status_b.leader().as_deref(), Some("a"));
//!
//! lock_a.set_available(false); // a can no longer renew
//! step(clock.clone(), 10).await;
//! assert!(!term_a.is_held() && !status_b.is_leader()); // a gave up; b still waits
//! step(clock.clone(), 10).await;
//! assert!(status_b.is_leader());
//! let _ = stop.send(true);
//! # Ok(())
//! # }
//! ```

mod config;
mod elector;
mod health;
mod in_process;
mod jitter;
mod lock;
mod membership;
mod record;
mod status;
mod sync;

pub use config::{ConfigError, LeaderElectionConfig, DEFAULT_JITTER_FACTOR};
pub use elector::{
    AlreadyRunning, Attempt, AttemptError, LeaderElector, Release, ReleaseError, TermEnd,
    TermEndReason,
};
pub use health::{HealthCheckError, LeaderHealthCheck};
pub use in_process::{InProcessLock, Unavailable};
pub use lock::{Lock, LockError};
pub use membership::{InProcessMembers, MemberRecord, MemberStore, VersionedMember};
pub use record::{LeaderElectionRecord, VersionedRecord};
pub use status::{LeaderGate, LeaderState, LeaderStatus, Leadership};

/// This crate's README.md, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
