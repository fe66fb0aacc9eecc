//! client-go runs the reflector's resync check (`shouldResync`) on its own timer, beside the
//! watch: a tick that comes due while the watch fails is not lost to the relist that follows.
//! Until the first check, every handler is flagged "syncing" (client-go's starting state), so a
//! lost tick would let a relist's unchanged objects reach handlers that asked for no resync.

mod common;

use common::{Pod, Recorder};
use futures::channel::mpsc;
use futures::StreamExt;
use kcache_core::{FakeClock, ResourceVersion};
use kcache_informer::{Event, InformerOptions, SharedIndexInformer};
use kcache_reflector::{
    BackendError, ErrorKind, ListOptions, ListPage, ListWatcher, WatchEvent, WatchOptions,
    WatchStream,
};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
#[error("scripted: resource version expired")]
struct Expired;

impl BackendError for Expired {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Expired
    }
}

type Tx = mpsc::UnboundedSender<Result<WatchEvent<Pod>, Expired>>;

/// Lists come from a script (the last one repeats); the first watch is fed by the test, later
/// ones stay open and silent.
struct Scripted {
    lists: Mutex<VecDeque<(Vec<Pod>, u64)>>,
    first_watch: Mutex<Option<WatchStream<Pod, Expired>>>,
    watches: Mutex<usize>,
}

impl ListWatcher<Pod> for Scripted {
    type Error = Expired;

    async fn list(&self, _: &ListOptions) -> Result<ListPage<Pod>, Expired> {
        let mut lists = self.lists.lock().unwrap();
        let (items, rv) = if lists.len() > 1 {
            lists.pop_front().unwrap()
        } else {
            lists.front().cloned().unwrap()
        };
        Ok(ListPage {
            items: items.into_iter().map(Arc::new).collect(),
            resource_version: rv.into(),
            continue_token: None,
        })
    }

    async fn watch(&self, _: &WatchOptions) -> Result<WatchStream<Pod, Expired>, Expired> {
        *self.watches.lock().unwrap() += 1;
        let first = self.first_watch.lock().unwrap().take();
        Ok(first.unwrap_or_else(|| futures::stream::pending().boxed()))
    }
}

fn pod(name: &str, rv: u64) -> Pod {
    let mut p = Pod::new(name, 1);
    p.rv = ResourceVersion::from(rv);
    p
}

fn unchanged_updates(events: &[Event<Pod>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Updated { old, new } if old.rv == new.rv => Some(new.name.clone()),
            _ => None,
        })
        .collect()
}

/// Lets the informer's task run (single-threaded runtime: nothing else runs meanwhile).
async fn settle() {
    for _ in 0..200 {
        tokio::task::yield_now().await;
    }
}

