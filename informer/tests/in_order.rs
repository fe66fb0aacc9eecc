//! The informer as client-go's in-order informers run it: events of different keys reach the
//! handlers in source order even when the queue is backlogged; a relist is applied in one step
//! (a lister read from inside any of its notifications sees the whole new list); a version once
//! reached stays reached; a list that never completes changes nothing and holds at most one
//! attempt; a list handed in with `replace_all` is applied as a relist.

mod common;

use common::{Pod, Recorder, WAIT};
use futures::stream;
use kcache_core::{FakeClock, ObjectAccessor, ResourceVersion};
use kcache_informer::{
    CacheReader, DeletedObject, Event, InformerOptions, ResourceEventHandler, SharedIndexInformer,
};
use kcache_reflector::{
    BackendError, ErrorKind, ListOptions, ListPage, ListWatcher, WatchEvent, WatchOptions,
    WatchStream,
};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::watch;

#[derive(Debug, thiserror::Error)]
#[error("scripted source: {0:?}")]
struct Failure(ErrorKind);

impl BackendError for Failure {
    fn kind(&self) -> ErrorKind {
        self.0
    }
}

fn pod(name: &str, value: u32, rv: u64) -> Pod {
    let mut p = Pod::new(name, value);
    p.rv = ResourceVersion::from(rv);
    p
}

type Events = Vec<Result<WatchEvent<Pod>, Failure>>;

/// Lists and watches from a script. A list is split into pages of the requested size (a
/// continue token is the next offset); before a continue request it waits (bounded) for
/// `hold_pages` to open. Each watch takes the next scripted events (ending with an error, or
/// staying open and silent after them); without a script, a watch stays open and silent.
#[derive(Default)]
struct Script {
    lists: Mutex<VecDeque<(Vec<Pod>, u64)>>,
    current: Mutex<Option<(Vec<Pod>, u64)>>,
    watches: Mutex<VecDeque<Events>>,
    hold_pages: Option<watch::Sender<bool>>,
}

impl ListWatcher<Pod> for Script {
    type Error = Failure;

    async fn list(&self, opts: &ListOptions) -> Result<ListPage<Pod>, Failure> {
        let offset = match &opts.continue_token {
            None => {
                let next = self.lists.lock().unwrap().pop_front();
                if let Some(next) = next {
                    *self.current.lock().unwrap() = Some(next);
                }
                0
            }
            Some(t) => {
                if let Some(hold) = &self.hold_pages {
                    let mut open = hold.subscribe();
                    let _ = tokio::time::timeout(Duration::from_millis(500), open.wait_for(|o| *o))
                        .await;
                }
                t.parse::<usize>().unwrap()
            }
        };
        let cur = self.current.lock().unwrap();
        let (items, rv) = cur.as_ref().expect("a scripted list");
        let size = opts.limit.map_or(items.len(), |l| l as usize).max(1);
        let end = (offset + size).min(items.len());
        Ok(ListPage {
            items: items[offset..end].iter().cloned().map(Arc::new).collect(),
            resource_version: (*rv).into(),
            continue_token: (end < items.len()).then(|| end.to_string()),
        })
    }

    async fn watch(&self, _: &WatchOptions) -> Result<WatchStream<Pod, Failure>, Failure> {
        let events = self.watches.lock().unwrap().pop_front().unwrap_or_default();
        let ends_in_error = matches!(events.last(), Some(Err(_)));
        let events = stream::iter(events);
        if ends_in_error {
            Ok(Box::pin(events))
        } else {
            Ok(Box::pin(futures::StreamExt::chain(
                events,
                stream::pending(),
            )))
        }
    }
}

type Informer<L> = SharedIndexInformer<Pod, L>;

