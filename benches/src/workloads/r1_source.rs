//! r1's source and snapshot codec.
//!
//! [`R1Source`] is a list-watcher whose state is r1's after the downtime: objects `0..1000`
//! changed (label `app-{(i + 7) % 50}`, resourceVersion `100001 + i`), objects `1000..1100`
//! deleted (at `101001 ..= 101100`), the rest as first written ([`initial`]); its current version
//! is `101100`. Every object handed out goes over a stand-in for the wire: built, encoded to JSON
//! (the server's work) and decoded again (the client's), without the network. A list (pages,
//! continue token = the next index) does so page by page; a watch from the snapshot's version
//! `100000` delivers the 1,100 missed changes in order, then a bookmark at `101100`, then stays open;
//! a watch from any other version stays open and silent. Every object handed out, in a list page
//! or a watch event, is counted.
//!
//! [`ConfigMapCodec`] encodes the fields r1's objects carry (namespace, name, resourceVersion,
//! labels) in a compact binary form and refuses objects with other fields.

use crate::objects::{config_map, initial, ConfigMapMeta, OBJECTS};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcache_core::ResourceVersion;
use kcache_informer::snapshot::{CodecError, SnapshotCodec};
use kcache_reflector::{
    BackendError, Bookmark, ErrorKind, ListOptions, ListPage, ListWatcher, WatchEvent,
    WatchOptions, WatchStream,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The snapshot's version: every initial object is at or below it.
pub(super) const SNAPSHOT_RV: u64 = OBJECTS as u64;
/// Objects changed while the informer is down.
pub(super) const CHANGED: usize = 1000;
/// Objects deleted while the informer is down (the next indexes after the changed ones).
pub(super) const DELETED: usize = 100;
/// The source's version after the downtime.
pub(super) const CURRENT_RV: u64 = SNAPSHOT_RV + (CHANGED + DELETED) as u64;

/// Object `i` as changed while the informer was down.
pub(super) fn changed(i: usize) -> ConfigMap {
    config_map(i, i + 7, SNAPSHOT_RV + 1 + i as u64)
}

/// Whether object `i` is gone after the downtime.
fn deleted(i: usize) -> bool {
    (CHANGED..CHANGED + DELETED).contains(&i)
}

/// Object `i` after the downtime (`None`: deleted).
pub(super) fn current(i: usize) -> Option<ConfigMap> {
    if i < CHANGED {
        Some(changed(i))
    } else if deleted(i) {
        None
    } else {
        Some(initial(i))
    }
}

/// How many objects exist after the downtime.
pub(super) const CURRENT_OBJECTS: usize = OBJECTS - DELETED;

/// What r1's source reports.
#[derive(Debug)]
pub(super) enum R1Error {
    /// A continue token this source did not hand out.
    BadContinue(String),
    /// Objects did not survive their JSON round trip.
    Wire(String),
}

impl std::fmt::Display for R1Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BadContinue(t) => write!(f, "r1: bad continue token {t:?}"),
            Self::Wire(e) => write!(f, "r1: JSON round trip: {e}"),
        }
    }
}

impl std::error::Error for R1Error {}

impl BackendError for R1Error {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Other
    }
}

/// The source after the downtime (see the module documentation).
#[derive(Clone, Default)]
pub(super) struct R1Source {
    transferred: Arc<AtomicU64>,
    lists: Arc<AtomicU64>,
}

impl R1Source {
    /// Objects handed out so far, in list pages and watch events.
    pub(super) fn transferred(&self) -> u64 {
        self.transferred.load(Ordering::Relaxed)
    }
    /// Complete lists served.
    pub(super) fn lists(&self) -> u64 {
        self.lists.load(Ordering::Relaxed)
    }

    fn page(&self, opts: &ListOptions) -> Result<ListPage<ConfigMap>, R1Error> {
        let from = match &opts.continue_token {
            None => 0,
            Some(t) => t
                .parse::<usize>()
                .map_err(|_| R1Error::BadContinue(t.clone()))?,
        };
        let limit = opts.limit.map_or(OBJECTS, |l| l.max(1) as usize);
        let to = from.saturating_add(limit).min(OBJECTS);
        let page: Vec<ConfigMap> = (from..to).filter_map(current).collect();
        let items: Vec<Arc<ConfigMap>> = over_the_wire(&page)?.into_iter().map(Arc::new).collect();
        self.transferred
            .fetch_add(items.len() as u64, Ordering::Relaxed);
        let continue_token = (to < OBJECTS).then(|| to.to_string());
        if continue_token.is_none() {
            self.lists.fetch_add(1, Ordering::Relaxed);
        }
        Ok(ListPage {
            items,
            resource_version: ResourceVersion::from(CURRENT_RV.to_string()),
            continue_token,
        })
    }

