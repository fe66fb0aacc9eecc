//! The controller's periodic resync (`ControllerBuilder::resync_period`) and `Action::Requeue`,
//! on a fake clock.

// The informer's test support (a pod-like object, a memory source on a fake clock, a running informer).
#[path = "../../informer/tests/common/mod.rs"]
mod common;

use common::{informer, run, source, synced, Pod, WAIT};
use kcache_controller::{Action, Controller, ControllerHandle};
use kcache_core::{FakeClock, ObjectKey};
use kcache_memory::MemorySource;
use kcache_workqueue::ItemExponentialFailureRateLimiter;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Reconciled keys and how often each was seen.
type Seen = Arc<Mutex<BTreeMap<String, usize>>>;

fn count(seen: &Seen) -> BTreeMap<String, usize> {
    seen.lock().unwrap().clone()
}

async fn reconciled(handle: &ControllerHandle, n: u64) {
    let r = tokio::time::timeout(WAIT, handle.wait_stats(|s| s.reconciles >= n)).await;
    assert!(r.is_ok(), "fewer than {n} reconciles: {:?}", handle.stats());
}

/// A controller watching `sets` and owning `children` (owner: the child's name up to '-'),
/// resyncing every `period`, recording every reconciled key.
fn controller(
    clock: &FakeClock,
    sets: &Arc<common::Informer>,
    children: &Arc<common::Informer>,
    period: Duration,
) -> (Controller, Seen) {
    let controller = Controller::builder("resync")
        .clock(Arc::new(clock.clone()))
        .resync_period(period)
        .watches(sets)
        .owns(children, |child: &Pod| {
            let owner = child.name.split('-').next().unwrap_or_default();
            vec![ObjectKey::namespaced(&child.ns, owner).unwrap()]
        })
        .build()
        .unwrap();
    (controller, Seen::default())
}

