//! A ReplicaSet controller on a real cluster with kcache: typed `Api<K>`s through kube-rs, two
//! shared informers (ReplicaSets; Pods with an owner index), a `Controller` with 4 workers and
//! rate-limited per-key retries, and read-your-writes after every create.
//!
//! It keeps, for every ReplicaSet labelled `kcache-example=true` in a namespace, as many Pods as
//! the set asks for (Kubernetes' own ReplicaSet controller does this job for real sets; scale its
//! deployment down, or use this on sets it does not own, to watch this one work).
//!
//! ```sh
//! cargo run -p kcache-kube --example controller -- [NAMESPACE]
//! ```
//! Needs a cluster (the current kubeconfig context). CI only compiles it.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kcache_controller::{Action, Controller};
use kcache_core::ObjectKey;
use kcache_indexer::Indexers;
use kcache_informer::{CacheReader, InformerOptions, SharedIndexInformer};
use kcache_kube::{KubeListWatcher, KubeMeta};
use kcache_workqueue::default_controller_rate_limiter;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use std::sync::Arc;

type Error = Box<dyn std::error::Error + Send + Sync>;
type Informer<K> = SharedIndexInformer<K, KubeListWatcher<K>, KubeMeta>;

const SELECTOR: &str = "kcache-example=true";
const OWNER_INDEX: &str = "owner";

/// The keys (`namespace/name`) of the ReplicaSets that own `pod`: the owner index's values, and
/// what a pod event enqueues.
fn owners(pod: &Pod) -> Vec<String> {
    let ns = pod.namespace().unwrap_or_default();
    pod.owner_references()
        .iter()
        .filter(|o| o.kind == "ReplicaSet")
        .map(|o| format!("{ns}/{}", o.name))
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let namespace = std::env::args().nth(1).unwrap_or_else(|| "default".into());
    let mut config = kube::Config::infer().await?;
    config.default_retry = false; // the reflector backs off by itself (client-go's backoff)
    let client = Client::try_from(config)?;
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &namespace);
    let pods: Api<Pod> = Api::namespaced(client, &namespace);

    // One shared, indexed cache per resource.
    let set_informer: Arc<Informer<ReplicaSet>> = Arc::new(SharedIndexInformer::with_accessor(
        KubeListWatcher::new(sets).labels(SELECTOR),
        InformerOptions::new().name("replicasets"),
    ));
    let owner_index = Indexers::new().with(OWNER_INDEX, |p: &Pod| Ok(owners(p)));
    let pod_informer: Arc<Informer<Pod>> = Arc::new(SharedIndexInformer::with_accessor(
        KubeListWatcher::new(pods.clone()).labels(SELECTOR),
        InformerOptions::new().name("pods").indexers(owner_index),
    ));

    // A set's key is queued when the set changes or when one of its pods does; 4 workers
    // reconcile keys, a failing key is retried with client-go's default controller rate limiter
    // (per key 5 ms doubling to 1000 s, overall 10 qps with a burst of 100).
    let controller = Controller::builder("replicasets")
        .workers(4)
        .rate_limiter(default_controller_rate_limiter())
        .watches(&set_informer)
        .owns(&pod_informer, |p: &Pod| {
            owners(p)
                .iter()
                .filter_map(|k| ObjectKey::new(k.as_str()).ok())
                .collect()
        })
        .build()?;
    let (set_cache, pod_cache) = (set_informer.indexer(), pod_informer.indexer());
    let informer = pod_informer.clone();
    let handle = controller.run_async(move |key: ObjectKey| {
        let (sets, cache) = (set_cache.clone(), pod_cache.clone());
        let (pods, informer) = (pods.clone(), informer.clone());
        async move { reconcile(key, &sets, &cache, &pods, &informer).await }
    })?;

    // Run both informers until Ctrl-C, then drain the workers.
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let stop = futures::future::FutureExt::shared(stop);
    let (a, b) = tokio::join!(set_informer.run(stop.clone()), pod_informer.run(stop));
    let stats = handle.shutdown_async().await;
    println!("stopped: {stats:?}");
    a?;
    b?;
    Ok(())
}

/// Brings the pods of the set `key` to its replica count, level-triggered: read the caches,
/// write the difference, wait until the pod cache shows the writes, then look again and requeue
/// while the set still differs (someone else may have deleted a new pod before the cache saw it,
/// and no event would bring the set back). An error is retried with backoff.
async fn reconcile(
    key: ObjectKey,
    sets: &CacheReader<ReplicaSet, KubeMeta>,
    cache: &CacheReader<Pod, KubeMeta>,
    pods: &Api<Pod>,
    pod_informer: &Informer<Pod>,
) -> Result<Action, Error> {
    let Some(set) = sets.get_by_key(&key) else {
        return Ok(Action::Done); // deleted: its pods go with Kubernetes' garbage collector
    };
    let want = usize::try_from(set.spec.replicas.unwrap_or(1))?;
    // Pods being deleted (graceful termination) no longer count, as in the ReplicaSet controller.
    let live = || -> Result<Vec<Arc<Pod>>, Error> {
        let owned = cache.by_index(OWNER_INDEX, key.as_str())?;
        Ok(owned
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect())
    };
    let owned = live()?;
    let mut wrote = false;
    for extra in owned.iter().skip(want) {
        let name = extra.name_any();
        let deleted = pods.delete(&name, &DeleteParams::default()).await?;
        if let Some(pod) = deleted.left() {
            // Terminating: the cache shows its deletion timestamp from this version on.
            if let Some(rv) = pod.resource_version() {
                pod_informer.wait_for_resource_version(&rv.into()).await?;
            }
        }
        wrote = true;
    }
    for _ in owned.len()..want {
        let created = pods.create(&PostParams::default(), &pod_for(&set)?).await?;
        // Read your own write: the next reconcile of this key sees the new pod in the cache,
        // so it does not create another one.
        if let Some(rv) = created.resource_version() {
            pod_informer.wait_for_resource_version(&rv.into()).await?;
        }
        wrote = true;
    }
    println!("{key}: {want} pods (had {})", owned.len());
    if wrote && live()?.len() != want {
        return Ok(Action::Requeue);
    }
    Ok(Action::Done)
}

/// A pod from the set's template, owned by the set.
fn pod_for(set: &ReplicaSet) -> Result<Pod, Error> {
    let template = set
        .spec
        .template
        .clone()
        .ok_or("the ReplicaSet has no pod template")?;
    let owner = OwnerReference {
        controller: Some(true),
        ..set
            .controller_owner_ref(&())
            .ok_or("the ReplicaSet has no uid")?
    };
    let mut labels = template.metadata.and_then(|m| m.labels).unwrap_or_default();
    labels.insert("kcache-example".into(), "true".into());
    Ok(Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", set.name_any())),
            labels: Some(labels),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec,
        ..Pod::default()
    })
}
