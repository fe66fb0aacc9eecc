//! `InformerOptions`: how to build a `SharedIndexInformer`.

use crate::metrics::InformerMetricsProvider;
use kcache_core::{Clock, SystemClock};
use kcache_indexer::Indexers;
use kcache_reflector::BackoffConfig;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// How to build a [`SharedIndexInformer`](crate::SharedIndexInformer) (client-go's
/// `SharedIndexInformerOptions`).
///
/// # Examples
/// ```
/// use kcache_core::FakeClock;
/// use kcache_informer::InformerOptions;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let options = InformerOptions::<String>::new()
///     .name("configmaps")
///     .resync_period(Duration::from_secs(300))
///     .clock(Arc::new(FakeClock::new()));
/// # let _ = options;
/// ```
pub struct InformerOptions<T> {
    pub(crate) name: String,
    pub(crate) resync_period: Duration,
    pub(crate) indexers: Indexers<T>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) metrics: Option<Arc<dyn InformerMetricsProvider>>,
    pub(crate) reflector: ReflectorTuning,
    #[cfg(feature = "snapshot")]
    pub(crate) restore: Option<crate::restore::Restore<T>>,
    pub(crate) batch_size: usize,
}

/// The default of [`InformerOptions::batch_size`]: client-go's batch of queued changes.
pub const DEFAULT_BATCH_SIZE: usize = 1000;

/// The reflector settings an informer passes through (each `None`: the reflector's default).
#[derive(Debug, Clone, Default)]
pub(crate) struct ReflectorTuning {
    pub(crate) page_size: Option<u32>,
    pub(crate) min_watch_timeout: Option<Duration>,
    pub(crate) streaming_initial_list: Option<bool>,
    pub(crate) backoff: Option<BackoffConfig>,
    pub(crate) seed: Option<u64>,
    pub(crate) max_list_pages: Option<u64>,
    pub(crate) max_list_objects: Option<usize>,
}

impl<T> InformerOptions<T> {
    /// Name "informer", no resync, no indexes, the system clock, no metrics.
    pub fn new() -> Self {
        Self {
            name: "informer".to_owned(),
            resync_period: Duration::ZERO,
            indexers: Indexers::new(),
            clock: Arc::new(SystemClock),
            metrics: None,
            reflector: ReflectorTuning::default(),
            #[cfg(feature = "snapshot")]
            restore: None,
            batch_size: DEFAULT_BATCH_SIZE,
        }
    }

