//! A store that takes lists page by page (`PagedReplace`): the reflector hands over each page as
//! it arrives, waits until the store took it before it asks the source for the next page, ends
//! the list with `finish_list` at the first page's version, and abandons a failed attempt.

mod common;

use common::{eventually, pod, settle, Pod, Scripted};
use kcache_core::{BoxFuture, FakeClock, PagedReplace, ReflectorStore, ResourceVersion};
use kcache_reflector::{ErrorKind, Reflector};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

#[derive(Debug, thiserror::Error)]
#[error("paged store error")]
struct PagedError;

/// Records every call; a page counts as taken only once the test says so (`take`).
struct Paged {
    calls: Mutex<Vec<String>>,
    /// How many pages the test let the store take.
    taken: watch::Sender<usize>,
    pages: Mutex<usize>,
}

impl Paged {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            calls: Mutex::new(Vec::new()),
            taken: watch::channel(0).0,
            pages: Mutex::new(0),
        })
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
    fn call(&self, c: String) {
        self.calls.lock().unwrap().push(c);
    }
    /// Lets the store take one more page.
    fn take(&self) {
        self.taken.send_modify(|n| *n += 1);
    }
}

#[derive(Clone)]
struct Store(Arc<Paged>);

impl ReflectorStore<Pod> for Store {
    type Error = PagedError;
    fn add(&self, o: Arc<Pod>) -> Result<(), PagedError> {
        self.0.call(format!("add {}", o.name));
        Ok(())
    }
    fn update(&self, o: Arc<Pod>) -> Result<(), PagedError> {
        self.0.call(format!("update {}", o.name));
        Ok(())
    }
    fn delete(&self, o: Arc<Pod>) -> Result<(), PagedError> {
        self.0.call(format!("delete {}", o.name));
        Ok(())
    }
    fn replace(&self, objects: Vec<Arc<Pod>>, rv: ResourceVersion) -> Result<(), PagedError> {
        self.0.call(format!("replace {} @{rv}", objects.len()));
        Ok(())
    }
    fn resync(&self) -> Result<(), PagedError> {
        Ok(())
    }
    fn paged(&self) -> Option<&dyn PagedReplace<Pod, Error = PagedError>> {
        Some(self)
    }
}

impl PagedReplace<Pod> for Store {
    type Error = PagedError;
    fn begin_list(&self) {
        self.0.call("begin".into());
    }
    fn list_page(&self, objects: Vec<Arc<Pod>>) -> Result<(), PagedError> {
        let names: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
        self.0.call(format!("page {}", names.join(",")));
        *self.0.pages.lock().unwrap() += 1;
        Ok(())
    }
    fn page_taken(&self) -> BoxFuture<'_, ()> {
        let pages = *self.0.pages.lock().unwrap();
        let mut taken = self.0.taken.subscribe();
        Box::pin(async move {
            let _ = taken.wait_for(|n| *n >= pages).await;
        })
    }
    fn finish_list(&self, rv: ResourceVersion) -> Result<(), PagedError> {
        self.0.call(format!("finish @{rv}"));
        Ok(())
    }
    fn list_delete(&self, obj: Arc<Pod>) -> Result<(), PagedError> {
        self.0.call(format!("delete {}", obj.name));
        Ok(())
    }
    fn abandon_list(&self) {
        self.0.call("abandon".into());
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_source_is_asked_for_a_page_only_once_the_store_took_the_one_before() {
    let lw = Arc::new(Scripted::default());
    lw.list_ok(vec![pod("a", "1"), pod("b", "2")], "30", Some("t1"));
    lw.list_ok(vec![pod("c", "3"), pod("d", "4")], "30", Some("t2"));
    lw.list_ok(vec![pod("e", "5")], "30", None);
    let paged = Paged::new();
    let r = Reflector::builder(lw.clone(), Store(paged.clone()))
        .page_size(2)
        .clock(Arc::new(FakeClock::new()))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("page 1 handed over", || paged.calls().len() == 2).await;
    settle().await;
    assert_eq!(
        lw.list_calls.lock().unwrap().len(),
        1,
        "page 2 not asked for yet"
    );
    assert_eq!(paged.calls(), ["begin", "page a,b"]);
    paged.take();
    eventually("page 2 handed over", || paged.calls().len() == 3).await;
    settle().await;
    assert_eq!(
        lw.list_calls.lock().unwrap().len(),
        2,
        "page 3 not asked for yet"
    );
    paged.take();
    eventually("page 3 handed over", || paged.calls().len() == 4).await;
    assert!(
        handle.last_sync_resource_version().is_empty(),
        "not synced before the finish"
    );
    paged.take();
    eventually("finished", || {
        handle.last_sync_resource_version().as_str() == "30"
    })
    .await;
    assert_eq!(
        paged.calls(),
        ["begin", "page a,b", "page c,d", "page e", "finish @30"],
        "no whole replace"
    );
    handle.stop();
    task.await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn a_list_that_fails_after_some_pages_is_abandoned_then_listed_again_from_the_start() {
    let lw = Arc::new(Scripted::default());
    lw.list_ok(vec![pod("a", "1")], "30", Some("t1"));
    lw.list_err(ErrorKind::Other);
    lw.list_ok(vec![pod("b", "2")], "31", None);
    let paged = Paged::new();
    paged.taken.send_replace(usize::MAX);
    let clock = FakeClock::new();
    let r = Reflector::builder(lw.clone(), Store(paged.clone()))
        .page_size(1)
        .clock(Arc::new(clock.clone()))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("abandoned", || {
        paged.calls().contains(&"abandon".to_owned())
    })
    .await;
    for _ in 0..100 {
        if handle.last_sync_resource_version().as_str() == "31" {
            break;
        }
        clock.advance(Duration::from_secs(2));
        settle().await;
    }
    assert_eq!(
        paged.calls(),
        [
            "begin",
            "page a",
            "abandon",
            "begin",
            "page b",
            "finish @31"
        ]
    );
    handle.stop();
    task.await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn an_expired_continue_token_starts_a_new_attempt_with_the_full_list() {
    let lw = Arc::new(Scripted::default());
    lw.list_ok(vec![pod("a", "1")], "30", Some("t1"));
    lw.list_err(ErrorKind::Expired);
    lw.list_ok(vec![pod("b", "2"), pod("c", "3")], "40", None);
    let paged = Paged::new();
    paged.taken.send_replace(usize::MAX);
    let r = Reflector::builder(lw.clone(), Store(paged.clone()))
        .page_size(1)
        .clock(Arc::new(FakeClock::new()))
        .build();
    let handle = r.handle();
    let task = tokio::spawn(r.run());
    eventually("relisted", || {
        handle.last_sync_resource_version().as_str() == "40"
    })
    .await;
    assert_eq!(
        paged.calls(),
        ["begin", "page a", "begin", "page b,c", "finish @40"],
        "the full list is one new attempt, no abandon needed"
    );
    handle.stop();
    task.await.unwrap();
}
