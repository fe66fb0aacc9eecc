//! Relists over a scripted source: deletions the watch missed arrive as tombstones, unchanged
//! objects in a relist are resyncs, changed ones are updates.

mod common;

use common::{Pod, Recorder, WAIT};
use futures::stream;
use kcache_core::{FakeClock, ResourceVersion};
use kcache_informer::{Event, InformerOptions, SharedIndexInformer};
use kcache_reflector::{
    BackendError, ErrorKind, ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream,
};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// Lists come from a script (the last one repeats); the first watch fails as expired (forcing a
/// relist), later ones stay open and silent.
struct Scripted {
    lists: Mutex<VecDeque<(Vec<Pod>, u64)>>,
    watches: AtomicUsize,
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
        if self.watches.fetch_add(1, Ordering::SeqCst) == 0 {
            Ok(Box::pin(stream::once(async { Err(Expired) })))
        } else {
            Ok(Box::pin(stream::pending()))
        }
    }
}

fn pod(name: &str, value: u32, rv: u64) -> Pod {
    let mut p = Pod::new(name, value);
    p.rv = ResourceVersion::from(rv);
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_turns_missed_deletions_into_tombstones_and_changes_into_updates() {
    let clock = FakeClock::new();
    let source = Scripted {
        lists: Mutex::new(VecDeque::from([
            (vec![pod("a", 1, 1), pod("b", 1, 2), pod("c", 1, 3)], 3),
            // b vanished, c changed, a is the same.
            (vec![pod("a", 1, 1), pod("c", 2, 7)], 7),
        ])),
        watches: AtomicUsize::new(0),
    };
    let inf = Arc::new(SharedIndexInformer::with_options(
        source,
        InformerOptions::new().clock(Arc::new(clock.clone())),
    ));
    let rec = Recorder::new();
    inf.add_event_handler(rec.clone()).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let i2 = inf.clone();
    let task = tokio::spawn(async move {
        i2.run(async {
            let _ = stopped.await;
        })
        .await
    });
    // Three initial adds, then the relist (after a backoff on the fake clock): a resync of a,
    // a tombstone for b, an update of c.
    for _ in 0..500 {
        if rec.len() >= 6 {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(10), rec.wait_for_quiet(6)).await;
        clock.advance(Duration::from_secs(1));
    }
    rec.wait_for(6).await;
    let events = rec.events();
    let tail = &events[3..];
    let deleted: Vec<_> = tail
        .iter()
        .filter_map(|e| match e {
            Event::Deleted(d) => Some(d.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0].key().as_str(), "default/b");
    assert!(deleted[0].is_final_state_unknown());
    assert_eq!(
        deleted[0].object().unwrap().value,
        1,
        "the last known state"
    );
    assert!(tail.iter().any(
        |e| matches!(e, Event::Updated { old, new } if new.name == "c" && old.value == 1 && new.value == 2)
    ));
    assert!(tail
        .iter()
        .any(|e| matches!(e, Event::Updated { old, new } if new.name == "a" && old.rv == new.rv)));
    assert!(inf.indexer().get_by_key("default/b").is_none());
    assert_eq!(inf.last_sync_resource_version().as_str(), "7");
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
