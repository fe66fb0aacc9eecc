//! Lists reach the informer page by page and are staged: nothing of a list is in the cache (or
//! the handlers' buffers) before its last page; then the cache is swapped in one step and the
//! handlers hear the deletions first, then each listed object in list order, against the state
//! before the list. No object is lost or delivered twice.

mod common;

use common::{cache_view, replay, Pod, Recorder, WAIT};
use futures::stream;
use kcache_core::{FakeClock, ResourceVersion};
use kcache_informer::{CacheReader, Event, InformerOptions, SharedIndexInformer};
use kcache_reflector::{
    BackendError, BackoffConfig, ErrorKind, ListOptions, ListPage, ListWatcher, WatchEvent,
    WatchOptions, WatchStream,
};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::watch;

#[derive(Debug, thiserror::Error)]
#[error("paged source: {0:?}")]
struct Failure(ErrorKind);

impl BackendError for Failure {
    fn kind(&self) -> ErrorKind {
        self.0
    }
}

type Cache = CacheReader<Pod, kcache_core::ObjectAccessor>;
/// A scripted list: its pages (objects, or the error a page request gets) and its version.
type List = (Vec<Result<Vec<Pod>, ErrorKind>>, u64);
/// What the cache held when a continue request came: the page asked for, keys and values.
type Seen = (usize, Vec<(String, u32)>);

/// Answers lists from a script of pages (a continue token is the next page's index); before it
/// answers a continue request it records what the informer's cache holds. Continue requests wait
/// for `gate` to reach their page number. The first watch fails as expired (a relist), later
/// ones stay open and silent.
struct PagedSource {
    /// Each list: its pages (objects, or an error), its version.
    lists: Mutex<VecDeque<List>>,
    current: Mutex<Option<List>>,
    watches: AtomicUsize,
    cache: OnceLock<Cache>,
    /// The cache's content when each continue request came: (page asked for, keys and values).
    seen: Mutex<Vec<Seen>>,
    gate: watch::Sender<usize>,
    /// A deletion the first watch delivers before it expires.
    first_watch_deletes: Mutex<Option<Pod>>,
}

impl PagedSource {
    fn new(lists: Vec<List>) -> Arc<Self> {
        Arc::new(Self {
            lists: Mutex::new(lists.into()),
            current: Mutex::new(None),
            watches: AtomicUsize::new(0),
            cache: OnceLock::new(),
            seen: Mutex::new(Vec::new()),
            gate: watch::channel(usize::MAX).0,
            first_watch_deletes: Mutex::new(None),
        })
    }
}

impl ListWatcher<Pod> for PagedSource {
    type Error = Failure;

    async fn list(&self, opts: &ListOptions) -> Result<ListPage<Pod>, Failure> {
        let index = match &opts.continue_token {
            None => {
                let next = self.lists.lock().unwrap().pop_front();
                let mut cur = self.current.lock().unwrap();
                if let Some(next) = next {
                    *cur = Some(next);
                }
                0
            }
            Some(t) => t.parse::<usize>().unwrap(),
        };
        if index > 0 {
            let mut gate = self.gate.subscribe();
            tokio::time::timeout(WAIT, gate.wait_for(|g| *g >= index))
                .await
                .expect("the test opens the gate")
                .unwrap();
            let held = self.cache.get().map(|c| {
                let mut v: Vec<_> = c.list().iter().map(|p| (p.key(), p.value)).collect();
                v.sort();
                v
            });
            self.seen
                .lock()
                .unwrap()
                .push((index, held.unwrap_or_default()));
        }
        let cur = self.current.lock().unwrap();
        let (pages, rv) = cur.as_ref().expect("a scripted list");
        let page = pages[index].clone().map_err(Failure)?;
        let items = page
            .into_iter()
            .map(|mut p| {
                p.rv = ResourceVersion::from(u64::from(p.value) + 100);
                Arc::new(p)
            })
            .collect();
        Ok(ListPage {
            items,
            resource_version: (*rv).into(),
            continue_token: (index + 1 < pages.len()).then(|| (index + 1).to_string()),
        })
    }

    async fn watch(&self, _: &WatchOptions) -> Result<WatchStream<Pod, Failure>, Failure> {
        if self.watches.fetch_add(1, Ordering::SeqCst) == 0 {
            // The scripted deletion (if any), then the expiry that forces the relist.
            let deleted = self.first_watch_deletes.lock().unwrap().take();
            let events = deleted
                .into_iter()
                .map(|p| Ok(WatchEvent::Deleted(Arc::new(p))))
                .chain([Err(Failure(ErrorKind::Expired))]);
            Ok(Box::pin(stream::iter(events.collect::<Vec<_>>())))
        } else {
            Ok(Box::pin(stream::pending()))
        }
    }
}

fn pods(names: &[(&str, u32)]) -> Result<Vec<Pod>, ErrorKind> {
    Ok(names.iter().map(|&(n, v)| Pod::new(n, v)).collect())
}

