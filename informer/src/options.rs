//! `InformerOptions`: how to build a `SharedIndexInformer`.

use crate::metrics::InformerMetricsProvider;
use kcache_core::{Clock, SystemClock};
use kcache_indexer::Indexers;
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
            .finish()
    }
}
