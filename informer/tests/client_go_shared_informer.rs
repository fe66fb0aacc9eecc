//! Behaviour ported from client-go's `tools/cache/shared_informer_test.go` (kubernetes/client-go),
//! rewritten in our words over kcache-memory and a fake clock. Each test names the Go test it
//! follows; where kcache deliberately differs, the comment says so.

mod common;

use common::*;
use kcache_informer::{Event, HandlerFuncs, ResourceEventHandler};
use kcache_reflector::{FaultInjector, FaultPlan};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const S: Duration = Duration::from_secs(1);

fn resyncs(events: &[Event<Pod>]) -> Vec<String> {
    let mut names: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Updated { old, new } if old.rv == new.rv => Some(new.name.clone()),
            _ => None,
        })
        .collect();
    names.sort();
    names
}

/// `TestListenerResyncPeriods`: with the informer checking every second, a handler resyncing
/// every 2 s gets its resync at 2 s, one resyncing every 3 s at 3 s, one without resync never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_listener_resyncs_on_its_own_period() {
    let (clock, src) = source();
    src.create(Pod::new("pod1", 0)).unwrap();
    src.create(Pod::new("pod2", 0)).unwrap();
    let inf = informer(&clock, &src, S);
    let (l1, l2, l3) = (Recorder::new(), Recorder::new(), Recorder::new());
    let r1 = inf
        .add_event_handler_with_resync(l1.clone(), Duration::ZERO)
        .unwrap();
    let r2 = inf
        .add_event_handler_with_resync(l2.clone(), 2 * S)
        .unwrap();
    let r3 = inf
        .add_event_handler_with_resync(l3.clone(), 3 * S)
        .unwrap();
    let running = run(&inf);
    for l in [&l1, &l2, &l3] {
        l.wait_for(2).await;
    }

    clock.advance(2 * S);
    l2.wait_for(4).await;
    assert_eq!(resyncs(&l2.events()), ["pod1", "pod2"]);
    // The same dispatch filled every buffer: the others got nothing.
    assert_eq!(l1.len() + r1.pending(), 2);
    assert_eq!(l3.len() + r3.pending(), 2);

    clock.advance(S);
    l3.wait_for(4).await;
    assert_eq!(resyncs(&l3.events()), ["pod1", "pod2"]);
    assert_eq!(l1.len() + r1.pending(), 2);
    assert_eq!(l2.len() + r2.pending(), 4);
    running.stop().await;
}

/// `TestResyncCheckPeriod`: handlers added before the start lower the informer's check period;
/// each keeps its own period (client-go reads private fields; we read the registrations').
#[tokio::test]
async fn handlers_added_before_the_start_lower_the_check_period() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, 12 * 3600 * S);
    let h1 = inf
        .add_event_handler_with_resync(Recorder::new(), Duration::ZERO)
        .unwrap();
    assert_eq!(h1.resync_period(), Some(Duration::ZERO));
    let h2 = inf
        .add_event_handler_with_resync(Recorder::new(), 60 * S)
        .unwrap();
    assert_eq!(h1.resync_period(), Some(Duration::ZERO));
    assert_eq!(h2.resync_period(), Some(60 * S));
    let h3 = inf
        .add_event_handler_with_resync(Recorder::new(), 55 * S)
        .unwrap();
    assert_eq!(h2.resync_period(), Some(60 * S));
    assert_eq!(h3.resync_period(), Some(55 * S));
    let h4 = inf
        .add_event_handler_with_resync(Recorder::new(), 5 * S)
        .unwrap();
    assert_eq!(h1.resync_period(), Some(Duration::ZERO));
    assert_eq!(h2.resync_period(), Some(60 * S));
    assert_eq!(h3.resync_period(), Some(55 * S));
    assert_eq!(h4.resync_period(), Some(5 * S));
    // A handler with the default period now gets the informer's default, 12 h.
    let h5 = inf.add_event_handler(Recorder::new()).unwrap();
    assert_eq!(h5.resync_period(), Some(12 * 3600 * S));
}

/// `TestSharedInformerInitializationRace` (kubernetes#59822): adding a handler while the
/// informer starts and stops is safe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_a_handler_while_starting_and_stopping_is_safe() {
    for _ in 0..20 {
        let (clock, src) = source();
        src.create(Pod::new("pod1", 0)).unwrap();
        let inf = informer(&clock, &src, S);
        let adder = {
            let inf = inf.clone();
            std::thread::spawn(move || {
                let _ = inf.add_event_handler_with_resync(Recorder::new(), Duration::ZERO);
            })
        };
        let running = run(&inf);
        running.stop().await;
        adder.join().unwrap();
    }
}

