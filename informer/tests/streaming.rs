//! Streaming lists (watch-list) as the default where the source serves them: the memory source
//! is streamed, not listed; a source that refuses the stream is listed instead; a streamed list
//! that repeats a key reaches the cache and the handlers once per key (the last object); and a
//! streamed relist, handed to the informer in pages as it arrives, stays invisible until its end
//! bookmark and is then swapped in whole.

mod common;

use common::{source, Pod, Recorder, WAIT};
use futures::{stream, StreamExt};
use kcache_core::{FakeClock, ObjectAccessor, ResourceVersion};
use kcache_informer::{
    CacheReader, DeletedObject, Event, InformerOptions, ResourceEventHandler, SharedIndexInformer,
};
use kcache_memory::{MemoryError, MemorySource};
use kcache_reflector::{
    BackendError, Bookmark, ErrorKind, ListOptions, ListPage, ListWatcher, WatchEvent,
    WatchOptions, WatchStream,
};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::watch;

/// The memory source, counting the calls it gets; `refuse` makes it answer every streaming
/// watch with an error, as a server without watch-list does.
struct Counting {
    inner: MemorySource<Pod>,
    refuse: bool,
    lists: AtomicUsize,
    streams: AtomicUsize,
}

impl Counting {
    fn new(inner: MemorySource<Pod>, refuse: bool) -> Self {
        Self {
            inner,
            refuse,
            lists: AtomicUsize::new(0),
            streams: AtomicUsize::new(0),
        }
    }
}

impl ListWatcher<Pod> for Counting {
    type Error = MemoryError;

    async fn list(&self, opts: &ListOptions) -> Result<ListPage<Pod>, MemoryError> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list(opts).await
    }

    async fn watch(
        &self,
        opts: &WatchOptions,
    ) -> Result<WatchStream<Pod, MemoryError>, MemoryError> {
        if opts.send_initial_events {
            self.streams.fetch_add(1, Ordering::SeqCst);
            if self.refuse {
                return Err(MemoryError::InvalidContinueToken(
                    "sendInitialEvents is not supported".into(),
                ));
            }
        }
        self.inner.watch(opts).await
    }

    fn supports_watch_list(&self) -> bool {
        self.inner.supports_watch_list()
    }
}

fn informer_over<L: ListWatcher<Pod>>(
    lw: L,
    clock: &FakeClock,
) -> Arc<SharedIndexInformer<Pod, L>> {
    Arc::new(SharedIndexInformer::with_options(
        lw,
        InformerOptions::new().clock(Arc::new(clock.clone())),
    ))
}

