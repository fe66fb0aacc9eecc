//! `LeaseLock` against the loopback server: the lock's compare-and-swap on `resourceVersion`, and
//! two electors on one Lease (acquire, follow, take over after the lease, release, a Lease that
//! cannot be reached).
//!
//! The electors run on the real clock with short timings (lease 2 s, renew deadline 1.5 s, retry
//! 0.25 s); every wait is bounded.

mod support;

use kcache_core::{Clock, SystemClock};
use kcache_kube::LeaseLock;
use kcache_leaderelection::{
    LeaderElectionConfig, LeaderElectionRecord, LeaderElector, LeaderStatus, Lock, LockError,
};
use kcache_memory::MemoryConfig;
use std::time::{Duration, UNIX_EPOCH};
use support::Loopback;
use tokio::sync::watch;

const WAIT: Duration = Duration::from_secs(20);

fn record(holder: &str) -> LeaderElectionRecord {
    LeaderElectionRecord {
        holder_identity: holder.into(),
        lease_duration: Duration::from_secs(15),
        acquire_time: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        renew_time: UNIX_EPOCH + Duration::from_secs(1_700_000_002),
        leader_transitions: 0,
    }
}

#[tokio::test]
async fn the_lease_lock_is_a_compare_and_swap_on_the_resource_version() {
    let server = Loopback::start(MemoryConfig::new()).await.unwrap();
    let lock = LeaseLock::new(server.client(), "kube-system", "ctrl", "a");
    assert_eq!(lock.describe(), "Lease kube-system/ctrl");
    assert!(lock.get().await.unwrap().is_none());

    let v1 = lock.create(&record("a")).await.unwrap();
    assert!(matches!(
        lock.create(&record("a")).await,
        Err(LockError::AlreadyExists)
    ));
    let read = lock.get().await.unwrap().expect("the Lease exists");
    assert_eq!(read.version, v1);
    assert_eq!(read.record, record("a"));
    let stored = server.lease("kube-system", "ctrl").expect("stored");
    assert_eq!(stored["spec"]["holderIdentity"], "a");
    assert_eq!(stored["spec"]["leaseDurationSeconds"], 15);

    let mut renewed = record("a");
    renewed.renew_time += Duration::from_secs(2);
    let v2 = lock.update(&v1, &renewed).await.unwrap();
    assert_ne!(v1, v2);
    // A writer holding the old version loses.
    assert!(matches!(
        lock.update(&v1, &record("b")).await,
        Err(LockError::Conflict)
    ));
    assert_eq!(lock.get().await.unwrap().map(|r| r.record), Some(renewed));

    let missing = LeaseLock::new(server.client(), "kube-system", "other", "a");
    assert!(matches!(
        missing.update(&v2, &record("a")).await,
        Err(LockError::NotFound)
    ));
    server.set_leases_available(false);
    assert!(matches!(lock.get().await, Err(LockError::Backend(_))));
}

fn config() -> LeaderElectionConfig {
    LeaderElectionConfig::new()
        .lease_duration(Duration::from_secs(2))
        .renew_deadline(Duration::from_millis(1500))
        .retry_period(Duration::from_millis(250))
}

struct Running {
    status: LeaderStatus,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

fn start(server: &Loopback, identity: &str, config: LeaderElectionConfig) -> Running {
    let lock = LeaseLock::new(server.client(), "kube-system", "ctrl", identity);
    let elector = LeaderElector::new(lock, config).unwrap();
    let status = elector.status();
    let (stop, mut stopped) = watch::channel(false);
    let task = tokio::spawn(async move {
        elector
            .run(async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await
            .expect("the elector runs once");
    });
    Running { status, stop, task }
}

impl Running {
    async fn stop(self) {
        self.stop.send_replace(true);
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the elector stops")
            .expect("the elector does not panic");
    }
}

/// Polls `cond` every 10 ms; fails after `WAIT`. Returns how long it took.
async fn until(what: &str, cond: impl Fn() -> bool) -> Duration {
    let start = SystemClock.now();
    while !cond() {
        assert!(SystemClock.now() - start < WAIT, "timed out: {what}");
        SystemClock.sleep_async(Duration::from_millis(10)).await;
    }
    SystemClock.now() - start
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_electors_share_a_lease_one_leads_the_other_takes_over() {
    let server = Loopback::start(MemoryConfig::new()).await.unwrap();
    let a = start(&server, "a", config());
    until("a leads", || a.status.is_leader()).await;
    let b = start(&server, "b", config().release_on_cancel(true));
    until("b sees a", || b.status.leader().as_deref() == Some("a")).await;
    SystemClock.sleep_async(Duration::from_secs(1)).await;
    assert!(a.status.is_leader() && !b.status.is_leader());

    // a stops without releasing: b waits out the lease, then takes over.
    let a_status = a.status.clone();
    a.stop().await;
    assert!(!a_status.is_leader());
    let took = until("b takes over", || b.status.is_leader()).await;
    assert!(
        took >= Duration::from_millis(1500),
        "b took over after {took:?}"
    );
    let lease = server.lease("kube-system", "ctrl").expect("the Lease");
    assert_eq!(lease["spec"]["holderIdentity"], "b");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);

    // b is cut off from the API server: it stops leading by its renew deadline.
    server.set_leases_available(false);
    let lost = until("b stops leading", || !b.status.is_leader()).await;
    assert!(
        lost <= Duration::from_millis(1500 + 300),
        "b led {lost:?} without the Lease"
    );
    server.set_leases_available(true);
    until("b leads again", || b.status.is_leader()).await;

    // b stops with release_on_cancel: the Lease is released; c gets it at once.
    b.stop().await;
    let lease = server.lease("kube-system", "ctrl").expect("the Lease");
    assert_eq!(lease["spec"]["holderIdentity"], "");
    let c = start(&server, "c", config());
    let took = until("c leads", || c.status.is_leader()).await;
    assert!(
        took < Duration::from_secs(1),
        "c waited {took:?} for a released Lease"
    );
    assert_eq!(
        server.lease("kube-system", "ctrl").expect("the Lease")["spec"]["leaseTransitions"],
        2
    );
    c.stop().await;
}
