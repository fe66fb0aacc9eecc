//! A deletion the watch missed, delivered to a `Controller` through a relist (issue #5).
//!
//! The scenario comes from client-go: when a watch breaks and the object is deleted while it is
//! down, the reflector relists and `DeltaFIFO.Replace` (tools/cache/delta_fifo.go) turns every
//! cached key missing from the new list into a `Deleted` delta carrying a
//! `DeletedFinalStateUnknown{Key, Obj}` tombstone, `Obj` being the last state the cache knew
//! (client-go's `TestDeltaFIFO_ReplaceMakesDeletions` at the FIFO level). Controllers must unwrap
//! that tombstone in their delete handlers: kube-controller-manager's ReplicaSet controller
//! (pkg/controller/replicaset/replica_set.go, `deleteRS` and `deletePod`, whose comment describes
//! exactly this "delete is dropped, the relist notices" case) and sample-controller's
//! `handleObject` take the owner reference from the tombstone's object and enqueue the owner; a
//! deleted parent is enqueued under its own key (client-go's `DeletionHandlingMetaNamespaceKeyFunc`
//! reads a tombstone's key), and the sync function then finds it gone from the lister.
//!
//! Here, over kcache-memory wrapped in a source whose watch the test can break (the stream ends
//! with `MemoryError::Evicted`, as a watch cache evicting a slow watcher would): the object is
//! deleted at the source while the reflector backs off (on a `FakeClock`, so it cannot relist
//! before the test lets it), then the clock moves and the reflector relists. Each test checks
//! the handler's `on_delete` gets the tombstone with the last known state, the controller
//! reconciles the right key (the parent's own; the owner taken from the tombstone's last known
//! child, which names a different owner than the child's first state), the reconcile finds the
//! object gone from the cache, and the caches equal the sources afterwards.
//!
//! A tombstone without a last known state cannot be produced through an informer: the FIFO makes
//! one only when its known objects (the informer's indexer) list a key and then fail to return
//! it, and a key whose change is being applied to the indexer is in flight, so `replace` skips it.
//! What the controller does with one (`watches`: enqueues the tombstone's key; `owns`: enqueues
//! nothing, reported with `tracing::warn!`) is covered by the unit tests in
//! `controller/src/controller/enqueue.rs`.

use futures::future::{select, Either};
use futures::stream::{self, StreamExt};
use kcache_controller::{Action, Controller, ControllerHandle};
use kcache_core::{FakeClock, Object, ObjectKey, ResourceVersion};
use kcache_informer::{DeletedObject, HandlerFuncs, InformerOptions, SharedIndexInformer};
use kcache_memory::{MemoryError, MemorySource, SetResourceVersion};
use kcache_reflector::{
    BackoffConfig, ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream,
};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// How long any wait may take before the test fails (a bound, not a sleep).
const WAIT: Duration = Duration::from_secs(20);

/// The reflector's backoff after the broken watch: exactly this long on the fake clock.
const BACKOFF: Duration = Duration::from_secs(1);

const NS: &str = "default";

/// The parent type (a ReplicaSet, say).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Parent {
    name: String,
    replicas: u32,
    rv: ResourceVersion,
}

/// The child type (a Pod): `owner` is its owner reference, the name of a parent in the same
/// namespace. The child's own name says nothing about its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Child {
    name: String,
    owner: String,
    rv: ResourceVersion,
}

fn parent(name: &str, replicas: u32) -> Parent {
    Parent {
        name: name.into(),
        replicas,
        rv: ResourceVersion::default(),
    }
}

fn child(name: &str, owner: &str) -> Child {
    Child {
        name: name.into(),
        owner: owner.into(),
        rv: ResourceVersion::default(),
    }
}

impl Object for Parent {
    fn namespace(&self) -> Option<&str> {
        Some(NS)
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        self.rv.clone()
    }
}

impl SetResourceVersion for Parent {
    fn set_resource_version(&mut self, rv: ResourceVersion) {
        self.rv = rv;
    }
}

impl Object for Child {
    fn namespace(&self) -> Option<&str> {
        Some(NS)
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        self.rv.clone()
    }
}

impl SetResourceVersion for Child {
    fn set_resource_version(&mut self, rv: ResourceVersion) {
        self.rv = rv;
    }
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::namespaced(NS, name).unwrap()
}