/// `TestSharedInformerErrorHandling`: a failing list reaches the watch error handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_error_reaches_the_watch_error_handler() {
    let (clock, src) = source();
    src.create(Pod::new("pod1", 0)).unwrap();
    let failing = FaultInjector::with_clock(
        src,
        FaultPlan {
            list_error: 1.0,
            ..FaultPlan::default()
        },
        Arc::new(clock.clone()),
    );
    let inf = Arc::new(kcache_informer::SharedIndexInformer::with_options(
        failing,
        // Lists, not streams (the memory source's default): the failing call is the list.
        kcache_informer::InformerOptions::new()
            .clock(Arc::new(clock.clone()))
            .streaming_initial_list(false),
    ));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    inf.set_watch_error_handler(move |e| {
        let _ = tx.send(e.to_string());
    })
    .unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let i2 = inf.clone();
    let task = tokio::spawn(async move {
        i2.run(async {
            let _ = stop_rx.await;
        })
        .await
    });
    let msg = tokio::time::timeout(WAIT, rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(msg.contains("list"), "{msg}");
    stop_tx.send(()).unwrap();
    tokio::time::timeout(WAIT, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// `TestSharedInformerTransformer`: handlers see transformed objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_see_transformed_objects() {
    let (clock, src) = source();
    src.create(Pod::new("pod1", 0)).unwrap();
    src.create(Pod::new("pod2", 0)).unwrap();
    let inf = informer(&clock, &src, S);
    inf.set_transform(|p: Arc<Pod>| {
        let mut p = (*p).clone();
        p.name = p.name.to_uppercase();
        Ok::<_, std::convert::Infallible>(Arc::new(p))
    })
    .unwrap();
    let rec = Recorder::new();
    inf.add_event_handler(rec.clone()).unwrap();
    let running = run(&inf);
    rec.wait_for(2).await;
    let mut names: Vec<_> = rec
        .events()
        .iter()
        .map(|e| e.object().unwrap().name.clone())
        .collect();
    names.sort();
    assert_eq!(names, ["POD1", "POD2"]);
    running.stop().await;
}

/// `TestSharedInformerRemoveHandler` and `TestSharedInformerRemoveForeignHandler`: removing
/// registrations one by one; a registration belongs to its informer only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_are_removed_one_by_one_and_only_from_their_informer() {
    let (clock, src) = source();
    src.create(Pod::new("pod1", 0)).unwrap();
    let inf = informer(&clock, &src, S);
    let (c2, s2) = source();
    let other = informer(&c2, &s2, S);
    let h1 = inf.add_event_handler(HandlerFuncs::new()).unwrap();
    let h2 = inf.add_event_handler(HandlerFuncs::new()).unwrap();
    assert_eq!(inf.handler_count(), 2);
    assert_eq!(other.handler_count(), 0);
    assert!(h2.remove());
    assert_eq!(inf.handler_count(), 1);
    assert!(h1.remove());
    assert_eq!(inf.handler_count(), 0);
    assert!(!h1.remove());
}

/// `TestSharedInformerMultipleRegistration`: the same handler registered twice is two
/// registrations, each with its own notifications; removing one leaves the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_handler_registered_twice_is_notified_twice() {
    let (clock, src) = source();
    src.create(Pod::new("pod1", 0)).unwrap();
    let inf = informer(&clock, &src, S);
    let rec = Recorder::new();
    let shared: Arc<dyn ResourceEventHandler<Pod>> = Arc::new(rec.clone());
    let a = inf.add_event_handler(shared.clone()).unwrap();
    let b = inf.add_event_handler(shared).unwrap();
    let running = run(&inf);
    rec.wait_for(2).await;
    assert!(a.remove());
    assert!(!b.is_removed());
    src.create(Pod::new("pod2", 0)).unwrap();
    rec.wait_for(3).await;
    running.stop().await;
    assert!(
        b.is_removed(),
        "stopping the informer ends every registration"
    );
}

/// `TestSharedInformerHandlerAbuse` (in spirit): a handler that adds and removes other handlers
/// from inside its callbacks does not deadlock the informer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_may_register_and_remove_handlers_from_their_callbacks() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, S);
    let made = Arc::new(AtomicUsize::new(0));
    let m = made.clone();
    let weak = Arc::downgrade(&inf);
    let rec = Recorder::new();
    let abuser_calls = Recorder::new();
    let calls = abuser_calls.clone();
    inf.add_event_handler(HandlerFuncs::new().add_func(move |p: &Arc<Pod>, initial| {
        if let Some(inf) = weak.upgrade() {
            if let Ok(reg) = inf.add_event_handler(HandlerFuncs::new()) {
                m.fetch_add(1, Ordering::SeqCst);
                reg.remove();
            }
        }
        calls.on_add(p, initial);
    }))
    .unwrap();
    inf.add_event_handler(rec.clone()).unwrap();
    let running = run(&inf);
    synced(&inf).await;
    for i in 0..10 {
        src.create(Pod::new(&format!("p{i}"), 0)).unwrap();
    }
    rec.wait_for(10).await;
    abuser_calls.wait_for(10).await;
    running.stop().await;
    assert_eq!(made.load(Ordering::SeqCst), 10);
    assert_eq!(inf.handler_count(), 0, "stopped: no registrations left");
}

/// `TestStateSharedInformer` (in spirit): `has_synced` and `is_stopped` follow the lifecycle,
/// and a second `run` is refused (client-go logs and returns; we return a typed error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_informer_reports_its_lifecycle() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, S);
    assert!(!inf.has_synced());
    assert!(!inf.is_stopped());
    let running = run(&inf);
    synced(&inf).await;
    assert!(!inf.is_stopped());
    running.stop().await;
    assert!(inf.is_stopped());
    assert!(inf.run(async {}).await.is_err());
}