    /// The changes made while the informer was down, in order, then the bookmark at the
    /// source's version.
    fn missed(&self) -> Vec<Result<WatchEvent<ConfigMap>, R1Error>> {
        let mut events = Vec::with_capacity(CHANGED + DELETED + 1);
        let one = |cm: ConfigMap| -> Result<Arc<ConfigMap>, R1Error> {
            let mut decoded = over_the_wire(std::slice::from_ref(&cm))?;
            decoded
                .pop()
                .map(Arc::new)
                .ok_or(R1Error::Wire("an empty event".into()))
        };
        for i in 0..CHANGED {
            events.push(one(changed(i)).map(WatchEvent::Modified));
        }
        for (k, i) in (CHANGED..CHANGED + DELETED).enumerate() {
            // The last state, stamped with the deletion's version.
            let rv = SNAPSHOT_RV + (CHANGED + k) as u64 + 1;
            events.push(one(config_map(i, i, rv)).map(WatchEvent::Deleted));
        }
        self.transferred
            .fetch_add((CHANGED + DELETED) as u64, Ordering::Relaxed);
        events.push(Ok(WatchEvent::Bookmark(Bookmark {
            resource_version: ResourceVersion::from(CURRENT_RV.to_string()),
            initial_events_end: false,
        })));
        events
    }
}

impl ListWatcher<ConfigMap> for R1Source {
    type Error = R1Error;

