//! Stopping an informer: client-go closes `Run`'s stop channel from anywhere; here a
//! `StopHandle` does it. And `run` counts as started from the call (client-go's `Run` marks the
//! informer started before it does anything else), not from the first poll of its future.

mod common;

use common::*;
use futures::FutureExt;
use kcache_informer::{HandlerFuncs, InformerError};
use std::convert::Infallible;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_stop_channel_stops_run_and_the_informer_for_good() {
    let (clock, src) = source();
    src.create(Pod::new("a", 1)).unwrap();
    let inf = informer(&clock, &src, Duration::ZERO);
    let stop = inf.stop_handle();
    let task = {
        let inf = inf.clone();
        // A stop future that never completes: only the handle can end this run.
        tokio::spawn(async move { inf.run(std::future::pending()).await })
    };
    synced(&inf).await;
    assert!(!inf.is_stopped());
    let other = stop.clone();
    other.stop();
    assert!(stop.is_stop_requested(), "clones share the flag");
    let r = tokio::time::timeout(WAIT, task).await;
    assert!(matches!(r, Ok(Ok(Ok(())))), "run returned: {r:?}");
    assert!(inf.is_stopped());
    assert!(matches!(
        inf.add_event_handler(HandlerFuncs::new()),
        Err(InformerError::Stopped)
    ));
    stop.stop();
}

#[tokio::test(flavor = "current_thread")]
async fn a_stop_before_run_makes_run_return_at_once() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, Duration::ZERO);
    inf.stop_handle().stop();
    let r = tokio::time::timeout(WAIT, inf.run(std::future::pending())).await;
    assert!(matches!(r, Ok(Ok(()))), "{r:?}");
    assert!(inf.is_stopped());
    assert!(!inf.has_synced());
}

#[tokio::test(flavor = "current_thread")]
async fn run_counts_as_started_from_the_call_not_the_first_poll() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, Duration::ZERO);
    let first = inf.run(std::future::pending());
    // Neither future was polled: the second call is refused all the same, and so are the
    // settings that only apply before the start.
    let second = inf.run(std::future::pending());
    assert!(matches!(
        second.now_or_never(),
        Some(Err(InformerError::AlreadyStarted))
    ));
    assert!(matches!(
        inf.set_transform(Ok::<_, Infallible>),
        Err(InformerError::AlreadyStarted)
    ));
    assert!(matches!(
        inf.set_watch_error_handler(|_| {}),
        Err(InformerError::AlreadyStarted)
    ));
    // The first one is the run.
    inf.stop_handle().stop();
    let r = tokio::time::timeout(WAIT, first).await;
    assert!(matches!(r, Ok(Ok(()))), "{r:?}");
    assert!(inf.is_stopped());
}