/// A memory source whose open watches the test can break: `cut` ends every watch open at that
/// moment with `MemoryError::Evicted` (an `Expired`-class error: the reflector backs off and
/// relists). Watches opened later are not affected. `opened` counts the watches opened.
struct Breakable<T> {
    inner: MemorySource<T>,
    cuts: Arc<watch::Sender<u64>>,
    opened: Arc<watch::Sender<u64>>,
}

impl<T: Object + SetResourceVersion + Clone + Send + Sync + 'static> Breakable<T> {
    fn new(clock: &FakeClock) -> Arc<Self> {
        Arc::new(Self {
            inner: MemorySource::with_clock(clock.clone()),
            cuts: Arc::new(watch::Sender::new(0)),
            opened: Arc::new(watch::Sender::new(0)),
        })
    }

    fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Waits (bounded) until at least `n` watches were opened.
    async fn wait_opened(&self, n: u64) {
        let mut rx = self.opened.subscribe();
        let r = tokio::time::timeout(WAIT, rx.wait_for(|&o| o >= n)).await;
        assert!(matches!(r, Ok(Ok(_))), "fewer than {n} watches opened");
    }
}

fn evicted() -> MemoryError {
    MemoryError::Evicted { capacity: 0 }
}

impl<T: Send + Sync + 'static> ListWatcher<T> for Breakable<T> {
    type Error = MemoryError;

    fn list(
        &self,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<ListPage<T>, MemoryError>> + Send {
        self.inner.list(opts)
    }

    fn watch(
        &self,
        opts: &WatchOptions,
    ) -> impl Future<Output = Result<WatchStream<T, MemoryError>, MemoryError>> + Send {
        // Subscribed before the watch opens: a cut from now on ends this watch.
        let cut = self.cuts.subscribe();
        let opened = self.opened.clone();
        let open = self.inner.watch(opts);
        async move {
            let events = open.await?;
            opened.send_modify(|n| *n += 1);
            let stream = stream::unfold(Some((events, cut)), |state| async move {
                let (mut events, mut cut) = state?;
                // A cut seen before the next poll wins over a ready event. (The tests write
                // nothing between a cut and the reflector's report of the error it caused.)
                if cut.has_changed().unwrap_or(true) {
                    return Some((Err(evicted()), None));
                }
                let next = {
                    let changed = pin!(cut.changed());
                    match select(events.next(), changed).await {
                        Either::Left((event, _)) => Some(event),
                        Either::Right(_) => None,
                    }
                };
                match next {
                    Some(Some(event)) => Some((event, Some((events, cut)))),
                    Some(None) => None,
                    None => Some((Err(evicted()), None)),
                }
            });
            Ok(stream.boxed())
        }
    }
}

type Informer<T> = SharedIndexInformer<T, Arc<Breakable<T>>>;

/// What one reconcile saw in the caches.
#[derive(Debug, Clone)]
struct Reconciled {
    key: ObjectKey,
    /// The parent under the key, from the parents' cache.
    parent: Option<Arc<Parent>>,
    /// The names of the children in the children's cache that name the key's parent as owner.
    children: Vec<String>,
}

/// The controller and its two informers over breakable sources, on one fake clock.
struct World {
    clock: FakeClock,
    parents_src: Arc<Breakable<Parent>>,
    children_src: Arc<Breakable<Child>>,
    parents: Arc<Informer<Parent>>,
    children: Arc<Informer<Child>>,
    /// Deletions as a separate handler on each informer receives them.
    parent_deletions: mpsc::UnboundedReceiver<DeletedObject<Parent>>,
    child_deletions: mpsc::UnboundedReceiver<DeletedObject<Child>>,
    /// Reflector errors reported to each informer's watch error handler, counted.
    parent_errors: watch::Receiver<u64>,
    child_errors: watch::Receiver<u64>,
    reconciled: mpsc::UnboundedReceiver<Reconciled>,
    handle: ControllerHandle,
    stops: Vec<oneshot::Sender<()>>,
    runs: Vec<tokio::task::JoinHandle<Result<(), kcache_informer::InformerError>>>,
}

