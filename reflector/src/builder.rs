//! [`ReflectorBuilder`]: the reflector's options.

use crate::backoff::BackoffConfig;
use crate::defaults::DEFAULT_MIN_WATCH_TIMEOUT;
use crate::handle::Shared;
use crate::machine::{Config, ListLimits};
use crate::reflector::{Hook, Reflector, ShouldResync};
use crate::{ConfigError, ListWatcher, ReflectorError};
use kcache_core::{Clock, Meta, ObjectAccessor, ReflectorStore, ResourceVersion, SystemClock};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// Builds a [`Reflector`]: `Reflector::builder(lister_watcher, store)`, options, then
/// [`ReflectorBuilder::build`].
///
/// Defaults: name `"reflector"`, [`SystemClock`], no resync, client-go's paging rule (see
/// [`page_size`](Self::page_size)), watch timeouts in `[5 min, 10 min]`, a streaming initial list
/// if the backend serves one ([`ListWatcher::supports_watch_list`]),
/// [`BackoffConfig::default`], jitter seeded from process randomness, no watch-error hook, keys
/// read through [`ObjectAccessor`].
pub struct ReflectorBuilder<T, L: ListWatcher<T>, S: ReflectorStore<T>, M = ObjectAccessor> {
    lw: L,
    store: S,
    name: String,
    clock: Arc<dyn Clock>,
    config: Config,
    /// [`streaming_initial_list`](Self::streaming_initial_list) as set; `None` follows the
    /// backend.
    streaming: Option<bool>,
    should_resync: Option<ShouldResync>,
    hook: Option<Hook<L::Error, S::Error>>,
    _types: PhantomData<fn() -> (T, M)>,
}

impl<T, L: ListWatcher<T>, S: ReflectorStore<T>> ReflectorBuilder<T, L, S, ObjectAccessor> {
    /// A builder with the default options.
    pub fn new(lw: L, store: S) -> Self {
        Self {
            lw,
            store,
            name: "reflector".to_owned(),
            clock: Arc::new(SystemClock),
            config: Config {
                page_size: None,
                min_watch_timeout: DEFAULT_MIN_WATCH_TIMEOUT,
                resync_period: None,
                streaming: false,
                backoff: BackoffConfig::default(),
                seed: None,
                limits: ListLimits::default(),
                paged: false,
                resume_from: None,
            },
            streaming: None,
            should_resync: None,
            hook: None,
            _types: PhantomData,
        }
    }
}

impl<T, L: ListWatcher<T>, S: ReflectorStore<T>, M: Meta<T>> ReflectorBuilder<T, L, S, M> {
    /// A builder with the default options that reads keys through the accessor `M`; the same as
    /// `Reflector::builder(lw, store).meta::<M>()`, for callers that name the types anyway.
    pub fn with_meta(lw: L, store: S) -> Self {
        let b = ReflectorBuilder::<T, L, S, ObjectAccessor>::new(lw, store);
        ReflectorBuilder {
            lw: b.lw,
            store: b.store,
            name: b.name,
            clock: b.clock,
            config: b.config,
            streaming: b.streaming,
            should_resync: b.should_resync,
            hook: b.hook,
            _types: PhantomData,
        }
    }
}

