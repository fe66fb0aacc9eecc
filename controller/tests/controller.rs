//! The Controller's rules, one test each: keys from events and owner mapping, waiting for sync,
//! Done / RequeueAfter / errors with backoff / max retries, graceful drain, caught panics, async
//! workers, metrics by name. Delays run on a FakeClock; every wait is bounded and notified.

// The informer's test support (a pod-like object, a memory source on a fake clock, a running informer).
#[path = "../../informer/tests/common/mod.rs"]
mod common;

use common::{informer, run, source, synced, Pod, WAIT};
use futures::future::BoxFuture;
use kcache_controller::{Action, Controller, ControllerError, ControllerHandle};
use kcache_core::{FakeClock, ObjectKey};
use kcache_informer::HasSynced;
use kcache_workqueue::metrics::{CounterMetric, GaugeMetric, HistogramMetric, SettableGaugeMetric};
use kcache_workqueue::{ItemExponentialFailureRateLimiter, MetricsProvider, NoopMetricsProvider};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

fn key(s: &str) -> ObjectKey {
    ObjectKey::new(s).unwrap()
}

/// Receives the next reconciled key (bounded wait).
async fn next(rx: &mut mpsc::UnboundedReceiver<ObjectKey>) -> ObjectKey {
    match tokio::time::timeout(WAIT, rx.recv()).await {
        Ok(Some(k)) => k,
        other => panic!("no reconcile within the bound: {other:?}"),
    }
}

/// Waits (bounded) until the controller has finished `n` reconciles.
async fn reconciled(handle: &ControllerHandle, n: u64) {
    let r = tokio::time::timeout(WAIT, handle.wait_stats(|s| s.reconciles >= n)).await;
    assert!(r.is_ok(), "fewer than {n} reconciles: {:?}", handle.stats());
}

/// A controller over a fake clock, with the per-key exponential limiter `base`..`max`.
fn fake_clock_controller(
    clock: &FakeClock,
    base: Duration,
) -> kcache_controller::ControllerBuilder {
    Controller::builder("test")
        .clock(Arc::new(clock.clone()))
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            base,
            Duration::from_secs(1000),
        ))
}

/// A HasSynced the test flips by hand.
struct Manual(tokio::sync::watch::Sender<bool>);

