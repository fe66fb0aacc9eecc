//! The Controller under leader election: workers take keys only while this process leads, stop
//! at the renew deadline (a reconcile in progress finishes), start again when leadership comes
//! back, and the informers stay warm throughout.
//!
//! The electors (kcache-leaderelection, in-process lock) run on a FakeClock, on a current-thread
//! runtime of their own in a driver thread: the test tells it to advance time, and it answers once
//! every elector has acted on the new time and waits on the clock again. Nothing sleeps.

// The informer's test support (a pod-like object, a memory source on a fake clock, a running informer).
#[path = "../../informer/tests/common/mod.rs"]
mod common;

use common::{informer, run, source, synced, Pod, WAIT};
use futures::future::BoxFuture;
use kcache_controller::{Action, Controller, ControllerHandle};
use kcache_core::{FakeClock, ObjectKey};
use kcache_leaderelection::{InProcessLock, LeaderElectionConfig, LeaderElector, LeaderStatus};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

const STEP: Duration = Duration::from_millis(250);

enum Command {
    Spawn(BoxFuture<'static, ()>),
    Advance(Duration, oneshot::Sender<()>),
}

/// Electors on a fake clock, in a thread with a current-thread runtime.
struct Electors {
    clock: FakeClock,
    commands: mpsc::UnboundedSender<Command>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

async fn settle() {
    for _ in 0..32 {
        tokio::task::yield_now().await;
    }
}

impl Electors {
    fn start(clock: &FakeClock) -> Self {
        let (commands, mut rx) = mpsc::unbounded_channel::<Command>();
        let (stop, _) = watch::channel(false);
        let clock2 = clock.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                while let Some(cmd) = rx.recv().await {
                    match cmd {
                        Command::Spawn(f) => {
                            tokio::spawn(f);
                            settle().await;
                        }
                        Command::Advance(d, done) => {
                            clock2.advance(d);
                            settle().await;
                            let _ = done.send(());
                        }
                    }
                }
                settle().await;
            });
        });
        Self {
            clock: clock.clone(),
            commands,
            stop,
            thread: Some(thread),
        }
    }

    /// Starts a candidate on `lock`; returns its status.
    async fn spawn(&self, lock: InProcessLock) -> LeaderStatus {
        let config = LeaderElectionConfig::new().jitter_factor(0.0);
        let elector = LeaderElector::with_clock(lock, config, Arc::new(self.clock.clone()))
            .expect("valid config");
        let status = elector.status();
        let mut stop = self.stop.subscribe();
        let run = async move {
            elector
                .run(async move {
                    let _ = stop.wait_for(|s| *s).await;
                })
                .await
                .expect("the elector runs once");
        };
        let _ = self.commands.send(Command::Spawn(Box::pin(run)));
        self.advance(Duration::ZERO).await;
        status
    }

    async fn advance(&self, d: Duration) {
        let (tx, rx) = oneshot::channel();
        let _ = self.commands.send(Command::Advance(d, tx));
        let r = tokio::time::timeout(WAIT, rx).await;
        assert!(matches!(r, Ok(Ok(()))), "the elector driver did not answer");
    }

    /// Advances in steps until `cond` holds (at most 120 s of fake time).
    async fn advance_until(&self, what: &str, cond: impl Fn() -> bool) {
        for _ in 0..480 {
            if cond() {
                return;
            }
            self.advance(STEP).await;
        }
        panic!("never happened: {what}");
    }

    fn stop(mut self) {
        self.stop.send_replace(true);
        let (tx, _) = mpsc::unbounded_channel();
        drop(std::mem::replace(&mut self.commands, tx));
        if let Some(t) = self.thread.take() {
            t.join().expect("the driver thread ends");
        }
    }
}

fn key(s: &str) -> ObjectKey {
    ObjectKey::new(s).unwrap()
}

async fn next(rx: &mut mpsc::UnboundedReceiver<ObjectKey>) -> ObjectKey {
    match tokio::time::timeout(WAIT, rx.recv()).await {
        Ok(Some(k)) => k,
        other => panic!("no reconcile within the bound: {other:?}"),
    }
}

/// Bounded wait for a condition on the controller that has no notification of its own.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let r = tokio::time::timeout(WAIT, async {
        while !cond() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(r.is_ok(), "timed out waiting for {what}");
}