fn world(clock: &FakeClock) -> (MemorySource<Pod>, MemorySource<Pod>) {
    let sets = MemorySource::<Pod>::with_clock(clock.clone());
    let children = MemorySource::<Pod>::with_clock(clock.clone());
    for name in ["a", "b", "c"] {
        sets.create(Pod::new(name, 1)).unwrap();
    }
    // A child whose owner is not a set: only events name it, the resync does not.
    children.create(Pod::new("orphan-1", 0)).unwrap();
    (sets, children)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_watched_key_comes_back_once_per_period_and_not_before() {
    let (clock, _) = source();
    let (sets_src, children_src) = world(&clock);
    let sets = informer(&clock, &sets_src, Duration::ZERO);
    let children = informer(&clock, &children_src, Duration::ZERO);
    let (controller, seen) = controller(&clock, &sets, &children, Duration::from_secs(60));
    let record = seen.clone();
    let handle = controller
        .run(move |k: &ObjectKey| {
            *record.lock().unwrap().entry(k.to_string()).or_default() += 1;
            Ok::<_, String>(Action::Done)
        })
        .unwrap();
    let (r1, r2) = (run(&sets), run(&children));
    synced(&sets).await;
    reconciled(&handle, 4).await;
    assert!(handle.wait_workers_started().await);

    // Just before the period: no resync. An event's reconcile shows the workers were awake.
    clock.advance(Duration::from_secs(59));
    sets_src.create(Pod::new("d", 1)).unwrap();
    reconciled(&handle, 5).await;
    assert_eq!(handle.stats().resyncs, 0);

    // Past the period and its largest jitter (10 %): one round, every watched key once more.
    clock.advance(Duration::from_secs(7));
    let r = tokio::time::timeout(WAIT, handle.wait_stats(|s| s.reconciles >= 9)).await;
    assert!(r.is_ok(), "no resync round: {:?}", handle.stats());
    assert_eq!(handle.stats().resyncs, 1);
    let expected: BTreeMap<String, usize> = [
        ("default/a".to_string(), 2),
        ("default/b".to_string(), 2),
        ("default/c".to_string(), 2),
        ("default/d".to_string(), 2),
        ("default/orphan".to_string(), 1),
    ]
    .into();
    assert_eq!(count(&seen), expected, "owned-only keys are not resynced");

    // And again one period later.
    clock.advance(Duration::from_secs(66));
    let r = tokio::time::timeout(
        WAIT,
        handle.wait_stats(|s| s.resyncs >= 2 && s.reconciles >= 13),
    )
    .await;
    assert!(r.is_ok(), "no second resync round: {:?}", handle.stats());
    assert_eq!(count(&seen)["default/a"], 3);

    let stats = handle.shutdown();
    assert_eq!(stats.errors, 0);
    r1.stop().await;
    r2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_workers_resync_too() {
    let (clock, _) = source();
    let (sets_src, children_src) = world(&clock);
    let sets = informer(&clock, &sets_src, Duration::ZERO);
    let children = informer(&clock, &children_src, Duration::ZERO);
    let (controller, seen) = controller(&clock, &sets, &children, Duration::from_secs(3600));
    let record = seen.clone();
    let handle = controller
        .run_async(move |k: ObjectKey| {
            *record.lock().unwrap().entry(k.to_string()).or_default() += 1;
            async { Ok::<_, String>(Action::Done) }
        })
        .unwrap();
    let (r1, r2) = (run(&sets), run(&children));
    reconciled(&handle, 4).await;
    assert!(handle.wait_workers_started().await);
    clock.advance(Duration::from_secs(3960));
    let r = tokio::time::timeout(
        WAIT,
        handle.wait_stats(|s| s.resyncs >= 1 && s.reconciles >= 7),
    )
    .await;
    assert!(r.is_ok(), "no resync round: {:?}", handle.stats());
    assert_eq!(count(&seen)["default/b"], 2);
    handle.shutdown_async().await;
    r1.stop().await;
    r2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_period_turns_the_resync_off() {
    let (clock, _) = source();
    let (sets_src, children_src) = world(&clock);
    let sets = informer(&clock, &sets_src, Duration::ZERO);
    let children = informer(&clock, &children_src, Duration::ZERO);
    let (controller, _) = controller(&clock, &sets, &children, Duration::ZERO);
    let handle = controller
        .run(|_: &ObjectKey| Ok::<_, String>(Action::Done))
        .unwrap();
    let (r1, r2) = (run(&sets), run(&children));
    reconciled(&handle, 4).await;
    // Far past the default period: still nothing but events.
    clock.advance(Duration::from_secs(100 * 3600));
    sets_src.create(Pod::new("d", 1)).unwrap();
    reconciled(&handle, 5).await;
    let stats = handle.shutdown();
    assert_eq!((stats.resyncs, stats.reconciles), (0, 5));
    r1.stop().await;
    r2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_retries_through_the_rate_limiter_without_an_error() {
    let (clock, sets_src) = source();
    sets_src.create(Pod::new("a", 1)).unwrap();
    let sets = informer(&clock, &sets_src, Duration::ZERO);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let handle = Controller::builder("requeue")
        .clock(Arc::new(clock.clone()))
        .max_retries(0)
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            Duration::from_secs(1),
            Duration::from_secs(1000),
        ))
        .watches(&sets)
        .build()
        .unwrap()
        .run(move |_: &ObjectKey| {
            // Not done twice, then done.
            if counted.fetch_add(1, Ordering::SeqCst) < 2 {
                Ok::<_, String>(Action::Requeue)
            } else {
                Ok(Action::Done)
            }
        })
        .unwrap();
    let r = run(&sets);
    reconciled(&handle, 1).await;
    // The first requeue waits the limiter's base (1 s), the second twice that: it backs off.
    assert_eq!(
        handle
            .queue()
            .num_requeues(&ObjectKey::new("default/a").unwrap()),
        1
    );
    clock.advance(Duration::from_secs(1));
    reconciled(&handle, 2).await;
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the second wait is 2 s, not 1 s"
    );
    clock.advance(Duration::from_secs(1));
    reconciled(&handle, 3).await;
    let stats = handle.shutdown();
    // Requeues are not errors: max_retries(0) drops nothing.
    assert_eq!(
        (stats.requeues, stats.errors, stats.dropped, stats.successes),
        (2, 0, 0, 3)
    );
    r.stop().await;
}

/// Waits (real time, bounded) until `cond` holds.
async fn until(what: &str, cond: impl Fn() -> bool) {
    let r = tokio::time::timeout(WAIT, async {
        while !cond() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(r.is_ok(), "timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_keys_wait_at_low_priority_behind_a_watched_change() {
    let (clock, _) = source();
    let (sets_src, children_src) = world(&clock);
    let sets = informer(&clock, &sets_src, Duration::ZERO);
    let children = informer(&clock, &children_src, Duration::ZERO);
    let (controller, _) = controller(&clock, &sets, &children, Duration::from_secs(60));
    assert!(controller.queue().is_priority());
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    let release = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (record, gate) = (order.clone(), release.clone());
    let handle = controller
        .run(move |k: &ObjectKey| {
            let n = {
                let mut order = record.lock().unwrap();
                order.push(k.to_string());
                order.len()
            };
            // The first key of the resync round holds the only worker until released.
            if n == 5 {
                while !gate.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
            }
            Ok::<_, String>(Action::Done)
        })
        .unwrap();
    let (r1, r2) = (run(&sets), run(&children));
    reconciled(&handle, 4).await;
    assert!(handle.wait_workers_started().await);
    clock.advance(Duration::from_secs(66));
    until("the resync round", || handle.stats().resyncs >= 1).await;
    until("the worker to hold a resync key", || {
        order.lock().unwrap().len() >= 5
    })
    .await;
    // A watched change arrives while two resync keys wait.
    sets_src.create(Pod::new("d", 1)).unwrap();
    let d = ObjectKey::new("default/d").unwrap();
    until("the change to be queued", || {
        handle.queue().priority_of(&d).is_some()
    })
    .await;
    assert_eq!(handle.queue().priority_of(&d), Some(0));
    let held = order.lock().unwrap()[4].clone();
    for name in ["default/a", "default/b", "default/c"] {
        if name != held {
            let key = ObjectKey::new(name).unwrap();
            assert_eq!(
                handle.queue().priority_of(&key),
                Some(kcache_controller::ControllerQueue::LOW),
                "{name} from the resync"
            );
        }
    }
    release.store(true, Ordering::SeqCst);
    reconciled(&handle, 8).await;
    assert_eq!(
        order.lock().unwrap()[5],
        "default/d",
        "the change goes first"
    );
    handle.shutdown();
    r1.stop().await;
    r2.stop().await;
}
