//! [`KubeListWatcher`]: a [`ListWatcher`] over `kube::Api<K>`.

use crate::endpoint::Endpoint;
use crate::error::KubeError;
use kcache_core::ResourceVersion;
use kcache_reflector::{ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use std::fmt;
use std::future::Future;

/// Lists and watches the objects of a `kube::Api<K>` for a kcache reflector or informer.
///
/// `K` is any kube-rs resource: a k8s-openapi type (`ConfigMap`, `Pod`), your `CustomResource`,
/// `DynamicObject` (built with `Api::all_with(client, &api_resource)`), or
/// `PartialObjectMeta<K>` (an `Api<PartialObjectMeta<K>>` makes metadata-only requests; see also
/// [`KubeMetadataListWatcher`](crate::KubeMetadataListWatcher)). Read keys and versions with
/// [`KubeMeta`](crate::KubeMeta). The API's scope is kept: `Api::all` watches every namespace,
/// `Api::namespaced` one.
///
/// # What is sent
/// - list: `limit`, `continue`, `resourceVersion` and `resourceVersionMatch` from the reflector's
///   [`ListOptions`], plus the selectors. An empty version sends none (a consistent read), and
///   then no `resourceVersionMatch` either (Kubernetes rejects a match without a version). Note
///   that kube-rs omits `resourceVersion=0` when a `limit` is set, so the reflector's first paged
///   list is a consistent paged read rather than a watch-cache read.
/// - watch: `watch=true`, `resourceVersion`, `timeoutSeconds` (the reflector's timeout rounded up
///   to whole seconds; kube-rs' 290 s when none), `allowWatchBookmarks`, and for a streaming list
///   `sendInitialEvents=true` with `resourceVersionMatch=NotOlderThan` (bookmarks are then always
///   requested, as Kubernetes requires), plus the selectors. The bookmark annotated
///   `k8s.io/initial-events-end: "true"` becomes
///   [`Bookmark::initial_events_end`](kcache_reflector::Bookmark::initial_events_end).
///
/// Objects are decoded once and moved into their `Arc`; nothing is cloned afterwards. Errors are
/// classified as [`KubeError`] documents.
///
/// # Client settings
/// kube-rs' default client retries HTTP 429, 503 and 504 by itself (up to 15 times with
/// exponential backoff) before the reflector sees them, which also delays a "too large resource
/// version" (504) answer. The reflector has its own backoff; set `Config::default_retry = false` to
/// leave retries to it.
///
/// # Examples
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_informer::SharedIndexInformer;
/// use kcache_kube::{KubeListWatcher, KubeMeta};
/// use kube::{Api, Client};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = Client::try_default().await?;
/// let lw = KubeListWatcher::new(Api::<ConfigMap>::all(client)).labels("app=web");
/// let informer: SharedIndexInformer<ConfigMap, _, KubeMeta> =
///     SharedIndexInformer::with_accessor(lw, Default::default());
/// # Ok(()) }
/// ```
pub struct KubeListWatcher<K> {
    api: Api<K>,
    endpoint: Endpoint,
}

impl<K: Resource + Clone + 'static> KubeListWatcher<K> {
    /// A list-watcher for every object `api` can see.
    pub fn new(api: Api<K>) -> Self {
        let endpoint = Endpoint {
            client: api.clone().into_client(),
            url: api.resource_url().to_owned(),
            metadata: K::metadata_api(),
            label_selector: None,
            field_selector: None,
        };
        Self { api, endpoint }
    }

    /// Only objects matching a label selector (`"app=web,tier!=cache"`), on lists and watches.
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.endpoint.label_selector = Some(selector.to_owned());
        self
    }

    /// Only objects matching a field selector (`"metadata.name=web"`), on lists and watches.
    #[must_use]
    pub fn fields(mut self, selector: &str) -> Self {
        self.endpoint.field_selector = Some(selector.to_owned());
        self
    }

    /// The `Api` this list-watcher talks to.
    pub fn api(&self) -> &Api<K> {
        &self.api
    }
}

impl<K: Clone> Clone for KubeListWatcher<K> {
    fn clone(&self) -> Self {
        Self {
            api: self.api.clone(),
            endpoint: self.endpoint.clone(),
        }
    }
}

impl<K> fmt::Debug for KubeListWatcher<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeListWatcher")
            .field("url", &self.endpoint.url)
            .field("metadata", &self.endpoint.metadata)
            .field("label_selector", &self.endpoint.label_selector)
            .field("field_selector", &self.endpoint.field_selector)
            .finish_non_exhaustive()
    }
}

impl<K> ListWatcher<K> for KubeListWatcher<K>
where
    K: Resource + Clone + DeserializeOwned + Send + Sync + 'static,
{
    type Error = KubeError;

    fn list(
        &self,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<ListPage<K>, KubeError>> + Send {
        self.endpoint.list(opts)
    }

    fn watch(
        &self,
        opts: &WatchOptions,
    ) -> impl Future<Output = Result<WatchStream<K, KubeError>, KubeError>> + Send {
        self.endpoint.watch(opts)
    }

    /// A consistent list of at most one object (`limit=1`); its list version.
    fn current_resource_version(
        &self,
    ) -> impl Future<Output = Result<Option<ResourceVersion>, KubeError>> + Send {
        self.endpoint.current_resource_version::<K>()
    }
    /// Yes: a watch with `sendInitialEvents=true` (Kubernetes' watch-list, the server's
    /// `WatchList` feature). A server without it refuses the request with an error, and the
    /// reflector lists instead for that cycle.
    fn supports_watch_list(&self) -> bool {
        true
    }
}
