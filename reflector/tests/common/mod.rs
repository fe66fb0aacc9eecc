//! Shared test doubles: an object type, a `ReflectorStore` over a `BTreeMap`, and a scripted
//! `ListWatcher` whose answers the test queues up.

#![allow(dead_code, unreachable_pub)]

use futures::channel::mpsc;
use futures::StreamExt;
use kcache_core::{Object, ObjectKey, ReflectorStore, ResourceVersion};
use kcache_memory::SetResourceVersion;
use kcache_reflector::{
    BackendError, ErrorKind, ListOptions, ListPage, ListWatcher, WatchEvent, WatchOptions,
    WatchStream,
};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};

/// A namespaced test object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub ns: String,
    pub name: String,
    pub rv: ResourceVersion,
    pub value: u64,
}

impl Object for Pod {
    fn namespace(&self) -> Option<&str> {
        Some(&self.ns)
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        self.rv.clone()
    }
}

impl SetResourceVersion for Pod {
    fn set_resource_version(&mut self, rv: ResourceVersion) {
        self.rv = rv;
    }
}

pub fn pod(name: &str, rv: &str) -> Arc<Pod> {
    Arc::new(Pod {
        ns: "ns".into(),
        name: name.into(),
        rv: rv.into(),
        value: 0,
    })
}

/// A store over a map that also records the calls it got (clones share it).
#[derive(Default, Clone)]
pub struct MapStore(Arc<MapInner>);

impl std::ops::Deref for MapStore {
    type Target = MapInner;
    fn deref(&self) -> &MapInner {
        &self.0
    }
}

#[derive(Default)]
pub struct MapInner {
    pub map: Mutex<BTreeMap<ObjectKey, Arc<Pod>>>,
    pub calls: Mutex<Vec<String>>,
    pub fail_next: Mutex<VecDeque<&'static str>>,
}

#[derive(Debug, thiserror::Error)]
#[error("store refused {0}")]
pub struct StoreError(pub &'static str);

impl MapStore {
    fn call(&self, what: &'static str, detail: String) -> Result<(), StoreError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("{what} {detail}").trim_end().to_owned());
        let mut fail = self.fail_next.lock().unwrap();
        if fail.front() == Some(&what) {
            fail.pop_front();
            return Err(StoreError(what));
        }
        Ok(())
    }

    pub fn snapshot(&self) -> BTreeMap<String, String> {
        let map = self.map.lock().unwrap();
        map.iter()
            .map(|(k, v)| (k.to_string(), v.rv.to_string()))
            .collect()
    }

    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

fn key(p: &Pod) -> ObjectKey {
    ObjectKey::namespaced(&p.ns, &p.name)
        .unwrap_or_else(|_| ObjectKey::new("bad").expect("a valid key"))
}

impl ReflectorStore<Pod> for MapStore {
    type Error = StoreError;

    fn add(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.call("add", obj.name.clone())?;
        self.map.lock().unwrap().insert(key(&obj), obj);
        Ok(())
    }
    fn update(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.call("update", obj.name.clone())?;
        self.map.lock().unwrap().insert(key(&obj), obj);
        Ok(())
    }
    fn delete(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.call("delete", obj.name.clone())?;
        self.map.lock().unwrap().remove(&key(&obj));
        Ok(())
    }
    fn replace(&self, objects: Vec<Arc<Pod>>, rv: ResourceVersion) -> Result<(), StoreError> {
        self.call("replace", format!("{} @{rv}", objects.len()))?;
        let map = objects.into_iter().map(|o| (key(&o), o)).collect();
        *self.map.lock().unwrap() = map;
        Ok(())
    }
    fn resync(&self) -> Result<(), StoreError> {
        self.call("resync", String::new())
    }
    fn bookmark(&self, rv: ResourceVersion) -> Result<(), StoreError> {
        self.call("bookmark", rv.to_string())
    }
}

/// A backend error of a chosen class.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("test backend error {0:?}")]
pub struct TestError(pub ErrorKind);

impl BackendError for TestError {
    fn kind(&self) -> ErrorKind {
        self.0
    }
}

pub type Sender = mpsc::UnboundedSender<Result<WatchEvent<Pod>, TestError>>;

/// A `ListWatcher` that answers from queues and records every request. An empty list queue
/// answers an `Other` error; an empty watch queue answers a stream that never ends.
#[derive(Default)]
pub struct Scripted {
    pub lists: Mutex<VecDeque<Result<ListPage<Pod>, TestError>>>,
    pub watches: Mutex<VecDeque<Result<WatchStream<Pod, TestError>, TestError>>>,
    pub list_calls: Mutex<Vec<ListOptions>>,
    pub watch_calls: Mutex<Vec<WatchOptions>>,
}

impl Scripted {
    pub fn list_ok(&self, items: Vec<Arc<Pod>>, rv: &str, next: Option<&str>) {
        let page = ListPage {
            items,
            resource_version: rv.into(),
            continue_token: next.map(str::to_owned),
        };
        self.lists.lock().unwrap().push_back(Ok(page));
    }
    pub fn list_err(&self, kind: ErrorKind) {
        self.lists.lock().unwrap().push_back(Err(TestError(kind)));
    }
    /// Queues a watch and returns the sender that feeds it (drop it to close cleanly).
    pub fn watch_channel(&self) -> Sender {
        let (tx, rx) = mpsc::unbounded();
        self.watches.lock().unwrap().push_back(Ok(rx.boxed()));
        tx
    }
    pub fn watch_events(&self, events: Vec<Result<WatchEvent<Pod>, TestError>>) {
        let s = futures::stream::iter(events).boxed();
        self.watches.lock().unwrap().push_back(Ok(s));
    }
    pub fn watch_err(&self, kind: ErrorKind) {
        self.watches.lock().unwrap().push_back(Err(TestError(kind)));
    }
    pub fn list_rvs(&self) -> Vec<String> {
        let calls = self.list_calls.lock().unwrap();
        calls
            .iter()
            .map(|o| o.resource_version.to_string())
            .collect()
    }
    pub fn watch_rvs(&self) -> Vec<String> {
        let calls = self.watch_calls.lock().unwrap();
        calls
            .iter()
            .map(|o| o.resource_version.to_string())
            .collect()
    }
}

impl ListWatcher<Pod> for Scripted {
    type Error = TestError;

    fn list(
        &self,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<ListPage<Pod>, TestError>> + Send {
        self.list_calls.lock().unwrap().push(opts.clone());
        let next = self.lists.lock().unwrap().pop_front();
        async move { next.unwrap_or(Err(TestError(ErrorKind::Other))) }
    }

    fn watch(
        &self,
        opts: &WatchOptions,
    ) -> impl Future<Output = Result<WatchStream<Pod, TestError>, TestError>> + Send {
        self.watch_calls.lock().unwrap().push(opts.clone());
        let next = self.watches.lock().unwrap().pop_front();
        async move { next.unwrap_or_else(|| Ok(futures::stream::pending().boxed())) }
    }
}

/// Lets spawned tasks run until `cond` holds (no real time passes).
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if cond() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("never happened: {what}");
}

/// Lets spawned tasks run for a while.
pub async fn settle() {
    for _ in 0..200 {
        tokio::task::yield_now().await;
    }
}