// Single-threaded on purpose: the watch error and the tick become ready together, before the
// informer's task runs again.
#[tokio::test]
async fn resync_check_runs_on_its_own_schedule_even_when_a_watch_error_is_waiting() {
    let clock = FakeClock::new();
    let (tx, rx): (Tx, _) = mpsc::unbounded();
    let source = Scripted {
        lists: Mutex::new(VecDeque::from([
            (vec![pod("a", 1)], 1),
            // The relist: a unchanged, b new (b tells the test the relist has been delivered).
            (vec![pod("a", 1), pod("b", 2)], 2),
        ])),
        first_watch: Mutex::new(Some(rx.boxed())),
        watches: Mutex::new(0),
    };
    let inf = Arc::new(SharedIndexInformer::with_options(
        source,
        InformerOptions::new()
            .resync_period(Duration::from_secs(10))
            .clock(Arc::new(clock.clone())),
    ));
    let quiet = Recorder::new();
    let resyncing = Recorder::new();
    inf.add_event_handler_with_resync(quiet.clone(), Duration::ZERO)
        .unwrap();
    inf.add_event_handler_with_resync(resyncing.clone(), Duration::from_secs(10))
        .unwrap();
    let running = {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let inf = inf.clone();
        let task = tokio::spawn(async move {
            inf.run(async {
                let _ = stopped.await;
            })
            .await
        });
        (stop, task)
    };
    let synced = tokio::time::timeout(common::WAIT, inf.wait_for_cache_sync()).await;
    assert_eq!(synced, Ok(true));
    quiet.wait_for(1).await;
    resyncing.wait_for(1).await;
    settle().await;

    // The tick and the watch error become ready together.
    tx.unbounded_send(Err(Expired)).unwrap();
    clock.advance(Duration::from_secs(10));
    settle().await;
    // The relist follows a backoff on the fake clock.
    for _ in 0..20 {
        if quiet.len() >= 2 {
            break;
        }
        clock.advance(Duration::from_secs(1));
        settle().await;
        let _ = tokio::time::timeout(Duration::from_millis(5), quiet.wait_for_quiet(2)).await;
    }
    quiet.wait_for(2).await;
    resyncing.wait_for(3).await;

    let quiet_events = quiet.events();
    assert_eq!(
        unchanged_updates(&quiet_events),
        Vec::<String>::new(),
        "a handler without resync got RV-unchanged updates: the tick was lost ({quiet_events:?})"
    );
    assert!(
        matches!(&quiet_events[1], Event::Added { obj, .. } if obj.name == "b"),
        "{quiet_events:?}"
    );
    let resynced = unchanged_updates(&resyncing.events());
    assert!(
        !resynced.is_empty() && resynced.iter().all(|n| n == "a"),
        "the due handler is resynced: {resynced:?}"
    );

    let (stop, task) = running;
    stop.send(()).unwrap();
    tokio::time::timeout(common::WAIT, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// A check that finds no handler due unflags them all: from then on an update whose version did
/// not change (a watch repeating the cached object, or a relist) reaches no handler, on the
/// direct path of watch events as on the FIFO's.
#[tokio::test]
async fn after_a_check_with_no_handler_due_unchanged_updates_reach_none() {
    let clock = FakeClock::new();
    let (tx, rx): (Tx, _) = mpsc::unbounded();
    let source = Scripted {
        lists: Mutex::new(VecDeque::from([
            (vec![pod("a", 1)], 1),
            // The relist: a and b unchanged, c new (c marks the relist as delivered).
            (vec![pod("a", 1), pod("b", 2), pod("c", 3)], 3),
        ])),
        first_watch: Mutex::new(Some(rx.boxed())),
        watches: Mutex::new(0),
    };
    let inf = Arc::new(SharedIndexInformer::with_options(
        source,
        InformerOptions::new()
            .resync_period(Duration::from_secs(10))
            .clock(Arc::new(clock.clone())),
    ));
    // Checked every 10 s; neither is due at the first check.
    let quiet = Recorder::new();
    let slow = Recorder::new();
    inf.add_event_handler_with_resync(quiet.clone(), Duration::ZERO)
        .unwrap();
    inf.add_event_handler_with_resync(slow.clone(), Duration::from_secs(30))
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = {
        let inf = inf.clone();
        tokio::spawn(async move {
            inf.run(async {
                let _ = stopped.await;
            })
            .await
        })
    };
    let synced = tokio::time::timeout(common::WAIT, inf.wait_for_cache_sync()).await;
    assert_eq!(synced, Ok(true));
    // Before any check every handler is flagged: a repeated object reaches both.
    tx.unbounded_send(Ok(WatchEvent::Modified(Arc::new(pod("a", 1)))))
        .unwrap();
    quiet.wait_for(2).await;
    slow.wait_for(2).await;
    settle().await;

    // The first check: no handler due, both unflagged.
    clock.advance(Duration::from_secs(10));
    settle().await;
    // Through the watch (the FIFO is caught up: the direct path): the repeat reaches nobody,
    // the new object both.
    tx.unbounded_send(Ok(WatchEvent::Modified(Arc::new(pod("a", 1)))))
        .unwrap();
    tx.unbounded_send(Ok(WatchEvent::Added(Arc::new(pod("b", 2)))))
        .unwrap();
    quiet.wait_for(3).await;
    slow.wait_for(3).await;
    settle().await;
    // Through a relist (the FIFO's path): a and b unchanged reach nobody, c both.
    tx.unbounded_send(Err(Expired)).unwrap();
    for _ in 0..20 {
        if quiet.len() >= 4 && slow.len() >= 4 {
            break;
        }
        clock.advance(Duration::from_secs(1));
        settle().await;
        let _ = tokio::time::timeout(Duration::from_millis(5), quiet.wait_for_quiet(4)).await;
    }
    quiet.wait_for(4).await;
    slow.wait_for(4).await;
    settle().await;

    for (name, r) in [("quiet", &quiet), ("slow", &slow)] {
        let events = r.events();
        assert_eq!(
            unchanged_updates(&events),
            vec!["a".to_string()],
            "{name}: only the repeat before the first check may arrive ({events:?})"
        );
        let added: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                Event::Added { obj, .. } => Some(obj.name.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(added, ["a", "b", "c"], "{name}: {events:?}");
        assert_eq!(events.len(), 4, "{name}: {events:?}");
    }
    stop.send(()).unwrap();
    tokio::time::timeout(common::WAIT, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