// The options need no accessor: `meta` can come at any point of the chain, even for an object
// type that does not implement `Object` (whose default accessor does not apply). Only building
// asks for a `Meta`.
impl<T, L, S, M> ReflectorBuilder<T, L, S, M>
where
    L: ListWatcher<T>,
    S: ReflectorStore<T>,
{
    /// Reads keys and resource versions through the accessor `M2` instead: the route for object
    /// types that do not implement [`kcache_core::Object`] (types of other crates).
    ///
    /// # Examples
    /// A reflector over maps of labels (a type this crate does not own), keyed by their `name`:
    /// ```
    /// use kcache_core::{KeyError, Meta, MetaMut, ObjectKey, ResourceVersion};
    /// use kcache_indexer::Indexer;
    /// use kcache_memory::MemorySource;
    /// use kcache_reflector::Reflector;
    /// use std::collections::BTreeMap;
    ///
    /// type Labels = BTreeMap<String, String>;
    /// struct LabelsMeta;
    ///
    /// impl Meta<Labels> for LabelsMeta {
    ///     fn key(obj: &Labels) -> Result<ObjectKey, KeyError> {
    ///         ObjectKey::cluster(obj.get("name").ok_or(KeyError::MissingName)?)
    ///     }
    ///     fn resource_version(obj: &Labels) -> ResourceVersion {
    ///         obj.get("rv").map(|rv| ResourceVersion::from(rv.as_str())).unwrap_or_default()
    ///     }
    /// }
    /// impl MetaMut<Labels> for LabelsMeta {
    ///     fn set_resource_version(obj: &mut Labels, rv: ResourceVersion) {
    ///         obj.insert("rv".into(), rv.as_str().to_owned());
    ///     }
    /// }
    ///
    /// let source: MemorySource<Labels, LabelsMeta> = MemorySource::new();
    /// source.create(Labels::from([("name".to_owned(), "web".to_owned())]))?;
    /// let cache: Indexer<Labels, LabelsMeta> = Indexer::new();
    /// let reflector = Reflector::builder(source, cache.clone())
    ///     .name("labels")
    ///     .meta::<LabelsMeta>()
    ///     .build();
    /// # let _ = reflector;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn meta<M2: Meta<T>>(self) -> ReflectorBuilder<T, L, S, M2> {
        ReflectorBuilder {
            lw: self.lw,
            store: self.store,
            name: self.name,
            clock: self.clock,
            config: self.config,
            streaming: self.streaming,
            should_resync: self.should_resync,
            hook: self.hook,
            _types: PhantomData,
        }
    }

    /// The reflector's name (for your logs; client-go's `Name()`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The clock for backoff, watch timeouts and resync ([`kcache_core::FakeClock`] in tests).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Calls `store.resync()` every `period` while watching (zero disables it).
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.config.resync_period = (!period.is_zero()).then_some(period);
        self
    }

    /// Asked at every resync tick; the store is resynced only when it returns true.
    pub fn should_resync(mut self, f: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.should_resync = Some(Arc::new(f));
        self
    }

    /// The list page size; `0` lists everything in one request.
    ///
    /// Without it the reflector follows client-go's rule: the first list (resource version
    /// `"0"`) and lists at `""` go in pages of [`DEFAULT_PAGE_SIZE`](crate::DEFAULT_PAGE_SIZE);
    /// a relist at a known version goes in one request, so a source with a watch cache (a
    /// Kubernetes apiserver) can answer it from memory; but if the `"0"` list came back in several
    /// pages (the source has no such cache), every later list is paged too. A set size applies to
    /// every list.
    pub fn page_size(mut self, size: u32) -> Self {
        self.config.page_size = Some(size);
        self
    }

    /// The most pages one list may take (default
    /// [`DEFAULT_MAX_LIST_PAGES`](crate::DEFAULT_MAX_LIST_PAGES); at least 1). A source that hands
    /// out a continue token on every page would otherwise keep the reflector listing forever, its
    /// memory growing: past the bound the list is abandoned, reported as
    /// [`BadInput::ListTooLong`](crate::BadInput::ListTooLong), and retried after a backoff.
    /// Raise it if you list huge collections with a small page size.
    pub fn max_list_pages(mut self, pages: u64) -> Self {
        self.config.limits.max_pages = pages.max(1);
        self
    }

    /// The most objects one list (or streaming list) may collect (default
    /// [`DEFAULT_MAX_LIST_OBJECTS`](crate::DEFAULT_MAX_LIST_OBJECTS); at least 1); past it, as for
    /// [`max_list_pages`](Self::max_list_pages).
    pub fn max_list_objects(mut self, objects: usize) -> Self {
        self.config.limits.max_objects = objects.max(1);
        self
    }

    /// The minimum watch timeout: each watch asks the backend to end it after a random duration in
    /// `[min, 2·min]` (saturating at [`Duration::MAX`], so any value is safe). Unlike client-go,
    /// values below 5 minutes are honoured (useful in tests).
    pub fn min_watch_timeout(mut self, min: Duration) -> Self {
        self.config.min_watch_timeout = min;
        self
    }

    /// Starts by watching from `rv` instead of listing, for a store that already holds the
    /// source's state at `rv` (a cache restored from a snapshot): the changes made since arrive
    /// as watch events. If the source says `rv` is gone (compacted, expired) or newer than it
    /// has, the reflector lists at once, and the store's replace settles the difference
    /// (deletions the list reveals included). The store is not told it synced until that list
    /// or, for a resumed watch, not at all: its owner decides when it has caught up (see
    /// [`ListWatcher::current_resource_version`](crate::ListWatcher::current_resource_version)).
    /// An empty `rv` is ignored (the reflector lists).
    pub fn resume_from(mut self, rv: ResourceVersion) -> Self {
        self.config.resume_from = Some(rv);
        self
    }

    /// Whether lists stream (Kubernetes watch-list: a watch that first sends every object, then
    /// a bookmark that ends the initial events, then goes on as the watch) instead of a list
    /// followed by a watch.
    ///
    /// Unset, the reflector streams when the backend says it can
    /// ([`ListWatcher::supports_watch_list`]: kcache-memory and kcache-kube do), as client-go
    /// 1.35 does. `true` streams with any backend. Either way a cycle whose stream the source
    /// refuses (an error other than a transient one or an expired version, or a stream that
    /// closes at once without an event) lists instead; the next cycle tries streaming again.
    /// `false` always lists.
    ///
    /// A streamed list is applied as a list is: in one
    /// [`replace`](kcache_core::ReflectorStore::replace) at the end bookmark, or, for a store
    /// that takes lists [page by page](kcache_core::PagedReplace), in pages of
    /// [`DEFAULT_PAGE_SIZE`](crate::DEFAULT_PAGE_SIZE) objects as they arrive, then
    /// `finish_list`. An initial event for a key already streamed replaces the earlier object
    /// (the last one wins); a `Deleted` one removes it.
    pub fn streaming_initial_list(mut self, on: bool) -> Self {
        self.streaming = Some(on);
        self
    }

    /// The backoff parameters. [`build`](Self::build) takes them as they are (the arithmetic
    /// saturates); [`try_build`](Self::try_build) refuses nonsensical ones.
    pub fn backoff(mut self, backoff: BackoffConfig) -> Self {
        self.config.backoff = backoff;
        self
    }

    /// Seeds the pseudo-random numbers behind backoff jitter and watch timeouts (for reproducible
    /// tests).
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = Some(seed);
        self
    }

    /// Called with every error the reflector meets (client-go's `WatchErrorHandler`, but called
    /// for every error, not once per cycle). It runs on the reflector's task: keep it short.
    pub fn on_watch_error(
        mut self,
        hook: impl Fn(&ReflectorError<L::Error, S::Error>) + Send + Sync + 'static,
    ) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// The reflector, after checking the settings.
    ///
    /// # Errors
    /// [`ConfigError`] for a setting that makes no sense: a backoff `factor` or `jitter` that is
    /// negative, NaN or infinite ([`BackoffConfig::validate`]).
    ///
    /// # Examples
    /// ```
    /// use kcache_memory::MemorySource;
    /// use kcache_indexer::Indexer;
    /// use kcache_reflector::{BackoffConfig, ConfigError, Reflector};
    /// # #[derive(Debug, Clone)] struct Job;
    /// # impl kcache_core::Object for Job {
    /// #     fn namespace(&self) -> Option<&str> { None }
    /// #     fn name(&self) -> &str { "j" }
    /// #     fn resource_version(&self) -> kcache_core::ResourceVersion { "1".into() }
    /// # }
    /// # impl kcache_memory::SetResourceVersion for Job {
    /// #     fn set_resource_version(&mut self, _: kcache_core::ResourceVersion) {}
    /// # }
    ///
    /// let source: MemorySource<Job> = MemorySource::new();
    /// let backoff = BackoffConfig { jitter: f64::NAN, ..BackoffConfig::default() };
    /// let built = Reflector::builder(source, Indexer::<Job>::new()).backoff(backoff).try_build();
    /// assert!(matches!(built, Err(ConfigError::BackoffJitter(_))));
    /// ```
    pub fn try_build(self) -> Result<Reflector<T, L, S, M>, ConfigError>
    where
        M: Meta<T>,
    {
        self.config.backoff.validate()?;
        Ok(self.build())
    }

    /// The reflector, with the settings as given: nothing is refused, and the backoff and
    /// watch-timeout arithmetic saturates, so even nonsensical values cannot make it panic (a NaN
    /// backoff factor grows nothing; an infinite one or infinite jitter reaches the cap at once).
    /// Prefer [`try_build`](Self::try_build), which refuses them.
    pub fn build(self) -> Reflector<T, L, S, M>
    where
        M: Meta<T>,
    {
        let mut config = self.config;
        config.streaming = self
            .streaming
            .unwrap_or_else(|| self.lw.supports_watch_list());
        Reflector {
            lw: self.lw,
            store: self.store,
            name: self.name,
            clock: self.clock,
            config,
            should_resync: self.should_resync,
            hook: self.hook,
            shared: Shared::new(),
            _types: PhantomData,
        }
    }
}

impl<T, L: ListWatcher<T>, S: ReflectorStore<T>, M> fmt::Debug for ReflectorBuilder<T, L, S, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReflectorBuilder")
            .field("name", &self.name)
            .field("config", &self.config)
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}
