//! The demo's world: `ReplicaSet`-like sets and their `Pod`-like children in two sources (in
//! memory or in etcd, through [`Source`]), the reconcile function, the seeded "user", and the
//! convergence check.

use crate::metrics::Histogram;
use crate::restart::CountingLists;
use crate::source::Source;
use kcache_controller::{Action, ConsistencyStore, WriteTracker};
use kcache_core::sync::Mutex;
use kcache_core::{Clock, Object, ObjectKey, ResourceVersion, SetResourceVersion};
use kcache_informer::SharedIndexInformer;
use kcache_reflector::FaultInjector;
use kcache_workqueue::metrics::HistogramMetric;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Every object lives in this namespace.
pub(crate) const NAMESPACE: &str = "demo";
/// The name of the pods' owner index.
pub(crate) const OWNER_INDEX: &str = "owner";

/// A `ReplicaSet`-like object: how many pods it wants. In etcd it is stored as JSON without its
/// resource version (the key's `mod_revision` is the version).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "etcd", derive(serde::Serialize, serde::Deserialize))]
pub(crate) struct ReplicaSet {
    pub(crate) name: String,
    pub(crate) replicas: u32,
    #[cfg_attr(feature = "etcd", serde(skip))]
    pub(crate) rv: ResourceVersion,
}

/// A `Pod`-like object owned by a set (its owner reference is the set's key).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "etcd", derive(serde::Serialize, serde::Deserialize))]
pub(crate) struct Pod {
    pub(crate) name: String,
    pub(crate) owner: String,
    #[cfg_attr(feature = "etcd", serde(skip))]
    pub(crate) rv: ResourceVersion,
}

impl Object for ReplicaSet {
    fn namespace(&self) -> Option<&str> {
        Some(NAMESPACE)
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        self.rv.clone()
    }
}

impl SetResourceVersion for ReplicaSet {
    fn set_resource_version(&mut self, rv: ResourceVersion) {
        self.rv = rv;
    }
}

