//! Cases ported from client-go's leader election tests.
//!
//! Provenance: `k8s.io/client-go/tools/leaderelection/leaderelection_test.go` (the
//! `tryAcquireOrRenew` table, release, release-calls-get, release-retries-on-conflict, release on
//! cancellation, fast path, config validation, the check race) and `healthzadaptor_test.go` (the
//! health check table), read at client-go master of 2026-07 and rewritten here in our own words
//! against kcache's public API. client-go drives its elector through a fake clientset whose
//! reactors answer get/create/update; here a scripted lock does the same: a small
//! compare-and-swap store that logs every call in order and can be told to fail, or to apply a
//! write and never answer (a request the client gave up on that still reached the server).
//!
//! Where client-go seeds the elector's private observed record and observation time, these
//! tests reach the same state through the public API: an attempt that observes the record, then
//! the fake clock moved past (or not past) the lease.
//!
//! Not ported: `TestTryCoordinatedRenew` (coordinated leader election and lease candidates are
//! not part of kcache) and `TestLeaseSpecToLeaderElectionRecordRoundTrip` (the Lease conversion
//! lives in `kcache-kube`, whose own tests cover it).

use kcache_core::{Clock, FakeClock, ResourceVersion};
use kcache_leaderelection::{
    Attempt, AttemptError, ConfigError, InProcessLock, LeaderElectionConfig, LeaderElectionRecord,
    LeaderElector, LeaderHealthCheck, Lock, LockError, Release, ReleaseError, TermEnd,
    TermEndReason, VersionedRecord,
};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

// ---------------------------------------------------------------------------------------------
// The scripted lock.

/// One call the elector made.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Get,
    Create,
    /// An update naming this version.
    Update(String),
}

impl Op {
    fn verb(&self) -> &'static str {
        match self {
            Op::Get => "get",
            Op::Create => "create",
            Op::Update(_) => "update",
        }
    }
}

/// What the script does with a call.
enum Fault {
    /// Behave as a store.
    None,
    /// Fail with this error (the store is not changed).
    Fail(LockError),
    /// Apply the write (bumping the version), then never answer.
    ApplyThenHang,
    /// Never answer (nothing applied).
    Hang,
}

type Script = Box<dyn FnMut(usize, &Op) -> Fault + Send>;

struct FakeState {
    record: Option<(LeaderElectionRecord, u64)>,
    next_version: u64,
    ops: Vec<Op>,
    script: Script,
}

/// A compare-and-swap store behind [`Lock`], logging every call; a script decides per call
/// (numbered from 0 in order) whether it fails or hangs.
#[derive(Clone)]
struct FakeLock {
    identity: String,
    state: Arc<Mutex<FakeState>>,
}

impl FakeLock {
    fn new(identity: &str) -> Self {
        Self {
            identity: identity.into(),
            state: Arc::new(Mutex::new(FakeState {
                record: None,
                next_version: 1,
                ops: Vec::new(),
                script: Box::new(|_, _| Fault::None),
            })),
        }
    }

    /// The store holds `record` at version `version`.
    fn holding(identity: &str, record: LeaderElectionRecord, version: u64) -> Self {
        let lock = Self::new(identity);
        lock.set(record, version);
        lock
    }

    fn set(&self, record: LeaderElectionRecord, version: u64) {
        let mut st = self.state.lock();
        st.record = Some((record, version));
        st.next_version = st.next_version.max(version + 1);
    }

    fn script(&self, script: impl FnMut(usize, &Op) -> Fault + Send + 'static) {
        self.state.lock().script = Box::new(script);
    }

    fn ops(&self) -> Vec<Op> {
        self.state.lock().ops.clone()
    }

