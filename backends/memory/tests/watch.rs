//! Watches: history replay, expiry, bookmarks, timeouts, watch-list, slow watchers, concurrency.

mod common;

use common::{
    describe, drain, ev, item, ok, ready, rv, source, source_with, watch, watch_from, Item,
};
use futures::StreamExt;
use kcache_memory::{MemoryConfig, MemoryError, MemorySource};
use kcache_reflector::{BackendError, ErrorKind, WatchEvent, WatchOptions};
use std::time::Duration;

fn descriptions(
    events: &[Result<WatchEvent<Item>, MemoryError>],
) -> Vec<(String, String, u32, String)> {
    events.iter().map(describe).collect()
}

#[test]
fn watch_replays_history_after_the_version_then_streams_live_changes() {
    let (s, _) = source();
    ok(s.create(item("a", 1))); // 2
    ok(s.create(item("b", 1))); // 3
    ok(s.update(item("a", 2))); // 4
    ok(s.delete("ns/b")); // 5
    let mut w = watch_from(&s, "3");
    assert_eq!(
        descriptions(&drain(&mut w)),
        [ev("MODIFIED", "ns/a", 2, 4), ev("DELETED", "ns/b", 1, 5)]
    );
    assert!(ready(&mut w).is_none(), "nothing more until a write");
    ok(s.create(item("c", 3))); // 6
    assert_eq!(descriptions(&drain(&mut w)), [ev("ADDED", "ns/c", 3, 6)]);
}

#[test]
fn watch_from_the_current_version_sends_only_later_changes() {
    let (s, _) = source();
    ok(s.create(item("a", 1)));
    let mut w = watch_from(&s, "2");
    assert!(ready(&mut w).is_none());
    ok(s.update(item("a", 2)));
    assert_eq!(descriptions(&drain(&mut w)), [ev("MODIFIED", "ns/a", 2, 3)]);
}

#[test]
fn watch_from_before_the_window_is_expired_at_open() {
    let (s, _) = source_with(MemoryConfig::new().with_history_window(2));
    for i in 0..4 {
        ok(s.create(item(&format!("k{i}"), i))); // 2..=5; oldest servable is 3
    }
    let err = watch(
        &s,
        WatchOptions {
            resource_version: rv("2"),
            ..Default::default()
        },
    )
    .err();
    assert_eq!(
        err,
        Some(MemoryError::Expired {
            requested: rv("2"),
            oldest: rv("3")
        })
    );
    assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::Expired));
    let mut w = watch_from(&s, "3");
    assert_eq!(
        descriptions(&drain(&mut w)),
        [ev("ADDED", "ns/k2", 2, 4), ev("ADDED", "ns/k3", 3, 5)]
    );
    assert_eq!(s.watcher_count(), 1);
}

#[test]
fn watch_from_a_future_version_is_too_large() {
    let (s, _) = source();
    let err = watch(
        &s,
        WatchOptions {
            resource_version: rv("7"),
            ..Default::default()
        },
    )
    .err();
    assert_eq!(
        err.map(|e| e.kind()),
        Some(ErrorKind::TooLargeResourceVersion)
    );
    let bad = watch(
        &s,
        WatchOptions {
            resource_version: rv("x7"),
            ..Default::default()
        },
    )
    .err();
    assert_eq!(bad, Some(MemoryError::InvalidResourceVersion(rv("x7"))));
    assert_eq!(s.watcher_count(), 0);
}

#[test]
fn watch_from_empty_or_zero_starts_with_every_current_object_as_added() {
    let (s, _) = source();
    ok(s.create(item("b", 1)));
    ok(s.create(item("a", 1)));
    ok(s.delete("ns/b"));
    for from in ["", "0"] {
        let mut w = watch_from(&s, from);
        assert_eq!(
            descriptions(&drain(&mut w)),
            [ev("ADDED", "ns/a", 1, 3)],
            "from {from:?}"
        );
    }
}

