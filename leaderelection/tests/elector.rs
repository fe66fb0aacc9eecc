//! The elector's state machine on a fake clock, with the in-process lock.
//!
//! Every test runs on a current-thread runtime: after each step of the fake clock, a few yields
//! let every elector run until it waits on the clock again (the in-process lock never waits), so
//! the schedule is deterministic and nothing sleeps.

use kcache_core::{Clock, FakeClock};
use kcache_leaderelection::{
    ConfigError, InProcessLock, LeaderElectionConfig, LeaderElectionRecord, LeaderElector,
    LeaderStatus, Lock, TermEnd, TermEndReason,
};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

const STEP: Duration = Duration::from_millis(250);

/// client-go's default timings without jitter (so the schedule is exact).
fn config() -> LeaderElectionConfig {
    LeaderElectionConfig::new().jitter_factor(0.0)
}

async fn settle() {
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
}

/// Advances `clock` by `d` in steps of 250 ms, letting the electors act at each step.
async fn advance(clock: &FakeClock, d: Duration) {
    let mut left = d;
    while !left.is_zero() {
        let step = left.min(STEP);
        clock.advance(step);
        left -= step;
        settle().await;
    }
}

/// Advances until `cond` holds (at most `limit`), returning the time it took.
async fn advance_until(
    clock: &FakeClock,
    limit: Duration,
    cond: impl Fn() -> bool,
) -> Option<Duration> {
    let start = clock.now();
    while clock.now() - start <= limit {
        if cond() {
            return Some(clock.now() - start);
        }
        clock.advance(STEP);
        settle().await;
    }
    None
}

/// One running candidate.
struct Candidate {
    lock: InProcessLock,
    status: LeaderStatus,
    stop: watch::Sender<bool>,
    ended: Arc<Mutex<Vec<TermEnd>>>,
    leaders_seen: Arc<Mutex<Vec<String>>>,
    run: tokio::task::JoinHandle<Result<(), kcache_leaderelection::AlreadyRunning>>,
}

