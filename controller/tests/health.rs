//! The controller's `/healthz` check (`WorkersCheck`): passes while every worker runs (also
//! while they wait for the caches), fails for a worker stuck in one reconcile past the limit (on
//! a FakeClock), for workers that left, and for a controller shutting down.

use futures::future::BoxFuture;
use kcache_controller::{Action, Controller, WorkersError};
use kcache_core::health::HealthChecks;
use kcache_core::{FakeClock, ObjectKey};
use kcache_informer::HasSynced;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

const WAIT: Duration = Duration::from_secs(20);

fn key(s: &str) -> ObjectKey {
    ObjectKey::new(s).unwrap()
}

/// A HasSynced the test flips by hand; `wait_synced` is `false` once `stopped` is set.
struct Manual(watch::Sender<(bool, bool)>);

impl HasSynced for Manual {
    fn has_synced(&self) -> bool {
        self.0.borrow().0
    }
    fn wait_synced(&self) -> BoxFuture<'_, bool> {
        let mut rx = self.0.subscribe();
        Box::pin(
            async move { matches!(rx.wait_for(|s| s.0 || s.1).await.as_deref(), Ok((true, _))) },
        )
    }
}

/// Waits (bounded, notified by the check's own state after each yield) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let r = tokio::time::timeout(WAIT, async {
        while !done() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(r.is_ok(), "never happened: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stuck_in_one_reconcile_past_the_limit_fails_the_check() {
    let clock = FakeClock::new();
    let controller = Controller::builder("volumes")
        .clock(Arc::new(clock.clone()))
        .workers(2)
        .build()
        .unwrap();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (release_tx, release) = oneshot::channel::<()>();
    let release = Arc::new(tokio::sync::Mutex::new(Some(release)));
    let handle = controller
        .run_async(move |k: ObjectKey| {
            let (started_tx, release) = (started_tx.clone(), release.clone());
            async move {
                if k.as_str() == "default/slow" {
                    let _ = started_tx.send(());
                    if let Some(rx) = release.lock().await.take() {
                        let _ = rx.await;
                    }
                }
                Ok::<_, String>(Action::Done)
            }
        })
        .unwrap();
    let check = handle.workers_check(Duration::from_secs(30));
    let healthz = HealthChecks::new().with(check.clone());
    assert!(check.check().is_ok(), "workers running, nothing in flight");

    handle.queue().add(key("default/slow"));
    tokio::time::timeout(WAIT, started.recv()).await.unwrap();
    clock.advance(Duration::from_secs(30));
    assert!(check.check().is_ok(), "exactly at the limit");
    // The other worker still reconciles; a quick reconcile never trips the check.
    handle.queue().add(key("default/quick"));
    let r = tokio::time::timeout(WAIT, handle.wait_stats(|s| s.reconciles >= 1)).await;
    assert!(r.is_ok());
    clock.advance(Duration::from_millis(1));
    let report = healthz.check();
    assert!(!report.is_ok());
    assert_eq!(
        report.failed().map(|r| r.name()).collect::<Vec<_>>(),
        ["volumes-workers"]
    );
    match check.check() {
        Err(WorkersError::Stuck {
            controller,
            key,
            busy_for,
            limit,
            ..
        }) => {
            assert_eq!(controller, "volumes");
            assert_eq!(key, "default/slow");
            assert_eq!(busy_for, Duration::from_millis(30_001));
            assert_eq!(limit, Duration::from_secs(30));
        }
        other => panic!("expected Stuck, got {other:?}"),
    }
    assert!(report
        .to_string()
        .contains("[-]volumes-workers failed: controller \"volumes\": worker "));

    let _ = release_tx.send(());
    let r = tokio::time::timeout(WAIT, handle.wait_stats(|s| s.reconciles >= 2)).await;
    assert!(r.is_ok());
    assert!(check.check().is_ok(), "the reconcile finished");
    handle.shutdown_async().await;
    assert!(matches!(
        check.check(),
        Err(WorkersError::ShuttingDown { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_workers_are_checked_the_same_way() {
    let clock = FakeClock::new();
    let controller = Controller::builder("jobs")
        .clock(Arc::new(clock.clone()))
        .workers(3)
        .build()
        .unwrap();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let release_rx = std::sync::Mutex::new(release_rx);
    let handle = controller
        .run(move |_: &ObjectKey| {
            let _ = started_tx.send(());
            let _ = release_rx.lock().unwrap().recv();
            Ok::<_, String>(Action::Done)
        })
        .unwrap();
    let check = handle.workers_check(Duration::from_secs(5));
    assert!(check.check().is_ok());
    handle.queue().add(key("batch/nightly"));
    tokio::time::timeout(WAIT, started.recv()).await.unwrap();
    clock.advance(Duration::from_secs(6));
    assert!(matches!(
        check.check(),
        Err(WorkersError::Stuck { key, .. }) if key == "batch/nightly"
    ));
    release_tx.send(()).unwrap();
    let r = tokio::time::timeout(WAIT, handle.wait_stats(|s| s.reconciles >= 1)).await;
    assert!(r.is_ok());
    assert!(check.check().is_ok());
    tokio::task::spawn_blocking(move || handle.shutdown())
        .await
        .unwrap();
    assert!(matches!(
        check.check(),
        Err(WorkersError::ShuttingDown { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_waiting_for_the_caches_are_alive_and_workers_that_left_fail_the_check() {
    for threads in [false, true] {
        let caches = Arc::new(Manual(watch::Sender::new((false, false))));
        let controller = Controller::builder("pods")
            .workers(2)
            .wait_for(caches.clone())
            .build()
            .unwrap();
        let reconcile = |_: &ObjectKey| Ok::<_, String>(Action::Done);
        let handle = if threads {
            controller.run(reconcile).unwrap()
        } else {
            controller
                .run_async(move |k: ObjectKey| async move { reconcile(&k) })
                .unwrap()
        };
        let check = handle.workers_check(Duration::from_secs(5));
        assert!(check.check().is_ok(), "waiting for the caches is alive");

        // The watched cache stops before it syncs: the workers never start and leave.
        caches.0.send_replace((false, true));
        assert!(!handle.wait_workers_started().await);
        let left = Err(WorkersError::WorkersExited {
            controller: "pods".into(),
            running: 0,
            workers: 2,
        });
        until("both workers left", || check.check() == left).await;
        drop(handle);
    }
}