#[test]
fn bookmarks_arrive_every_interval_of_the_fake_clock() {
    let interval = Duration::from_secs(10);
    let (s, clock) = source_with(MemoryConfig::new().with_bookmark_interval(interval));
    ok(s.create(item("a", 1)));
    let opts = WatchOptions {
        resource_version: rv("2"),
        allow_bookmarks: true,
        ..Default::default()
    };
    let mut w = ok(watch(&s, opts));
    assert!(ready(&mut w).is_none());
    clock.advance(Duration::from_secs(9));
    assert!(ready(&mut w).is_none(), "not before the interval");
    clock.advance(Duration::from_secs(1));
    assert_eq!(descriptions(&drain(&mut w)), [ev("BOOKMARK", "", 0, 2)]);
    ok(s.update(item("a", 2)));
    clock.advance(interval);
    assert_eq!(
        descriptions(&drain(&mut w)),
        [ev("MODIFIED", "ns/a", 2, 3), ev("BOOKMARK", "", 0, 3)],
        "the bookmark follows the buffered event and carries its version"
    );
    clock.advance(interval);
    assert_eq!(descriptions(&drain(&mut w)), [ev("BOOKMARK", "", 0, 3)]);
}

#[test]
fn bookmarks_are_not_sent_unless_allowed() {
    let (s, clock) =
        source_with(MemoryConfig::new().with_bookmark_interval(Duration::from_secs(1)));
    let mut w = watch_from(&s, "1");
    clock.advance(Duration::from_secs(5));
    assert!(ready(&mut w).is_none());
}

#[test]
fn timeout_ends_the_stream_cleanly() {
    let (s, clock) = source();
    let opts = WatchOptions {
        resource_version: rv("1"),
        timeout: Some(Duration::from_secs(30)),
        ..Default::default()
    };
    let mut w = ok(watch(&s, opts));
    ok(s.create(item("a", 1)));
    assert_eq!(descriptions(&drain(&mut w)), [ev("ADDED", "ns/a", 1, 2)]);
    clock.advance(Duration::from_secs(29));
    assert!(ready(&mut w).is_none());
    clock.advance(Duration::from_secs(1));
    assert!(matches!(ready(&mut w), Some(None)), "a clean end, no error");
    assert!(matches!(ready(&mut w), Some(None)));
    assert_eq!(s.watcher_count(), 0);
}

#[test]
fn watch_list_sends_initial_events_then_the_end_bookmark_then_changes() {
    let (s, _) = source();
    ok(s.create(item("b", 1))); // 2
    ok(s.create(item("a", 1))); // 3
    ok(s.update(item("b", 2))); // 4
    for from in ["", "0", "2"] {
        let opts = WatchOptions {
            resource_version: rv(from),
            send_initial_events: true,
            allow_bookmarks: true,
            ..Default::default()
        };
        let mut w = ok(watch(&s, opts));
        let initial = [
            ev("ADDED", "ns/a", 1, 3),
            ev("ADDED", "ns/b", 2, 4),
            ev("BOOKMARK", "END", 0, 4),
        ];
        assert_eq!(descriptions(&drain(&mut w)), initial, "from {from:?}");
    }
    let opts = WatchOptions {
        send_initial_events: true,
        ..Default::default()
    };
    let mut w = ok(watch(&s, opts));
    ok(s.delete("ns/a")); // 5: after the snapshot, so a change, not an initial event
    assert_eq!(
        descriptions(&drain(&mut w)),
        [
            ev("ADDED", "ns/a", 1, 3),
            ev("ADDED", "ns/b", 2, 4),
            ev("BOOKMARK", "END", 0, 4),
            ev("DELETED", "ns/a", 1, 5)
        ]
    );
    let future = WatchOptions {
        resource_version: rv("9"),
        send_initial_events: true,
        ..Default::default()
    };
    assert_eq!(
        watch(&s, future).err().map(|e| e.kind()),
        Some(ErrorKind::TooLargeResourceVersion)
    );
}

#[test]
fn a_slow_watcher_is_evicted_with_expired_and_writers_never_block() {
    let (s, _) = source_with(MemoryConfig::new().with_watcher_buffer(8));
    let mut slow = watch_from(&s, "1");
    let mut other = watch_from(&s, "1");
    let writer = s.clone();
    // A writer thread does far more writes than the buffer holds while nobody reads `slow`;
    // it finishes (joins) on its own.
    let handle = std::thread::spawn(move || {
        for i in 0..100u32 {
            ok(writer.create(item(&format!("k{i:03}"), i)));
        }
    });
    ok(handle.join().map_err(|_| "writer panicked"));
    assert_eq!(
        s.watcher_count(),
        0,
        "evicted watchers are dropped from the source at once"
    );
    assert_eq!(s.pending_events(), 0, "and their buffers released");
    let events = drain(&mut slow);
    assert_eq!(
        events.len(),
        1,
        "its buffer was released: only the error remains"
    );
    let err = events.into_iter().next().and_then(Result::err);
    assert_eq!(err, Some(MemoryError::Evicted { capacity: 8 }));
    assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::Expired));
    assert!(matches!(ready(&mut slow), Some(None)), "then it ends");
    assert!(matches!(
        drain(&mut other).last(),
        Some(Err(MemoryError::Evicted { .. }))
    ));
    // The source itself is intact, and a new watch (after a relist) works.
    assert_eq!(s.len(), 100);
    let mut fresh = watch_from(&s, &s.resource_version().to_string());
    ok(s.update(item("k000", 1)));
    assert_eq!(drain(&mut fresh).len(), 1);
}