fn informer<T>(name: &str, clock: &FakeClock, src: &Arc<Breakable<T>>) -> Arc<Informer<T>>
where
    T: Object + Send + Sync + 'static,
{
    Arc::new(SharedIndexInformer::with_options(
        src.clone(),
        InformerOptions::new()
            .name(name)
            .clock(Arc::new(clock.clone()))
            .backoff(BackoffConfig {
                initial: BACKOFF,
                factor: 1.0,
                jitter: 0.0,
                cap: BACKOFF,
                ..BackoffConfig::default()
            }),
    ))
}

/// Registers a handler sending every deletion to a channel, and a watch error handler counting
/// the reflector's errors.
fn observe<T>(
    inf: &Informer<T>,
) -> (
    mpsc::UnboundedReceiver<DeletedObject<T>>,
    watch::Receiver<u64>,
)
where
    T: Object + Send + Sync + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    inf.add_event_handler(
        HandlerFuncs::new().delete_func(move |d: &DeletedObject<T>| {
            let _ = tx.send(d.clone());
        }),
    )
    .unwrap();
    let errors = watch::Sender::new(0u64);
    let errors_rx = errors.subscribe();
    inf.set_watch_error_handler(move |_| errors.send_modify(|n| *n += 1))
        .unwrap();
    (rx, errors_rx)
}

impl World {
    /// Creates the objects, starts the informers and the controller (it watches the parents and
    /// owns the children, mapped to their owner), and waits until the initial keys are
    /// reconciled: the workers start only once both handlers received their initial lists, so
    /// the queue then holds each initial key once and exactly `initial_keys` reconciles follow.
    async fn start(parents: &[Parent], children: &[Child], initial_keys: u64) -> Self {
        let clock = FakeClock::new();
        let parents_src = Breakable::<Parent>::new(&clock);
        let children_src = Breakable::<Child>::new(&clock);
        for p in parents {
            parents_src.inner.create(p.clone()).unwrap();
        }
        for c in children {
            children_src.inner.create(c.clone()).unwrap();
        }
        let parents_inf = informer("parents", &clock, &parents_src);
        let children_inf = informer("children", &clock, &children_src);
        let (parent_deletions, parent_errors) = observe(&parents_inf);
        let (child_deletions, child_errors) = observe(&children_inf);

        let (tx, reconciled) = mpsc::unbounded_channel();
        let (parent_cache, child_cache) = (parents_inf.indexer(), children_inf.indexer());
        let handle = Controller::builder("replicasets")
            .clock(Arc::new(clock.clone()))
            .watches(&parents_inf)
            .owns(&children_inf, |c: &Child| vec![key(&c.owner)])
            .build()
            .unwrap()
            .run(move |k: &ObjectKey| {
                let name = k.as_str().rsplit('/').next().unwrap_or_default().to_owned();
                let mut owned: Vec<String> = child_cache
                    .list_all(|c| c.owner == name)
                    .iter()
                    .map(|c| c.name.clone())
                    .collect();
                owned.sort();
                let seen = Reconciled {
                    key: k.clone(),
                    parent: parent_cache.get_by_key(k),
                    children: owned,
                };
                tx.send(seen).map(|()| Action::Done)
            })
            .unwrap();

        let mut stops = Vec::new();
        let runs = vec![
            spawn_run(parents_inf.clone(), &mut stops),
            spawn_run(children_inf.clone(), &mut stops),
        ];
        let mut world = Self {
            clock,
            parents_src,
            children_src,
            parents: parents_inf,
            children: children_inf,
            parent_deletions,
            child_deletions,
            parent_errors,
            child_errors,
            reconciled,
            handle,
            stops,
            runs,
        };
        let started = tokio::time::timeout(WAIT, world.handle.wait_workers_started()).await;
        assert_eq!(started, Ok(true), "the caches did not sync");
        world.wait_reconciles(initial_keys).await;
        let initial = world.take(initial_keys).await;
        assert!(initial.iter().all(|r| r.parent.is_some()));
        world
    }

    /// Waits (bounded) until `n` reconciles have finished in all.
    async fn wait_reconciles(&self, n: u64) {
        let r = tokio::time::timeout(WAIT, self.handle.wait_stats(|s| s.reconciles >= n)).await;
        assert!(
            r.is_ok(),
            "fewer than {n} reconciles: {:?}",
            self.handle.stats()
        );
    }