async fn no_reconcile_yet(handle: &ControllerHandle, rx: &mut mpsc::UnboundedReceiver<ObjectKey>) {
    assert!(rx.try_recv().is_err(), "a follower reconciled");
    assert_eq!(handle.stats().reconciles, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_run_only_while_leading_and_resume_when_leadership_returns() {
    let (clock, src) = source();
    for name in ["a", "b", "c"] {
        src.create(Pod::new(name, 1)).unwrap();
    }
    let pods = informer(&clock, &src, Duration::ZERO);
    let electors = Electors::start(&clock);
    let lock_other = InProcessLock::new("other");
    let lock_me = lock_other.for_identity("me");
    let other = electors.spawn(lock_other.clone()).await;
    let me = electors.spawn(lock_me.clone()).await;
    assert!(other.is_leader() && !me.is_leader());

    // Reconciles report their key; the key "default/slow" waits for the test's go.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (slow_started_tx, mut slow_started) = mpsc::unbounded_channel::<()>();
    let go_rx = std::sync::Mutex::new(go_rx);
    let controller = Controller::builder("pods")
        .workers(2)
        .watches(&pods)
        .leader_election(me.clone())
        .build()
        .unwrap();
    let handle = controller
        .run(move |k: &ObjectKey| {
            if k.as_str() == "default/slow" {
                let _ = slow_started_tx.send(());
                let _ = go_rx.lock().unwrap().recv_timeout(WAIT);
            }
            tx.send(k.clone()).map(|()| Action::Done)
        })
        .unwrap();
    let running = run(&pods);
    synced(&pods).await;
    assert!(
        tokio::time::timeout(WAIT, handle.wait_workers_started()).await == Ok(true),
        "the workers start (and wait for leadership)"
    );
    // Warm standby: the cache is full and every key waits in the queue.
    eventually("three keys queued", || handle.queue().len() == 3).await;
    no_reconcile_yet(&handle, &mut rx).await;

    // The other replica is cut off: we take over and reconcile the queued keys.
    lock_other.set_available(false);
    electors.advance_until("we lead", || me.is_leader()).await;
    let mut got: Vec<String> = Vec::new();
    for _ in 0..3 {
        got.push(next(&mut rx).await.to_string());
    }
    got.sort();
    assert_eq!(got, ["default/a", "default/b", "default/c"]);

    // A slow reconcile is in progress when we are cut off ourselves.
    src.create(Pod::new("slow", 1)).unwrap();
    tokio::time::timeout(WAIT, slow_started.recv())
        .await
        .expect("the slow reconcile starts");
    lock_me.set_available(false);
    electors
        .advance_until("we lose the lease", || !me.is_leader())
        .await;
    // Not leading: a new key is handed back (by the other worker, if it was already waiting in
    // `get` when the lease was lost) or waits in the queue (if that worker came round after the
    // loss and now waits for leadership first); either way it is not reconciled.
    let before = handle.stats().handed_back;
    src.create(Pod::new("d", 1)).unwrap();
    eventually("the new key handed back or queued", || {
        handle.stats().handed_back > before || handle.queue().len() == 1
    })
    .await;
    // The reconcile in progress finishes.
    go_tx.send(()).unwrap();
    assert_eq!(next(&mut rx).await, key("default/slow"));
    eventually("the new key back in the queue", || {
        handle.queue().len() == 1
    })
    .await;
    // The slow call is counted once it returned, a moment after its key reached `rx` (the
    // stats are a scrape, see `ControllerStats`): wait for it, then nothing else was reconciled.
    eventually("the slow reconcile counted", || {
        handle.stats().reconciles >= 4
    })
    .await;
    assert!(
        rx.try_recv().is_err(),
        "a key was reconciled without the lease"
    );
    assert_eq!(handle.stats().reconciles, 4);

    // Leadership comes back (the other replica is still cut off): the queued key is reconciled.
    lock_me.set_available(true);
    electors
        .advance_until("we lead again", || me.is_leader())
        .await;
    assert_eq!(next(&mut rx).await, key("default/d"));
    assert_eq!(me.state().term, Some(2));

    let stats = handle.shutdown();
    assert_eq!(stats.reconciles, 5);
    assert_eq!(stats.successes, 5);
    running.stop().await;
    electors.stop();
    let _ = other;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_workers_follow_the_election_and_shutdown_as_a_follower_drops_the_queue() {
    let (clock, src) = source();
    src.create(Pod::new("a", 1)).unwrap();
    let pods = informer(&clock, &src, Duration::ZERO);
    let electors = Electors::start(&clock);
    let lock_other = InProcessLock::new("other");
    let lock_me = lock_other.for_identity("me");
    let _other = electors.spawn(lock_other.clone()).await;
    let me = electors.spawn(lock_me.clone()).await;

    let (tx, mut rx) = mpsc::unbounded_channel();
    let controller = Controller::builder("pods")
        .workers(2)
        .watches(&pods)
        .leader_election(me.clone())
        .build()
        .unwrap();
    let handle = controller
        .run_async(move |k: ObjectKey| {
            let tx = tx.clone();
            async move { tx.send(k).map(|()| Action::Done) }
        })
        .unwrap();
    let running = run(&pods);
    synced(&pods).await;
    eventually("the key queued", || handle.queue().len() == 1).await;
    no_reconcile_yet(&handle, &mut rx).await;

    lock_other.set_available(false);
    electors.advance_until("we lead", || me.is_leader()).await;
    assert_eq!(next(&mut rx).await, key("default/a"));

    lock_me.set_available(false);
    electors
        .advance_until("we lose the lease", || !me.is_leader())
        .await;
    src.create(Pod::new("b", 1)).unwrap();
    // Queued, and handed back first if a worker was already waiting in `get` when the lease was
    // lost (a worker that came round after the loss waits for leadership instead): a timing
    // matter, so only the queue is checked.
    eventually("the new key waits in the queue", || {
        handle.queue().len() == 1
    })
    .await;

    // Shutting down as a follower ends promptly and reconciles nothing more.
    let stats = tokio::time::timeout(WAIT, handle.shutdown_async())
        .await
        .expect("shutdown as a follower does not hang");
    assert_eq!(stats.reconciles, 1);
    assert!(rx.try_recv().is_err());
    running.stop().await;
    electors.stop();
}
