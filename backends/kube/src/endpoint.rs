//! The list and watch requests shared by both list-watchers: parameter mapping, the list call,
//! and the watch stream decoder.

use crate::error::KubeError;
use futures::io::AsyncBufReadExt;
use futures::{stream, StreamExt};
use kcache_core::ResourceVersion;
use kcache_reflector::{
    Bookmark, ListOptions, ListPage, ResourceVersionMatch, WatchEvent, WatchOptions, WatchStream,
};
use kube::api::{ListParams, VersionMatch, WatchParams};
use kube::core::{ObjectList, Request, Status, WatchEvent as KubeEvent};
use kube::Client;
use serde::de::DeserializeOwned;
use std::io;
use std::sync::Arc;

/// The annotation of the bookmark that ends a streaming list's initial events
/// (`k8s.io/initial-events-end`, value `"true"`).
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// Where and what to list and watch.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) client: Client,
    pub(crate) url: String,
    /// Metadata-only requests (`PartialObjectMetadata` / `PartialObjectMetadataList`).
    pub(crate) metadata: bool,
    pub(crate) label_selector: Option<String>,
    pub(crate) field_selector: Option<String>,
}

impl Endpoint {
    pub(crate) fn list_params(&self, opts: &ListOptions) -> ListParams {
        let rv = opts.resource_version.as_str();
        let mut lp = ListParams::default();
        lp.label_selector.clone_from(&self.label_selector);
        lp.field_selector.clone_from(&self.field_selector);
        lp.limit = opts.limit;
        lp.continue_token.clone_from(&opts.continue_token);
        if !rv.is_empty() {
            lp.resource_version = Some(rv.to_owned());
            // Kubernetes rejects a match without a version; "" is a consistent read either way.
            lp.version_match = opts.resource_version_match.map(|m| match m {
                ResourceVersionMatch::NotOlderThan => VersionMatch::NotOlderThan,
                ResourceVersionMatch::Exact => VersionMatch::Exact,
            });
        }
        lp
    }

    pub(crate) fn watch_params(&self, opts: &WatchOptions) -> WatchParams {
        let mut wp = WatchParams::default();
        wp.label_selector.clone_from(&self.label_selector);
        wp.field_selector.clone_from(&self.field_selector);
        // Whole seconds, rounded up, at least one (0 would mean "no timeout" to some servers).
        wp.timeout = opts.timeout.map(|t| {
            let secs = t.as_secs() + u64::from(t.subsec_nanos() > 0);
            u32::try_from(secs.max(1)).unwrap_or(u32::MAX)
        });
        // Kubernetes requires bookmarks for sendInitialEvents (the end marker is a bookmark).
        wp.bookmarks = opts.allow_bookmarks || opts.send_initial_events;
        wp.send_initial_events = opts.send_initial_events;
        wp
    }

    pub(crate) async fn list<E>(&self, opts: &ListOptions) -> Result<ListPage<E>, KubeError>
    where
        E: Clone + DeserializeOwned,
    {
        let lp = self.list_params(opts);
        let request = Request::new(self.url.as_str());
        let mut req = if self.metadata {
            request.list_metadata(&lp)
        } else {
            request.list(&lp)
        }
        .map_err(|e| KubeError::from_kube(kube::Error::BuildRequest(e)))?;
        req.extensions_mut().insert(if self.metadata {
            "list_metadata"
        } else {
            "list"
        });
        let list: ObjectList<E> = self
            .client
            .request(req)
            .await
            .map_err(KubeError::from_kube)?;
        Ok(ListPage {
            items: list.items.into_iter().map(Arc::new).collect(),
            resource_version: list
                .metadata
                .resource_version
                .map(ResourceVersion::from)
                .unwrap_or_default(),
            continue_token: list.metadata.continue_.filter(|c| !c.is_empty()),
        })
    }

