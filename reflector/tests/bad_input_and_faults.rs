//! Bad input from a backend (typed errors through the hook, no panic, recovery), the error types'
//! auto traits, and the fault injector's own rules.

mod common;

use common::{eventually, pod, MapStore, Scripted, StoreError, TestError};
use futures::StreamExt;
use kcache_core::FakeClock;
use kcache_reflector::{
    BadInput, ErrorKind, FaultError, FaultInjector, FaultPlan, FaultSite, InjectedFault,
    ListOptions, ListWatcher, Reflector, ReflectorError, WatchEvent, WatchOptions,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn assert_error<E: std::error::Error + Send + Sync + 'static>() {}

#[test]
fn every_public_error_is_send_sync_and_static() {
    assert_error::<ReflectorError<TestError, StoreError>>();
    assert_error::<BadInput>();
    assert_error::<InjectedFault>();
    assert_error::<FaultError<TestError>>();
    let e: ReflectorError<TestError, StoreError> =
        ReflectorError::List(TestError(ErrorKind::Other));
    assert!(
        std::error::Error::source(&e).is_some(),
        "the backend error is the source"
    );
}

async fn first_error_then_recovery(lw: Arc<Scripted>) -> Vec<String> {
    let store = MapStore::default();
    let clock = FakeClock::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let r = Reflector::builder(lw.clone(), store.clone())
        .clock(Arc::new(clock.clone()))
        .on_watch_error(move |e| s.lock().unwrap().push(e.to_string()))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("an error", || !seen.lock().unwrap().is_empty()).await;
    clock.advance(Duration::from_secs(2));
    eventually("recovered", || {
        handle.last_sync_resource_version().as_str() == "9"
    })
    .await;
    handle.stop();
    task.await.unwrap();
    let out = seen.lock().unwrap().clone();
    out
}

#[tokio::test(flavor = "current_thread")]
async fn an_object_without_a_name_is_reported_and_the_reflector_relists() {
    let lw = Arc::new(Scripted::default());
    lw.list_ok(vec![pod("", "1")], "3", None);
    lw.list_ok(vec![pod("a", "1")], "9", None);
    assert_eq!(
        first_error_then_recovery(lw).await,
        ["bad input from the backend"]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn the_same_seed_injects_the_same_faults_and_heal_stops_them() {
    async fn outcomes(seed: u64) -> Vec<bool> {
        let lw = Arc::new(Scripted::default());
        for _ in 0..40 {
            lw.list_ok(vec![], "1", None);
        }
        let plan = FaultPlan {
            list_error: 0.5,
            ..FaultPlan::default()
        };
        let faulty = FaultInjector::new(lw, FaultPlan { seed, ..plan });
        let mut out = Vec::new();
        for _ in 0..20 {
            out.push(faulty.list(&ListOptions::default()).await.is_ok());
        }
        faulty.handle().heal();
        for _ in 0..20 {
            assert!(faulty.list(&ListOptions::default()).await.is_ok(), "healed");
        }
        out
    }
    let a = outcomes(5).await;
    assert_eq!(a, outcomes(5).await);
    assert!(a.iter().any(|ok| *ok) && a.iter().any(|ok| !*ok), "{a:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_cut_watch_ends_after_n_events_with_the_chosen_error_class() {
    let lw = Arc::new(Scripted::default());
    let events = (1..=10)
        .map(|i| Ok(WatchEvent::Added(pod(&format!("p{i}"), "1"))))
        .collect();
    lw.watch_events(events);
    let plan = FaultPlan {
        cut_watch: 1.0,
        max_events_before_cut: 5,
        cut_with_error: 1.0,
        error_kinds: vec![ErrorKind::Expired],
        ..FaultPlan::default()
    };
    let faulty = FaultInjector::new(lw, plan);
    let handle = faulty.handle();
    let mut stream = faulty.watch(&WatchOptions::default()).await.unwrap();
    let mut delivered = 0;
    let last = loop {
        match stream.next().await {
            Some(Ok(_)) => delivered += 1,
            other => break other,
        }
    };
    assert!(delivered <= 5);
    match last {
        Some(Err(FaultError::Injected(f))) => {
            assert_eq!(
                f,
                InjectedFault {
                    kind: ErrorKind::Expired,
                    site: FaultSite::WatchStream
                }
            )
        }
        _ => panic!("expected an injected Expired"),
    }
    assert!(stream.next().await.is_none(), "nothing after the cut");
    assert_eq!(handle.stats().error_cuts, 1);
}

#[tokio::test(flavor = "current_thread")]
async fn delays_wait_on_the_injector_clock() {
    let lw = Arc::new(Scripted::default());
    lw.list_ok(vec![], "1", None);
    let clock = FakeClock::new();
    let plan = FaultPlan {
        delay: 1.0,
        max_delay: Duration::from_secs(5),
        ..FaultPlan::default()
    };
    let faulty = Arc::new(FaultInjector::with_clock(lw, plan, Arc::new(clock.clone())));
    let f = faulty.clone();
    let task = tokio::spawn(async move { f.list(&ListOptions::default()).await.is_ok() });
    common::settle().await;
    assert!(!task.is_finished(), "waiting for the fake clock");
    clock.advance(Duration::from_secs(5));
    assert!(task.await.unwrap());
    assert_eq!(faulty.handle().stats().delays, 1);
}

#[tokio::test(flavor = "current_thread")]
async fn a_watch_that_drew_no_cut_is_still_cut_after_some_event() {
    // 200 events, no per-watch cut: only the per-event draw can end this watch early.
    let lw = Arc::new(Scripted::default());
    let events = (1..=200)
        .map(|i| Ok(WatchEvent::Added(pod(&format!("p{i}"), "1"))))
        .collect();
    lw.watch_events(events);
    let plan = FaultPlan {
        seed: 3,
        cut_per_event: 0.1,
        cut_with_error: 0.0,
        ..FaultPlan::default()
    };
    let faulty = FaultInjector::new(lw, plan);
    let handle = faulty.handle();
    let mut stream = faulty.watch(&WatchOptions::default()).await.unwrap();
    let mut delivered = 0;
    while let Some(Ok(_)) = stream.next().await {
        delivered += 1;
    }
    assert!(
        (1..200).contains(&delivered),
        "cut after {delivered} of 200"
    );
    assert_eq!(handle.stats().clean_cuts, 1);
}

#[tokio::test(flavor = "current_thread")]
async fn every_watch_ends_within_its_lifetime_on_the_injector_clock() {
    let lw = Arc::new(Scripted::default());
    let clock = FakeClock::new();
    let plan = FaultPlan {
        max_watch_lifetime: Duration::from_secs(10),
        ..FaultPlan::default()
    };
    let faulty = Arc::new(FaultInjector::with_clock(lw, plan, Arc::new(clock.clone())));
    let handle = faulty.handle();
    // The scripted watch never ends by itself.
    let mut stream = faulty.watch(&WatchOptions::default()).await.unwrap();
    let next = tokio::spawn(async move { stream.next().await.is_none() });
    common::settle().await;
    clock.advance(Duration::from_secs(4));
    common::settle().await;
    assert!(!next.is_finished(), "alive before half the lifetime");
    clock.advance(Duration::from_secs(6));
    assert!(next.await.unwrap(), "ended cleanly by the lifetime");
    assert_eq!(handle.stats().lifetime_cuts, 1);

    // Healed: the next watch lives on.
    handle.heal();
    let mut stream = faulty.watch(&WatchOptions::default()).await.unwrap();
    let next = tokio::spawn(async move { stream.next().await.is_none() });
    clock.advance(Duration::from_secs(60));
    common::settle().await;
    assert!(!next.is_finished(), "no lifetime once healed");
    next.abort();
    assert_eq!(handle.stats().lifetime_cuts, 1);
}