impl Object for Pod {
    fn namespace(&self) -> Option<&str> {
        Some(NAMESPACE)
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

/// The informers over the sources (through a list counter and a fault injector that injects nothing without
/// `--chaos`).
pub(crate) type SetInformer<S> = SharedIndexInformer<
    ReplicaSet,
    CountingLists<FaultInjector<<S as Source<ReplicaSet>>::ListWatcher>>,
>;
pub(crate) type PodInformer<P> =
    SharedIndexInformer<Pod, CountingLists<FaultInjector<<P as Source<Pod>>::ListWatcher>>>;

/// What the reconciles did, for the report.
#[derive(Debug, Default)]
pub(crate) struct ReconcileStats {
    pub(crate) latency: Histogram,
    pub(crate) pods_created: AtomicU64,
    pub(crate) pods_deleted: AtomicU64,
    /// Reconciles that found the world still different from the wish once the previous
    /// reconcile's writes had reached the cache (and wrote again).
    pub(crate) unsettled: AtomicU64,
}

/// What the reconcile function needs: the caches, where pods are written, where the writes are
/// recorded, the clock.
pub(crate) struct Ctx<S: Source<ReplicaSet>, P: Source<Pod>> {
    pub(crate) sets: Arc<SetInformer<S>>,
    pub(crate) pods: Arc<PodInformer<P>>,
    pub(crate) pod_source: P,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) stats: Arc<ReconcileStats>,
    /// Records pod writes under the set's key in the controller's consistency store.
    pod_writes: WriteTracker,
    /// Sets whose last reconcile wrote (their next reconcile is a follow-up).
    wrote: Mutex<HashSet<ObjectKey>>,
    next_pod: AtomicU64,
    /// Put before a pod's number in its name (replicas set it apart: several of them create
    /// pods for one set over time).
    pub(crate) pod_prefix: String,
}

impl<S: Source<ReplicaSet>, P: Source<Pod>> Ctx<S, P> {
    /// `consistency` is the store the controller was built with
    /// ([`consistency_store`](kcache_controller::ControllerBuilder::consistency_store)).
    pub(crate) fn new(
        sets: Arc<SetInformer<S>>,
        pods: Arc<PodInformer<P>>,
        pod_source: P,
        clock: Arc<dyn Clock>,
        consistency: &ConsistencyStore,
    ) -> Self {
        Self {
            pod_writes: consistency.tracker(&pods),
            sets,
            pods,
            pod_source,
            clock,
            stats: Arc::new(ReconcileStats::default()),
            wrote: Mutex::new(HashSet::new()),
            next_pod: AtomicU64::new(0),
            pod_prefix: String::new(),
        }
    }
}

/// Makes the pods of the set `key` match its desired count, reading both caches (the set's
/// absence, after a delete or a tombstone, means zero). Level-triggered, the pattern to copy:
///
/// 1. read the wish and the world from the caches, never from the event that queued the key;
/// 2. write the difference to the source, recording each write's resource version in the
///    controller's [`ConsistencyStore`] (KEP-5647): the key's next reconcile is held back until
///    the pod cache shows these writes, so no reconcile counts stale pods and creates them twice;
/// 3. after writing, return [`Action::Requeue`]: the key comes back once the cache shows the
///    writes, and that reconcile looks *again*. Something else may have changed the world
///    meanwhile, and its event may never come: pods created and deleted while the pod cache was
///    blind (a watch cut, a relist after backoff) leave no trace in the relist, and the store is
///    satisfied by the relist's newer version. Returning `Done` after writing would leave such a
///    set short for good. A reconcile that finds nothing to write returns `Done`.
pub(crate) async fn reconcile<S: Source<ReplicaSet>, P: Source<Pod>>(
    ctx: Arc<Ctx<S, P>>,
    key: ObjectKey,
) -> Result<Action, String> {
    let start = ctx.clock.now();
    let follow_up = ctx.wrote.lock().remove(&key);
    let (want, mut pods) = observe(&ctx, &key)?;
    if follow_up && pods.len() != want {
        // Our last writes are in the cache, and the world still differs from the wish.
        ctx.stats.unsettled.fetch_add(1, Relaxed);
    }
    let mut wrote = false;
    if pods.len() < want {
        let set_name = key.name();
        for _ in pods.len()..want {
            let n = ctx.next_pod.fetch_add(1, Relaxed);
            let pod = Pod {
                name: format!("{set_name}-{}{n:x}", ctx.pod_prefix),
                owner: key.to_string(),
                rv: ResourceVersion::default(),
            };
            let created = ctx.pod_source.create(pod).await?;
            ctx.stats.pods_created.fetch_add(1, Relaxed);
            ctx.pod_writes
                .record(&key, &created)
                .map_err(|e| e.to_string())?;
            wrote = true;
        }
    } else if pods.len() > want {
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        for pod in &pods[want..] {
            let pod_key = ObjectKey::namespaced(NAMESPACE, &pod.name).map_err(|e| e.to_string())?;
            // `None`: deleted meanwhile (by the chaos user): its event will bring the set back.
            if let Some(deleted) = ctx.pod_source.delete(&pod_key).await? {
                ctx.stats.pods_deleted.fetch_add(1, Relaxed);
                ctx.pod_writes
                    .record(&key, &deleted)
                    .map_err(|e| e.to_string())?;
                wrote = true;
            }
        }
    }
    let took = ctx.clock.now().saturating_duration_since(start);
    ctx.stats.latency.observe(took.as_secs_f64());
    if wrote {
        ctx.wrote.lock().insert(key);
        return Ok(Action::Requeue);
    }
    Ok(Action::Done)
}

/// The set's desired pod count and its pods, as the caches hold them now.
fn observe<S: Source<ReplicaSet>, P: Source<Pod>>(
    ctx: &Ctx<S, P>,
    key: &ObjectKey,
) -> Result<(usize, Vec<Arc<Pod>>), String> {
    let want = ctx
        .sets
        .indexer()
        .get_by_key(key)
        .map_or(0, |s| s.replicas as usize);
    let pods = ctx
        .pods
        .indexer()
        .by_index(OWNER_INDEX, key.as_str())
        .map_err(|e| e.to_string())?;
    Ok((want, pods))
}

/// SplitMix64: a seeded generator, so a seed always gives the same user.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (0 when `n == 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

/// What the user did.
#[derive(Debug, Default)]
pub(crate) struct UserStats {
    pub(crate) scaled: AtomicU64,
    pub(crate) created: AtomicU64,
    pub(crate) deleted: AtomicU64,
    pub(crate) pods_killed: AtomicU64,
    /// Actions that failed (the source refused or was unreachable); the user goes on.
    pub(crate) failed: AtomicU64,
}

/// The seeded user: scales, deletes and creates sets (and with `chaos` deletes random pods).
pub(crate) struct User<S, P> {
    pub(crate) sets: S,
    pub(crate) pods: P,
    pub(crate) rng: Rng,
    pub(crate) live: Vec<String>,
    pub(crate) next_set: u64,
    pub(crate) target_sets: usize,
    pub(crate) max_replicas: u32,
    pub(crate) chaos: bool,
    pub(crate) stats: Arc<UserStats>,
}

/// The key of the object `name` in the demo's namespace.
fn key(name: &str) -> Result<ObjectKey, String> {
    ObjectKey::namespaced(NAMESPACE, name).map_err(|e| e.to_string())
}

impl<S: Source<ReplicaSet>, P: Source<Pod>> User<S, P> {
    /// Creates a set with a fresh name and a random size.
    pub(crate) async fn create_set(&mut self) -> Result<(), String> {
        let name = format!("rs-{:05}", self.next_set);
        self.next_set += 1;
        let replicas = self.rng.below(u64::from(self.max_replicas) + 1) as u32;
        self.sets
            .create(ReplicaSet {
                name: name.clone(),
                replicas,
                rv: ResourceVersion::default(),
            })
            .await?;
        self.live.push(name);
        Ok(())
    }