#[test]
fn a_watcher_that_keeps_up_is_never_evicted() {
    let (s, _) = source_with(MemoryConfig::new().with_watcher_buffer(4));
    let mut w = watch_from(&s, "1");
    let mut seen = 0;
    for i in 0..50u32 {
        ok(s.create(item(&format!("k{i:03}"), i)));
        if i % 4 == 3 {
            seen += drain(&mut w).iter().filter(|e| e.is_ok()).count();
        }
    }
    seen += drain(&mut w).iter().filter(|e| e.is_ok()).count();
    assert_eq!(seen, 50);
}

#[test]
fn dropping_a_stream_unregisters_its_watcher() {
    let (s, _) = source();
    let w = watch_from(&s, "1");
    let w2 = watch_from(&s, "1");
    assert_eq!(s.watcher_count(), 2);
    drop(w);
    assert_eq!(s.watcher_count(), 1);
    drop(w2);
    assert_eq!(s.watcher_count(), 0);
}

#[test]
fn dropping_the_last_source_handle_ends_open_watches_after_their_events() {
    let (s, _) = source();
    let mut w = watch_from(&s, "1");
    let clone = s.clone();
    drop(s);
    ok(clone.create(item("a", 1)));
    drop(clone);
    assert_eq!(descriptions(&drain(&mut w)), [ev("ADDED", "ns/a", 1, 2)]);
    assert!(matches!(ready(&mut w), Some(None)));
}

#[test]
fn concurrent_writers_from_two_threads_produce_a_gap_free_sequence_in_one_watch() {
    let (s, _) = source_with(MemoryConfig::new().with_watcher_buffer(10_000));
    let mut w = watch_from(&s, "1");
    let threads: Vec<_> = ["x", "y"]
        .into_iter()
        .map(|prefix| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..500u32 {
                    let name = format!("{prefix}{}", i % 10);
                    if s.create(item(&name, i)).is_err() {
                        ok(s.update(item(&name, i)));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        ok(t.join().map_err(|_| "writer panicked"));
    }
    let versions: Vec<u64> = drain(&mut w)
        .iter()
        .map(|e| ok(describe(e).3.parse::<u64>()))
        .collect();
    let expected: Vec<u64> = (2..=1001).collect();
    assert_eq!(versions, expected);
}

#[tokio::test]
async fn a_waiting_watch_wakes_on_a_write_from_another_task() {
    let s: MemorySource<Item> = MemorySource::new();
    let mut w = watch_from(&s, "1");
    let writer = s.clone();
    let task = tokio::spawn(async move {
        tokio::task::yield_now().await;
        ok(writer.create(item("a", 1)));
    });
    let first = w.next().await;
    assert_eq!(
        first.as_ref().map(describe),
        Some(ev("ADDED", "ns/a", 1, 2))
    );
    ok(task.await);
}

#[tokio::test]
async fn a_waiting_watch_wakes_for_bookmarks_and_timeout_on_the_fake_clock() {
    let (s, clock) =
        source_with(MemoryConfig::new().with_bookmark_interval(Duration::from_secs(5)));
    let opts = WatchOptions {
        resource_version: rv("1"),
        allow_bookmarks: true,
        timeout: Some(Duration::from_secs(12)),
        ..Default::default()
    };
    let mut w = ok(watch(&s, opts));
    let reader = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(e) = w.next().await {
            seen.push(describe(&e));
        }
        seen
    });
    for _ in 0..3 {
        tokio::task::yield_now().await;
        clock.advance(Duration::from_secs(5));
        tokio::task::yield_now().await;
    }
    let seen = ok(reader.await);
    assert_eq!(seen, [ev("BOOKMARK", "", 0, 1), ev("BOOKMARK", "", 0, 1)]);
}