    fn verbs(&self) -> Vec<&'static str> {
        self.ops().iter().map(Op::verb).collect()
    }

    fn clear_ops(&self) {
        self.state.lock().ops.clear();
    }

    fn stored(&self) -> Option<VersionedRecord> {
        self.state
            .lock()
            .record
            .as_ref()
            .map(|(record, v)| VersionedRecord {
                record: record.clone(),
                version: ResourceVersion::from(*v),
            })
    }

    /// Logs the call and asks the script.
    fn begin(&self, op: Op) -> Fault {
        let mut st = self.state.lock();
        let n = st.ops.len();
        st.ops.push(op.clone());
        (st.script)(n, &op)
    }

    fn write(
        &self,
        expect: Option<&ResourceVersion>,
        record: &LeaderElectionRecord,
    ) -> Result<ResourceVersion, LockError> {
        let mut st = self.state.lock();
        match (expect, &st.record) {
            (None, Some(_)) => return Err(LockError::AlreadyExists),
            (Some(_), None) => return Err(LockError::NotFound),
            (Some(want), Some((_, have))) if want.as_str() != have.to_string() => {
                return Err(LockError::Conflict)
            }
            _ => {}
        }
        let version = st.next_version;
        st.next_version += 1;
        st.record = Some((record.clone(), version));
        Ok(ResourceVersion::from(version))
    }

    async fn written(
        &self,
        op: Op,
        expect: Option<&ResourceVersion>,
        record: &LeaderElectionRecord,
    ) -> Result<ResourceVersion, LockError> {
        match self.begin(op) {
            Fault::None => self.write(expect, record),
            Fault::Fail(e) => Err(e),
            Fault::ApplyThenHang => {
                let _ = self.write(expect, record);
                std::future::pending().await
            }
            Fault::Hang => std::future::pending().await,
        }
    }
}

impl Lock for FakeLock {
    async fn get(&self) -> Result<Option<VersionedRecord>, LockError> {
        match self.begin(Op::Get) {
            Fault::None | Fault::ApplyThenHang => Ok(self.stored()),
            Fault::Fail(e) => Err(e),
            Fault::Hang => std::future::pending().await,
        }
    }

    async fn create(&self, record: &LeaderElectionRecord) -> Result<ResourceVersion, LockError> {
        self.written(Op::Create, None, record).await
    }

    async fn update(
        &self,
        version: &ResourceVersion,
        record: &LeaderElectionRecord,
    ) -> Result<ResourceVersion, LockError> {
        self.written(
            Op::Update(version.as_str().to_owned()),
            Some(version),
            record,
        )
        .await
    }

    fn identity(&self) -> &str {
        &self.identity
    }

