//! The `ListWatcher` trait: what a backend implements to feed a reflector.

use futures::stream::BoxStream;
use kcache_core::ResourceVersion;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// How a list's resource version is to be matched (Kubernetes `resourceVersionMatch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceVersionMatch {
    /// Any state at least as new as the given version (a cache may answer).
    NotOlderThan,
    /// Exactly the state at the given version.
    Exact,
}

/// The parameters of one list request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `""` (empty): the most recent state (a consistent read); `"0"`: any state (may be served
    /// from a cache); otherwise a state not older than (or exactly, see `resource_version_match`)
    /// this version.
    pub resource_version: ResourceVersion,
    /// How `resource_version` is matched; `None` leaves it to the backend's default.
    pub resource_version_match: Option<ResourceVersionMatch>,
    /// The page size; `None` asks for everything at once. A backend may ignore it.
    pub limit: Option<u32>,
    /// The continue token of the previous page, to fetch the next one.
    pub continue_token: Option<String>,
}

/// One page of a list.
#[derive(Debug)]
pub struct ListPage<T> {
    /// The objects of this page.
    pub items: Vec<Arc<T>>,
    /// The resource version the list was served at (the same on every page of one list).
    pub resource_version: ResourceVersion,
    /// The token for the next page; `None` on the last page.
    pub continue_token: Option<String>,
}

/// The parameters of one watch request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// Events after this version are sent. With `send_initial_events`, the empty version means
    /// "start from a consistent snapshot of now".
    pub resource_version: ResourceVersion,
    /// The backend should end the stream cleanly after about this long.
    pub timeout: Option<Duration>,
    /// Whether the backend may send [`WatchEvent::Bookmark`]s.
    pub allow_bookmarks: bool,
    /// Streaming list (Kubernetes watch-list): first send every current object as `Added`, then a
    /// bookmark with [`Bookmark::initial_events_end`] set, then the changes.
    pub send_initial_events: bool,
}

/// A bookmark: the source has reached a resource version, with nothing else to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bookmark {
    /// The version reached.
    pub resource_version: ResourceVersion,
    /// Set on the bookmark that ends the initial events of a streaming list
    /// (`k8s.io/initial-events-end`).
    pub initial_events_end: bool,
}

/// One event of a watch stream.
#[derive(Debug)]
pub enum WatchEvent<T> {
    /// An object was created (or is part of a streaming list's initial events).
    Added(Arc<T>),
    /// An object was modified.
    Modified(Arc<T>),
    /// An object was deleted; this is its last state.
    Deleted(Arc<T>),
    /// The source reached a version.
    Bookmark(Bookmark),
}

// Clone by hand: objects are shared `Arc`s, so cloning needs no `T: Clone`.
impl<T> Clone for ListPage<T> {
    fn clone(&self) -> Self {
        Self {
            items: self.items.clone(),
            resource_version: self.resource_version.clone(),
            continue_token: self.continue_token.clone(),
        }
    }
}

impl<T> Clone for WatchEvent<T> {
    fn clone(&self) -> Self {
        match self {
            Self::Added(o) => Self::Added(o.clone()),
            Self::Modified(o) => Self::Modified(o.clone()),
            Self::Deleted(o) => Self::Deleted(o.clone()),
            Self::Bookmark(b) => Self::Bookmark(b.clone()),
        }
    }
}

/// How the reflector must react to a backend error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The requested resource version is too old (HTTP 410 Gone, a compacted etcd revision):
    /// relist from the most recent state.
    Expired,
    /// The requested resource version is newer than the source has ("too large resource
    /// version"): relist from the most recent state.
    TooLargeResourceVersion,
    /// A transient failure (connection refused, throttled): back off and retry the watch, no
    /// relist.
    Retry,
    /// Anything else: back off and relist.
    Other,
}

/// The error type of a [`ListWatcher`]: any error that says how the reflector must react.
pub trait BackendError: std::error::Error + Send + Sync + 'static {
    /// The class of this error.
    fn kind(&self) -> ErrorKind;
}

/// A watch: a stream of events that ends cleanly (timeout, server close) or with an error.
pub type WatchStream<T, E> = BoxStream<'static, Result<WatchEvent<T>, E>>;

/// A source of objects that can be listed and watched: the one trait a backend implements.
///
/// Modelled on the Kubernetes list/watch protocol (client-go's `ListerWatcher`), which etcd and
/// most change feeds also fit: a list returns the state at a resource version, a watch streams
/// the changes after a resource version. Errors are classified through [`BackendError::kind`].
pub trait ListWatcher<T>: Send + Sync + 'static {
    /// The backend's error.
    type Error: BackendError;

    /// Lists objects (one page when `opts.limit` is set).
    fn list(
        &self,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<ListPage<T>, Self::Error>> + Send;

    /// Opens a watch from `opts.resource_version`.
    fn watch(
        &self,
        opts: &WatchOptions,
    ) -> impl Future<Output = Result<WatchStream<T, Self::Error>, Self::Error>> + Send;

    /// The source's current resource version, if the backend can read it cheaply, without
    /// listing objects: a version at least as new as any change made before the call (etcd: a
    /// response header's revision; the memory source: its head; Kubernetes: a list with
    /// `limit=1`). An informer restored from a snapshot waits until its cache reached it before
    /// it reports synced. `Ok(None)`, the default, says the backend cannot tell; such a restore
    /// relists instead.
    fn current_resource_version(
        &self,
    ) -> impl Future<Output = Result<Option<ResourceVersion>, Self::Error>> + Send {
        std::future::ready(Ok(None))
    }

    /// Whether the backend serves streaming lists ([`WatchOptions::send_initial_events`]: every
    /// current object as `Added`, then a bookmark with [`Bookmark::initial_events_end`]). A
    /// reflector left at its default then lists by streaming (see
    /// [`ReflectorBuilder::streaming_initial_list`](crate::ReflectorBuilder::streaming_initial_list)),
    /// and still falls back to a list for any cycle in which the source refuses the stream.
    /// `false`, the default: the reflector lists, then watches.
    fn supports_watch_list(&self) -> bool {
        false
    }
}

impl<T, L: ListWatcher<T>> ListWatcher<T> for Arc<L> {
    type Error = L::Error;

    fn list(
        &self,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<ListPage<T>, Self::Error>> + Send {
        (**self).list(opts)
    }

    fn watch(
        &self,
        opts: &WatchOptions,
    ) -> impl Future<Output = Result<WatchStream<T, Self::Error>, Self::Error>> + Send {
        (**self).watch(opts)
    }

    fn current_resource_version(
        &self,
    ) -> impl Future<Output = Result<Option<ResourceVersion>, Self::Error>> + Send {
        (**self).current_resource_version()
    }

    fn supports_watch_list(&self) -> bool {
        (**self).supports_watch_list()
    }
}