    /// One action.
    pub(crate) async fn step(&mut self) -> Result<(), String> {
        let roll = self.rng.below(100);
        if self.chaos && roll < 15 {
            let pods = self.pods.list().await?;
            if !pods.is_empty() {
                let victim = &pods[self.rng.below(pods.len() as u64) as usize];
                if self.pods.delete(&key(&victim.name)?).await?.is_some() {
                    self.stats.pods_killed.fetch_add(1, Relaxed);
                }
            }
            return Ok(());
        }
        let too_few = self.live.len() < self.target_sets / 2 + 1;
        let too_many = self.live.len() > self.target_sets * 3 / 2;
        if too_few || (roll >= 90 && !too_many) {
            self.stats.created.fetch_add(1, Relaxed);
            return self.create_set().await;
        }
        let i = self.rng.below(self.live.len() as u64) as usize;
        if roll >= 80 || too_many {
            let name = self.live.swap_remove(i);
            if self.sets.delete(&key(&name)?).await?.is_none() {
                return Err(format!("set {name} was not there to delete"));
            }
            self.stats.deleted.fetch_add(1, Relaxed);
            return Ok(());
        }
        if let Some(set) = self.sets.get(&key(&self.live[i])?).await? {
            let mut set = (*set).clone();
            set.replicas = self.rng.below(u64::from(self.max_replicas) + 1) as u32;
            self.sets.update(set).await?;
            self.stats.scaled.fetch_add(1, Relaxed);
        }
        Ok(())
    }
}

/// The world as read from the source, checked: every set has exactly its desired pods, and no
/// pod's owner is missing. Returns the problems (empty: converged).
pub(crate) fn check(sets: &[Arc<ReplicaSet>], pods: &[Arc<Pod>]) -> Vec<String> {
    let mut by_owner: HashMap<String, usize> = HashMap::new();
    for pod in pods {
        *by_owner.entry(pod.owner.clone()).or_default() += 1;
    }
    let mut problems = Vec::new();
    for set in sets {
        let key = format!("{NAMESPACE}/{}", set.name);
        let have = by_owner.remove(&key).unwrap_or(0);
        if have != set.replicas as usize {
            problems.push(format!("{key} wants {} pods, has {have}", set.replicas));
        }
    }
    let mut orphans: Vec<_> = by_owner.into_iter().collect();
    orphans.sort();
    for (owner, n) in orphans {
        problems.push(format!("{n} orphan pod(s) of deleted set {owner}"));
    }
    problems
}

/// Whether a cache holds exactly `source`'s objects at their versions (names are unique: every
/// object lives in [`NAMESPACE`]).
pub(crate) fn same_objects<T: Object>(cache: &[Arc<T>], source: &[Arc<T>]) -> bool {
    let versions = |objs: &[Arc<T>]| -> HashMap<String, ResourceVersion> {
        objs.iter()
            .map(|o| (o.name().to_owned(), o.resource_version()))
            .collect()
    };
    cache.len() == source.len() && versions(cache) == versions(source)
}

#[cfg(test)]
mod tests;
