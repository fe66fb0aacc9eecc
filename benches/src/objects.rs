//! The objects of the store workloads (i1, f1, e1, m1): Kubernetes `ConfigMap`s from
//! `k8s-openapi`, the key accessor kcache needs for them, and the byte counting that tells how much
//! a store adds beyond the objects.
//!
//! Object `i` (of `0..100,000`) has namespace `ns-{i % 100}`, name `name-{i}`, resourceVersion
//! `{i + 1}` and the single label `app = app-{i % 50}`, no data; its key is `ns/name`.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcache_core::{KeyError, Meta, ObjectKey, ResourceVersion};
use kcache_memory::MetaMut;
use std::collections::BTreeMap;
use std::sync::Arc;

/// How many objects the store workloads hold.
pub const OBJECTS: usize = 100_000;

/// kcache's key accessor for `ConfigMap`: reads `metadata.namespace`, `metadata.name` and
/// `metadata.resourceVersion` (and, for [`kcache_memory::MemorySource`], writes the latter).
///
/// # Examples
/// ```
/// use kcache_benches::objects::{config_map, ConfigMapMeta};
/// use kcache_core::Meta;
///
/// let cm = config_map(7, 7, 8);
/// assert_eq!(ConfigMapMeta::key(&cm).unwrap().as_str(), "ns-7/name-7");
/// assert_eq!(ConfigMapMeta::resource_version(&cm).as_str(), "8");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ConfigMapMeta;

impl Meta<ConfigMap> for ConfigMapMeta {
    fn key(obj: &ConfigMap) -> Result<ObjectKey, KeyError> {
        let name = obj.metadata.name.as_deref().unwrap_or("");
        if name.is_empty() {
            return Err(KeyError::MissingName);
        }
        ObjectKey::namespaced(obj.metadata.namespace.as_deref().unwrap_or(""), name)
    }

    fn resource_version(obj: &ConfigMap) -> ResourceVersion {
        obj.metadata
            .resource_version
            .as_deref()
            .map(ResourceVersion::from)
            .unwrap_or_default()
    }

    fn write_key(obj: &ConfigMap, out: &mut String) -> Result<(), KeyError> {
        let name = obj.metadata.name.as_deref().unwrap_or("");
        if name.is_empty() {
            out.clear();
            return Err(KeyError::MissingName);
        }
        ObjectKey::write_namespaced(obj.metadata.namespace.as_deref().unwrap_or(""), name, out)
    }

    fn same_resource_version(a: &ConfigMap, b: &ConfigMap) -> bool {
        a.metadata.resource_version.as_deref().unwrap_or("")
            == b.metadata.resource_version.as_deref().unwrap_or("")
    }
}

impl MetaMut<ConfigMap> for ConfigMapMeta {
    fn set_resource_version(obj: &mut ConfigMap, rv: ResourceVersion) {
        obj.metadata.resource_version = Some(rv.as_str().to_owned());
    }
}

/// Object `i` with the label `app-{app % 50}` and resourceVersion `rv`.
pub fn config_map(i: usize, app: usize, rv: u64) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            namespace: Some(format!("ns-{}", i % 100)),
            name: Some(format!("name-{i}")),
            resource_version: Some(rv.to_string()),
            labels: Some(BTreeMap::from([(
                "app".to_owned(),
                format!("app-{}", app % 50),
            )])),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// Object `i` as first written: label `app-{i % 50}`, resourceVersion `{i + 1}`.
pub fn initial(i: usize) -> ConfigMap {
    config_map(i, i, i as u64 + 1)
}

/// i1's replacement of object `i`: label `app-{(i + 1) % 50}`, resourceVersion
/// `{100000 + i + 1}`.
pub fn replacement(i: usize) -> ConfigMap {
    config_map(i, i + 1, (OBJECTS + i) as u64 + 1)
}

/// The namespace of `cm` (empty when unset).
pub fn namespace(cm: &ConfigMap) -> &str {
    cm.metadata.namespace.as_deref().unwrap_or("")
}

/// The `app` label of `cm`, if any.
pub fn app(cm: &ConfigMap) -> Option<&str> {
    cm.metadata.labels.as_ref()?.get("app").map(String::as_str)
}

/// The key `ns/name` of `cm` as a `String`.
pub fn key(cm: &ConfigMap) -> String {
    format!(
        "{}/{}",
        namespace(cm),
        cm.metadata.name.as_deref().unwrap_or("")
    )
}

/// The resourceVersion of `cm` as a number (0 when unset or not a number).
pub fn rv(cm: &ConfigMap) -> u64 {
    cm.metadata
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

/// Runs `f` and returns its result with the bytes it left allocated (allocated minus freed) on
/// the calling thread.
///
/// Allocations are counted by `allocation-counter`'s global allocator, which every binary linking
/// this crate uses: it counts into thread-local counters (no shared cache line, so threads do not
/// slow each other down, unlike a global atomic counter) and counts only the calling thread's
/// allocations: run what is measured on this thread.
///
/// # Examples
/// ```
/// use kcache_benches::objects::measure_bytes;
///
/// let (v, bytes) = measure_bytes(|| vec![0u8; 1000]);
/// assert_eq!((v.len(), bytes), (1000, 1000));
/// ```
pub fn measure_bytes<R>(f: impl FnOnce() -> R) -> (R, i64) {
    let mut out = None;
    let info = allocation_counter::measure(|| out = Some(f()));
    match out {
        Some(r) => (r, info.bytes_current),
        None => unreachable!("measure runs its closure once"),
    }
}

/// Runs `f` and returns its result with the calling thread's allocation figures over the run:
/// `bytes_current` is what it left allocated, `bytes_max` the peak of live bytes above the level
/// at the start (see [`measure_bytes`] for what is counted).
///
/// # Examples
/// ```
/// use kcache_benches::objects::measure_bytes_info;
///
/// let ((), info) = measure_bytes_info(|| drop(vec![0u8; 1000]));
/// assert_eq!((info.bytes_max, info.bytes_current), (1000, 0));
/// ```
pub fn measure_bytes_info<R>(f: impl FnOnce() -> R) -> (R, allocation_counter::AllocationInfo) {
    let mut out = None;
    let info = allocation_counter::measure(|| out = Some(f()));
    match out {
        Some(r) => (r, info),
        None => unreachable!("measure runs its closure once"),
    }
}

/// Builds `n` objects with `make` as `Arc`s, returning them with the bytes each took on average
/// (its heap strings and map, the `ConfigMap` itself and the `Arc` header): the "object's own
/// bytes" that the memory metrics subtract. Each kept object is a clone of the one `make` built,
/// so its strings are allocated exactly as a store's deep clone allocates them.
pub fn build_counted(n: usize, make: impl Fn(usize) -> ConfigMap) -> (Vec<Arc<ConfigMap>>, f64) {
    let mut out = Vec::with_capacity(n);
    let ((), bytes) = measure_bytes(|| {
        for i in 0..n {
            let made = make(i);
            out.push(Arc::new(made.clone()));
        }
    });
    (out, bytes as f64 / n as f64)
}