fn start<L: ListWatcher<Pod>>(
    inf: &Arc<Informer<L>>,
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
async fn events_of_different_keys_reach_a_handler_in_source_order_while_the_queue_is_backlogged() {
    let script = Script::default();
    script
        .lists
        .lock()
        .unwrap()
        .push_back((vec![pod("x", 1, 1)], 1));
    // A deletion (always queued), then A1 B1 A2 arrive in one streak behind it.
    script.watches.lock().unwrap().push_back(vec![
        Ok(WatchEvent::Deleted(Arc::new(pod("x", 1, 2)))),
        Ok(WatchEvent::Added(Arc::new(pod("a", 1, 3)))),
        Ok(WatchEvent::Added(Arc::new(pod("b", 1, 4)))),
        Ok(WatchEvent::Modified(Arc::new(pod("a", 2, 5)))),
    ]);
    let inf = Arc::new(SharedIndexInformer::new(script, Duration::ZERO));
    let rec = Recorder::new();
    inf.add_event_handler(rec.clone()).unwrap();
    let (stop, task) = start(&inf);
    rec.wait_for(5).await;
    assert_eq!(
        told(&rec.events()),
        ["+x@1", "-default/x", "+a@3", "+b@4", "~a@5"]
    );
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
}

/// What a handler was told, with the cache it read inside the call (names and values).
type Read = (String, Vec<(String, u32)>);

/// Reads the whole cache inside every notification.
struct Reader {
    cache: Arc<OnceLock<CacheReader<Pod, ObjectAccessor>>>,
    reads: Arc<Mutex<Vec<Read>>>,
    seen: watch::Sender<usize>,
}

impl Reader {
    fn read(&self, what: String) {
        let mut held: Vec<_> = self
            .cache
            .get()
            .map(|c| c.list().iter().map(|p| (p.name.clone(), p.value)).collect())
            .unwrap_or_default();
        held.sort();
        self.reads.lock().unwrap().push((what, held));
        self.seen.send_modify(|n| *n += 1);
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
async fn a_lister_read_inside_every_notification_of_a_relist_sees_the_complete_new_list() {
    let (hold, _) = watch::channel(false);
    let script = Script {
        hold_pages: Some(hold.clone()),
        ..Script::default()
    };
    script
        .lists
        .lock()
        .unwrap()
        .push_back((vec![pod("a", 1, 1), pod("b", 1, 2), pod("c", 1, 3)], 10));
    // The relist (after the expired watch): a and c changed, b gone, d new; in pages of 2.
    script
        .lists
        .lock()
        .unwrap()
        .push_back((vec![pod("a", 2, 11), pod("c", 2, 12), pod("d", 2, 13)], 20));
    script
        .watches
        .lock()
        .unwrap()
        .push_back(vec![Err(Failure(ErrorKind::Expired))]);
    let clock = FakeClock::new();
    let inf = Arc::new(SharedIndexInformer::with_options(
        script,
        InformerOptions::new()
            .page_size(2)
            .clock(Arc::new(clock.clone())),
    ));
    let reader = Reader {
        cache: Arc::new(OnceLock::new()),
        reads: Arc::new(Mutex::new(Vec::new())),
        seen: watch::channel(0).0,
    };
    reader.cache.set(inf.indexer()).ok().unwrap();
    let reads = reader.reads.clone();
    let mut seen = reader.seen.subscribe();
    // A page is fetched only once the handler has heard something of the relist (or after a
    // bound): a pipeline that tells a page before the list is complete is caught reading.
    let opener = tokio::spawn(async move {
        let _ = seen.wait_for(|n| *n >= 4).await;
        hold.send_replace(true);
    });
    inf.add_event_handler(reader).unwrap();
    let (stop, task) = start(&inf);
    until(&clock, || reads.lock().unwrap().len() >= 7).await;
    let reads = reads.lock().unwrap().clone();
    let new_list = vec![("a".to_string(), 2), ("c".into(), 2), ("d".into(), 2)];
    let relist = &reads[3..];
    assert_eq!(
        relist.iter().map(|(w, _)| w.as_str()).collect::<Vec<_>>(),
        ["-default/b", "~a", "~c", "+d"],
        "tombstones first, then the list in order"
    );
    for (what, held) in relist {
        assert_eq!(held, &new_list, "read inside {what}");
    }
    opener.abort();
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_once_reached_stays_reached_after_the_source_versions_go_down() {
    let script = Script::default();
    script
        .lists
        .lock()
        .unwrap()
        .push_back((vec![pod("a", 1, 100)], 100));
    // The source is restored from a backup: the relist's version is lower.
    script
        .lists
        .lock()
        .unwrap()
        .push_back((vec![pod("a", 1, 50)], 50));
    script
        .watches
        .lock()
        .unwrap()
        .push_back(vec![Err(Failure(ErrorKind::Expired))]);
    let clock = FakeClock::new();
    let inf = Arc::new(SharedIndexInformer::with_options(
        script,
        InformerOptions::new().clock(Arc::new(clock.clone())),
    ));
    let (stop, task) = start(&inf);
    tokio::time::timeout(WAIT, inf.wait_for_resource_version(&"100".into()))
        .await
        .unwrap()
        .unwrap();
    until(&clock, || inf.last_sync_resource_version().as_str() == "50").await;
    tokio::time::timeout(WAIT, inf.wait_for_resource_version(&"50".into()))
        .await
        .unwrap()
        .unwrap();
    // 80 was passed on the way to 100: reached, even though the cache is now at 50.
    tokio::time::timeout(WAIT, inf.wait_for_resource_version(&"80".into()))
        .await
        .expect("waiting for a version the cache already passed hangs")
        .unwrap();
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
}

/// A hostile source: the first list is complete; every later list hands out pages of new keys,
/// each with a continue token, forever. It keeps a weak handle on every endless object.
struct Endless {
    lists: AtomicUsize,
    next: AtomicUsize,
    handed: Mutex<Vec<Weak<Pod>>>,
}

impl ListWatcher<Pod> for Endless {
    type Error = Failure;

    async fn list(&self, opts: &ListOptions) -> Result<ListPage<Pod>, Failure> {
        if opts.continue_token.is_none() && self.lists.fetch_add(1, Ordering::SeqCst) == 0 {
            return Ok(ListPage {
                items: vec![Arc::new(pod("a", 1, 1)), Arc::new(pod("b", 1, 2))],
                resource_version: "2".into(),
                continue_token: None,
            });
        }
        let items: Vec<_> = (0..2)
            .map(|_| {
                let n = self.next.fetch_add(1, Ordering::SeqCst);
                Arc::new(pod(&format!("endless-{n}"), 1, 3))
            })
            .collect();
        self.handed
            .lock()
            .unwrap()
            .extend(items.iter().map(Arc::downgrade));
        Ok(ListPage {
            items,
            resource_version: "3".into(),
            continue_token: Some("more".into()),
        })
    }

    async fn watch(&self, _: &WatchOptions) -> Result<WatchStream<Pod, Failure>, Failure> {
        Ok(Box::pin(stream::iter(vec![Err(Failure(
            ErrorKind::Expired,
        ))])))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_paged_list_changes_nothing_a_reader_sees_and_holds_at_most_one_attempt() {
    let source = Arc::new(Endless {
        lists: AtomicUsize::new(0),
        next: AtomicUsize::new(0),
        handed: Mutex::new(Vec::new()),
    });
    let clock = FakeClock::new();
    let inf = Arc::new(SharedIndexInformer::with_options(
        source.clone(),
        InformerOptions::new()
            .page_size(2)
            .max_list_pages(5)
            .clock(Arc::new(clock.clone())),
    ));
    let rec = Recorder::new();
    inf.add_event_handler(rec.clone()).unwrap();
    let (stop, task) = start(&inf);
    tokio::time::timeout(WAIT, inf.wait_for_cache_sync())
        .await
        .unwrap();
    // Many abandoned attempts of 5 pages each.
    until(&clock, || source.next.load(Ordering::SeqCst) >= 200).await;
    let mut keys: Vec<_> = inf.indexer().list().iter().map(|p| p.key()).collect();
    keys.sort();
    assert_eq!(
        keys,
        ["default/a", "default/b"],
        "an unfinished list reached the cache"
    );
    assert_eq!(told(&rec.events()), ["+a@1", "+b@2"]);
    let live = source
        .handed
        .lock()
        .unwrap()
        .iter()
        .filter(|w| w.strong_count() > 0)
        .count();
    assert!(
        live <= 10,
        "{live} objects of abandoned attempts are still held (one attempt is 10)"
    );
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_all_before_run_fills_the_cache_and_the_first_list_is_diffed_against_it() {
    let script = Script::default();
    script
        .lists
        .lock()
        .unwrap()
        .push_back((vec![pod("a", 1, 5), pod("c", 1, 8)], 9));
    let inf = Arc::new(SharedIndexInformer::new(script, Duration::ZERO));
    let rec = Recorder::new();
    inf.add_event_handler(rec.clone()).unwrap();
    let restored = Arc::new(pod("a", 1, 5));
    inf.replace_all(vec![restored.clone(), Arc::new(pod("b", 1, 6))], "7".into())
        .unwrap();
    assert_eq!(inf.indexer().len(), 2);
    assert!(!inf.has_synced(), "only the source syncs the informer");
    tokio::time::timeout(WAIT, inf.wait_for_resource_version(&"7".into()))
        .await
        .unwrap()
        .unwrap();
    let (stop, task) = start(&inf);
    tokio::time::timeout(WAIT, inf.wait_for_cache_sync())
        .await
        .unwrap();
    rec.wait_for(5).await;
    assert_eq!(
        told(&rec.events()),
        ["+a@5", "+b@6", "-default/b", "~a@5", "+c@8"]
    );
    let a = inf.indexer().get_by_key("default/a").unwrap();
    assert!(
        Arc::ptr_eq(&a, &restored),
        "an unchanged object keeps the restored Arc"
    );
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
    assert!(matches!(
        inf.replace_all(Vec::new(), "10".into()),
        Err(kcache_informer::ReplaceAllError::Stopped)
    ));
}