fn start<L: ListWatcher<Pod>>(
    inf: &Arc<SharedIndexInformer<Pod, L>>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let i2 = inf.clone();
    let task = tokio::spawn(async move {
        i2.run(async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    (stop, task)
}

/// Advances the fake clock (past backoffs) until `done`, bounded.
async fn until(clock: &FakeClock, mut done: impl FnMut() -> bool) {
    for _ in 0..4000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        clock.advance(Duration::from_millis(500));
    }
    panic!("never happened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_source_is_streamed_by_default_not_listed() {
    let (clock, src) = source();
    for name in ["a", "b", "c"] {
        src.create(Pod::new(name, 1)).unwrap();
    }
    let counting = Arc::new(Counting::new(src.clone(), false));
    let inf = informer_over(counting.clone(), &clock);
    let (stop, task) = start(&inf);
    tokio::time::timeout(WAIT, inf.wait_for_cache_sync())
        .await
        .unwrap();
    assert_eq!(inf.indexer().len(), 3);
    assert_eq!(counting.lists.load(Ordering::SeqCst), 0, "no list call");
    assert_eq!(
        counting.streams.load(Ordering::SeqCst),
        1,
        "one streaming watch"
    );
    // The stream goes on as the watch.
    let w = src.create(Pod::new("d", 1)).unwrap();
    tokio::time::timeout(WAIT, inf.wait_for_resource_version(&w.rv))
        .await
        .unwrap()
        .unwrap();
    assert!(inf.indexer().get_by_key("default/d").is_some());
    assert_eq!(counting.lists.load(Ordering::SeqCst), 0);
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_refuses_the_stream_is_listed_instead() {
    let (clock, src) = source();
    for name in ["a", "b"] {
        src.create(Pod::new(name, 1)).unwrap();
    }
    let counting = Arc::new(Counting::new(src.clone(), true));
    let inf = informer_over(counting.clone(), &clock);
    let (errors_tx, mut errors) = tokio::sync::mpsc::unbounded_channel();
    inf.set_watch_error_handler(move |e| {
        let _ = errors_tx.send(e.to_string());
    })
    .unwrap();
    let (stop, task) = start(&inf);
    tokio::time::timeout(WAIT, inf.wait_for_cache_sync())
        .await
        .unwrap();
    assert_eq!(inf.indexer().len(), 2);
    assert_eq!(
        counting.streams.load(Ordering::SeqCst),
        1,
        "the stream was tried"
    );
    assert_eq!(counting.lists.load(Ordering::SeqCst), 1, "then the list");
    let refused = errors.recv().await.unwrap();
    assert!(refused.contains("watch"), "{refused}");
    // The watch after the list works as ever.
    let w = src.create(Pod::new("c", 1)).unwrap();
    tokio::time::timeout(WAIT, inf.wait_for_resource_version(&w.rv))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(inf.indexer().len(), 3);
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
}

#[derive(Debug, thiserror::Error)]
#[error("scripted source: {0:?}")]
struct Failure(ErrorKind);

impl BackendError for Failure {
    fn kind(&self) -> ErrorKind {
        self.0
    }
}

fn pod(name: &str, value: u32, rv: u64) -> Arc<Pod> {
    let mut p = Pod::new(name, value);
    p.rv = ResourceVersion::from(rv);
    Arc::new(p)
}

fn end(rv: u64) -> Result<WatchEvent<Pod>, Failure> {
    Ok(WatchEvent::Bookmark(Bookmark {
        resource_version: rv.into(),
        initial_events_end: true,
    }))
}

/// Serves streaming watches only, each from the next scripted stream (after which a watch stays
/// open and silent); a list is a test failure.
#[derive(Default)]
struct Streams {
    streams: Mutex<VecDeque<WatchStream<Pod, Failure>>>,
}

impl Streams {
    fn push(
        &self,
        s: impl futures::Stream<Item = Result<WatchEvent<Pod>, Failure>> + Send + 'static,
    ) {
        self.streams.lock().unwrap().push_back(Box::pin(s));
    }
}

impl ListWatcher<Pod> for Streams {
    type Error = Failure;

    async fn list(&self, _: &ListOptions) -> Result<ListPage<Pod>, Failure> {
        panic!("a source that streams is not listed");
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchStream<Pod, Failure>, Failure> {
        assert!(
            opts.send_initial_events,
            "every watch here is a streaming list"
        );
        let next = self.streams.lock().unwrap().pop_front();
        Ok(next.unwrap_or_else(|| Box::pin(stream::pending())))
    }

    fn supports_watch_list(&self) -> bool {
        true
    }
}

fn told(events: &[Event<Pod>]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            Event::Added { obj, .. } => format!("+{}@{}", obj.name, obj.rv),
            Event::Updated { new, .. } => format!("~{}@{}", new.name, new.rv),
            Event::Deleted(d) => format!("-{}", d.key().as_str()),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_repeated_by_the_initial_events_reaches_the_cache_and_handlers_once() {
    let streams = Streams::default();
    // a twice, c added then deleted: the list is b@2 and a@3, each told once.
    streams.push(
        stream::iter(vec![
            Ok(WatchEvent::Added(pod("a", 1, 1))),
            Ok(WatchEvent::Added(pod("b", 1, 2))),
            Ok(WatchEvent::Added(pod("a", 2, 3))),
            Ok(WatchEvent::Added(pod("c", 1, 4))),
            Ok(WatchEvent::Deleted(pod("c", 1, 5))),
            end(5),
        ])
        .chain(stream::pending()),
    );
    let clock = FakeClock::new();
    let inf = informer_over(streams, &clock);
    let rec = Recorder::new();
    inf.add_event_handler(rec.clone()).unwrap();
    let (stop, task) = start(&inf);
    tokio::time::timeout(WAIT, inf.wait_for_cache_sync())
        .await
        .unwrap();
    rec.wait_for(2).await;
    let cache = inf.indexer();
    assert_eq!(cache.len(), 2);
    assert_eq!(cache.get_by_key("default/a").map(|p| p.value), Some(2));
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
    assert_eq!(told(&rec.events()), ["+b@2", "+a@3"]);
}

/// Objects `0..n` of a state: name `p{i}`, `value`, version `rv0 + i`.
fn state(n: u32, skip: impl Fn(u32) -> bool, value: u32, rv0: u64) -> Vec<Arc<Pod>> {
    (0..n)
        .filter(|&i| !skip(i))
        .map(|i| pod(&format!("p{i:04}"), value, rv0 + u64::from(i)))
        .collect()
}

fn names_and_values(list: &[Arc<Pod>]) -> Vec<(String, u32)> {
    let mut v: Vec<_> = list.iter().map(|p| (p.name.clone(), p.value)).collect();
    v.sort();
    v
}

/// What a handler was told, with the cache (names and values) it read inside the call.
type Read = (String, Vec<(String, u32)>);

/// Reads the whole cache inside every notification.
struct Reader {
    cache: Arc<OnceLock<CacheReader<Pod, ObjectAccessor>>>,
    reads: Arc<Mutex<Vec<Read>>>,
}

impl Reader {
    fn read(&self, what: String) {
        let held = self
            .cache
            .get()
            .map(|c| names_and_values(&c.list()))
            .unwrap_or_default();
        self.reads.lock().unwrap().push((what, held));
    }
}

impl ResourceEventHandler<Pod> for Reader {
    fn on_add(&self, obj: &Arc<Pod>, _: bool) {
        self.read(format!("+{}", obj.name));
    }
    fn on_update(&self, _: &Arc<Pod>, new: &Arc<Pod>) {
        self.read(format!("~{}", new.name));
    }
    fn on_delete(&self, obj: &DeletedObject<Pod>) {
        self.read(format!("-{}", obj.key().as_str()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_relist_is_invisible_until_its_end_bookmark_then_swapped_in_whole() {
    const N: u32 = 1200;
    const HELD_AFTER: usize = 700;
    let old = state(N, |_| false, 1, 1);
    // The relist: every third object gone, every other changed, 100 new ones.
    let new: Vec<Arc<Pod>> = state(N + 100, |i| i % 3 == 0 && i < N, 2, 10_000);
    let streams = Streams::default();
    let mut first: Vec<_> = old
        .iter()
        .cloned()
        .map(|p| Ok(WatchEvent::Added(p)))
        .collect();
    first.push(end(5000));
    // The first stream fails after its list: the informer lists again by streaming.
    first.push(Err(Failure(ErrorKind::Other)));
    streams.push(stream::iter(first));
    // The relist stops after HELD_AFTER initial events (more than a page) until `release`.
    let (release, released) = watch::channel(false);
    let passed = Arc::new(AtomicUsize::new(0));
    let counted = passed.clone();
    let mut events = new
        .iter()
        .cloned()
        .map(|p| Ok::<_, Failure>(WatchEvent::Added(p)));
    let head: Vec<_> = events.by_ref().take(HELD_AFTER).collect();
    let tail: Vec<_> = events.collect();
    let gate = stream::once(async move {
        let mut open = released;
        let _ = open.wait_for(|o| *o).await;
    })
    .filter_map(|()| async { None });
    streams.push(
        stream::iter(head)
            .inspect(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
            })
            .chain(gate)
            .chain(stream::iter(tail))
            .chain(stream::iter(vec![end(20_000)]))
            .chain(stream::pending()),
    );
    let clock = FakeClock::new();
    let inf = informer_over(streams, &clock);
    let reader = Reader {
        cache: Arc::new(OnceLock::new()),
        reads: Arc::new(Mutex::new(Vec::new())),
    };
    reader.cache.set(inf.indexer()).ok().unwrap();
    let reads = reader.reads.clone();
    inf.add_event_handler(reader).unwrap();
    let (stop, task) = start(&inf);
    tokio::time::timeout(WAIT, inf.wait_for_resource_version(&"5000".into()))
        .await
        .unwrap()
        .unwrap();
    until(&clock, || reads.lock().unwrap().len() >= N as usize).await;
    let old_view = names_and_values(&old);
    let new_view = names_and_values(&new);
    // Past the backoff, the relist streams until it is held.
    until(&clock, || passed.load(Ordering::SeqCst) == HELD_AFTER).await;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let seen = names_and_values(&inf.indexer().list());
        assert!(
            seen == old_view,
            "a reader saw {} objects, {} of them new, while the relist streamed",
            seen.len(),
            seen.iter().filter(|(_, v)| *v == 2).count()
        );
    }
    let before = reads.lock().unwrap().len();
    assert_eq!(before, N as usize, "nothing of the relist was told yet");
    release.send_replace(true);
    tokio::time::timeout(WAIT, inf.wait_for_resource_version(&"20000".into()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(names_and_values(&inf.indexer().list()), new_view);
    let relist_told = N as usize / 3 + new.len();
    until(&clock, || {
        reads.lock().unwrap().len() >= before + relist_told
    })
    .await;
    for (what, held) in &reads.lock().unwrap()[before..] {
        assert!(
            held == &new_view,
            "read inside {what} saw a state that never existed"
        );
    }
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
}