    /// The next `n` reconciles (bounded wait).
    async fn take(&mut self, n: u64) -> Vec<Reconciled> {
        let mut got = Vec::new();
        for _ in 0..n {
            match tokio::time::timeout(WAIT, self.reconciled.recv()).await {
                Ok(Some(r)) => got.push(r),
                other => panic!("missing reconciles, have {got:?}: {other:?}"),
            }
        }
        got
    }

    /// Waits (bounded) until a watch error handler count reaches `n`.
    async fn wait_errors(errors: &mut watch::Receiver<u64>, n: u64) {
        let r = tokio::time::timeout(WAIT, errors.wait_for(|&e| e >= n)).await;
        assert!(matches!(r, Ok(Ok(_))), "the broken watch was not reported");
    }

    /// Lets the reflectors' backoff elapse: the relist starts.
    fn end_backoff(&self) {
        self.clock.advance(BACKOFF);
    }

    async fn stop(self) {
        let stats = tokio::time::timeout(WAIT, self.handle.shutdown_async()).await;
        assert!(stats.is_ok(), "the controller did not stop");
        for stop in self.stops {
            let _ = stop.send(());
        }
        for run in self.runs {
            let r = tokio::time::timeout(WAIT, run).await;
            assert!(
                matches!(r, Ok(Ok(Ok(())))),
                "an informer did not stop cleanly"
            );
        }
    }
}

fn spawn_run<T: Object + Send + Sync + 'static>(
    inf: Arc<Informer<T>>,
    stops: &mut Vec<oneshot::Sender<()>>,
) -> tokio::task::JoinHandle<Result<(), kcache_informer::InformerError>> {
    let (tx, rx) = oneshot::channel();
    stops.push(tx);
    tokio::spawn(async move {
        inf.run(async {
            let _ = rx.await;
        })
        .await
    })
}

/// Waits (bounded) until the informer's cache has applied the source's current version, then
/// compares their contents.
async fn assert_cache_equals_source<T>(inf: &Informer<T>, src: &Breakable<T>)
where
    T: Object + Clone + PartialEq + std::fmt::Debug + Send + Sync + SetResourceVersion + 'static,
{
    let rv = src.inner.resource_version();
    let r = tokio::time::timeout(WAIT, inf.wait_for_resource_version(&rv)).await;
    assert!(matches!(r, Ok(Ok(()))), "cache did not reach {rv}: {r:?}");
    let view = |objs: Vec<Arc<T>>| -> BTreeMap<String, T> {
        objs.iter()
            .map(|o| (o.name().to_owned(), (**o).clone()))
            .collect()
    };
    assert_eq!(
        view(inf.indexer().list()),
        view(src.inner.list_all()),
        "cache != source"
    );
}