    /// The name used in logs and as the metrics label.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The default resync period of handlers, and the informer's resync check period (zero: no
    /// resyncs, and handlers' own periods are ignored, as in client-go).
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = period;
        self
    }

    /// The cache's initial indexes.
    #[must_use]
    pub fn indexers(mut self, indexers: Indexers<T>) -> Self {
        self.indexers = indexers;
        self
    }

    /// The clock (a [`FakeClock`](kcache_core::FakeClock) in tests).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// A metrics provider.
    #[must_use]
    pub fn metrics(mut self, provider: Arc<dyn InformerMetricsProvider>) -> Self {
        self.metrics = Some(provider);
        self
    }

    /// The reflector's list page size (0 lists in one request). Without it, client-go's rule:
    /// pages of 500, but a relist at a known version goes unpaged unless the first list came
    /// back paginated (see [`ReflectorBuilder::page_size`](kcache_reflector::ReflectorBuilder::page_size)).
    #[must_use]
    pub fn page_size(mut self, size: u32) -> Self {
        self.reflector.page_size = Some(size);
        self
    }

    /// The reflector's minimum watch timeout (default 5 minutes; each watch asks for a random
    /// timeout between this and twice this).
    #[must_use]
    pub fn min_watch_timeout(mut self, min: Duration) -> Self {
        self.reflector.min_watch_timeout = Some(min);
        self
    }

    /// Whether the initial list and relists stream through a watch with initial events
    /// (Kubernetes watch-list) instead of paged lists. Unset, they stream when the source says
    /// it can ([`ListWatcher::supports_watch_list`](kcache_reflector::ListWatcher::supports_watch_list):
    /// kcache-memory and kcache-kube), and a cycle whose stream the source refuses lists
    /// instead (see [`ReflectorBuilder::streaming_initial_list`](kcache_reflector::ReflectorBuilder::streaming_initial_list)).
    /// Streamed or listed, a relist reaches the cache in one step: the streamed objects are
    /// staged as they arrive and swapped in at the end of the initial events.
    #[must_use]
    pub fn streaming_initial_list(mut self, on: bool) -> Self {
        self.reflector.streaming_initial_list = Some(on);
        self
    }

    /// The reflector's backoff between failed list/watch rounds (default: client-go's 800 ms
    /// doubling to 30 s with jitter).
    #[must_use]
    pub fn backoff(mut self, backoff: BackoffConfig) -> Self {
        self.reflector.backoff = Some(backoff);
        self
    }

    /// The most pages one list may take before the reflector abandons it and backs off
    /// (default [`DEFAULT_MAX_LIST_PAGES`](kcache_reflector::DEFAULT_MAX_LIST_PAGES); see
    /// [`ReflectorBuilder::max_list_pages`](kcache_reflector::ReflectorBuilder::max_list_pages)).
    #[must_use]
    pub fn max_list_pages(mut self, pages: u64) -> Self {
        self.reflector.max_list_pages = Some(pages);
        self
    }

    /// The most objects one list may collect (default
    /// [`DEFAULT_MAX_LIST_OBJECTS`](kcache_reflector::DEFAULT_MAX_LIST_OBJECTS)).
    #[must_use]
    pub fn max_list_objects(mut self, objects: usize) -> Self {
        self.reflector.max_list_objects = Some(objects);
        self
    }

    /// Starts warm from the snapshot in `file` (feature `snapshot`; kcache only, client-go
    /// always starts cold): `run` fills the cache from it in one step, hands the handlers its
    /// objects as initial adds, and watches from its resource version, so only the changes made
    /// since arrive from the source. A missing or refused snapshot (another type, another format
    /// version, a bad checksum, a truncated file, older than the file's
    /// [`max_age`](crate::snapshot::SnapshotFile::max_age)), or a source that cannot report its
    /// current version, is logged and counted by the file's metrics, and the informer lists as
    /// without it. See the [`snapshot`](crate::snapshot) module for when a restored informer
    /// reports synced, and [`CacheSnapshots`](crate::snapshot::CacheSnapshots) to write the
    /// snapshots.
    #[cfg(feature = "snapshot")]
    #[must_use]
    pub fn restore_from<C>(mut self, file: crate::snapshot::SnapshotFile<T, C>) -> Self
    where
        T: 'static,
        C: crate::snapshot::SnapshotCodec<T> + 'static,
    {
        self.restore = Some(crate::restore::Restore(Arc::new(file)));
        self
    }

    /// The most queued changes applied to the cache under one lock, whose notifications then go
    /// to the handlers' buffers together (default [`DEFAULT_BATCH_SIZE`], as client-go since
    /// 1.35; at least 1). With 1, every change is applied and handed to the buffers alone, a
    /// change that skipped the queue included: what the pipeline costs without batching. The
    /// order of events and the atomicity of relists are the same either way.
    #[must_use]
    pub fn batch_size(mut self, size: usize) -> Self {
        self.batch_size = size.max(1);
        self
    }

    /// Seeds the reflector's jitter and watch-timeout randomness (reproducible tests).
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.reflector.seed = Some(seed);
        self
    }
}

impl<T> Default for InformerOptions<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for InformerOptions<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerOptions")
            .field("name", &self.name)
            .field("resync_period", &self.resync_period)
            .field("indexers", &self.indexers)
            .field("clock", &self.clock)
            .field("metrics", &self.metrics.is_some())
            .field("reflector", &self.reflector)
            .field("batch_size", &self.batch_size)
            .finish_non_exhaustive()
    }
}