type Informer = SharedIndexInformer<Pod, Arc<PagedSource>>;

fn start(
    src: &Arc<PagedSource>,
    clock: &FakeClock,
) -> (
    Arc<Informer>,
    Recorder,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    start_with(src, clock, InformerOptions::new())
}

fn start_with(
    src: &Arc<PagedSource>,
    clock: &FakeClock,
    options: InformerOptions<Pod>,
) -> (
    Arc<Informer>,
    Recorder,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let inf = Arc::new(SharedIndexInformer::with_options(
        src.clone(),
        options.page_size(2).clock(Arc::new(clock.clone())),
    ));
    src.cache.set(inf.indexer()).ok().unwrap();
    let rec = Recorder::new();
    inf.add_event_handler(rec.clone()).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let i2 = inf.clone();
    let task = tokio::spawn(async move {
        i2.run(async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    (inf, rec, stop, task)
}

/// Advances the fake clock (past backoffs) until `done`, bounded.
async fn until(clock: &FakeClock, mut done: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        clock.advance(Duration::from_millis(500));
    }
    panic!("never happened");
}

/// The cache as sorted (key, value) pairs.
fn held(inf: &Informer) -> Vec<(String, u32)> {
    let mut v: Vec<_> = inf
        .indexer()
        .list()
        .iter()
        .map(|p| (p.key(), p.value))
        .collect();
    v.sort();
    v
}

fn pairs(v: &[(&str, u32)]) -> Vec<(String, u32)> {
    v.iter()
        .map(|&(k, n)| (format!("default/{k}"), n))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn has_synced_waits_for_the_last_page_and_no_page_is_cached_before_it() {
    let src = PagedSource::new(vec![(
        vec![
            pods(&[("a", 1), ("b", 1)]),
            pods(&[("c", 1), ("d", 1)]),
            pods(&[("e", 1)]),
        ],
        10,
    )]);
    src.gate.send_replace(0);
    let clock = FakeClock::new();
    let (inf, rec, stop, task) = start(&src, &clock);
    src.gate.send_replace(1);
    src.gate.send_replace(2);
    tokio::time::timeout(WAIT, inf.wait_for_cache_sync())
        .await
        .unwrap();
    assert_eq!(inf.indexer().len(), 5);
    let seen = src.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(
        seen.iter().all(|(_, cache)| cache.is_empty()),
        "a page reached the cache before the list was complete: {seen:?}"
    );
    // Every object reached the handler once, as an initial add, in list order.
    rec.wait_for(5).await;
    let events = rec.events();
    let adds: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Added {
                obj,
                is_in_initial_list,
            } => Some((obj.name.clone(), *is_in_initial_list)),
            _ => None,
        })
        .collect();
    assert_eq!(
        adds,
        [
            ("a", true),
            ("b", true),
            ("c", true),
            ("d", true),
            ("e", true)
        ]
        .map(|(n, i)| (n.to_owned(), i))
    );
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_in_pages_tombstones_the_unlisted_keys_first_then_tells_the_list_in_order() {
    let src = PagedSource::new(vec![
        (
            vec![
                pods(&[("a", 1), ("b", 1)]),
                pods(&[("c", 1), ("d", 1)]),
                pods(&[("e", 1), ("f", 1)]),
            ],
            10,
        ),
        // The relist (after the expired watch): b, d and f are gone, c and e changed, a did not.
        (
            vec![pods(&[("a", 1), ("e", 2)]), pods(&[("c", 2), ("g", 2)])],
            20,
        ),
    ]);
    let clock = FakeClock::new();
    let (inf, rec, stop, task) = start(&src, &clock);
    until(&clock, || inf.last_sync_resource_version().as_str() == "20").await;
    tokio::time::timeout(WAIT, inf.wait_for_resource_version(&"20".into()))
        .await
        .unwrap()
        .unwrap();
    // 6 adds, then 3 tombstones, then a (resync) e c (updates) g (add), in list order.
    rec.wait_for(13).await;
    let events = rec.events();
    let relist = &events[6..];
    let told: Vec<String> = relist
        .iter()
        .map(|e| match e {
            Event::Deleted(d) => {
                assert!(d.is_final_state_unknown());
                format!("-{}", d.key().as_str())
            }
            Event::Updated { new, .. } => format!("~{}", new.key()),
            Event::Added { obj, .. } => format!("+{}", obj.key()),
        })
        .collect();
    let (deletes, listed) = told.split_at(3);
    let mut deletes = deletes.to_vec();
    deletes.sort();
    assert_eq!(
        deletes,
        ["-default/b", "-default/d", "-default/f"],
        "tombstones first: {told:?}"
    );
    assert_eq!(
        listed,
        ["~default/a", "~default/e", "~default/c", "+default/g"]
    );
    let expected = cache_view(inf.indexer().list());
    assert_eq!(
        replay(&events),
        expected,
        "the handler's view equals the cache"
    );
    assert_eq!(held(&inf), pairs(&[("a", 1), ("c", 2), ("e", 2), ("g", 2)]));
    // While the relist's second page was being fetched, the cache still held the old list.
    let seen = src.seen.lock().unwrap().clone();
    let relist_page2 = seen.last().unwrap();
    assert_eq!(
        relist_page2.1,
        pairs(&[("a", 1), ("b", 1), ("c", 1), ("d", 1), ("e", 1), ("f", 1)])
    );
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_failing_mid_list_changes_nothing_and_the_retry_settles_everything() {
    let src = PagedSource::new(vec![
        (vec![pods(&[("a", 1), ("b", 1)]), pods(&[("c", 1)])], 10),
        // The relist fails on its second page: its first page (a, b now 2) is never seen...
        (vec![pods(&[("a", 2), ("b", 2)]), Err(ErrorKind::Other)], 20),
        // ...the retry no longer has b.
        (vec![pods(&[("a", 3)]), pods(&[("c", 3)])], 30),
    ]);
    let clock = FakeClock::new();
    let (inf, rec, stop, task) = start(&src, &clock);
    until(&clock, || inf.last_sync_resource_version().as_str() == "30").await;
    tokio::time::timeout(WAIT, inf.wait_for_resource_version(&"30".into()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(held(&inf), pairs(&[("a", 3), ("c", 3)]));
    // 3 adds; b tombstoned from the state before the failed attempt; a and c updated.
    rec.wait_for(6).await;
    let events = rec.events();
    assert_eq!(events.len(), 6, "{events:?}");
    assert_eq!(replay(&events), cache_view(inf.indexer().list()));
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, Event::Updated { new, .. } if new.value == 2)),
        "the failed attempt's page reached a handler"
    );
    let Event::Deleted(b) = &events[3] else {
        panic!("the tombstone comes first: {events:?}")
    };
    assert_eq!(b.key().as_str(), "default/b");
    assert_eq!(b.object().map(|p| p.value), Some(1));
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_queued_behind_a_deletion_is_diffed_after_it() {
    let src = PagedSource::new(vec![
        (vec![pods(&[("a", 1), ("b", 1)]), pods(&[("c", 1)])], 10),
        (
            vec![pods(&[("b", 2)]), pods(&[("c", 2)]), pods(&[("d", 2)])],
            20,
        ),
    ]);
    // The watch deletes a, then expires; with no backoff the relist may be queued behind the
    // deletion: it is diffed against the cache after the deletion, so a is told deleted once.
    let mut a = Pod::new("a", 1);
    a.rv = "11".into();
    *src.first_watch_deletes.lock().unwrap() = Some(a);
    let clock = FakeClock::new();
    let no_backoff = BackoffConfig {
        initial: Duration::ZERO,
        ..BackoffConfig::default()
    };
    let (inf, rec, stop, task) =
        start_with(&src, &clock, InformerOptions::new().backoff(no_backoff));
    until(&clock, || inf.last_sync_resource_version().as_str() == "20").await;
    tokio::time::timeout(WAIT, inf.wait_for_resource_version(&"20".into()))
        .await
        .unwrap()
        .unwrap();
    // 3 adds, the deletion of a, b and c updated, d added.
    rec.wait_for(7).await;
    let events = rec.events();
    assert_eq!(events.len(), 7, "no duplicates: {events:?}");
    let Event::Deleted(gone) = &events[3] else {
        panic!("the watch's deletion comes before the relist: {events:?}")
    };
    assert!(!gone.is_final_state_unknown());
    let cache = cache_view(inf.indexer().list());
    assert_eq!(replay(&events), cache);
    assert_eq!(held(&inf), pairs(&[("b", 2), ("c", 2), ("d", 2)]));
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relisted_object_with_the_cached_resource_version_keeps_the_cached_arc() {
    let src = PagedSource::new(vec![
        (vec![pods(&[("a", 1), ("b", 1)])], 10),
        (vec![pods(&[("a", 1), ("b", 2)])], 20),
    ]);
    let clock = FakeClock::new();
    let (inf, _rec, stop, task) = start(&src, &clock);
    tokio::time::timeout(WAIT, inf.wait_for_cache_sync())
        .await
        .unwrap();
    let before = inf.indexer().get_by_key("default/a").unwrap();
    until(&clock, || inf.last_sync_resource_version().as_str() == "20").await;
    tokio::time::timeout(WAIT, inf.wait_for_resource_version(&"20".into()))
        .await
        .unwrap()
        .unwrap();
    let after = inf.indexer().get_by_key("default/a").unwrap();
    assert!(
        Arc::ptr_eq(&before, &after),
        "the relist's copy of an unchanged object replaced the cached one"
    );
    assert_eq!(held(&inf), pairs(&[("a", 1), ("b", 2)]));
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
}
