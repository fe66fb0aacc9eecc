//! The informer's rules, one test each, over kcache-memory on a fake clock.

mod common;

use common::*;
use kcache_core::ResourceVersion;
use kcache_indexer::Indexers;
use kcache_informer::{
    BufferMode, Event, HandlerFuncs, HandlerOptions, InformerError, ResourceVersionError,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const S: Duration = Duration::from_secs(1);

fn added(e: &Event<Pod>) -> Option<(String, bool)> {
    match e {
        Event::Added {
            obj,
            is_in_initial_list,
        } => Some((obj.name.clone(), *is_in_initial_list)),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_list_reaches_handlers_as_initial_adds_and_the_registration_syncs() {
    let (clock, src) = source();
    for (i, n) in ["a", "b", "c"].iter().enumerate() {
        src.create(Pod::new(n, i as u32)).unwrap();
    }
    let inf = informer(&clock, &src, Duration::ZERO);
    let rec = Recorder::new();
    let reg = inf.add_event_handler(rec.clone()).unwrap();
    assert!(!reg.has_synced());
    let running = run(&inf);
    synced(&inf).await;
    assert!(tokio::time::timeout(WAIT, reg.synced()).await.unwrap());
    let mut adds: Vec<_> = rec.events().iter().filter_map(added).collect();
    adds.sort();
    assert_eq!(
        adds,
        [("a".into(), true), ("b".into(), true), ("c".into(), true)]
    );
    assert_eq!(inf.indexer().len(), 3);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watched_changes_arrive_as_add_update_delete_in_order() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, Duration::ZERO);
    let rec = Recorder::new();
    inf.add_event_handler(rec.clone()).unwrap();
    let running = run(&inf);
    synced(&inf).await;
    src.create(Pod::new("a", 1)).unwrap();
    src.update(Pod::new("a", 2)).unwrap();
    src.delete("default/a").unwrap();
    rec.wait_for(3).await;
    let ev = rec.events();
    assert_eq!(added(&ev[0]), Some(("a".into(), false)));
    assert!(matches!(&ev[1], Event::Updated { old, new } if old.value == 1 && new.value == 2));
    assert!(
        matches!(&ev[2], Event::Deleted(d) if !d.is_final_state_unknown() && d.object().unwrap().value == 2)
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_is_written_before_handlers_hear_of_a_change() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, Duration::ZERO);
    let cache = inf.indexer();
    let (c1, c2) = (cache.clone(), cache);
    // What the cache held when the handler was called: (add saw it, delete saw it gone).
    let seen = Recorder::new();
    let (s1, s2) = (seen.clone(), seen.clone());
    let in_cache = Arc::new(Mutex::new(Vec::new()));
    let (i1, i2) = (in_cache.clone(), in_cache.clone());
    inf.add_event_handler(
        HandlerFuncs::new()
            .add_func(move |p: &Arc<Pod>, i| {
                i1.lock().unwrap().push(c1.get_by_key(&p.key()).is_some());
                use kcache_informer::ResourceEventHandler;
                s1.on_add(p, i);
            })
            .delete_func(move |d| {
                i2.lock().unwrap().push(c2.get_by_key(d.key()).is_none());
                use kcache_informer::ResourceEventHandler;
                s2.on_delete(d);
            }),
    )
    .unwrap();
    let running = run(&inf);
    synced(&inf).await;
    // One change at a time, so the cache cannot have moved on when the handler looks.
    src.create(Pod::new("a", 1)).unwrap();
    seen.wait_for(1).await;
    src.delete("default/a").unwrap();
    seen.wait_for(2).await;
    running.stop().await;
    assert_eq!(*in_cache.lock().unwrap(), [true, true]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_handler_gets_a_replay_and_its_has_synced_waits_for_the_replay() {
    let (clock, src) = source();
    for n in ["a", "b", "c", "d"] {
        src.create(Pod::new(n, 0)).unwrap();
    }
    let inf = informer(&clock, &src, Duration::ZERO);
    let running = run(&inf);
    synced(&inf).await;

    let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let g = gate.clone();
    let rec = Recorder::new();
    let r = rec.clone();
    let reg = inf
        .add_event_handler(HandlerFuncs::new().add_func(move |p: &Arc<Pod>, initial| {
            let (lock, cv) = &*g;
            let mut open = lock.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
            use kcache_informer::ResourceEventHandler;
            r.on_add(p, initial);
        }))
        .unwrap();
    // The informer has synced, but this handler has not received its replay.
    assert!(inf.has_synced());
    assert!(!reg.has_synced());
    // Four replayed adds: three or four still queued (one may be in flight).
    assert!(
        (3..=4).contains(&reg.pending()),
        "pending {}",
        reg.pending()
    );
    {
        let (lock, cv) = &*gate;
        *lock.lock().unwrap() = true;
        cv.notify_all();
    }
    assert!(tokio::time::timeout(WAIT, reg.synced()).await.unwrap());
    assert_eq!(rec.len(), 4);
    assert!(rec
        .events()
        .iter()
        .all(|e| matches!(added(e), Some((_, true)))));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_and_settings_after_the_start_are_typed_errors() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, Duration::ZERO);
    let running = run(&inf);
    synced(&inf).await;
    assert!(matches!(
        inf.run(async {}).await,
        Err(InformerError::AlreadyStarted)
    ));
    assert!(matches!(
        inf.set_transform(|p: Arc<Pod>| Ok::<_, std::convert::Infallible>(p)),
        Err(InformerError::AlreadyStarted)
    ));
    assert!(matches!(
        inf.set_watch_error_handler(|_| {}),
        Err(InformerError::AlreadyStarted)
    ));
    running.stop().await;
    assert!(inf.is_stopped());
    assert!(matches!(
        inf.add_event_handler(Recorder::new()),
        Err(InformerError::Stopped)
    ));
    assert!(matches!(
        inf.add_indexers(Indexers::new()),
        Err(InformerError::Stopped)
    ));
    assert!(matches!(
        inf.run(async {}).await,
        Err(InformerError::AlreadyStarted)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transform_runs_once_per_received_object_before_the_cache() {
    let (clock, src) = source();
    src.create(Pod::new("a", 1)).unwrap();
    let inf = informer(&clock, &src, Duration::ZERO);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    inf.set_transform(move |p: Arc<Pod>| {
        c.fetch_add(1, Ordering::SeqCst);
        let mut p = (*p).clone();
        p.value += 100;
        Ok::<_, std::convert::Infallible>(Arc::new(p))
    })
    .unwrap();
    let rec = Recorder::new();
    inf.add_event_handler(rec.clone()).unwrap();
    let running = run(&inf);
    synced(&inf).await;
    let b = src.create(Pod::new("b", 2)).unwrap();
    applied(&inf, &b.rv).await;
    rec.wait_for(2).await;
    assert_eq!(inf.indexer().get_by_key("default/a").unwrap().value, 101);
    assert_eq!(inf.indexer().get_by_key("default/b").unwrap().value, 102);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(rec.events().iter().all(|e| e.object().unwrap().value > 100));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_is_isolated_and_its_notification_counts_as_delivered() {
    let (clock, src) = source();
    src.create(Pod::new("boom", 0)).unwrap();
    src.create(Pod::new("fine", 0)).unwrap();
    let inf = informer(&clock, &src, Duration::ZERO);
    let survivor = Recorder::new();
    let s = survivor.clone();
    let panicky = inf
        .add_event_handler(HandlerFuncs::new().add_func(move |p: &Arc<Pod>, initial| {
            assert!(p.name != "boom", "handler bug on purpose");
            use kcache_informer::ResourceEventHandler;
            s.on_add(p, initial);
        }))
        .unwrap();
    let other = Recorder::new();
    let other_reg = inf.add_event_handler(other.clone()).unwrap();
    let running = run(&inf);
    synced(&inf).await;
    assert!(tokio::time::timeout(WAIT, panicky.synced()).await.unwrap());
    assert!(tokio::time::timeout(WAIT, other_reg.synced())
        .await
        .unwrap());
    other.wait_for(2).await;
    // The panicking handler goes on with later notifications.
    src.create(Pod::new("later", 0)).unwrap();
    survivor.wait_for(2).await;
    let names: Vec<_> = survivor
        .events()
        .iter()
        .filter_map(added)
        .map(|a| a.0)
        .collect();
    assert!(names.contains(&"fine".to_string()) && names.contains(&"later".to_string()));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_handler_receives_nothing_more() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, Duration::ZERO);
    let gone = Recorder::new();
    let stays = Recorder::new();
    let reg = inf.add_event_handler(gone.clone()).unwrap();
    inf.add_event_handler(stays.clone()).unwrap();
    let running = run(&inf);
    synced(&inf).await;
    src.create(Pod::new("a", 0)).unwrap();
    gone.wait_for(1).await;
    assert!(reg.resync_period().is_some());
    tokio::task::block_in_place(|| reg.remove_and_wait()).unwrap();
    assert!(reg.is_removed());
    assert!(!reg.remove(), "a second remove finds nothing");
    assert_eq!(reg.resync_period(), None);
    src.create(Pod::new("b", 0)).unwrap();
    stays.wait_for(2).await;
    assert_eq!(gone.len(), 1);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_removed_mid_call_gets_none_of_its_queued_notifications() {
    let (clock, src) = source();
    for i in 0..10 {
        src.create(Pod::new(&format!("p{i}"), 0)).unwrap();
    }
    let inf = informer(&clock, &src, Duration::ZERO);
    // The first call blocks until the gate opens; the other nine initial adds wait in the
    // handler's buffer meanwhile.
    let gate = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let (g, c) = (gate.clone(), calls.clone());
    let reg = inf
        .add_event_handler(HandlerFuncs::new().add_func(move |_: &Arc<Pod>, _| {
            if c.fetch_add(1, Ordering::SeqCst) == 0 {
                let (lock, cv) = &*g;
                let mut open = lock.lock().unwrap();
                while !*open {
                    open = cv.wait(open).unwrap();
                }
            }
        }))
        .unwrap();
    let running = run(&inf);
    synced(&inf).await;
    tokio::time::timeout(WAIT, async {
        while calls.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
    assert!(reg.remove());
    {
        let (lock, cv) = &*gate;
        *lock.lock().unwrap() = true;
        cv.notify_all();
    }
    tokio::task::block_in_place(|| reg.remove_and_wait()).unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "only the call in progress finished"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_yields_the_notifications_and_ends_at_stop() {
    use futures::StreamExt;
    let (clock, src) = source();
    src.create(Pod::new("a", 0)).unwrap();
    let inf = informer(&clock, &src, Duration::ZERO);
    let mut stream = inf.event_stream().unwrap();
    let running = run(&inf);
    let first = tokio::time::timeout(WAIT, stream.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(added(&first), Some(("a".into(), true)));
    assert!(tokio::time::timeout(WAIT, stream.registration().synced())
        .await
        .unwrap());
    src.update(Pod::new("a", 1)).unwrap();
    let second = tokio::time::timeout(WAIT, stream.next())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(second, Event::Updated { ref new, .. } if new.value == 1));
    running.stop().await;
    assert!(tokio::time::timeout(WAIT, stream.next())
        .await
        .unwrap()
        .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resyncs_reach_only_the_handlers_whose_period_elapsed() {
    let (clock, src) = source();
    src.create(Pod::new("a", 0)).unwrap();
    src.create(Pod::new("b", 0)).unwrap();
    let inf = informer(&clock, &src, 10 * S);
    let due = Recorder::new();
    let never = Recorder::new();
    let due_reg = inf.add_event_handler(due.clone()).unwrap();
    let never_reg = inf
        .add_event_handler_with_resync(never.clone(), Duration::ZERO)
        .unwrap();
    assert_eq!(due_reg.resync_period(), Some(10 * S));
    assert_eq!(never_reg.resync_period(), Some(Duration::ZERO));
    let running = run(&inf);
    synced(&inf).await;
    due.wait_for(2).await;
    never.wait_for(2).await;
    // Advance in steps until the resync has reached the due handler.
    for _ in 0..200 {
        if due.len() >= 4 {
            break;
        }
        clock.advance(S);
        let _ = tokio::time::timeout(Duration::from_millis(20), due.wait_for_quiet(4)).await;
    }
    due.wait_for(4).await;
    for e in &due.events()[2..4] {
        assert!(
            matches!(e, Event::Updated { old, new } if old.rv == new.rv),
            "{e:?}"
        );
    }
    // Both handlers' buffers were filled under one lock: the other one got nothing.
    assert_eq!(never.len() + never_reg.pending(), 2);
    running.stop().await;
}

#[tokio::test]
async fn resync_periods_follow_client_go_rounding_rules() {
    let (clock, src) = source();
    // Before the start: below 1 s is raised to 1 s and lowers the check period.
    let inf = informer(&clock, &src, 10 * S);
    let slow = inf.add_event_handler(Recorder::new()).unwrap();
    let fast = inf
        .add_event_handler_with_resync(Recorder::new(), Duration::from_millis(300))
        .unwrap();
    let none = inf
        .add_event_handler_with_resync(Recorder::new(), Duration::ZERO)
        .unwrap();
    assert_eq!(fast.resync_period(), Some(S));
    assert_eq!(slow.resync_period(), Some(10 * S));
    assert_eq!(none.resync_period(), Some(Duration::ZERO));

    // An informer without resync ignores handlers' periods.
    let off = informer(&clock, &src, Duration::ZERO);
    let ignored = off
        .add_event_handler_with_resync(Recorder::new(), 5 * S)
        .unwrap();
    assert_eq!(ignored.resync_period(), Some(Duration::ZERO));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_start_a_short_period_is_raised_to_the_check_period() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, 10 * S);
    let running = run(&inf);
    synced(&inf).await;
    let late = inf
        .add_event_handler_with_resync(Recorder::new(), 3 * S)
        .unwrap();
    assert_eq!(late.resync_period(), Some(10 * S));
    let longer = inf
        .add_event_handler_with_resync(Recorder::new(), 30 * S)
        .unwrap();
    assert_eq!(longer.resync_period(), Some(30 * S));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_resource_version_resolves_once_the_write_is_cached() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, Duration::ZERO);
    let running = run(&inf);
    synced(&inf).await;
    let mut last = None;
    for i in 0..20 {
        last = Some(src.create(Pod::new(&format!("p{i}"), i)).unwrap());
    }
    let last = last.unwrap();
    applied(&inf, &last.rv).await;
    assert_eq!(inf.indexer().get_by_key(&last.key()).unwrap().rv, last.rv);
    assert_eq!(inf.indexer().len(), 20);
    assert_eq!(
        inf.wait_for_resource_version(&ResourceVersion::from("abc"))
            .await,
        Err(ResourceVersionError::NotNumeric("abc".into()))
    );
    running.stop().await;
    assert_eq!(
        inf.wait_for_resource_version(&ResourceVersion::from(u64::MAX))
            .await,
        Err(ResourceVersionError::Stopped)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_can_be_added_to_a_running_informer() {
    let (clock, src) = source();
    src.create(Pod::new("a", 7)).unwrap();
    let inf = informer(&clock, &src, Duration::ZERO);
    let running = run(&inf);
    synced(&inf).await;
    inf.add_indexers(Indexers::new().with("by-value", |p: &Pod| Ok(vec![p.value.to_string()])))
        .unwrap();
    assert_eq!(inf.indexer().by_index("by-value", "7").unwrap().len(), 1);
    assert!(matches!(
        inf.add_indexers(Indexers::new().with("by-value", |_: &Pod| Ok(vec![]))),
        Err(InformerError::Indexers(_))
    ));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_coalescing_handler_holds_at_most_one_notification_per_key() {
    const KEYS: usize = 5;
    let (clock, src) = source();
    let inf = informer(&clock, &src, Duration::ZERO);
    let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let g = gate.clone();
    let rec = Recorder::new();
    let r = rec.clone();
    let block = move || {
        let (lock, cv) = &*g;
        let mut open = lock.lock().unwrap();
        while !*open {
            open = cv.wait(open).unwrap();
        }
    };
    let (b1, b2, b3) = (block.clone(), block.clone(), block);
    let (r1, r2, r3) = (r.clone(), r.clone(), r);
    use kcache_informer::ResourceEventHandler;
    let reg = inf
        .add_event_handler_with_options(
            HandlerFuncs::new()
                .add_func(move |p: &Arc<Pod>, i| {
                    b1();
                    r1.on_add(p, i)
                })
                .update_func(move |o, n| {
                    b2();
                    r2.on_update(o, n)
                })
                .delete_func(move |d| {
                    b3();
                    r3.on_delete(d)
                }),
            HandlerOptions::new().buffer_mode(BufferMode::Coalescing),
        )
        .unwrap();
    let running = run(&inf);
    synced(&inf).await;
    let mut last = ResourceVersion::default();
    for round in 0..40u32 {
        for k in 0..KEYS {
            let name = format!("k{k}");
            let p = if round == 0 {
                src.create(Pod::new(&name, round))
            } else if round % 13 == 0 {
                src.delete(&format!("default/{name}"))
            } else if round % 13 == 1 && round > 1 {
                src.create(Pod::new(&name, round))
            } else {
                src.update(Pod::new(&name, round))
            };
            last = p.unwrap().rv.clone();
        }
        assert!(
            reg.pending() <= KEYS,
            "pending {} > {KEYS} keys",
            reg.pending()
        );
    }
    applied(&inf, &last).await;
    assert!(
        reg.pending() <= KEYS,
        "pending {} > {KEYS} keys",
        reg.pending()
    );
    {
        let (lock, cv) = &*gate;
        *lock.lock().unwrap() = true;
        cv.notify_all();
    }
    let want = source_view(&src);
    let r = tokio::time::timeout(WAIT, async {
        loop {
            // Count first: an event landing between the check and the wait is then not missed.
            let n = rec.len();
            if rec.view() == want && reg.pending() == 0 {
                break;
            }
            rec.wait_for_quiet(n + 1).await;
        }
    })
    .await;
    assert!(
        r.is_ok(),
        "handler view {:?} != source {want:?}",
        rec.view()
    );
    assert!(
        rec.len() < 40 * KEYS,
        "coalescing delivered {} notifications",
        rec.len()
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_buffer_keeps_every_notification_and_reports_its_backlog() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, Duration::ZERO);
    let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let g = gate.clone();
    let rec = Recorder::new();
    let r = rec.clone();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let entered_tx = Mutex::new(entered_tx);
    let reg = inf
        .add_event_handler(
            HandlerFuncs::new()
                .add_func(move |_: &Arc<Pod>, _| {
                    let _ = entered_tx.lock().unwrap().send(());
                    let (lock, cv) = &*g;
                    let mut open = lock.lock().unwrap();
                    while !*open {
                        open = cv.wait(open).unwrap();
                    }
                })
                .update_func(move |o: &Arc<Pod>, n| {
                    use kcache_informer::ResourceEventHandler;
                    r.on_update(o, n);
                }),
        )
        .unwrap();
    let running = run(&inf);
    synced(&inf).await;
    src.create(Pod::new("a", 0)).unwrap();
    let mut last = ResourceVersion::default();
    for v in 1..=10 {
        last = src.update(Pod::new("a", v)).unwrap().rv.clone();
    }
    applied(&inf, &last).await;
    tokio::task::block_in_place(|| entered_rx.recv_timeout(WAIT)).unwrap();
    assert_eq!(reg.pending(), 10, "the add in flight, ten updates waiting");
    {
        let (lock, cv) = &*gate;
        *lock.lock().unwrap() = true;
        cv.notify_all();
    }
    rec.wait_for(10).await;
    let values: Vec<u32> = rec
        .events()
        .iter()
        .map(|e| e.object().unwrap().value)
        .collect();
    assert_eq!(values, (1..=10).collect::<Vec<_>>());
    assert_eq!(reg.pending(), 0);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_cache_sync_is_false_when_the_informer_stops_before_syncing() {
    use kcache_reflector::{FaultInjector, FaultPlan};
    let (clock, src) = source();
    let failing = FaultInjector::with_clock(
        src,
        FaultPlan {
            list_error: 1.0,
            ..FaultPlan::default()
        },
        Arc::new(clock.clone()),
    );
    // Lists, not streams (the memory source's default): every list fails.
    let inf = Arc::new(kcache_informer::SharedIndexInformer::with_options(
        failing,
        kcache_informer::InformerOptions::new()
            .clock(Arc::new(clock.clone()))
            .streaming_initial_list(false),
    ));
    let (err_tx, mut err_rx) = tokio::sync::mpsc::unbounded_channel();
    inf.set_watch_error_handler(move |e| {
        let _ = err_tx.send(e.to_string());
    })
    .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let i2 = inf.clone();
    let task = tokio::spawn(async move {
        i2.run(async {
            let _ = rx.await;
        })
        .await
    });
    let waiter = {
        let inf = inf.clone();
        tokio::spawn(async move { inf.wait_for_cache_sync().await })
    };
    // Two failed lists: the second one after a backoff on the fake clock.
    for _ in 0..2 {
        let mut got = None;
        for _ in 0..200 {
            if let Ok(e) = tokio::time::timeout(Duration::from_millis(10), err_rx.recv()).await {
                got = e;
                break;
            }
            clock.advance(S);
        }
        assert!(
            got.is_some_and(|e| e.contains("list")),
            "the watch error handler saw a list error"
        );
    }
    assert!(!inf.has_synced());
    tx.send(()).unwrap();
    tokio::time::timeout(WAIT, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(!tokio::time::timeout(WAIT, waiter).await.unwrap().unwrap());
}
