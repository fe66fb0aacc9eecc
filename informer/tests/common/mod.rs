//! Shared test support: a pod-like object, a recording handler, a running informer.

#![allow(dead_code, unreachable_pub, missing_docs)]

use kcache_core::{FakeClock, Object, ResourceVersion};
use kcache_informer::{
    DeletedObject, Event, InformerOptions, ResourceEventHandler, SharedIndexInformer,
};
use kcache_memory::{MemoryConfig, MemorySource, SetResourceVersion};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// How long any test waits for an asynchronous condition before failing (a bound, not a sleep).
pub const WAIT: Duration = Duration::from_secs(20);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    pub ns: String,
    pub name: String,
    pub value: u32,
    pub rv: ResourceVersion,
}

impl Pod {
    pub fn new(name: &str, value: u32) -> Self {
        Self {
            ns: "default".into(),
            name: name.into(),
            value,
            rv: ResourceVersion::default(),
        }
    }
    pub fn key(&self) -> String {
        format!("{}/{}", self.ns, self.name)
    }
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

/// A handler that records every call and counts them on a watch channel.
#[derive(Clone)]
pub struct Recorder {
    pub events: Arc<Mutex<Vec<Event<Pod>>>>,
    count: Arc<watch::Sender<usize>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Self {
        Self {
            events: Arc::new(Mutex::new(Vec::new())),
            count: Arc::new(watch::Sender::new(0)),
        }
    }

    fn record(&self, e: Event<Pod>) {
        self.events.lock().unwrap().push(e);
        self.count.send_modify(|n| *n += 1);
    }

    pub fn len(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    pub fn events(&self) -> Vec<Event<Pod>> {
        self.events.lock().unwrap().clone()
    }

    /// Waits (bounded) until at least `n` calls were recorded.
    pub async fn wait_for(&self, n: usize) {
        let mut rx = self.count.subscribe();
        let r = tokio::time::timeout(WAIT, rx.wait_for(|c| *c >= n)).await;
        assert!(
            r.is_ok(),
            "timed out waiting for {n} events, have {}: {:?}",
            self.len(),
            self.events()
        );
    }

    /// The handler's view: its notifications replayed into a map key -> (value, rv).
    pub fn view(&self) -> BTreeMap<String, (u32, String)> {
        replay(&self.events())
    }
}

/// Replays notifications into a map key -> (value, rv), checking they make sense.
pub fn replay(events: &[Event<Pod>]) -> BTreeMap<String, (u32, String)> {
    let mut m = BTreeMap::new();
    for e in events {
        match e {
            Event::Added { obj, .. } => {
                m.insert(obj.key(), (obj.value, obj.rv.to_string()));
            }
            Event::Updated { new, .. } => {
                m.insert(new.key(), (new.value, new.rv.to_string()));
            }
            Event::Deleted(d) => {
                m.remove(d.key().as_str());
            }
        }
    }
    m
}

impl ResourceEventHandler<Pod> for Recorder {
    fn on_add(&self, obj: &Arc<Pod>, is_in_initial_list: bool) {
        self.record(Event::Added {
            obj: obj.clone(),
            is_in_initial_list,
        });
    }
    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        self.record(Event::Updated {
            old: old.clone(),
            new: new.clone(),
        });
    }
    fn on_delete(&self, obj: &DeletedObject<Pod>) {
        self.record(Event::Deleted(obj.clone()));
    }
}

/// The source's content as a map key -> (value, rv).
pub fn source_view(source: &MemorySource<Pod>) -> BTreeMap<String, (u32, String)> {
    source
        .list_all()
        .iter()
        .map(|p| (p.key(), (p.value, p.rv.to_string())))
        .collect()
}

/// A cache's content as a map key -> (value, rv).
pub fn cache_view(list: Vec<Arc<Pod>>) -> BTreeMap<String, (u32, String)> {
    list.iter()
        .map(|p| (p.key(), (p.value, p.rv.to_string())))
        .collect()
}

pub type Informer = SharedIndexInformer<Pod, MemorySource<Pod>>;

/// A fake clock and a memory source on it.
pub fn source() -> (FakeClock, MemorySource<Pod>) {
    let clock = FakeClock::new();
    let source = MemorySource::with_config(MemoryConfig::new().with_clock(clock.clone()));
    (clock, source)
}

/// An informer over `source` on `clock` with the default resync `resync`.
pub fn informer(clock: &FakeClock, source: &MemorySource<Pod>, resync: Duration) -> Arc<Informer> {
    Arc::new(SharedIndexInformer::with_options(
        source.clone(),
        InformerOptions::new()
            .name("pods")
            .resync_period(resync)
            .clock(Arc::new(clock.clone())),
    ))
}

/// A running informer: stop it with `stop().await`.
pub struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), kcache_informer::InformerError>>,
}

impl Running {
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let r = tokio::time::timeout(WAIT, &mut self.task).await;
        assert!(matches!(r, Ok(Ok(Ok(())))), "informer did not stop cleanly");
    }
}

pub fn run(informer: &Arc<Informer>) -> Running {
    let (tx, rx) = oneshot::channel();
    let inf = informer.clone();
    let task = tokio::spawn(async move {
        inf.run(async {
            let _ = rx.await;
        })
        .await
    });
    Running {
        stop: Some(tx),
        task,
    }
}

/// Waits (bounded) for the informer's cache to sync.
pub async fn synced(informer: &Informer) {
    let r = tokio::time::timeout(WAIT, informer.wait_for_cache_sync()).await;
    assert_eq!(r, Ok(true), "informer did not sync");
}

/// Waits (bounded) until the cache has applied `rv`.
pub async fn applied(informer: &Informer, rv: &ResourceVersion) {
    let r = tokio::time::timeout(WAIT, informer.wait_for_resource_version(rv)).await;
    assert!(matches!(r, Ok(Ok(()))), "cache did not reach {rv}: {r:?}");
}

impl Recorder {
    /// Waits until at least `n` calls were recorded, without asserting (callers bound it).
    pub async fn wait_for_quiet(&self, n: usize) {
        let mut rx = self.count.subscribe();
        let _ = rx.wait_for(|c| *c >= n).await;
    }
}