impl Candidate {
    fn start(lock: InProcessLock, config: LeaderElectionConfig, clock: &FakeClock) -> Self {
        let ended = Arc::new(Mutex::new(Vec::new()));
        let leaders_seen = Arc::new(Mutex::new(Vec::new()));
        let (e, l) = (ended.clone(), leaders_seen.clone());
        let elector = LeaderElector::with_clock(lock.clone(), config, Arc::new(clock.clone()))
            .expect("valid config")
            .on_stopped_leading(move |end| e.lock().push(end.clone()))
            .on_new_leader(move |id| l.lock().push(id.to_owned()));
        let status = elector.status();
        let (stop, mut stopped) = watch::channel(false);
        let run = tokio::spawn(async move {
            elector
                .run(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await
        });
        Self {
            lock,
            status,
            stop,
            ended,
            leaders_seen,
            run,
        }
    }

    async fn stop(self) -> Vec<TermEnd> {
        let _ = self.stop.send(true);
        settle().await;
        assert!(self.run.is_finished(), "the elector stops when told to");
        self.run
            .await
            .expect("the elector does not panic")
            .expect("the elector was not already running");
        self.ended.lock().clone()
    }
}

fn record(lock: &InProcessLock) -> LeaderElectionRecord {
    lock.peek().expect("a record exists").record
}

#[tokio::test(flavor = "current_thread")]
async fn acquires_an_empty_lock_and_renews_every_retry_period() {
    let clock = FakeClock::new();
    let a = Candidate::start(InProcessLock::new("a"), config(), &clock);
    settle().await;
    assert!(a.status.is_leader());
    assert_eq!(a.status.leader().as_deref(), Some("a"));
    assert_eq!(a.status.state().term, Some(1));
    let first = record(&a.lock);
    assert_eq!(first.holder_identity, "a");
    assert_eq!(first.lease_duration, Duration::from_secs(15));
    assert_eq!(first.leader_transitions, 0);
    assert_eq!(first.acquire_time, first.renew_time);
    assert_eq!(a.lock.writes(), 1);

    advance(&clock, Duration::from_millis(1750)).await;
    assert_eq!(a.lock.writes(), 1, "no renewal before the retry period");
    advance(&clock, STEP).await;
    assert_eq!(a.lock.writes(), 2, "a renewal after the retry period");
    advance(&clock, Duration::from_secs(8)).await;
    assert_eq!(a.lock.writes(), 6);
    let renewed = record(&a.lock);
    assert_eq!(
        renewed.acquire_time, first.acquire_time,
        "renewals keep the acquire time"
    );
    assert_eq!(
        renewed.renew_time.duration_since(first.renew_time).ok(),
        Some(Duration::from_secs(10))
    );
    assert_eq!(renewed.leader_transitions, 0);
    assert_eq!(*a.leaders_seen.lock(), vec!["a".to_owned()]);
    assert!(a
        .stop()
        .await
        .iter()
        .all(|e| e.reason == TermEndReason::Stopped));
}

#[tokio::test(flavor = "current_thread")]
async fn a_leader_that_cannot_renew_stops_leading_at_its_renew_deadline() {
    let clock = FakeClock::new();
    let a = Candidate::start(InProcessLock::new("a"), config(), &clock);
    settle().await;
    let term = a.status.leadership().expect("a leads");
    advance(&clock, Duration::from_secs(2)).await; // one renewal, sent now
    let last_renewal_sent = clock.now();
    assert_eq!(a.lock.writes(), 2);
    a.lock.set_available(false);

    advance(&clock, Duration::from_secs(10) - STEP).await;
    assert!(
        a.status.is_leader() && term.is_held(),
        "still leading before the deadline"
    );
    // At the deadline the status is false even before the elector's task runs again.
    clock.advance(STEP);
    assert!(!a.status.is_leader());
    assert!(!term.is_held());
    settle().await;
    let ended = a.ended.lock().clone();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].reason, TermEndReason::RenewDeadlineExceeded);
    assert_eq!(ended[0].ended, last_renewal_sent + Duration::from_secs(10));
    assert_eq!(a.status.state().term, None);
    a.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn leadership_lost_resolves_at_the_deadline_without_the_elector() {
    let clock = FakeClock::new();
    let a = Candidate::start(InProcessLock::new("a"), config(), &clock);
    settle().await;
    let term = a.status.leadership().expect("a leads");
    a.lock.set_available(false);
    let lost = tokio::spawn({
        let term = term.clone();
        async move { term.lost().await }
    });
    settle().await;
    clock.advance(Duration::from_secs(10) - Duration::from_millis(1));
    settle().await;
    assert!(!lost.is_finished());
    clock.advance(Duration::from_millis(1));
    settle().await;
    assert!(lost.is_finished());
    a.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_candidate_waits_out_the_lease_then_takes_over_and_counts_the_transition() {
    let clock = FakeClock::new();
    let lock = InProcessLock::new("a");
    let a = Candidate::start(lock.clone(), config(), &clock);
    settle().await;
    let b = Candidate::start(lock.for_identity("b"), config(), &clock);
    settle().await;
    assert!(a.status.is_leader() && !b.status.is_leader());
    assert_eq!(b.status.leader().as_deref(), Some("a"));
    assert_eq!(*b.leaders_seen.lock(), vec!["a".to_owned()]);

    advance(&clock, Duration::from_secs(20)).await;
    assert!(
        a.status.is_leader() && !b.status.is_leader(),
        "renewals keep b out"
    );

    // a is cut off: it stops at its renew deadline; b takes over only after the lease expired.
    let cut = clock.now();
    a.lock.set_available(false);
    let b_status = b.status.clone();
    let a_status = a.status.clone();
    let took = advance_until(&clock, Duration::from_secs(30), || b_status.is_leader())
        .await
        .expect("b takes over");
    assert!(!a_status.is_leader());
    let a_end = a.ended.lock()[0].ended;
    assert!(a_end <= cut + Duration::from_secs(10));
    // a's last renewal was sent at most 2 s before the cut; b saw it at most one retry later,
    // and waits the lease duration from then, then at most one retry.
    assert!(
        took >= Duration::from_secs(13),
        "b took over after {took:?}"
    );
    assert!(
        took <= Duration::from_secs(17) + STEP,
        "b took over after {took:?}"
    );
    let rec = record(&lock);
    assert_eq!(rec.holder_identity, "b");
    assert_eq!(rec.leader_transitions, 1);
    assert_eq!(*b.leaders_seen.lock(), vec!["a".to_owned(), "b".to_owned()]);

    // a comes back: it sees b's renewals and stays a follower.
    a.lock.set_available(true);
    advance(&clock, Duration::from_secs(30)).await;
    assert!(!a.status.is_leader() && b.status.is_leader());
    assert_eq!(a.status.leader().as_deref(), Some("b"));
    assert_eq!(record(&lock).leader_transitions, 1);
    a.stop().await;
    b.stop().await;
}

/// A clock whose wall-clock time is `behind` the fake clock's (its monotonic time is the same).
#[derive(Debug, Clone)]
struct Skewed {
    inner: FakeClock,
    behind: Duration,
}

impl Clock for Skewed {
    fn now(&self) -> Instant {
        self.inner.now()
    }
    fn sleep_until(&self, deadline: Instant) {
        self.inner.sleep_until(deadline)
    }
    fn sleep_until_async(&self, deadline: Instant) -> kcache_core::Sleep {
        self.inner.sleep_until_async(deadline)
    }
    fn timeout_until(&self, deadline: Instant) -> Option<Duration> {
        self.inner.timeout_until(deadline)
    }
    fn subscribe(&self, waker: kcache_core::ClockWaker) -> kcache_core::Subscription {
        self.inner.subscribe(waker)
    }
    fn system_time(&self) -> std::time::SystemTime {
        self.inner.system_time() - self.behind
    }
}

#[tokio::test(flavor = "current_thread")]
async fn expiry_is_judged_by_local_observation_not_by_the_holders_timestamps() {
    // a's wall clock is an hour behind: its renew times look long expired to b's wall clock.
    // b must still wait a full lease from when it last saw the record change.
    let clock = FakeClock::new();
    let lock = InProcessLock::new("a");
    let skewed = Skewed {
        inner: clock.clone(),
        behind: Duration::from_secs(3600),
    };
    let a =
        LeaderElector::with_clock(lock.clone(), config(), Arc::new(skewed)).expect("valid config");
    let a_status = a.status();
    let (stop_a, mut stopped_a) = watch::channel(false);
    let a_run = tokio::spawn(async move {
        a.run(async move {
            let _ = stopped_a.wait_for(|s| *s).await;
        })
        .await
    });
    settle().await;
    assert!(a_status.is_leader());
    let b = Candidate::start(lock.for_identity("b"), config(), &clock);
    advance(&clock, Duration::from_secs(10)).await;
    assert!(
        a_status.is_leader() && !b.status.is_leader(),
        "a's renewals keep b out"
    );
    // a stops without releasing; b waits the lease from its last observed change.
    let _ = stop_a.send(true);
    settle().await;
    a_run.await.expect("a stops").expect("a ran once");
    let b_status = b.status.clone();
    let took = advance_until(&clock, Duration::from_secs(30), || b_status.is_leader())
        .await
        .expect("b takes over");
    assert!(
        took >= Duration::from_secs(13),
        "b took over after {took:?}"
    );
    b.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn release_on_cancel_lets_the_next_candidate_in_at_once() {
    let clock = FakeClock::new();
    let lock = InProcessLock::new("a");
    let a = Candidate::start(lock.clone(), config().release_on_cancel(true), &clock);
    settle().await;
    let b = Candidate::start(lock.for_identity("b"), config(), &clock);
    advance(&clock, Duration::from_secs(4)).await;
    let ended = a.stop().await;
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].reason, TermEndReason::Stopped);
    let released = record(&lock);
    assert!(released.is_released());
    assert_eq!(released.lease_duration, Duration::from_secs(1));
    let b_status = b.status.clone();
    let took = advance_until(&clock, Duration::from_secs(30), || b_status.is_leader())
        .await
        .expect("b takes over");
    assert!(took <= Duration::from_secs(2), "b waited {took:?}");
    assert_eq!(record(&lock).leader_transitions, 1);
    b.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn without_release_the_next_candidate_waits_for_the_lease() {
    let clock = FakeClock::new();
    let lock = InProcessLock::new("a");
    let a = Candidate::start(lock.clone(), config(), &clock);
    settle().await;
    let b = Candidate::start(lock.for_identity("b"), config(), &clock);
    advance(&clock, Duration::from_secs(4)).await;
    a.stop().await;
    assert_eq!(record(&lock).holder_identity, "a");
    let b_status = b.status.clone();
    let took = advance_until(&clock, Duration::from_secs(30), || b_status.is_leader())
        .await
        .expect("b takes over");
    assert!(took >= Duration::from_secs(13), "b waited {took:?}");
    b.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_leader_whose_record_was_taken_stops_leading_and_follows() {
    let clock = FakeClock::new();
    let lock = InProcessLock::new("a");
    let a = Candidate::start(lock.clone(), config(), &clock);
    settle().await;
    // Someone else writes itself in (an operator, or a candidate with a faster clock).
    let intruder = lock.for_identity("z");
    let current = lock.peek().expect("a record");
    let mut rec = current.record.clone();
    rec.holder_identity = "z".into();
    rec.leader_transitions += 1;
    intruder
        .update(&current.version, &rec)
        .await
        .expect("the write succeeds");
    advance(&clock, Duration::from_secs(2)).await;
    assert!(!a.status.is_leader());
    assert_eq!(a.ended.lock()[0].reason, TermEndReason::LeaseLost);
    assert_eq!(a.status.leader().as_deref(), Some("z"));
    a.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn leadership_comes_back_after_a_lost_term() {
    let clock = FakeClock::new();
    let a = Candidate::start(InProcessLock::new("a"), config(), &clock);
    settle().await;
    let first = a.status.leadership().expect("term 1");
    a.lock.set_available(false);
    advance(&clock, Duration::from_secs(11)).await;
    assert!(!first.is_held());
    a.lock.set_available(true);
    let status = a.status.clone();
    advance_until(&clock, Duration::from_secs(5), || status.is_leader())
        .await
        .expect("a leads again");
    let second = a.status.leadership().expect("term 2");
    assert_eq!((first.term(), second.term()), (1, 2));
    assert!(!first.is_held() && second.is_held());
    // It still held the record (nobody else wrote it): no transition.
    assert_eq!(record(&a.lock).leader_transitions, 0);
    a.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn two_candidates_starting_together_elect_one() {
    let clock = FakeClock::new();
    let lock = InProcessLock::new("a");
    let a = Candidate::start(lock.clone(), config(), &clock);
    let b = Candidate::start(lock.for_identity("b"), config(), &clock);
    advance(&clock, Duration::from_secs(6)).await;
    assert!(a.status.is_leader() ^ b.status.is_leader());
    a.stop().await;
    b.stop().await;
}

/// A seeded xorshift for the random schedules.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[tokio::test(flavor = "current_thread")]
async fn random_partitions_never_make_two_leaders() {
    for seed in 1..=12u64 {
        let clock = FakeClock::new();
        let lock = InProcessLock::new("c0");
        let config = LeaderElectionConfig::new()
            .lease_duration(Duration::from_secs(4))
            .renew_deadline(Duration::from_secs(3))
            .retry_period(Duration::from_millis(500))
            .jitter_factor(1.2);
        let candidates: Vec<Candidate> = (0..3)
            .map(|i| Candidate::start(lock.for_identity(format!("c{i}")), config.clone(), &clock))
            .collect();
        let mut rng = Rng(seed * 0x9E37_79B9);
        let mut leaders_total = 0;
        for _ in 0..600 {
            if rng.next().is_multiple_of(20) {
                let i = (rng.next() % 3) as usize;
                candidates[i]
                    .lock
                    .set_available(rng.next().is_multiple_of(2));
            }
            let step = Duration::from_millis(50 + rng.next() % 200);
            clock.advance(step);
            settle().await;
            let leading: Vec<usize> = (0..3)
                .filter(|i| candidates[*i].status.is_leader())
                .collect();
            assert!(leading.len() <= 1, "seed {seed}: {leading:?} lead at once");
            leaders_total += leading.len();
        }
        assert!(
            leaders_total > 100,
            "seed {seed}: somebody leads most of the time"
        );
        // Terms of all candidates never overlap in time.
        let mut terms: Vec<(Instant, Instant)> = Vec::new();
        for c in candidates {
            terms.extend(c.stop().await.iter().map(|e| (e.started, e.ended)));
        }
        terms.sort();
        for w in terms.windows(2) {
            assert!(w[0].1 <= w[1].0, "seed {seed}: overlapping terms {w:?}");
        }
    }
}

#[test]
fn bad_configurations_are_refused_with_a_typed_error() {
    let lock = || InProcessLock::new("a");
    let s = Duration::from_secs;
    let cases: Vec<(LeaderElectionConfig, ConfigError)> = vec![
        (
            LeaderElectionConfig::new().renew_deadline(s(15)),
            ConfigError::LeaseNotLongerThanRenewDeadline {
                lease_duration: s(15),
                renew_deadline: s(15),
            },
        ),
        (
            LeaderElectionConfig::new().renew_deadline(s(20)),
            ConfigError::LeaseNotLongerThanRenewDeadline {
                lease_duration: s(15),
                renew_deadline: s(20),
            },
        ),
        (
            LeaderElectionConfig::new().retry_period(Duration::ZERO),
            ConfigError::ZeroRetryPeriod,
        ),
        (
            LeaderElectionConfig::new().lease_duration(Duration::ZERO),
            ConfigError::ZeroLeaseDuration,
        ),
        (
            LeaderElectionConfig::new().renew_deadline(Duration::ZERO),
            ConfigError::ZeroRenewDeadline,
        ),
        (
            LeaderElectionConfig::new().retry_period(s(9)),
            ConfigError::RenewDeadlineNotLongerThanRetry {
                renew_deadline: s(10),
                retry_period: s(9),
                jitter_factor: 1.2,
            },
        ),
        (
            LeaderElectionConfig::new().jitter_factor(-1.0),
            ConfigError::BadJitterFactor(-1.0),
        ),
    ];
    for (config, want) in cases {
        let got = LeaderElector::new(lock(), config.clone()).err();
        assert_eq!(got, Some(want), "{config:?}");
    }
    assert!(matches!(
        LeaderElector::new(InProcessLock::new(""), LeaderElectionConfig::new()),
        Err(ConfigError::EmptyIdentity)
    ));
    assert!(matches!(
        LeaderElectionConfig::new()
            .jitter_factor(f64::NAN)
            .validate(),
        Err(ConfigError::BadJitterFactor(_))
    ));
    assert!(LeaderElector::new(lock(), LeaderElectionConfig::new()).is_ok());
}

#[test]
fn errors_are_send_sync_and_static() {
    fn check<E: std::error::Error + Send + Sync + 'static>() {}
    check::<ConfigError>();
    check::<kcache_leaderelection::LockError>();
}

#[tokio::test(flavor = "current_thread")]
async fn run_one_term_returns_when_the_term_ends_and_the_elector_runs_again() {
    let clock = FakeClock::new();
    let lock = InProcessLock::new("a");
    let elector = Arc::new(
        LeaderElector::with_clock(lock.clone(), config(), Arc::new(clock.clone()))
            .expect("valid config"),
    );
    let status = elector.status();
    let e = elector.clone();
    let run = tokio::spawn(async move { e.run_one_term(std::future::pending()).await });
    settle().await;
    assert!(status.is_leader());
    lock.set_available(false);
    advance(&clock, Duration::from_secs(10)).await;
    assert!(
        run.is_finished(),
        "client-go's Run returns once the term is over"
    );
    let end = run
        .await
        .expect("no panic")
        .expect("not running twice")
        .expect("it led");
    assert_eq!(end.reason, TermEndReason::RenewDeadlineExceeded);
    assert!(status.state().finished);

    // The same elector campaigns again (nothing was consumed).
    lock.set_available(true);
    let e = elector.clone();
    let (stop, mut stopped) = watch::channel(false);
    let again = tokio::spawn(async move {
        e.run(async move {
            let _ = stopped.wait_for(|s| *s).await;
        })
        .await
    });
    settle().await;
    assert!(!status.state().finished);
    let second = status.wait_for_leadership().await.expect("leads again");
    assert_eq!(second.term(), 2);
    let _ = stop.send(true);
    settle().await;
    again.await.expect("no panic").expect("not running twice");
}

#[tokio::test(flavor = "current_thread")]
async fn run_one_term_returns_none_when_stopped_before_leading() {
    let clock = FakeClock::new();
    let lock = InProcessLock::new("a");
    let a = Candidate::start(lock.clone(), config(), &clock);
    settle().await;
    let b = LeaderElector::with_clock(lock.for_identity("b"), config(), Arc::new(clock.clone()))
        .expect("valid config");
    let (stop, mut stopped) = watch::channel(false);
    let run = b.run_one_term(async move {
        let _ = stopped.wait_for(|s| *s).await;
    });
    let stopper = async {
        advance(&clock, Duration::from_secs(4)).await;
        let _ = stop.send(true);
    };
    let (end, ()) = tokio::join!(run, stopper);
    assert_eq!(end, Ok(None));
    a.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_second_concurrent_run_is_refused() {
    let clock = FakeClock::new();
    let elector = Arc::new(
        LeaderElector::with_clock(InProcessLock::new("a"), config(), Arc::new(clock.clone()))
            .expect("valid config"),
    );
    let e = elector.clone();
    let (stop, mut stopped) = watch::channel(false);
    let first = tokio::spawn(async move {
        e.run(async move {
            let _ = stopped.wait_for(|s| *s).await;
        })
        .await
    });
    settle().await;
    assert_eq!(
        elector.run(std::future::pending()).await,
        Err(kcache_leaderelection::AlreadyRunning)
    );
    assert_eq!(
        elector.run_one_term(std::future::pending()).await,
        Err(kcache_leaderelection::AlreadyRunning)
    );
    let _ = stop.send(true);
    settle().await;
    assert_eq!(first.await.expect("no panic"), Ok(()));
}
