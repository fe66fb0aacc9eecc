//! Hostile configuration and a misbehaving server, each case through the public API: a typed
//! error (through `try_build` or the watch-error hook) or the documented behaviour, never a panic,
//! a hang or a hot loop. Every test runs under a timeout, so a hang fails instead of stalling CI.

mod common;

use common::{eventually, pod, MapStore, Pod, Scripted, TestError};
use futures::StreamExt;
use kcache_core::FakeClock;
use kcache_reflector::{
    BackoffConfig, ConfigError, ListOptions, ListPage, ListWatcher, Reflector, ReflectorError,
    WatchEvent, WatchOptions, WatchStream, DEFAULT_MAX_LIST_PAGES,
};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Fails the test if `f` does not finish within 30 s of real time.
async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("the test hung")
}

/// The errors the hook saw, each as its message and its sources' (`a: b: c`).
type Seen = Arc<Mutex<Vec<String>>>;

fn hook_into(seen: &Seen) -> impl Fn(&ReflectorError<common::TestError, common::StoreError>) {
    let seen = seen.clone();
    move |e| {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        seen.lock().unwrap().push(text);
    }
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
fn config_error_is_send_sync_static_and_says_what_is_wrong() {
    fn assert_error<E: std::error::Error + Send + Sync + 'static>() {}
    assert_error::<ConfigError>();
    assert_eq!(
        ConfigError::BackoffJitter(f64::NAN).to_string(),
        "backoff jitter NaN is not a finite, non-negative number"
    );
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

/// A source whose every list page carries a continue token (`token`), until list call `until`.
struct EndlessPages {
    token: &'static str,
    per_page: usize,
    until: usize,
    calls: AtomicUsize,
}

impl EndlessPages {
    fn new(token: &'static str, per_page: usize, until: usize) -> Arc<Self> {
        Arc::new(Self {
            token,
            per_page,
            until,
            calls: AtomicUsize::new(0),
        })
    }
}

impl ListWatcher<Pod> for EndlessPages {
    type Error = TestError;

    fn list(
        &self,
        _opts: &ListOptions,
    ) -> impl Future<Output = Result<ListPage<Pod>, TestError>> + Send {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let items = (0..self.per_page)
            .map(|i| pod(&format!("p{n}-{i}"), "1"))
            .collect();
        let continue_token = (n < self.until).then(|| self.token.to_owned());
        async move {
            // Lets the test's timeout run even if the reflector never waits for anything else.
            tokio::task::yield_now().await;
            Ok(ListPage {
                items,
                resource_version: "7".into(),
                continue_token,
            })
        }
    }

    async fn watch(&self, _opts: &WatchOptions) -> Result<WatchStream<Pod, TestError>, TestError> {
        Ok(futures::stream::pending().boxed())
    }
}

fn too_long(seen: &Seen) -> Vec<String> {
    let seen = seen.lock().unwrap();
    seen.iter()
        .filter(|e| e.contains("past the reflector's bounds"))
        .cloned()
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn endless_continue_tokens_stop_at_the_default_page_bound_and_back_off() {
    within(async {
        // A token on every page until well past the default bound.
        let until = usize::try_from(DEFAULT_MAX_LIST_PAGES).unwrap() + 50_000;
        let lw = EndlessPages::new("more", 0, until);
        let store = MapStore::default();
        let seen = Seen::default();
        let r = Reflector::builder(lw.clone(), store.clone())
            .clock(Arc::new(FakeClock::new()))
            .on_watch_error(hook_into(&seen))
            .build();
        let handle = r.handle();
        let task = tokio::spawn(r.run());
        for _ in 0..until * 4 {
            if !too_long(&seen).is_empty() || lw.calls.load(Ordering::SeqCst) >= until {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(
            too_long(&seen),
            [format!(
                "bad input from the backend: \
                 a list went on past the reflector's bounds ({DEFAULT_MAX_LIST_PAGES} pages, 0 objects)"
            )]
        );
        // Backing off on the (unmoved) fake clock: no further list call, nothing replaced.
        common::settle().await;
        assert_eq!(
            lw.calls.load(Ordering::SeqCst) as u64,
            DEFAULT_MAX_LIST_PAGES
        );
        assert!(store.calls().is_empty(), "{:?}", store.calls());
        handle.stop();
        task.await.expect("no panic");
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn page_and_object_bounds_are_configurable() {
    within(async {
        for (pages, objects, expected) in [
            (5, 1_000, "(5 pages, 15 objects)"),
            (1_000, 10, "(4 pages, 12 objects)"),
        ] {
            let lw = EndlessPages::new("more", 3, usize::MAX);
            let store = MapStore::default();
            let seen = Seen::default();
            let clock = FakeClock::new();
            let r = Reflector::builder(lw.clone(), store.clone())
                .clock(Arc::new(clock.clone()))
                .max_list_pages(pages)
                .max_list_objects(objects)
                .on_watch_error(hook_into(&seen))
                .build();
            let handle = r.handle();
            let task = tokio::spawn(r.run());
            eventually("the bound", || !too_long(&seen).is_empty()).await;
            assert!(
                too_long(&seen)[0].ends_with(expected),
                "{:?}",
                too_long(&seen)
            );
            // After the backoff the reflector lists again, and is stopped by the bound again.
            clock.advance(Duration::from_secs(2));
            eventually("the bound again", || too_long(&seen).len() == 2).await;
            assert!(store.calls().is_empty());
            handle.stop();
            task.await.expect("no panic");
        }
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn an_empty_continue_token_is_the_last_page() {
    within(async {
        let lw = Arc::new(Scripted::default());
        lw.list_ok(vec![pod("a", "1")], "5", Some(""));
        let store = MapStore::default();
        let seen = Seen::default();
        let r = Reflector::builder(lw.clone(), store.clone())
            .clock(Arc::new(FakeClock::new()))
            .on_watch_error(hook_into(&seen))
            .build();
        let handle = r.handle();
        let task = tokio::spawn(r.run());
        eventually("a watch", || !lw.watch_calls.lock().unwrap().is_empty()).await;
        assert_eq!(store.calls(), ["replace 1 @5"]);
        assert_eq!(lw.list_calls.lock().unwrap().len(), 1);
        assert!(
            seen.lock().unwrap().is_empty(),
            "{:?}",
            seen.lock().unwrap()
        );
        handle.stop();
        task.await.expect("no panic");
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_streaming_list_without_end_stops_at_the_object_bound() {
    within(async {
        let lw = Arc::new(Scripted::default());
        let tx = lw.watch_channel();
        for i in 0..20 {
            tx.unbounded_send(Ok(WatchEvent::Added(pod(&format!("p{i}"), "1"))))
                .unwrap();
        }
        let store = MapStore::default();
        let seen = Seen::default();
        let r = Reflector::builder(lw.clone(), store.clone())
            .clock(Arc::new(FakeClock::new()))
            .streaming_initial_list(true)
            .max_list_objects(10)
            .on_watch_error(hook_into(&seen))
            .build();
        let handle = r.handle();
        let task = tokio::spawn(r.run());
        eventually("the bound", || !too_long(&seen).is_empty()).await;
        assert!(too_long(&seen)[0].ends_with("(0 pages, 11 objects)"));
        assert!(store.calls().is_empty());
        handle.stop();
        task.await.expect("no panic");
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_run_of_watches_that_close_right_after_one_event_backs_off() {
    within(async {
        let lw = Arc::new(Scripted::default());
        lw.list_ok(vec![pod("a", "1")], "5", None);
        // A server that closes every watch cleanly right after one event.
        for rv in 6..40 {
            let ev = WatchEvent::Modified(pod("a", &rv.to_string()));
            lw.watch_events(vec![Ok(ev)]);
        }
        let store = MapStore::default();
        let seen = Seen::default();
        let clock = FakeClock::new();
        let r = Reflector::builder(lw.clone(), store.clone())
            .clock(Arc::new(clock.clone()))
            .seed(2)
            .on_watch_error(hook_into(&seen))
            .build();
        let handle = r.handle();
        let task = tokio::spawn(r.run());
        let short = |seen: &Seen| {
            let seen = seen.lock().unwrap();
            seen.iter()
                .filter(|e| e.contains("watches in a row"))
                .count()
        };
        eventually("a backoff", || short(&seen) == 1).await;
        common::settle().await;
        // Five short watches, then the reflector waits on the (unmoved) clock.
        assert_eq!(lw.watch_calls.lock().unwrap().len(), 5);
        assert_eq!(
            seen.lock().unwrap().clone(),
            ["5 watches in a row closed within 1s of opening; backing off"]
        );
        clock.advance(Duration::from_secs(2));
        eventually("a second backoff", || short(&seen) == 2).await;
        assert_eq!(lw.watch_calls.lock().unwrap().len(), 10);
        // Every event reached the store, and the watches resumed from the last version.
        assert_eq!(handle.last_sync_resource_version().as_str(), "15");
        assert_eq!(lw.watch_rvs()[5], "10");
        handle.stop();
        task.await.expect("no panic");
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn the_fault_injector_plays_a_misbehaving_server() {
    use kcache_reflector::{ErrorKind, FaultInjector, FaultPlan};
    within(async {
        // Endless pages: every answer continues, and the made-up tokens are the injector's own.
        let lw = Arc::new(Scripted::default());
        lw.list_ok(vec![pod("a", "1")], "5", None);
        let plan = FaultPlan {
            endless_pages: 1.0,
            ..FaultPlan::default()
        };
        let faulty = FaultInjector::new(lw.clone(), plan);
        let switch = faulty.handle();
        let first = faulty.list(&ListOptions::default()).await.unwrap();
        assert_eq!(first.items.len(), 1);
        let mut token = first.continue_token.expect("a made-up token");
        for _ in 0..3 {
            let opts = ListOptions {
                continue_token: Some(token),
                ..ListOptions::default()
            };
            let page = faulty.list(&opts).await.unwrap();
            assert!(page.items.is_empty());
            token = page.continue_token.expect("another made-up token");
        }
        assert_eq!(
            lw.list_calls.lock().unwrap().len(),
            1,
            "answered by the injector"
        );
        switch.heal();
        let opts = ListOptions {
            continue_token: Some(token),
            ..ListOptions::default()
        };
        let healed = faulty.list(&opts).await.map(|_| ()).unwrap_err();
        assert_eq!(healed.to_string(), "injected Expired fault during List");
        assert_eq!(switch.stats().endless_pages, 4);

        // An empty continue token on the last page.
        lw.list_ok(vec![pod("a", "1")], "5", None);
        let plan = FaultPlan {
            empty_continue: 1.0,
            ..FaultPlan::default()
        };
        let faulty = FaultInjector::new(lw.clone(), plan);
        let page = faulty.list(&ListOptions::default()).await.unwrap();
        assert_eq!(page.continue_token.as_deref(), Some(""));

        // Instant clean closes, and a bookmark without a version before an event.
        let events = |n: u64| {
            (0..n)
                .map(|i| {
                    Ok(WatchEvent::Added(pod(
                        &format!("p{i}"),
                        &(i + 1).to_string(),
                    )))
                })
                .collect::<Vec<_>>()
        };
        lw.watch_events(events(5));
        let plan = FaultPlan {
            instant_close: 1.0,
            ..FaultPlan::default()
        };
        let faulty = FaultInjector::new(lw.clone(), plan);
        let got: Vec<_> = faulty
            .watch(&WatchOptions::default())
            .await
            .unwrap()
            .collect()
            .await;
        assert!(
            got.len() <= 1,
            "closed after at most one event: {}",
            got.len()
        );
        assert_eq!(faulty.handle().stats().instant_closes, 1);

        lw.watch_events(events(1));
        let plan = FaultPlan {
            unversioned_bookmark: 1.0,
            ..FaultPlan::default()
        };
        let faulty = FaultInjector::new(lw.clone(), plan);
        let mut stream = faulty.watch(&WatchOptions::default()).await.unwrap();
        match stream.next().await {
            Some(Ok(WatchEvent::Bookmark(b))) => assert!(b.resource_version.is_empty()),
            other => panic!("expected a bookmark without a version: {other:?}"),
        }
        assert!(matches!(
            stream.next().await,
            Some(Ok(WatchEvent::Added(_)))
        ));
        let _ = ErrorKind::Other;
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_reflector_over_a_hostile_server_converges_once_it_heals() {
    use kcache_memory::{MemoryConfig, MemorySource};
    use kcache_reflector::{FaultInjector, FaultPlan};
    within(async {
        let clock = FakeClock::new();
        let source: MemorySource<Pod> =
            MemorySource::with_config(MemoryConfig::new().with_clock(clock.clone()));
        for i in 0..20 {
            let _ = source.create(Pod {
                ns: "ns".into(),
                name: format!("p{i}"),
                rv: "".into(),
                value: i,
            });
        }
        let plan = FaultPlan {
            endless_pages: 0.05,
            empty_continue: 0.5,
            instant_close: 0.5,
            unversioned_bookmark: 0.2,
            ..FaultPlan::default()
        };
        let faulty = FaultInjector::with_clock(source.clone(), plan, Arc::new(clock.clone()));
        let switch = faulty.handle();
        let store = MapStore::default();
        let r = Reflector::builder(faulty, store.clone())
            .clock(Arc::new(clock.clone()))
            .page_size(3)
            .max_list_pages(50)
            .seed(4)
            .build();
        let handle = r.handle();
        let task = tokio::spawn(r.run());
        for i in 0..40 {
            let _ = source.update(Pod {
                ns: "ns".into(),
                name: format!("p{}", i % 20),
                rv: "".into(),
                value: 100 + i,
            });
            clock.advance(Duration::from_millis(700));
            common::settle().await;
        }
        switch.heal();
        let want: Vec<(String, String)> = source
            .list_all()
            .iter()
            .map(|p| (format!("{}/{}", p.ns, p.name), p.rv.to_string()))
            .collect();
        for _ in 0..200 {
            clock.advance(Duration::from_secs(2));
            common::settle().await;
            if store.snapshot().into_iter().collect::<Vec<_>>() == want {
                break;
            }
        }
        assert_eq!(store.snapshot().into_iter().collect::<Vec<_>>(), want);
        let stats = switch.stats();
        assert!(
            stats.endless_pages > 0 && stats.instant_closes > 0,
            "{stats:?}"
        );
        handle.stop();
        task.await.expect("no panic");
    })
    .await;
}