impl HasSynced for Manual {
    fn has_synced(&self) -> bool {
        *self.0.borrow()
    }
    fn wait_synced(&self) -> BoxFuture<'_, bool> {
        let mut rx = self.0.subscribe();
        Box::pin(async move { rx.wait_for(|s| *s).await.is_ok() })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_come_from_events_and_from_the_owner_mapping() {
    let (clock, sets_src) = source();
    let children_src = kcache_memory::MemorySource::<Pod>::with_clock(clock.clone());
    let sets = informer(&clock, &sets_src, Duration::ZERO);
    let children = informer(&clock, &children_src, Duration::ZERO);
    sets_src.create(Pod::new("a", 1)).unwrap();
    // A child "b-1" belongs to the set "b" (its name's prefix).
    children_src.create(Pod::new("b-1", 0)).unwrap();

    let (tx, mut rx) = mpsc::unbounded_channel();
    let controller = Controller::builder("sets")
        .workers(2)
        .watches(&sets)
        .owns(&children, |child: &Pod| {
            let owner = child.name.split('-').next().unwrap_or_default();
            vec![ObjectKey::namespaced(&child.ns, owner).unwrap()]
        })
        .build()
        .unwrap();
    let handle = controller
        .run(move |k: &ObjectKey| tx.send(k.clone()).map(|()| Action::Done))
        .unwrap();
    let (r1, r2) = (run(&sets), run(&children));

    let first: BTreeSet<ObjectKey> = [next(&mut rx).await, next(&mut rx).await].into();
    assert_eq!(first, [key("default/a"), key("default/b")].into());

    sets_src.delete("default/a").unwrap();
    assert_eq!(
        next(&mut rx).await,
        key("default/a"),
        "a deletion enqueues the key"
    );
    children_src.update(Pod::new("b-1", 1)).unwrap();
    assert_eq!(
        next(&mut rx).await,
        key("default/b"),
        "a child update enqueues its owner"
    );
    children_src.delete("default/b-1").unwrap();
    assert_eq!(
        next(&mut rx).await,
        key("default/b"),
        "a child deletion enqueues its owner"
    );

    let stats = handle.shutdown();
    assert_eq!(stats.reconciles, 5);
    r1.stop().await;
    r2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_that_moves_a_child_enqueues_both_owners() {
    let (clock, src) = source();
    let children = informer(&clock, &src, Duration::ZERO);
    // The child's owner is its `value`: owner-1, then owner-2.
    src.create(Pod::new("c", 1)).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let handle = Controller::builder("owners")
        .owns(&children, |p: &Pod| {
            vec![key(&format!("default/owner-{}", p.value))]
        })
        .build()
        .unwrap()
        .run(move |k: &ObjectKey| tx.send(k.clone()).map(|()| Action::Done))
        .unwrap();
    let r = run(&children);
    assert_eq!(next(&mut rx).await, key("default/owner-1"));
    src.update(Pod::new("c", 2)).unwrap();
    let moved: BTreeSet<ObjectKey> = [next(&mut rx).await, next(&mut rx).await].into();
    assert_eq!(
        moved,
        [key("default/owner-1"), key("default/owner-2")].into()
    );
    handle.shutdown();
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_wait_for_every_cache_to_sync_before_they_start() {
    let (clock, src) = source();
    src.create(Pod::new("a", 1)).unwrap();
    let pods = informer(&clock, &src, Duration::ZERO);
    let gate = Arc::new(Manual(tokio::sync::watch::Sender::new(false)));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let controller = Controller::builder("gated")
        .watches(&pods)
        .wait_for(gate.clone())
        .build()
        .unwrap();
    controller.queue().add(key("default/by-hand"));
    let handle = controller
        .run(move |k: &ObjectKey| tx.send(k.clone()).map(|()| Action::Done))
        .unwrap();

    // The informer is not running: nothing may be reconciled, the hand-added key stays queued.
    let r = run(&pods);
    synced(&pods).await;
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(
        !handle.workers_started(),
        "started before the manual gate synced"
    );
    assert!(rx.try_recv().is_err());
    assert_eq!(handle.stats().reconciles, 0);
    assert!(!handle.queue().is_empty());

    gate.0.send_replace(true);
    assert!(tokio::time::timeout(WAIT, handle.wait_workers_started())
        .await
        .unwrap());
    let got: BTreeSet<ObjectKey> = [next(&mut rx).await, next(&mut rx).await].into();
    assert_eq!(got, [key("default/a"), key("default/by-hand")].into());
    handle.shutdown();
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn done_forgets_the_retry_history() {
    let clock = FakeClock::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let controller = fake_clock_controller(&clock, Duration::from_millis(5))
        .build()
        .unwrap();
    controller.queue().add(key("default/a"));
    let handle = controller
        .run(
            move |_: &ObjectKey| match c.fetch_add(1, Ordering::SeqCst) {
                0 => Err("first attempt fails"),
                _ => Ok(Action::Done),
            },
        )
        .unwrap();
    reconciled(&handle, 1).await;
    assert_eq!(handle.queue().num_requeues(&key("default/a")), 1);
    clock.advance(Duration::from_millis(5));
    reconciled(&handle, 2).await;
    assert_eq!(
        handle.queue().num_requeues(&key("default/a")),
        0,
        "Done forgets"
    );
    let stats = handle.shutdown();
    assert_eq!((stats.errors, stats.successes, stats.retries), (1, 1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_after_brings_the_key_back_after_exactly_the_delay() {
    let clock = FakeClock::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let controller = fake_clock_controller(&clock, Duration::from_millis(5))
        .build()
        .unwrap();
    controller.queue().add(key("default/a"));
    let handle = controller
        .run(move |_: &ObjectKey| {
            Ok::<_, String>(match c.fetch_add(1, Ordering::SeqCst) {
                0 => Action::RequeueAfter(Duration::from_secs(10)),
                _ => Action::Done,
            })
        })
        .unwrap();
    reconciled(&handle, 1).await;
    assert_eq!(handle.queue().waiting_len(), 1);
    assert_eq!(
        handle.queue().num_requeues(&key("default/a")),
        0,
        "RequeueAfter forgets"
    );
    clock.advance(Duration::from_millis(9_999));
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert_eq!(handle.queue().waiting_len(), 1, "not due yet");
    assert_eq!(handle.stats().reconciles, 1);
    clock.advance(Duration::from_millis(1));
    reconciled(&handle, 2).await;
    let stats = handle.shutdown();
    assert_eq!((stats.requeues_after, stats.retries), (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_retried_with_exponential_backoff() {
    let clock = FakeClock::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let controller = fake_clock_controller(&clock, Duration::from_secs(1))
        .build()
        .unwrap();
    controller.queue().add(key("default/a"));
    let handle = controller
        .run(move |_: &ObjectKey| {
            if c.fetch_add(1, Ordering::SeqCst) < 3 {
                Err("not yet")
            } else {
                Ok(Action::Done)
            }
        })
        .unwrap();
    // Retry n waits 2^(n-1) s: 1 s, 2 s, 4 s.
    for (n, wait) in [(1u64, 1000u64), (2, 2000), (3, 4000)] {
        reconciled(&handle, n).await;
        assert_eq!(handle.queue().num_requeues(&key("default/a")), n as usize);
        clock.advance(Duration::from_millis(wait - 1));
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            handle.stats().reconciles,
            n,
            "retry {n} came before its backoff"
        );
        assert_eq!(handle.queue().waiting_len(), 1);
        clock.advance(Duration::from_millis(1));
    }
    reconciled(&handle, 4).await;
    let stats = handle.shutdown();
    assert_eq!((stats.errors, stats.retries, stats.successes), (3, 3, 1));
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_failing_past_max_retries_is_dropped_and_counted() {
    let clock = FakeClock::new();
    let controller = fake_clock_controller(&clock, Duration::from_millis(1))
        .max_retries(2)
        .build()
        .unwrap();
    controller.queue().add(key("default/bad"));
    let handle = controller
        .run(|_: &ObjectKey| Err::<Action, _>("always"))
        .unwrap();
    reconciled(&handle, 1).await;
    clock.advance(Duration::from_millis(1));
    reconciled(&handle, 2).await;
    clock.advance(Duration::from_millis(2));
    reconciled(&handle, 3).await;
    let stats = handle.stats();
    assert_eq!((stats.errors, stats.retries, stats.dropped), (3, 2, 1));
    assert_eq!(
        handle.queue().num_requeues(&key("default/bad")),
        0,
        "dropped keys are forgotten"
    );
    assert_eq!(handle.queue().waiting_len(), 0);
    assert!(handle.queue().is_empty());
    // A new event for the key starts afresh.
    handle.queue().add(key("default/bad"));
    reconciled(&handle, 4).await;
    assert_eq!(handle.queue().num_requeues(&key("default/bad")), 1);
    handle.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_queued_keys_and_waits_for_calls_in_progress() {
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let finished = Arc::new(AtomicUsize::new(0));
    let f = finished.clone();
    let (started_tx, mut started_rx) = mpsc::unbounded_channel();
    let controller = Controller::builder("drain").workers(1).build().unwrap();
    for i in 0..10 {
        controller.queue().add(key(&format!("default/k{i}")));
    }
    let handle = controller
        .run(move |k: &ObjectKey| {
            if k.as_str() == "default/k0" {
                let _ = started_tx.send(());
                // Blocks until the test has begun the shutdown.
                let _ = release_rx.lock().unwrap().recv();
            }
            f.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(Action::Done)
        })
        .unwrap();
    tokio::time::timeout(WAIT, started_rx.recv()).await.unwrap();
    let queue = handle.queue().clone();
    let shutdown = tokio::task::spawn_blocking(move || handle.shutdown());
    tokio::time::timeout(WAIT, async {
        while !queue.is_shutting_down() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
    assert!(
        !queue.add(key("default/late")),
        "adds are refused once shutting down"
    );
    release_tx.send(()).unwrap();
    let stats = tokio::time::timeout(WAIT, shutdown).await.unwrap().unwrap();
    assert_eq!(
        finished.load(Ordering::SeqCst),
        10,
        "every queued key was reconciled"
    );
    assert_eq!(stats.reconciles, 10);
    assert_eq!(queue.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_before_sync_drops_the_queue_and_starts_no_worker() {
    let gate = Arc::new(Manual(tokio::sync::watch::Sender::new(false)));
    let controller = Controller::builder("never").wait_for(gate).build().unwrap();
    controller.queue().add(key("default/a"));
    let handle = controller
        .run(|_: &ObjectKey| -> Result<Action, String> { panic!("must not run") })
        .unwrap();
    let stats = tokio::task::spawn_blocking(move || handle.shutdown())
        .await
        .unwrap();
    assert_eq!(stats.reconciles, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_reconcile_is_caught_and_retried_and_the_worker_survives() {
    let clock = FakeClock::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let controller = fake_clock_controller(&clock, Duration::from_millis(5))
        .workers(1)
        .build()
        .unwrap();
    controller.queue().add(key("default/a"));
    let handle = controller
        .run(move |_: &ObjectKey| {
            if c.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("boom");
            }
            Ok::<_, String>(Action::Done)
        })
        .unwrap();
    reconciled(&handle, 1).await;
    assert_eq!(handle.stats().panics, 1);
    assert_eq!(handle.queue().num_requeues(&key("default/a")), 1);
    clock.advance(Duration::from_millis(5));
    reconciled(&handle, 2).await;
    // The single worker is still alive: another key gets through.
    handle.queue().add(key("default/b"));
    reconciled(&handle, 3).await;
    let stats = handle.shutdown();
    assert_eq!((stats.panics, stats.retries, stats.successes), (1, 1, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_workers_reconcile_retry_and_catch_panics() {
    let clock = FakeClock::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let controller = fake_clock_controller(&clock, Duration::from_millis(5))
        .workers(3)
        .build()
        .unwrap();
    for k in ["default/a", "default/b", "default/c"] {
        controller.queue().add(key(k));
    }
    let handle = controller
        .run_async(move |k: ObjectKey| {
            let n = c.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::task::yield_now().await;
                match (k.as_str(), n) {
                    ("default/b", _) if n < 3 => panic!("async boom"),
                    ("default/c", _) if n < 3 => Err(format!("{k} failed")),
                    _ => Ok(Action::Done),
                }
            }
        })
        .unwrap();
    reconciled(&handle, 3).await;
    clock.advance(Duration::from_millis(5));
    let stats = tokio::time::timeout(WAIT, handle.wait_stats(|s| s.successes >= 3))
        .await
        .unwrap();
    assert!(stats.retries >= 1);
    // The counters of one reconcile are bumped one after another, and another worker may be
    // between them when a snapshot is taken: the totals only add up once every worker is done.
    let stats = tokio::time::timeout(WAIT, handle.shutdown_async())
        .await
        .unwrap();
    assert!(stats.successes >= 3);
    assert_eq!(
        stats.reconciles,
        stats.successes + stats.errors + stats.panics
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_shutdown_drains_the_queue() {
    let gate = Arc::new(Manual(tokio::sync::watch::Sender::new(false)));
    let controller = Controller::builder("drain-async")
        .workers(2)
        .wait_for(gate.clone())
        .build()
        .unwrap();
    for i in 0..20 {
        controller.queue().add(key(&format!("default/k{i}")));
    }
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let handle = controller
        .run_async(move |_k| {
            let d = d.clone();
            async move {
                tokio::task::yield_now().await;
                d.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>(Action::Done)
            }
        })
        .unwrap();
    gate.0.send_replace(true);
    assert!(handle.wait_workers_started().await);
    let stats = tokio::time::timeout(WAIT, handle.shutdown_async())
        .await
        .unwrap();
    assert_eq!(done.load(Ordering::SeqCst), 20);
    assert_eq!(stats.reconciles, 20);
}

#[test]
fn run_async_outside_a_runtime_is_a_typed_error() {
    let controller = Controller::builder("no-rt").build().unwrap();
    let r = controller.run_async(|_k| async { Ok::<_, String>(Action::Done) });
    assert!(matches!(r, Err(ControllerError::NoRuntime)));
}

#[test]
fn zero_workers_is_refused() {
    let r = Controller::builder("none").workers(0).build();
    assert!(matches!(r, Err(ControllerError::NoWorkers)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_informer_refuses_the_handler_with_a_typed_error() {
    let (clock, src) = source();
    let pods = informer(&clock, &src, Duration::ZERO);
    run(&pods).stop().await;
    let r = Controller::builder("late").watches(&pods).build();
    match r {
        Err(ControllerError::Register { informer, .. }) => assert_eq!(informer, "pods"),
        other => panic!("expected a Register error, got {other:?}"),
    }
}

/// Records the `name` label of every metric the queue asks for, and counts adds.
#[derive(Default)]
struct Names {
    names: Mutex<BTreeSet<String>>,
    adds: Arc<AddCount>,
}

#[derive(Default)]
struct AddCount(AtomicUsize);

impl CounterMetric for AddCount {
    fn inc(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Names {
    fn note(&self, name: &str) {
        self.names.lock().unwrap().insert(name.to_owned());
    }
}

impl MetricsProvider for Names {
    fn new_depth_metric(&self, name: &str) -> Arc<dyn GaugeMetric> {
        self.note(name);
        NoopMetricsProvider.new_depth_metric(name)
    }
    fn new_adds_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        self.note(name);
        self.adds.clone()
    }
    fn new_latency_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        self.note(name);
        NoopMetricsProvider.new_latency_metric(name)
    }
    fn new_work_duration_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        self.note(name);
        NoopMetricsProvider.new_work_duration_metric(name)
    }
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric> {
        self.note(name);
        NoopMetricsProvider.new_unfinished_work_seconds_metric(name)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Arc<dyn SettableGaugeMetric> {
        self.note(name);
        NoopMetricsProvider.new_longest_running_processor_seconds_metric(name)
    }
    fn new_retries_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        self.note(name);
        NoopMetricsProvider.new_retries_metric(name)
    }
}

#[test]
fn queue_metrics_are_labelled_with_the_controller_name() {
    let provider = Arc::new(Names::default());
    let controller = Controller::builder("replicasets")
        .metrics(provider.clone())
        .build()
        .unwrap();
    controller.queue().add(key("default/a"));
    controller.queue().add(key("default/a"));
    assert_eq!(
        *provider.names.lock().unwrap(),
        BTreeSet::from(["replicasets".to_owned()])
    );
    assert_eq!(
        provider.adds.0.load(Ordering::SeqCst),
        1,
        "a deduplicated add is not counted"
    );
}
