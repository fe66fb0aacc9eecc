//! What the informer reports through `tracing`: handler panics, slow handlers (a call over
//! 100 ms with more than 1024 notifications waiting, timed on the fake clock), failures to apply a
//! change to the cache. One test per file: it installs the global subscriber.

mod common;

use common::*;
use kcache_core::{Clock, ResourceVersion};
use kcache_indexer::Indexers;
use kcache_informer::{HandlerFuncs, InformerOptions, SharedIndexInformer};
use std::fmt::Debug;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing::{span, Level, Metadata, Subscriber};

type Log = Arc<Mutex<Vec<(Level, String)>>>;

struct Collect(Log, Arc<tokio::sync::watch::Sender<usize>>);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for Collect {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut m = Message(String::new());
        event.record(&mut m);
        self.0
            .lock()
            .unwrap()
            .push((*event.metadata().level(), m.0));
        self.1.send_modify(|n| *n += 1);
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

fn logged(log: &Log, level: Level, text: &str) -> bool {
    log.lock()
        .unwrap()
        .iter()
        .any(|(l, m)| *l == level && m.contains(text))
}

/// Waits (bounded, on the subscriber's notifications) until `text` was logged at `level`.
async fn wait_logged(
    log: &Log,
    events: &mut tokio::sync::watch::Receiver<usize>,
    level: Level,
    text: &str,
) {
    let found = tokio::time::timeout(WAIT, async {
        while !logged(log, level, text) {
            if events.changed().await.is_err() {
                return;
            }
        }
    })
    .await;
    assert!(
        found.is_ok() && logged(log, level, text),
        "{level} {text:?} not logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panics_slow_handlers_and_cache_failures_are_reported() {
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let notify = Arc::new(tokio::sync::watch::Sender::new(0));
    let mut events = notify.subscribe();
    tracing::subscriber::set_global_default(Collect(log.clone(), notify)).unwrap();

    let clock = kcache_core::FakeClock::new();
    // Room for the whole burst in the watch buffer and in the history (an evicted watcher, or a
    // watch opened after the burst from a version already out of the window, would relist after
    // a backoff on the fake clock).
    let src: kcache_memory::MemorySource<Pod> = kcache_memory::MemorySource::with_config(
        kcache_memory::MemoryConfig::new()
            .with_clock(clock.clone())
            .with_watcher_buffer(4096)
            .with_history_window(4096),
    );
    let inf = Arc::new(SharedIndexInformer::with_options(
        src.clone(),
        InformerOptions::new()
            .name("pods")
            .clock(Arc::new(clock.clone()))
            .indexers(Indexers::new().with("refuses-bad", |p: &Pod| {
                if p.name == "bad" {
                    Err("bad pods cannot be indexed".into())
                } else {
                    Ok(vec![])
                }
            })),
    ));

    // A handler that panics on one pod.
    inf.add_event_handler(HandlerFuncs::new().add_func(|p: &Arc<Pod>, _| {
        assert!(p.name != "p0", "handler bug on purpose");
    }))
    .unwrap();

    // A handler whose first call waits for a gate and then takes 200 ms of (fake) time.
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let g = gate.clone();
    let c = clock.clone();
    let first = Mutex::new(true);
    let rec = Recorder::new();
    let r = rec.clone();
    inf.add_event_handler(HandlerFuncs::new().add_func(move |p: &Arc<Pod>, i| {
        if std::mem::replace(&mut *first.lock().unwrap(), false) {
            let (lock, cv) = &*g;
            let mut open = lock.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
            c.advance(Duration::from_millis(200));
        }
        use kcache_informer::ResourceEventHandler;
        r.on_add(p, i);
    }))
    .unwrap();

    let running = run(&inf);
    synced(&inf).await;
    let mut last = ResourceVersion::default();
    for i in 0..1100 {
        last = src
            .create(Pod::new(&format!("p{i}"), i))
            .unwrap()
            .rv
            .clone();
    }
    applied(&inf, &last).await;
    let start = clock.now();
    {
        let (lock, cv) = &*gate;
        *lock.lock().unwrap() = true;
        cv.notify_all();
    }
    rec.wait_for(1100).await;
    assert!(clock.now() - start >= Duration::from_millis(200));

    // An object the cache refuses: reported, and the informer goes on.
    src.create(Pod::new("bad", 0)).unwrap();
    let good = src.create(Pod::new("good", 0)).unwrap();
    applied(&inf, &good.rv).await;
    assert!(inf.indexer().get_by_key("default/good").is_some());
    assert!(inf.indexer().get_by_key("default/bad").is_none());
    wait_logged(&log, &mut events, Level::ERROR, "event handler panicked").await;
    wait_logged(&log, &mut events, Level::WARN, "slow event handler").await;
    wait_logged(
        &log,
        &mut events,
        Level::ERROR,
        "cannot apply a change to the cache",
    )
    .await;
    running.stop().await;
}