    fn describe(&self) -> String {
        "scripted lock".into()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the request was cancelled")]
struct Cancelled;

fn cancelled() -> LockError {
    LockError::backend(Cancelled)
}

// ---------------------------------------------------------------------------------------------
// Helpers.

/// A record held by `holder` for `lease` (client-go's `LeaseDurationSeconds`).
fn held(holder: &str, lease: Duration, transitions: u32) -> LeaderElectionRecord {
    LeaderElectionRecord {
        holder_identity: holder.into(),
        lease_duration: lease,
        acquire_time: SystemTime::UNIX_EPOCH,
        renew_time: SystemTime::UNIX_EPOCH,
        leader_transitions: transitions,
    }
}

/// client-go's table uses a 10 s lease; no jitter so schedules are exact.
fn config() -> LeaderElectionConfig {
    LeaderElectionConfig::new()
        .lease_duration(Duration::from_secs(10))
        .renew_deadline(Duration::from_secs(5))
        .retry_period(Duration::from_secs(1))
        .jitter_factor(0.0)
}

/// An elector "baz" on `lock` and `clock`, reporting new leaders into the returned list.
fn elector<L: Lock>(
    lock: L,
    config: LeaderElectionConfig,
    clock: &FakeClock,
) -> (LeaderElector<L>, Arc<Mutex<Vec<String>>>) {
    let reported = Arc::new(Mutex::new(Vec::new()));
    let r = reported.clone();
    let e = LeaderElector::with_clock(lock, config, Arc::new(clock.clone()))
        .expect("valid config")
        .on_new_leader(move |l| r.lock().push(l.to_owned()));
    (e, reported)
}

fn holder<L: Lock>(e: &LeaderElector<L>) -> String {
    e.observed_record()
        .map(|r| r.record.holder_identity)
        .unwrap_or_default()
}

fn transitions<L: Lock>(e: &LeaderElector<L>) -> u32 {
    e.observed_record()
        .map(|r| r.record.leader_transitions)
        .unwrap_or_default()
}

async fn settle() {
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
}

// ---------------------------------------------------------------------------------------------
// tryAcquireOrRenew (client-go's `testTryAcquireOrRenew` table, lease lock).

#[tokio::test(flavor = "current_thread")]
async fn acquire_from_no_object_creates_the_record() {
    let clock = FakeClock::new();
    let lock = FakeLock::new("baz");
    let (e, reported) = elector(lock.clone(), config(), &clock);
    assert!(e.try_acquire_or_renew().await.succeeded());
    assert_eq!(lock.verbs(), ["get", "create"]);
    assert_eq!(holder(&e), "baz");
    assert_eq!(transitions(&e), 0);
    assert_eq!(*reported.lock(), ["baz"]);
    assert!(e.status().is_leader());
}

#[tokio::test(flavor = "current_thread")]
async fn acquire_from_an_object_without_a_record_counts_a_transition() {
    // A Lease with an empty spec reads as a record naming nobody.
    let clock = FakeClock::new();
    let lock = FakeLock::holding("baz", held("", Duration::ZERO, 0), 3);
    let (e, reported) = elector(lock.clone(), config(), &clock);
    assert!(e.try_acquire_or_renew().await.succeeded());
    assert_eq!(lock.ops(), [Op::Get, Op::Update("3".into())]);
    assert_eq!(holder(&e), "baz");
    assert_eq!(transitions(&e), 1);
    assert_eq!(*reported.lock(), ["baz"]);
}

#[tokio::test(flavor = "current_thread")]
async fn acquire_from_a_led_object_once_its_lease_duration_passed() {
    let clock = FakeClock::new();
    let lock = FakeLock::holding("baz", held("bing", Duration::from_secs(3), 0), 5);
    let (e, reported) = elector(lock.clone(), config(), &clock);
    let first = e.try_acquire_or_renew().await;
    assert!(
        matches!(&first, Attempt::HeldByOther { holder } if holder == "bing"),
        "{first:?}"
    );
    clock.advance(Duration::from_secs(3));
    assert!(e.try_acquire_or_renew().await.succeeded());
    assert_eq!(lock.verbs(), ["get", "get", "update"]);
    assert_eq!(holder(&e), "baz");
    assert_eq!(transitions(&e), 1);
    assert_eq!(*reported.lock(), ["bing", "baz"]);
}

#[tokio::test(flavor = "current_thread")]
async fn acquire_from_an_unled_object() {
    let clock = FakeClock::new();
    let lock = FakeLock::holding("baz", held("", Duration::from_secs(10), 0), 2);
    let (e, reported) = elector(lock.clone(), config(), &clock);
    assert!(e.try_acquire_or_renew().await.succeeded());
    assert_eq!(lock.verbs(), ["get", "update"]);
    assert_eq!(holder(&e), "baz");
    assert_eq!(transitions(&e), 1);
    assert_eq!(*reported.lock(), ["baz"]);
}

#[tokio::test(flavor = "current_thread")]
async fn acquire_from_a_led_object_observed_unchanged_for_longer_than_its_lease() {
    // client-go seeds "observed bing long ago"; here the elector observes it, then time passes.
    let clock = FakeClock::new();
    let lock = FakeLock::holding("baz", held("bing", Duration::from_secs(10), 0), 4);
    let (e, _) = elector(lock.clone(), config(), &clock);
    assert!(!e.try_acquire_or_renew().await.succeeded());
    lock.clear_ops();
    clock.advance(Duration::from_secs(60));
    assert!(e.try_acquire_or_renew().await.succeeded());
    assert_eq!(lock.verbs(), ["get", "update"]);
    assert_eq!(holder(&e), "baz");
    assert_eq!(transitions(&e), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn acquire_at_once_from_a_released_object_even_when_the_holder_was_seen_recently() {
    let clock = FakeClock::new();
    let lock = FakeLock::holding("baz", held("bing", Duration::from_secs(10), 0), 4);
    let (e, reported) = elector(lock.clone(), config(), &clock);
    assert!(!e.try_acquire_or_renew().await.succeeded());
    // bing released it (a record naming nobody) a moment later.
    lock.set(held("", Duration::from_secs(1), 0), 5);
    lock.clear_ops();
    assert!(e.try_acquire_or_renew().await.succeeded());
    assert_eq!(lock.verbs(), ["get", "update"]);
    assert_eq!(holder(&e), "baz");
    assert_eq!(transitions(&e), 1);
    assert_eq!(*reported.lock(), ["bing", "baz"]);
}

#[tokio::test(flavor = "current_thread")]
async fn do_not_acquire_from_a_led_object_whose_lease_is_running() {
    let clock = FakeClock::new();
    let lock = FakeLock::holding("baz", held("bing", Duration::from_secs(10), 0), 4);
    let (e, reported) = elector(lock.clone(), config(), &clock);
    let attempt = e.try_acquire_or_renew().await;
    assert!(
        matches!(&attempt, Attempt::HeldByOther { holder } if holder == "bing"),
        "{attempt:?}"
    );
    clock.advance(Duration::from_secs(9));
    assert!(!e.try_acquire_or_renew().await.succeeded());
    assert_eq!(
        lock.verbs(),
        ["get", "get"],
        "no write while the lease runs"
    );
    assert_eq!(holder(&e), "bing");
    assert_eq!(transitions(&e), 0);
    assert_eq!(*reported.lock(), ["bing"]);
    assert_eq!(e.status().leader().as_deref(), Some("bing"));
    assert!(!e.status().is_leader());
}

#[tokio::test(flavor = "current_thread")]
async fn renew_an_object_this_candidate_already_holds() {
    let clock = FakeClock::new();
    let lock = FakeLock::holding("baz", held("baz", Duration::from_secs(10), 0), 4);
    let (e, reported) = elector(lock.clone(), config(), &clock);
    assert!(e.try_acquire_or_renew().await.succeeded());
    assert_eq!(lock.ops(), [Op::Get, Op::Update("4".into())]);
    assert_eq!(holder(&e), "baz");
    assert_eq!(transitions(&e), 0, "a renewal is no transition");
    assert_eq!(*reported.lock(), ["baz"]);
}

// ---------------------------------------------------------------------------------------------
// Attempts and the term (what client-go's table leaves to Run).

#[tokio::test(flavor = "current_thread")]
async fn while_leading_an_attempt_renews_without_reading_and_extends_the_term() {
    let clock = FakeClock::new();
    let lock = FakeLock::new("baz");
    let (e, _) = elector(lock.clone(), config(), &clock);
    let Attempt::Leading(term) = e.try_acquire_or_renew().await else {
        panic!("the first attempt leads");
    };
    clock.advance(Duration::from_secs(4));
    lock.clear_ops();
    let again = e.try_acquire_or_renew().await;
    assert_eq!(again.leadership().map(|t| t.term()), Some(term.term()));
    assert_eq!(lock.verbs(), ["update"], "the fast path");
    clock.advance(Duration::from_secs(4));
    assert!(
        term.is_held(),
        "renewed at 4 s, the term runs to 9 s (renew deadline 5 s)"
    );
    clock.advance(Duration::from_secs(1));
    assert!(!term.is_held());
}

#[tokio::test(flavor = "current_thread")]
async fn an_attempt_after_the_renew_deadline_ends_the_term_and_starts_another() {
    let clock = FakeClock::new();
    let lock = FakeLock::new("baz");
    let ends = Arc::new(Mutex::new(Vec::<TermEnd>::new()));
    let ends2 = ends.clone();
    let e = LeaderElector::with_clock(lock.clone(), config(), Arc::new(clock.clone()))
        .expect("valid")
        .on_stopped_leading(move |end| ends2.lock().push(end.clone()));
    let first = e.try_acquire_or_renew().await;
    assert_eq!(first.leadership().map(|t| t.term()), Some(1));
    clock.advance(Duration::from_secs(6));
    let second = e.try_acquire_or_renew().await;
    assert_eq!(second.leadership().map(|t| t.term()), Some(2));
    let ends = ends.lock().clone();
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0].reason, TermEndReason::RenewDeadlineExceeded);
    assert_eq!(transitions(&e), 0, "it still held the record");
}

#[tokio::test(flavor = "current_thread")]
async fn a_failed_attempt_reports_the_lock_error() {
    let clock = FakeClock::new();
    let lock = FakeLock::new("baz");
    lock.script(|_, _| Fault::Fail(cancelled()));
    let (e, _) = elector(lock.clone(), config(), &clock);
    let attempt = e.try_acquire_or_renew().await;
    assert!(
        matches!(
            attempt,
            Attempt::Failed(AttemptError::Lock(LockError::Backend(_)))
        ),
        "{attempt:?}"
    );
    assert!(!e.status().is_leader());
}

// ---------------------------------------------------------------------------------------------
// release (client-go's `testReleaseLease`, `TestReleaseMethodCallsGet`,
// `TestReleaseRetriesOnConflict`).

#[tokio::test(flavor = "current_thread")]
async fn release_an_acquired_lock() {
    let clock = FakeClock::new();
    let lock = FakeLock::holding("baz", held("baz", Duration::from_secs(10), 0), 4);
    let (e, reported) = elector(lock.clone(), config(), &clock);
    assert!(e.try_acquire_or_renew().await.succeeded());
    assert_eq!(e.release().await.expect("released"), Release::Released);
    assert_eq!(lock.verbs(), ["get", "update", "get", "update"]);
    assert_eq!(holder(&e), "");
    assert_eq!(transitions(&e), 0);
    assert_eq!(*reported.lock(), ["baz"]);
    assert_eq!(e.status().leader(), None, "a released lease has no leader");
    assert!(!e.status().is_leader());
    let stored = lock.stored().expect("a record");
    assert!(stored.record.is_released());
    assert_eq!(stored.record.lease_duration, Duration::from_secs(1));
}

#[tokio::test(flavor = "current_thread")]
async fn release_reads_the_lock_first_and_writes_over_the_version_it_read() {
    let clock = FakeClock::new();
    let lock = FakeLock::new("baz");
    let (e, _) = elector(lock.clone(), config(), &clock);
    assert!(e.try_acquire_or_renew().await.succeeded());
    // A renewal of ours that the elector gave up on still landed: the store moved on.
    let current = lock.stored().expect("a record");
    let v = current.version.as_str().parse::<u64>().expect("a number");
    lock.set(current.record, v + 10);
    lock.clear_ops();
    assert_eq!(e.release().await.expect("released"), Release::Released);
    assert_eq!(lock.ops(), [Op::Get, Op::Update((v + 10).to_string())]);
    assert!(lock.stored().expect("a record").record.is_released());
}

#[tokio::test(flavor = "current_thread")]
async fn release_retries_when_its_write_conflicts_with_a_renewal() {
    let clock = FakeClock::new();
    let lock = FakeLock::holding("baz", held("baz", Duration::from_secs(10), 0), 4);
    let (e, _) = elector(lock.clone(), config(), &clock);
    assert!(e.try_acquire_or_renew().await.succeeded());
    lock.clear_ops();
    let mut conflicted = false;
    lock.script(move |_, op| match op {
        Op::Update(_) if !conflicted => {
            conflicted = true;
            Fault::Fail(LockError::Conflict)
        }
        _ => Fault::None,
    });
    assert_eq!(e.release().await.expect("released"), Release::Released);
    assert_eq!(lock.verbs(), ["get", "update", "get", "update"]);
    assert!(lock.stored().expect("a record").record.is_released());
}

#[tokio::test(flavor = "current_thread")]
async fn release_leaves_a_lease_held_by_another_candidate_alone() {
    // client-go judges by its observed record; kcache by the record it just read.
    let clock = FakeClock::new();
    let lock = FakeLock::new("baz");
    let (e, _) = elector(lock.clone(), config(), &clock);
    assert!(e.try_acquire_or_renew().await.succeeded());
    lock.set(held("bing", Duration::from_secs(10), 1), 40);
    lock.clear_ops();
    assert_eq!(
        e.release().await.expect("no error"),
        Release::NotHeld {
            holder: Some("bing".into())
        }
    );
    assert_eq!(lock.verbs(), ["get"]);
    assert_eq!(
        lock.stored().expect("a record").record.holder_identity,
        "bing"
    );
    assert!(!e.status().is_leader());
}

#[tokio::test(flavor = "current_thread")]
async fn release_of_a_lease_that_keeps_conflicting_gives_up_with_an_error() {
    let clock = FakeClock::new();
    let lock = FakeLock::new("baz");
    let (e, _) = elector(lock.clone(), config(), &clock);
    assert!(e.try_acquire_or_renew().await.succeeded());
    lock.script(|_, op| match op {
        Op::Update(_) => Fault::Fail(LockError::Conflict),
        _ => Fault::None,
    });
    assert!(matches!(
        e.release().await,
        Err(ReleaseError::Conflicts { .. })
    ));
}

#[tokio::test(flavor = "current_thread")]
async fn release_gives_up_after_the_renew_deadline() {
    let clock = FakeClock::new();
    let lock = FakeLock::new("baz");
    let (e, _) = elector(lock.clone(), config(), &clock);
    assert!(e.try_acquire_or_renew().await.succeeded());
    lock.script(|_, op| match op {
        Op::Get => Fault::Hang,
        _ => Fault::None,
    });
    let e = Arc::new(e);
    let e2 = e.clone();
    let release = tokio::spawn(async move { e2.release().await });
    settle().await;
    assert!(!release.is_finished());
    clock.advance(Duration::from_secs(5));
    settle().await;
    assert!(matches!(
        release.await.expect("no panic"),
        Err(ReleaseError::TimedOut)
    ));
}

// ---------------------------------------------------------------------------------------------
// Release on cancellation (client-go's `testReleaseOnCancellation`), through `run`.

/// Runs `e` until `stop` turns true; returns the run's task.
fn spawn_run<L: Lock>(
    e: Arc<LeaderElector<L>>,
    stop: &watch::Sender<bool>,
) -> tokio::task::JoinHandle<()> {
    let mut stopped = stop.subscribe();
    tokio::spawn(async move {
        e.run(async move {
            let _ = stopped.wait_for(|s| *s).await;
        })
        .await
        .expect("not running twice");
    })
}

async fn advance(clock: &FakeClock, d: Duration) {
    let step = Duration::from_millis(250);
    let mut left = d;
    while !left.is_zero() {
        let s = left.min(step);
        clock.advance(s);
        left -= s;
        settle().await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn stopping_during_a_renewal_that_lands_late_still_releases_the_lease() {
    // The renewal's update reaches the store but its answer never comes back (the client
    // cancelled it); the release must read the moved version instead of conflicting on the old.
    let clock = FakeClock::new();
    let lock = FakeLock::new("baz");
    let config = LeaderElectionConfig::new()
        .lease_duration(Duration::from_secs(15))
        .renew_deadline(Duration::from_secs(2))
        .retry_period(Duration::from_secs(1))
        .jitter_factor(0.0)
        .release_on_cancel(true);
    let (e, _) = elector(lock.clone(), config, &clock);
    let e = Arc::new(e);
    let status = e.status();
    let (stop, _) = watch::channel(false);
    let updates = Arc::new(Mutex::new(0));
    let u = updates.clone();
    lock.script(move |_, op| match op {
        Op::Update(_) => {
            *u.lock() += 1;
            if *u.lock() == 2 {
                Fault::ApplyThenHang
            } else {
                Fault::None
            }
        }
        _ => Fault::None,
    });
    let run = spawn_run(e.clone(), &stop);
    settle().await;
    assert!(status.is_leader());
    advance(&clock, Duration::from_millis(2500)).await;
    assert_eq!(*updates.lock(), 2, "the second renewal is in flight");
    let _ = stop.send(true);
    settle().await;
    assert!(run.is_finished());
    run.await.expect("no panic");
    let verbs = lock.verbs();
    assert_eq!(
        verbs,
        ["get", "create", "update", "update", "get", "update"],
        "release reads first"
    );
    assert!(lock.stored().expect("a record").record.is_released());
    assert!(!status.is_leader());
}

#[tokio::test(flavor = "current_thread")]
async fn stopping_during_a_renewal_whose_read_hangs_still_releases_the_lease() {
    let clock = FakeClock::new();
    let lock = FakeLock::new("baz");
    let config = LeaderElectionConfig::new()
        .lease_duration(Duration::from_secs(15))
        .renew_deadline(Duration::from_secs(2))
        .retry_period(Duration::from_secs(1))
        .jitter_factor(0.0)
        .release_on_cancel(true);
    let (e, _) = elector(lock.clone(), config, &clock);
    let e = Arc::new(e);
    let (stop, _) = watch::channel(false);
    // Fast-path renewals fail; the first read after acquiring hangs.
    let gets = Arc::new(Mutex::new(0));
    let g = gets.clone();
    let hang_gets = Arc::new(Mutex::new(true));
    let h = hang_gets.clone();
    lock.script(move |n, op| match op {
        Op::Update(_) if n == 2 => Fault::Fail(cancelled()),
        Op::Get => {
            *g.lock() += 1;
            if *g.lock() == 2 && *h.lock() {
                Fault::Hang
            } else {
                Fault::None
            }
        }
        _ => Fault::None,
    });
    let run = spawn_run(e.clone(), &stop);
    advance(&clock, Duration::from_millis(1250)).await;
    assert_eq!(lock.verbs(), ["get", "create", "update", "get"]);
    *hang_gets.lock() = false;
    let _ = stop.send(true);
    settle().await;
    run.await.expect("no panic");
    assert_eq!(
        lock.verbs(),
        ["get", "create", "update", "get", "get", "update"]
    );
    assert!(lock.stored().expect("a record").record.is_released());
}

// ---------------------------------------------------------------------------------------------
// Fast path (client-go's `TestFastPathLeaderElection`), through `run`.

async fn run_until_updates(lock: &FakeLock, clock: &FakeClock, stop_after: usize) -> Vec<String> {
    let (e, _) = elector(
        lock.clone(),
        LeaderElectionConfig::new()
            .lease_duration(Duration::from_secs(15))
            .renew_deadline(Duration::from_secs(2))
            .retry_period(Duration::from_secs(1))
            .jitter_factor(0.0),
        clock,
    );
    let e = Arc::new(e);
    let (stop, _) = watch::channel(false);
    let run = spawn_run(e, &stop);
    for _ in 0..40 {
        if lock.ops().iter().filter(|o| o.verb() == "update").count() >= stop_after {
            break;
        }
        advance(clock, Duration::from_millis(250)).await;
    }
    let _ = stop.send(true);
    settle().await;
    run.await.expect("no panic");
    lock.verbs().into_iter().map(str::to_owned).collect()
}

#[tokio::test(flavor = "current_thread")]
async fn renewals_after_acquiring_take_the_fast_path() {
    let clock = FakeClock::new();
    let lock = FakeLock::new("baz");
    let verbs = run_until_updates(&lock, &clock, 2).await;
    assert_eq!(verbs, ["get", "create", "update", "update"]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_failed_fast_path_falls_back_to_reading_the_record() {
    let clock = FakeClock::new();
    let lock = FakeLock::new("baz");
    let mut updates = 0;
    lock.script(move |_, op| match op {
        Op::Update(_) => {
            updates += 1;
            if updates == 2 {
                Fault::Fail(LockError::Conflict)
            } else {
                Fault::None
            }
        }
        _ => Fault::None,
    });
    let verbs = run_until_updates(&lock, &clock, 4).await;
    assert_eq!(
        verbs,
        ["get", "create", "update", "update", "get", "update", "update"]
    );
}

// ---------------------------------------------------------------------------------------------
// Configuration (client-go's `TestLeaderElectionConfigValidation`).

#[test]
fn a_valid_configuration_is_accepted_and_an_empty_identity_refused() {
    let config = LeaderElectionConfig::new()
        .lease_duration(Duration::from_secs(15))
        .renew_deadline(Duration::from_secs(2))
        .retry_period(Duration::from_secs(1))
        .release_on_cancel(true);
    assert!(LeaderElector::new(InProcessLock::new("baz"), config.clone()).is_ok());
    assert!(matches!(
        LeaderElector::new(InProcessLock::new(""), config),
        Err(ConfigError::EmptyIdentity)
    ));
}

// ---------------------------------------------------------------------------------------------
// The health check (client-go's `TestLeaderElectionHealthChecker` and `TestCheckMethodRace`).

fn health_config() -> LeaderElectionConfig {
    LeaderElectionConfig::new()
        .lease_duration(Duration::from_secs(60))
        .name("foo")
        .jitter_factor(0.0)
}

#[test]
fn the_health_check_passes_before_an_election_is_attached() {
    let health = LeaderHealthCheck::new(Duration::from_secs(20));
    assert_eq!(health.name(), "leaderElection");
    assert!(health.check().is_ok());
}

#[tokio::test(flavor = "current_thread")]
async fn the_health_check_fails_when_the_leaders_lease_is_far_expired() {
    let clock = FakeClock::new();
    let lock = InProcessLock::new("healthTest");
    let (e, _) = elector(lock.clone(), health_config(), &clock);
    let health = LeaderHealthCheck::new(Duration::from_secs(20));
    health.set_leader_election(e.status());
    assert!(e.try_acquire_or_renew().await.succeeded());
    clock.advance(Duration::from_secs(3600));
    let err = health.check().expect_err("an hour without renewal");
    assert_eq!(err.name, "foo");
    assert_eq!(err.identity, "healthTest");
    assert_eq!(err.since, Duration::from_secs(3600));
    assert!(e.check(Duration::from_secs(20)).is_err());
}

#[tokio::test(flavor = "current_thread")]
async fn the_health_check_passes_when_the_far_expired_lease_is_held_by_another() {
    let clock = FakeClock::new();
    let lock = InProcessLock::new("otherServer");
    let (other, _) = elector(lock.clone(), health_config(), &clock);
    assert!(other.try_acquire_or_renew().await.succeeded());
    let (e, _) = elector(lock.for_identity("healthTest"), health_config(), &clock);
    assert!(!e.try_acquire_or_renew().await.succeeded());
    let health = LeaderHealthCheck::new(Duration::from_secs(20));
    health.set_leader_election(e.status());
    clock.advance(Duration::from_secs(3600));
    assert!(health.check().is_ok());
}

#[tokio::test(flavor = "current_thread")]
async fn the_health_check_passes_while_the_lease_has_not_expired() {
    let clock = FakeClock::new();
    let (e, _) = elector(InProcessLock::new("healthTest"), health_config(), &clock);
    let health = LeaderHealthCheck::new(Duration::from_secs(20));
    health.set_leader_election(e.status());
    assert!(e.try_acquire_or_renew().await.succeeded());
    assert!(health.check().is_ok());
}

#[tokio::test(flavor = "current_thread")]
async fn the_health_check_passes_past_the_lease_but_inside_the_tolerance() {
    let clock = FakeClock::new();
    let (e, _) = elector(InProcessLock::new("healthTest"), health_config(), &clock);
    let health = LeaderHealthCheck::new(Duration::from_secs(20));
    health.set_leader_election(e.status());
    assert!(e.try_acquire_or_renew().await.succeeded());
    clock.advance(Duration::from_secs(61));
    assert!(health.check().is_ok(), "1 min 1 s: inside lease + 20 s");
    clock.advance(Duration::from_secs(19));
    assert!(health.check().is_ok(), "exactly lease + tolerance");
    clock.advance(Duration::from_millis(1));
    assert!(health.check().is_err());
}

#[tokio::test(flavor = "current_thread")]
async fn the_health_check_stays_healthy_while_a_running_leader_renews() {
    let clock = FakeClock::new();
    let config = LeaderElectionConfig::new()
        .lease_duration(Duration::from_secs(2))
        .renew_deadline(Duration::from_secs(1))
        .retry_period(Duration::from_millis(100))
        .jitter_factor(0.0);
    let (e, _) = elector(InProcessLock::new("baz"), config, &clock);
    let e = Arc::new(e);
    let status = e.status();
    let (stop, _) = watch::channel(false);
    let run = spawn_run(e.clone(), &stop);
    settle().await;
    assert!(status.is_leader());
    let start = clock.now();
    while clock.now() - start < Duration::from_secs(2) {
        assert!(status.check(Duration::from_secs(1)).is_ok());
        assert!(e.check(Duration::from_secs(1)).is_ok());
        clock.advance(Duration::from_millis(10));
        settle().await;
    }
    let _ = stop.send(true);
    settle().await;
    run.await.expect("no panic");
}

#[tokio::test(flavor = "current_thread")]
async fn a_running_leader_that_stops_renewing_fails_the_composed_healthz_report() {
    use kcache_core::health::HealthChecks;
    use kcache_leaderelection::HealthCheckError;
    let clock = FakeClock::new();
    let config = LeaderElectionConfig::new()
        .lease_duration(Duration::from_secs(2))
        .renew_deadline(Duration::from_secs(1))
        .retry_period(Duration::from_millis(100))
        .jitter_factor(0.0)
        .name("demo");
    let lock = InProcessLock::new("replica-a");
    let (e, _) = elector(lock.clone(), config, &clock);
    let e = Arc::new(e);
    let health = Arc::new(LeaderHealthCheck::new(Duration::from_secs(1)));
    health.set_leader_election(e.status());
    let healthz = HealthChecks::new()
        .with_fn("ping", || Ok(()))
        .with(health.clone());
    let (stop, _) = watch::channel(false);
    let run = spawn_run(e.clone(), &stop);
    settle().await;
    assert!(e.status().is_leader());
    assert!(healthz.check().is_ok());

    // The store stops taking renewals: 3 s (lease 2 s + tolerance 1 s) after the last one, the
    // report fails on `leaderElection` alone, with the leader-election crate's typed error.
    lock.set_available(false);
    let start = clock.now();
    while clock.now() - start <= Duration::from_secs(3) {
        assert!(healthz.check().is_ok(), "at {:?}", clock.now() - start);
        clock.advance(Duration::from_millis(50));
        settle().await;
    }
    let report = healthz.check();
    assert!(!report.is_ok());
    let failed: Vec<_> = report.failed().map(|r| r.name()).collect();
    assert_eq!(failed, ["leaderElection"]);
    let error = report.get("leaderElection").and_then(|r| r.error());
    let typed = error.and_then(|e| e.downcast_ref::<HealthCheckError>());
    assert_eq!(typed.map(|e| e.identity.as_str()), Some("replica-a"));
    assert!(report
        .to_string()
        .contains("[-]leaderElection failed: leader election \"demo\": replica-a holds the lease"));
    let _ = stop.send(true);
    settle().await;
    run.await.expect("no panic");
}
