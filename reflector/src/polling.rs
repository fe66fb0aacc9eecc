//! [`PollingListWatcher`]: a [`ListWatcher`] over a source that can only be listed.

mod history;
mod snapshot;
mod stream;

use crate::sync::{Arc, Mutex};
use crate::{
    BackendError, ErrorKind, ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream,
};
use history::History;
use kcache_core::{
    Clock, KeyError, Meta, MetaMut, Object, ObjectAccessor, ObjectKey, ResourceVersion, SystemClock,
};
use snapshot::{Snapshot, Versioner};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;
use stream::PollStream;

/// How often a [`PollingListWatcher`] lists its source unless told otherwise.
pub const DEFAULT_POLL_PERIOD: Duration = Duration::from_secs(10);

/// Turns a source that can only be listed (a REST endpoint without watch, a SQL table, a
/// directory) into a [`ListWatcher`]: its watch lists the source every period, compares the
/// listing with the previous one, and reports the difference as watch events. An informer over it
/// behaves as over any other backend: indexes, handlers, resyncs, `has_synced`.
///
/// # How changes are found
/// Objects are matched by key (through the accessor `M`, [`ObjectAccessor`] by default). A key
/// that appears is `Added`, a key that disappears is `Deleted` (with the last state seen), and a
/// key whose *version* changed is `Modified`. The version is the object's own resource version
/// (a row version, an ETag, an mtime) by default; for a source that has none, call
/// [`content_hash`](Self::content_hash) with a fingerprint of the content, and the poller stamps
/// `h<fingerprint>` into each object as its resource version (so the informer also tells real
/// updates from resyncs). An unchanged object keeps the allocation of the previous poll.
///
/// # Resource versions and resuming
/// Every list, and every poll that found a change, is published under a version of its own
/// (`poll-1`, `poll-2`, …; the watch sends it as a bookmark after the poll's events), and the
/// last few are kept. A watch from one of them compares the next poll against it; a watch from any
/// other version (a watch cut in the middle of a poll's events leaves the reflector at an
/// object's version) fails with [`ErrorKind::Expired`], so the reflector relists. A list always
/// lists the source as it is now; `limit` is ignored (one page).
///
/// # Failures
/// A failed poll ends the watch with [`PollError::Source`] ([`ErrorKind::Retry`]): the reflector
/// backs off (800 ms doubling to 30 s by default) and watches again from the last poll it applied,
/// and the cache keeps its contents meanwhile. A listing the poller cannot diff (a key the
/// accessor cannot read, a key listed twice, an object without a version when the versions come
/// from the source) is refused whole with a typed error ([`ErrorKind::Other`]), never half-applied.
///
/// Time goes through the poller's [`Clock`] ([`clock`](Self::clock)); give it the
/// [`FakeClock`](kcache_core::FakeClock) of your test and advance it by one period to make it poll.
///
/// # Examples
/// A "table" in a map, polled every 30 s, with versions taken from the rows:
/// ```
/// use kcache_core::{Object, ResourceVersion};
/// use kcache_reflector::{ListOptions, ListWatcher, PollingListWatcher};
/// use std::collections::BTreeMap;
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
///
/// #[derive(Clone)]
/// struct Row { id: String, version: u64 }
/// impl Object for Row {
///     fn namespace(&self) -> Option<&str> { None }
///     fn name(&self) -> &str { &self.id }
///     fn resource_version(&self) -> ResourceVersion { self.version.into() }
/// }
///
/// let table = Arc::new(Mutex::new(BTreeMap::from([("a".to_string(), 1u64)])));
/// let t = table.clone();
/// let lw = PollingListWatcher::new(move || {
///     let rows: Vec<Row> = t.lock().unwrap().iter()
///         .map(|(id, v)| Row { id: id.clone(), version: *v })
///         .collect();
///     async move { Ok::<_, std::io::Error>(rows) }
/// })
/// .period(Duration::from_secs(30));
///
/// # futures::executor::block_on(async {
/// let page = lw.list(&ListOptions::default()).await.unwrap();
/// assert_eq!(page.items.len(), 1);
/// assert_eq!(page.resource_version.as_str(), "poll-1");
/// # });
/// ```
#[doc(alias = "poller")]
pub struct PollingListWatcher<T, F, M = ObjectAccessor> {
    poller: Poller<T, F>,
    _meta: PhantomData<fn() -> M>,
}

/// What a poller and its watch streams share.
pub(crate) struct Poller<T, F> {
    list: Arc<F>,
    period: Duration,
    clock: Arc<dyn Clock>,
    version: Versioner<T>,
    history: Arc<Mutex<History<T>>>,
}

impl<T, F> Clone for Poller<T, F> {
    fn clone(&self) -> Self {
        Self {
            list: self.list.clone(),
            period: self.period,
            clock: self.clock.clone(),
            version: self.version.clone(),
            history: self.history.clone(),
        }
    }
}

impl<T: Object, F> PollingListWatcher<T, F, ObjectAccessor> {
    /// Polls `list` (a function returning a future of all current objects) every
    /// [`DEFAULT_POLL_PERIOD`] on the system clock; keys and versions come from [`Object`].
    pub fn new(list: F) -> Self {
        Self::with_accessor(list)
    }
}