    async fn list(&self, opts: &ListOptions) -> Result<ListPage<ConfigMap>, R1Error> {
        self.page(opts)
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchStream<ConfigMap, R1Error>, R1Error> {
        use futures::StreamExt;
        let events = if opts.resource_version.as_str() == SNAPSHOT_RV.to_string() {
            self.missed()
        } else {
            Vec::new()
        };
        Ok(futures::stream::iter(events)
            .chain(futures::stream::pending())
            .boxed())
    }

    async fn current_resource_version(&self) -> Result<Option<ResourceVersion>, R1Error> {
        Ok(Some(ResourceVersion::from(CURRENT_RV.to_string())))
    }
}

/// `objects` as a client receives them: encoded to JSON (the server's work) and decoded again
/// (the client's), without the network in between.
fn over_the_wire(objects: &[ConfigMap]) -> Result<Vec<ConfigMap>, R1Error> {
    let bytes = serde_json::to_vec(objects).map_err(|e| R1Error::Wire(e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| R1Error::Wire(e.to_string()))
}

/// A compact binary codec for the fields r1's `ConfigMap`s carry: namespace, name,
/// resourceVersion and labels, each string as a little-endian `u32` length and its bytes (an
/// absent field and an empty one differ by a leading flag byte). An object with any other field
/// set is refused (the codec would lose it).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ConfigMapCodec;

impl SnapshotCodec<ConfigMap> for ConfigMapCodec {
    fn type_name(&self) -> &str {
        "r1/ConfigMap/v1"
    }

    fn encode(&self, cm: &ConfigMap, out: &mut Vec<u8>) -> Result<(), CodecError> {
        if !only_kept_fields(cm) {
            return Err(CodecError::new(
                "r1's codec keeps namespace, name, resourceVersion and labels only",
            ));
        }
        let m = &cm.metadata;
        for field in [&m.namespace, &m.name, &m.resource_version] {
            put_opt(out, field.as_deref())?;
        }
        match &m.labels {
            None => out.push(0),
            Some(labels) => {
                out.push(1);
                put_len(out, labels.len())?;
                for (k, v) in labels {
                    put_str(out, k)?;
                    put_str(out, v)?;
                }
            }
        }
        Ok(())
    }

    fn decode(&self, mut bytes: &[u8]) -> Result<ConfigMap, CodecError> {
        let b = &mut bytes;
        let namespace = take_opt(b)?;
        let name = take_opt(b)?;
        let resource_version = take_opt(b)?;
        let labels = match take(b, 1)?[0] {
            0 => None,
            1 => {
                let n = take_len(b)?;
                let mut labels = BTreeMap::new();
                for _ in 0..n {
                    let k = take_str(b)?;
                    labels.insert(k, take_str(b)?);
                }
                Some(labels)
            }
            _ => return Err(CodecError::new("bad labels flag")),
        };
        if !b.is_empty() {
            return Err(CodecError::new("trailing bytes after the object"));
        }
        Ok(ConfigMap {
            metadata: ObjectMeta {
                namespace,
                name,
                resource_version,
                labels,
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        })
    }
}

/// Whether `cm` has no field but those the codec keeps (every field named, so a new field in
/// k8s-openapi fails to compile here instead of being lost).
fn only_kept_fields(cm: &ConfigMap) -> bool {
    let ConfigMap {
        binary_data,
        data,
        immutable,
        metadata,
    } = cm;
    let ObjectMeta {
        annotations,
        creation_timestamp,
        deletion_grace_period_seconds,
        deletion_timestamp,
        finalizers,
        generate_name,
        generation,
        labels: _,
        managed_fields,
        name: _,
        namespace: _,
        owner_references,
        resource_version: _,
        self_link,
        uid,
    } = metadata;
    binary_data.is_none()
        && data.is_none()
        && immutable.is_none()
        && annotations.is_none()
        && creation_timestamp.is_none()
        && deletion_grace_period_seconds.is_none()
        && deletion_timestamp.is_none()
        && finalizers.is_none()
        && generate_name.is_none()
        && generation.is_none()
        && managed_fields.is_none()
        && owner_references.is_none()
        && self_link.is_none()
        && uid.is_none()
}

fn put_len(out: &mut Vec<u8>, n: usize) -> Result<(), CodecError> {
    let n = u32::try_from(n).map_err(CodecError::new)?;
    out.extend_from_slice(&n.to_le_bytes());
    Ok(())
}

fn put_str(out: &mut Vec<u8>, s: &str) -> Result<(), CodecError> {
    put_len(out, s.len())?;
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn put_opt(out: &mut Vec<u8>, s: Option<&str>) -> Result<(), CodecError> {
    match s {
        None => {
            out.push(0);
            Ok(())
        }
        Some(s) => {
            out.push(1);
            put_str(out, s)
        }
    }
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], CodecError> {
    let (head, rest) = b
        .split_at_checked(n)
        .ok_or_else(|| CodecError::new("truncated object"))?;
    *b = rest;
    Ok(head)
}

fn take_len(b: &mut &[u8]) -> Result<usize, CodecError> {
    let raw = take(b, 4)?;
    let n = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
    // Every entry takes at least a byte: a count above the bytes left is a lie.
    if n > b.len() {
        return Err(CodecError::new("length past the object's end"));
    }
    Ok(n)
}

fn take_str(b: &mut &[u8]) -> Result<String, CodecError> {
    let n = take_len(b)?;
    let s = std::str::from_utf8(take(b, n)?).map_err(CodecError::new)?;
    Ok(s.to_owned())
}

fn take_opt(b: &mut &[u8]) -> Result<Option<String>, CodecError> {
    match take(b, 1)?[0] {
        0 => Ok(None),
        1 => take_str(b).map(Some),
        _ => Err(CodecError::new("bad field flag")),
    }
}

/// The accessor r1's informer reads keys through.
pub(super) type Meta = ConfigMapMeta;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codec_round_trips_r1s_objects_and_refuses_what_it_would_lose() {
        let codec = ConfigMapCodec;
        for cm in [initial(5), changed(7), ConfigMap::default()] {
            let mut bytes = Vec::new();
            codec.encode(&cm, &mut bytes).unwrap();
            assert_eq!(codec.decode(&bytes).unwrap(), cm);
            for cut in 0..bytes.len() {
                assert!(codec.decode(&bytes[..cut]).is_err(), "cut at {cut}");
            }
        }
        let mut with_data = initial(1);
        with_data.data = Some(BTreeMap::from([("k".into(), "v".into())]));
        assert!(codec.encode(&with_data, &mut Vec::new()).is_err());
    }

    #[test]
    fn the_source_lists_the_state_after_the_downtime_and_counts_it() {
        let source = R1Source::default();
        let page = source
            .page(&ListOptions {
                limit: Some(2000),
                ..ListOptions::default()
            })
            .unwrap();
        assert_eq!(page.items.len(), 1900);
        assert_eq!(page.continue_token.as_deref(), Some("2000"));
        assert_eq!(source.transferred(), 1900);
        assert_eq!(current(0), Some(changed(0)));
        assert_eq!(current(1050), None);
        assert_eq!(current(OBJECTS - 1), Some(initial(OBJECTS - 1)));
    }
}
