//! Behaviour ported from client-go's `tools/cache/controller_test.go` (kubernetes/client-go),
//! rewritten in our words over kcache-memory instead of the fake controller source:
//!
//! - `Example` / `ExampleNewInformer`: a controller that deletes everything that appears and
//!   reports each deletion's key (here through our `Controller`, the key of a deletion coming
//!   from the notification).
//! - `TestUpdate`: concurrent writers each add an object in state "from" then update it to "to"
//!   (final); the handler must only see allowed transitions, and deletes each final object; every
//!   deletion must arrive.
//! - `TestHammerController`: concurrent writers add, update and delete at random; per key, the
//!   handler's notifications must form a valid sequence, and replaying them must give the source.
//!
//! Not ported: `TestPanicPropagated` (client-go re-panics; our handlers and reconciles catch the
//! panic and go on, tested in `controller.rs` and `informer.rs`) and `TestTransformingInformer`
//! (the transform belongs to the informer's own tests).

// The informer's test support (a pod-like object, a memory source on a fake clock, a running informer).
#[path = "../../informer/tests/common/mod.rs"]
mod common;

use common::{informer, run, source, source_view, synced, Pod, WAIT};
use kcache_controller::{Action, Controller};
use kcache_core::ObjectKey;
use kcache_informer::{Event, HandlerFuncs};
use kcache_memory::{MemoryConfig, MemorySource};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_a_controller_that_deletes_everything_it_sees() {
    let (clock, src) = source();
    let pods = informer(&clock, &src, Duration::ZERO);
    let (tx, mut deleted) = mpsc::unbounded_channel();
    let cache = pods.indexer();
    let writer = src.clone();
    let handle = Controller::builder("deleter")
        .workers(2)
        .watches(&pods)
        .build()
        .unwrap()
        .run(move |key: &ObjectKey| {
            if cache.get_by_key(key).is_some() {
                // Present: delete it at the source; its deletion brings the key back.
                let _ = writer.delete(key.as_str());
            } else {
                tx.send(key.to_string()).map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(Action::Done)
        })
        .unwrap();
    let r = run(&pods);
    synced(&pods).await;
    for name in ["a-hello", "b-controller", "c-framework"] {
        src.create(Pod::new(name, 0)).unwrap();
    }
    let mut seen = BTreeSet::new();
    while seen.len() < 3 {
        match tokio::time::timeout(WAIT, deleted.recv()).await {
            Ok(Some(k)) => {
                seen.insert(k);
            }
            other => panic!("missing deletions, have {seen:?}: {other:?}"),
        }
    }
    assert_eq!(
        seen,
        BTreeSet::from([
            "default/a-hello".to_owned(),
            "default/b-controller".to_owned(),
            "default/c-framework".to_owned()
        ])
    );
    assert!(src.list_all().is_empty());
    handle.shutdown();
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_every_transition_is_allowed_and_every_final_object_is_deleted() {
    const THREADS: usize = 3;
    const PER_THREAD: usize = 30;
    let (clock, src) = source();
    let pods = informer(&clock, &src, Duration::ZERO);
    let bad = Arc::new(Mutex::new(Vec::<String>::new()));
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<String>();
    let (b, writer) = (bad.clone(), src.clone());
    // value 1 = "from", value 2 = "to" (final).
    pods.add_event_handler(
        HandlerFuncs::new()
            .update_func(move |old: &Arc<Pod>, new: &Arc<Pod>| {
                let allowed = matches!((old.value, new.value), (1, 2) | (2, 2) | (1, 1));
                if !allowed {
                    b.lock()
                        .unwrap()
                        .push(format!("{}: {} -> {}", new.name, old.value, new.value));
                }
                if new.value == 2 {
                    let _ = writer.delete(&new.key());
                }
            })
            .delete_func(move |d| {
                let _ = done_tx.send(d.key().to_string());
            }),
    )
    .unwrap();
    let r = run(&pods);
    synced(&pods).await;
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let src = src.clone();
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    let name = format!("a-{t}-{i}");
                    src.create(Pod::new(&name, 1)).unwrap();
                    src.update(Pod::new(&name, 2)).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let mut deleted = BTreeSet::new();
    while deleted.len() < THREADS * PER_THREAD {
        match tokio::time::timeout(WAIT, done_rx.recv()).await {
            Ok(Some(k)) => assert!(deleted.insert(k), "a key was deleted twice"),
            other => panic!("only {} deletions: {other:?}", deleted.len()),
        }
    }
    assert!(bad.lock().unwrap().is_empty(), "{:?}", bad.lock().unwrap());
    assert!(src.list_all().is_empty());
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hammer_concurrent_writers_give_valid_per_key_sequences_and_the_source_state() {
    const THREADS: u64 = 3;
    const OPS: u64 = 200;
    // Room for every event in the watcher's buffer and the history: a loaded machine must not
    // turn this into an eviction-and-relist test, whose backoff waits on the (frozen) fake clock.
    let clock = kcache_core::FakeClock::new();
    let src = MemorySource::with_config(
        MemoryConfig::new()
            .with_clock(clock.clone())
            .with_watcher_buffer(1 << 16)
            .with_history_window(1 << 16),
    );
    let pods = informer(&clock, &src, Duration::ZERO);
    let recorder = common::Recorder::new();
    pods.add_event_handler(recorder.clone()).unwrap();
    let r = run(&pods);
    synced(&pods).await;
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let src = src.clone();
            std::thread::spawn(move || {
                let mut state = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut next = move || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state
                };
                for i in 0..OPS {
                    // Each thread works on its own ten names (like client-go's per-thread sets).
                    let name = format!("p-{t}-{}", next() % 10);
                    let value = u32::try_from(i).unwrap_or(0);
                    if src.get(&format!("default/{name}")).is_none() {
                        src.create(Pod::new(&name, value)).unwrap();
                    } else if next() % 2 == 0 {
                        src.update(Pod::new(&name, value)).unwrap();
                    } else {
                        src.delete(&format!("default/{name}")).unwrap();
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    common::applied(&pods, &src.resource_version()).await;
    // Every notification sent so far has been delivered once the handler's view matches.
    let want = source_view(&src);
    let r2 = tokio::time::timeout(WAIT, async {
        loop {
            // Count first: an event landing between the check and the wait is then not missed.
            let n = recorder.len();
            if recorder.view() == want {
                break;
            }
            recorder.wait_for_quiet(n + 1).await;
        }
    })
    .await;
    assert!(r2.is_ok(), "handler view never matched the source");

    // Per key: add, then updates, then delete, then possibly add again …
    let mut present: BTreeMap<String, bool> = BTreeMap::new();
    for e in recorder.events() {
        match e {
            Event::Added { obj, .. } => {
                let was = present.insert(obj.key(), true).unwrap_or(false);
                assert!(!was, "{} added twice without a delete", obj.key());
            }
            Event::Updated { new, .. } => {
                assert!(
                    present.get(&new.key()).copied().unwrap_or(false),
                    "{} updated while absent",
                    new.key()
                );
            }
            Event::Deleted(d) => {
                let was = present.insert(d.key().to_string(), false).unwrap_or(false);
                assert!(was, "{} deleted while absent", d.key());
            }
        }
    }
    r.stop().await;
}