    /// The server's current resource version: a consistent list (no version asked) of at most
    /// one object, whose list version is the newest the server has.
    pub(crate) async fn current_resource_version<E>(
        &self,
    ) -> Result<Option<ResourceVersion>, KubeError>
    where
        E: Clone + DeserializeOwned,
    {
        let opts = ListOptions {
            limit: Some(1),
            ..ListOptions::default()
        };
        let page = self.list::<E>(&opts).await?;
        Ok(Some(page.resource_version).filter(|rv| !rv.is_empty()))
    }

    pub(crate) async fn watch<E>(
        &self,
        opts: &WatchOptions,
    ) -> Result<WatchStream<E, KubeError>, KubeError>
    where
        E: Clone + DeserializeOwned + Send + Sync + 'static,
    {
        let wp = self.watch_params(opts);
        let rv = opts.resource_version.as_str();
        let request = Request::new(self.url.as_str());
        let mut req = if self.metadata {
            request.watch_metadata(&wp, rv)
        } else {
            request.watch(&wp, rv)
        }
        .map_err(|e| KubeError::from_kube(kube::Error::BuildRequest(e)))?;
        req.extensions_mut().insert(if self.metadata {
            "watch_metadata"
        } else {
            "watch"
        });
        // A watch stream is one JSON document per line; compressed streams are not decoded here.
        req.headers_mut()
            .entry(http::header::ACCEPT_ENCODING)
            .or_insert(http::HeaderValue::from_static("identity"));
        let body = self
            .client
            .request_stream(req)
            .await
            .map_err(KubeError::from_kube)?;
        let lines = Box::pin(body.lines());
        let events = stream::unfold(Some(lines), |lines| async move {
            let mut lines = lines?;
            loop {
                let item = match lines.next().await? {
                    Ok(line) if line.trim().is_empty() => continue,
                    Ok(line) => decode_line::<E>(&line),
                    // A body cut mid-chunk ends the watch cleanly (client-go and kube-rs agree):
                    // the reflector re-watches from its last version.
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return None,
                    Err(e) => Err(KubeError::from_kube(kube::Error::ReadEvents(e))),
                };
                // After an error nothing more is read: the reflector drops the stream anyway.
                let next = item.is_ok().then_some(lines);
                return Some((item, next));
            }
        });
        Ok(events.boxed())
    }
}

/// Decodes one line of a watch stream.
pub(crate) fn decode_line<E: DeserializeOwned>(line: &str) -> Result<WatchEvent<E>, KubeError> {
    match serde_json::from_str::<KubeEvent<E>>(line) {
        Ok(KubeEvent::Added(o)) => Ok(WatchEvent::Added(Arc::new(o))),
        Ok(KubeEvent::Modified(o)) => Ok(WatchEvent::Modified(Arc::new(o))),
        Ok(KubeEvent::Deleted(o)) => Ok(WatchEvent::Deleted(Arc::new(o))),
        Ok(KubeEvent::Bookmark(b)) => Ok(WatchEvent::Bookmark(Bookmark {
            resource_version: ResourceVersion::from(b.metadata.resource_version),
            initial_events_end: b
                .metadata
                .annotations
                .get(INITIAL_EVENTS_END_ANNOTATION)
                .is_some_and(|v| v == "true"),
        })),
        Ok(KubeEvent::Error(status)) => Err(KubeError::Status {
            status,
            in_watch_stream: true,
        }),
        Err(e) => match bare_status(line) {
            // Some servers end a watch with a bare Status instead of an ERROR event.
            Some(status) => Err(KubeError::Status {
                status: Box::new(status),
                in_watch_stream: true,
            }),
            None => Err(KubeError::Decode(e)),
        },
    }
}

/// A line that is itself a `Status` object (`"kind": "Status"`), not an event.
fn bare_status(line: &str) -> Option<Status> {
    #[derive(serde::Deserialize)]
    struct Kind {
        #[serde(default)]
        kind: String,
    }
    let kind: Kind = serde_json::from_str(line).ok()?;
    if kind.kind != "Status" {
        return None;
    }
    serde_json::from_str(line).ok()
}