/// The next deletion a handler received (bounded wait).
async fn next_deletion<T: std::fmt::Debug>(
    rx: &mut mpsc::UnboundedReceiver<DeletedObject<T>>,
) -> DeletedObject<T> {
    match tokio::time::timeout(WAIT, rx.recv()).await {
        Ok(Some(d)) => d,
        other => panic!("no deletion within the bound: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_deleted_while_the_watch_was_down_is_reconciled_through_its_tombstone() {
    let mut w = World::start(
        &[parent("alpha", 1), parent("beta", 1)],
        &[child("pod-1", "beta")],
        2, // alpha, beta (beta once for itself and its child)
    )
    .await;
    // The last state the cache knows of alpha (newer than its initial one).
    let last_known = w.parents_src.inner.update(parent("alpha", 2)).unwrap();
    w.wait_reconciles(3).await;
    let r = w.take(1).await;
    assert_eq!(r[0].key, key("alpha"));
    assert_eq!(r[0].parent.as_deref(), Some(&*last_known));

    // The watch breaks; alpha is deleted while the reflector backs off; then it relists.
    w.parents_src.wait_opened(1).await;
    w.parents_src.cut();
    World::wait_errors(&mut w.parent_errors, 1).await;
    w.parents_src.inner.delete("default/alpha").unwrap();
    w.end_backoff();

    // The handler's on_delete gets the tombstone with the last known state.
    let deleted = next_deletion(&mut w.parent_deletions).await;
    assert_eq!(deleted.key(), &key("alpha"));
    assert!(
        deleted.is_final_state_unknown(),
        "a relist's deletion is a DeletedFinalStateUnknown tombstone: {deleted:?}"
    );
    assert_eq!(
        deleted.object().map(|o| &**o),
        Some(&*last_known),
        "the tombstone carries the last state the cache knew"
    );
    let tombstone = deleted.to_tombstone().expect("the tombstone form");
    assert_eq!(tombstone.key, key("alpha"));

    // The controller reconciles alpha (its own key) and finds it gone from the cache. The relist
    // also resyncs beta (same resource version), which enqueues beta: two reconciles.
    w.wait_reconciles(5).await;
    let mut after = w.take(2).await;
    after.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(
        after.iter().map(|r| r.key.clone()).collect::<Vec<_>>(),
        [key("alpha"), key("beta")],
        "{after:?}"
    );
    assert!(
        after[0].parent.is_none(),
        "reconcile of the deleted parent must find it gone from the lister: {:?}",
        after[0]
    );
    assert_eq!(after[1].parent.as_ref().map(|p| p.replicas), Some(1));

    assert_cache_equals_source(&w.parents, &w.parents_src).await;
    assert_cache_equals_source(&w.children, &w.children_src).await;
    assert!(w.parents.indexer().get_by_key("default/alpha").is_none());
    assert!(
        w.parent_deletions.try_recv().is_err(),
        "one deletion, delivered once"
    );
    assert!(w.child_deletions.try_recv().is_err());
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_deleted_while_the_watch_was_down_wakes_the_owner_of_its_last_known_state() {
    let mut w = World::start(
        &[parent("alpha", 1), parent("beta", 1)],
        &[child("pod-1", "alpha"), child("pod-2", "alpha")],
        2, // alpha (itself and both children), beta
    )
    .await;
    // pod-1 moves from alpha to beta (both are woken): its last known state names beta.
    let last_known = w.children_src.inner.update(child("pod-1", "beta")).unwrap();
    w.wait_reconciles(4).await;
    let mut moved = w.take(2).await;
    moved.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(moved[0].key, key("alpha"));
    assert_eq!(moved[1].key, key("beta"));
    assert_eq!(moved[1].children, ["pod-1"]);

    // The children's watch breaks; pod-1 is deleted meanwhile; the reflector relists.
    w.children_src.wait_opened(1).await;
    w.children_src.cut();
    World::wait_errors(&mut w.child_errors, 1).await;
    w.children_src.inner.delete("default/pod-1").unwrap();
    w.end_backoff();

    let deleted = next_deletion(&mut w.child_deletions).await;
    assert_eq!(deleted.key(), &key("pod-1"));
    assert!(
        deleted.is_final_state_unknown(),
        "a relist's deletion is a DeletedFinalStateUnknown tombstone: {deleted:?}"
    );
    assert_eq!(
        deleted.object().map(|o| &**o),
        Some(&*last_known),
        "the tombstone carries the last state the cache knew (owner beta)"
    );

    // The owner named by the tombstone's object (beta) is reconciled, and sees its child gone;
    // alpha comes from the relist's resync of pod-2. The child's own key is never enqueued.
    w.wait_reconciles(6).await;
    let mut after = w.take(2).await;
    after.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(
        after.iter().map(|r| r.key.clone()).collect::<Vec<_>>(),
        [key("alpha"), key("beta")],
        "the tombstone must enqueue the owner of its last known state: {after:?}"
    );
    assert!(after[1].parent.is_some());
    assert!(
        after[1].children.is_empty(),
        "the owner's reconcile must find the deleted child gone from the cache: {:?}",
        after[1]
    );
    assert_eq!(after[0].children, ["pod-2"]);

    assert_cache_equals_source(&w.children, &w.children_src).await;
    assert_cache_equals_source(&w.parents, &w.parents_src).await;
    assert!(w.children.indexer().get_by_key("default/pod-1").is_none());
    assert!(
        w.child_deletions.try_recv().is_err(),
        "one deletion, delivered once"
    );
    assert!(w.parent_deletions.try_recv().is_err());
    let stats = w.handle.stats();
    assert_eq!((stats.errors, stats.panics), (0, 0));
    w.stop().await;
}