impl<T, F, M: Meta<T>> PollingListWatcher<T, F, M> {
    /// As [`new`](PollingListWatcher::new), with keys and versions read through the accessor `M`
    /// (for types you do not own): `PollingListWatcher::<_, _, MyMeta>::with_accessor(list)`.
    pub fn with_accessor(list: F) -> Self {
        let poller = Poller {
            list: Arc::new(list),
            period: DEFAULT_POLL_PERIOD,
            clock: Arc::new(SystemClock),
            version: Arc::new(|obj: &mut T| M::resource_version(obj)),
            history: Arc::new(Mutex::new(History::new())),
        };
        Self {
            poller,
            _meta: PhantomData,
        }
    }

    /// Lists the source every `period` (measured from the end of the previous poll).
    pub fn period(mut self, period: Duration) -> Self {
        self.poller.period = period;
        self
    }

    /// Waits on `clock` (a [`FakeClock`](kcache_core::FakeClock) in tests).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.poller.clock = clock;
        self
    }

    /// For a source without versions: compares objects by `fingerprint` (a hash of their
    /// content, e.g. [`content_fingerprint`]) and stamps `h<fingerprint in hex>` into each listed
    /// object as its resource version.
    pub fn content_hash(mut self, fingerprint: impl Fn(&T) -> u64 + Send + Sync + 'static) -> Self
    where
        M: MetaMut<T>,
    {
        self.poller.version = Arc::new(move |obj: &mut T| {
            let rv = ResourceVersion::new(format!("h{:016x}", fingerprint(obj)));
            M::set_resource_version(obj, rv.clone());
            rv
        });
        self
    }
}

/// A 64-bit fingerprint of `value` through [`std::hash::Hash`], stable within one process (what
/// [`PollingListWatcher::content_hash`] needs: versions are compared, never stored).
pub fn content_fingerprint<H: std::hash::Hash + ?Sized>(value: &H) -> u64 {
    use std::hash::{DefaultHasher, Hasher};
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

impl<T, F, M> fmt::Debug for PollingListWatcher<T, F, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PollingListWatcher")
            .field("period", &self.poller.period)
            .finish_non_exhaustive()
    }
}

/// The error of a [`PollingListWatcher`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PollError<E> {
    /// The source failed to list ([`ErrorKind::Retry`]: back off, keep the cache, poll again).
    #[error("the polled source failed to list")]
    Source(#[source] E),
    /// A listed object's key cannot be read ([`ErrorKind::Other`]).
    #[error("a polled object's key cannot be read")]
    Key(#[source] KeyError),
    /// The source listed one key twice ([`ErrorKind::Other`]).
    #[error("the polled source listed {0} twice")]
    DuplicateKey(ObjectKey),
    /// An object without a resource version, with versions taken from the source
    /// ([`ErrorKind::Other`]; use [`PollingListWatcher::content_hash`] for such a source).
    #[error(
        "polled object {0} has no resource version (use content_hash for an unversioned source)"
    )]
    MissingResourceVersion(ObjectKey),
    /// A watch from a version that is not one of the recent polls ([`ErrorKind::Expired`]:
    /// relist).
    #[error("resource version {0:?} is not one of the recent polls")]
    Expired(ResourceVersion),
}

impl<E: std::error::Error + Send + Sync + 'static> BackendError for PollError<E> {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Source(_) => ErrorKind::Retry,
            Self::Expired(_) => ErrorKind::Expired,
            Self::Key(_) | Self::DuplicateKey(_) | Self::MissingResourceVersion(_) => {
                ErrorKind::Other
            }
        }
    }
}

impl<T, F, Fut, E, M> ListWatcher<T> for PollingListWatcher<T, F, M>
where
    T: Send + Sync + 'static,
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Vec<T>, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
    M: Meta<T>,
{
    type Error = PollError<E>;

    fn list(
        &self,
        _opts: &ListOptions,
    ) -> impl Future<Output = Result<ListPage<T>, Self::Error>> + Send {
        let p = &self.poller;
        let listing = (p.list)();
        async move {
            let items = listing.await.map_err(PollError::Source)?;
            let latest = p.history.lock().latest();
            let previous = latest.as_ref().map(|l| &*l.snapshot);
            let snapshot = Snapshot::build::<M, E>(items, &p.version, previous)?;
            let items = snapshot.objects();
            let now = p.clock.now();
            let rv = p.history.lock().publish(Arc::new(snapshot), now);
            Ok(ListPage {
                items,
                resource_version: rv,
                continue_token: None,
            })
        }
    }

    fn watch(
        &self,
        opts: &WatchOptions,
    ) -> impl Future<Output = Result<WatchStream<T, Self::Error>, Self::Error>> + Send {
        let now = self.poller.clock.now();
        let start = if opts.send_initial_events {
            Ok(None)
        } else {
            self.poller
                .history
                .lock()
                .find(&opts.resource_version)
                .map(Some)
                .ok_or_else(|| PollError::Expired(opts.resource_version.clone()))
        };
        let stream = start.map(|from| {
            let deadline = opts.timeout.map(|t| kcache_core::saturating_add(now, t));
            PollStream::<T, F, M>::new(
                self.poller.clone(),
                from,
                deadline,
                opts.allow_bookmarks,
                now,
            )
            .into_stream()
        });
        std::future::ready(stream)
    }
}
