//! Hostile configuration and a misbehaving server, each case through the public API: a typed
//! error (through `try_build` or the watch-error hook) or the documented behaviour, never a panic,
//! a hang or a hot loop. Every test runs under a timeout, so a hang fails instead of stalling CI.

mod common;

use common::{eventually, pod, MapStore, Scripted};
use kcache_core::FakeClock;
use kcache_reflector::{BackoffConfig, ConfigError, Reflector, ReflectorError};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Fails the test if `f` does not finish within 30 s of real time.
async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("the test hung")
}

/// The errors the hook saw, as strings.
type Seen = Arc<Mutex<Vec<String>>>;

fn hook_into(seen: &Seen) -> impl Fn(&ReflectorError<common::TestError, common::StoreError>) {
    let seen = seen.clone();
    move |e| seen.lock().unwrap().push(e.to_string())
}

#[tokio::test(flavor = "current_thread")]
async fn extreme_backoff_parameters_saturate_instead_of_panicking_on_a_failing_list() {
    within(async {
        let d = BackoffConfig::default();
        // (parameters, list failures to wait for: after the first, a backoff of Duration::MAX
        // sleeps as good as forever, which is what it asks for).
        let extreme = [
            (BackoffConfig { factor: 1e30, ..d }, 5),
            (
                BackoffConfig {
                    factor: f64::INFINITY,
                    ..d
                },
                5,
            ),
            (
                BackoffConfig {
                    jitter: f64::INFINITY,
                    ..d
                },
                5,
            ),
            (
                BackoffConfig {
                    initial: Duration::MAX,
                    cap: Duration::MAX,
                    ..d
                },
                1,
            ),
        ];
        for (backoff, failures) in extreme {
            // An empty script answers every list with an error: the reflector backs off forever.
            let lw = Arc::new(Scripted::default());
            let clock = FakeClock::new();
            let seen = Seen::default();
            let r = Reflector::builder(lw.clone(), MapStore::default())
                .clock(Arc::new(clock.clone()))
                .backoff(backoff)
                .seed(3)
                .on_watch_error(hook_into(&seen))
                .build();
            let handle = r.handle();
            let task = tokio::spawn(r.run());
            for n in 1..=failures {
                eventually("a list error", || seen.lock().unwrap().len() >= n).await;
                // Past the longest saturated delay: the 30 s cap plus at most 30 s of jitter.
                clock.advance(Duration::from_secs(61));
            }
            handle.stop();
            task.await
                .unwrap_or_else(|e| panic!("{backoff:?}: the reflector panicked: {e}"));
            assert!(
                seen.lock().unwrap().len() <= failures + 1,
                "{backoff:?}: no hot loop"
            );
        }
    })
    .await;
}

#[test]
fn try_build_refuses_negative_nan_and_infinite_backoff_factor_and_jitter() {
    let d = BackoffConfig::default();
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.5] {
        let built = Reflector::builder(Arc::new(Scripted::default()), MapStore::default())
            .backoff(BackoffConfig { factor: bad, ..d })
            .try_build();
        assert!(
            matches!(built, Err(ConfigError::BackoffFactor(_))),
            "factor {bad}"
        );
        let built = Reflector::builder(Arc::new(Scripted::default()), MapStore::default())
            .backoff(BackoffConfig { jitter: bad, ..d })
            .try_build();
        assert!(
            matches!(built, Err(ConfigError::BackoffJitter(_))),
            "jitter {bad}"
        );
    }
    let fine = Reflector::builder(Arc::new(Scripted::default()), MapStore::default())
        .backoff(BackoffConfig { factor: 1e30, ..d })
        .try_build();
    assert!(
        fine.is_ok(),
        "a huge but finite factor saturates at the cap"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_maximal_min_watch_timeout_saturates_instead_of_overflowing() {
    within(async {
        let lw = Arc::new(Scripted::default());
        lw.list_ok(vec![pod("a", "1")], "5", None);
        let clock = FakeClock::new();
        let r = Reflector::builder(lw.clone(), MapStore::default())
            .clock(Arc::new(clock.clone()))
            .min_watch_timeout(Duration::MAX)
            .seed(1)
            .build();
        let handle = r.handle();
        let task = tokio::spawn(r.run());
        eventually("a watch", || !lw.watch_calls.lock().unwrap().is_empty()).await;
        let timeout = lw.watch_calls.lock().unwrap()[0].timeout;
        assert_eq!(timeout, Some(Duration::MAX));
        handle.stop();
        task.await.expect("the reflector did not panic");
    })
    .await;
}
