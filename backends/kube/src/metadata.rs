//! [`KubeMetadataListWatcher`]: metadata-only lists and watches of a `kube::Api<K>`.

use crate::endpoint::Endpoint;
use crate::error::KubeError;
use kcache_core::ResourceVersion;
use kcache_reflector::{ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream};
use kube::core::PartialObjectMeta;
use kube::{Api, Resource};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;

/// Lists and watches only the metadata of the objects of a `kube::Api<K>`
/// (`PartialObjectMetadata`, as kube-rs' `Api::list_metadata` / `watch_metadata`): the cache holds
/// `PartialObjectMeta<K>`, a fraction of the memory of whole objects when a controller needs only
/// names, labels, annotations or owner references.
///
/// Everything else (parameters, selectors, errors) is as for
/// [`KubeListWatcher`](crate::KubeListWatcher); `KubeListWatcher::new(Api::<PartialObjectMeta<K>>)`
/// is equivalent.
///
/// # Examples
/// ```no_run
/// use k8s_openapi::api::core::v1::Pod;
/// use kcache_informer::SharedIndexInformer;
/// use kcache_kube::{KubeMeta, KubeMetadataListWatcher};
/// use kube::{api::PartialObjectMeta, Api, Client};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let pods = Api::<Pod>::all(Client::try_default().await?);
/// let informer: SharedIndexInformer<PartialObjectMeta<Pod>, _, KubeMeta> =
///     SharedIndexInformer::with_accessor(KubeMetadataListWatcher::new(pods), Default::default());
/// # Ok(()) }
/// ```
pub struct KubeMetadataListWatcher<K> {
    api: Api<K>,
    endpoint: Endpoint,
    _kind: PhantomData<fn() -> K>,
}

impl<K: Resource + Clone + 'static> KubeMetadataListWatcher<K> {
    /// A metadata-only list-watcher for every object `api` can see.
    pub fn new(api: Api<K>) -> Self {
        let endpoint = Endpoint {
            client: api.clone().into_client(),
            url: api.resource_url().to_owned(),
            metadata: true,
            label_selector: None,
            field_selector: None,
        };
        Self {
            api,
            endpoint,
            _kind: PhantomData,
        }
    }

    /// Only objects matching a label selector, on lists and watches.
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.endpoint.label_selector = Some(selector.to_owned());
        self
    }

    /// Only objects matching a field selector, on lists and watches.
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

impl<K: Clone> Clone for KubeMetadataListWatcher<K> {
    fn clone(&self) -> Self {
        Self {
            api: self.api.clone(),
            endpoint: self.endpoint.clone(),
            _kind: PhantomData,
        }
    }
}

impl<K> fmt::Debug for KubeMetadataListWatcher<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeMetadataListWatcher")
            .field("url", &self.endpoint.url)
            .field("label_selector", &self.endpoint.label_selector)
            .field("field_selector", &self.endpoint.field_selector)
            .finish_non_exhaustive()
    }
}

impl<K> ListWatcher<PartialObjectMeta<K>> for KubeMetadataListWatcher<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    type Error = KubeError;

    fn list(
        &self,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<ListPage<PartialObjectMeta<K>>, KubeError>> + Send {
        self.endpoint.list(opts)
    }

    fn watch(
        &self,
        opts: &WatchOptions,
    ) -> impl Future<Output = Result<WatchStream<PartialObjectMeta<K>, KubeError>, KubeError>> + Send
    {
        self.endpoint.watch(opts)
    }

    /// A consistent list of at most one object (`limit=1`); its list version.
    fn current_resource_version(
        &self,
    ) -> impl Future<Output = Result<Option<ResourceVersion>, KubeError>> + Send {
        self.endpoint
            .current_resource_version::<PartialObjectMeta<K>>()
    }
    /// Yes: a watch with `sendInitialEvents=true` (Kubernetes' watch-list, the server's
    /// `WatchList` feature). A server without it refuses the request with an error, and the
    /// reflector lists instead for that cycle.
    fn supports_watch_list(&self) -> bool {
        true
    }
}
