//! Informer metrics with client-go's names, through a small provider trait.

#[cfg(feature = "prometheus")]
mod prometheus;

#[cfg(feature = "prometheus")]
pub use self::prometheus::PrometheusInformerMetrics;

use std::fmt;
use std::sync::Arc;

/// A gauge set to a value.
pub trait GaugeMetric: Send + Sync {
    /// Sets the value.
    fn set(&self, value: f64);
}

/// A histogram of seconds.
pub trait HistogramMetric: Send + Sync {
    /// Records one observation.
    fn observe(&self, value: f64);
}

/// Creates an informer's metrics (client-go 1.36's `InformerMetricsProvider`).
///
/// `informer` is the informer's [name](crate::InformerOptions::name), `handler` the handler's
/// [name](crate::HandlerOptions::name); implementations use them as labels. An informer built
/// without a provider does no metrics work at all.
///
/// # Examples
/// ```
/// use kcache_informer::{GaugeMetric, HistogramMetric, InformerMetricsProvider};
/// use std::sync::Arc;
///
/// struct Nothing;
/// impl GaugeMetric for Nothing { fn set(&self, _: f64) {} }
/// impl HistogramMetric for Nothing { fn observe(&self, _: f64) {} }
///
/// struct Provider;
/// impl InformerMetricsProvider for Provider {
///     fn new_queued_items_metric(&self, _: &str, _: &str) -> Arc<dyn GaugeMetric> { Arc::new(Nothing) }
///     fn new_processing_latency_metric(&self, _: &str) -> Arc<dyn HistogramMetric> { Arc::new(Nothing) }
///     fn new_store_resource_version_metric(&self, _: &str) -> Arc<dyn GaugeMetric> { Arc::new(Nothing) }
/// }
/// let options = kcache_informer::InformerOptions::<u32>::new().metrics(Arc::new(Provider));
/// # let _ = options;
/// ```
#[doc(alias = "SetInformerMetricsProvider")]
pub trait InformerMetricsProvider: Send + Sync + 'static {
    /// `informer_queued_items` (gauge): notifications waiting in one handler's buffer.
    fn new_queued_items_metric(&self, informer: &str, handler: &str) -> Arc<dyn GaugeMetric>;
    /// `informer_processing_latency_seconds` (histogram, client-go's buckets 1 ms … 10 s): the
    /// time to apply one key's deltas to the cache and hand them to the handlers' buffers.
    fn new_processing_latency_metric(&self, informer: &str) -> Arc<dyn HistogramMetric>;
    /// `informer_store_resource_version` (gauge): the cache's resource version, its last 15
    /// digits when numeric (not set for other resource versions).
    fn new_store_resource_version_metric(&self, informer: &str) -> Arc<dyn GaugeMetric>;
}

/// The metrics of one informer (absent: no work).
#[derive(Clone, Default)]
pub(crate) struct InformerMetrics {
    pub(crate) provider: Option<Arc<dyn InformerMetricsProvider>>,
    pub(crate) latency: Option<Arc<dyn HistogramMetric>>,
    pub(crate) store_rv: Option<Arc<dyn GaugeMetric>>,
}

impl InformerMetrics {
    pub(crate) fn new(provider: Option<Arc<dyn InformerMetricsProvider>>, informer: &str) -> Self {
        match provider {
            None => Self::default(),
            Some(p) => Self {
                latency: Some(p.new_processing_latency_metric(informer)),
                store_rv: Some(p.new_store_resource_version_metric(informer)),
                provider: Some(p),
            },
        }
    }

    pub(crate) fn queued_items(
        &self,
        informer: &str,
        handler: &str,
    ) -> Option<Arc<dyn GaugeMetric>> {
        self.provider
            .as_ref()
            .map(|p| p.new_queued_items_metric(informer, handler))
    }

    pub(crate) fn set_store_rv(&self, rv: &str) {
        if let (Some(g), Ok(n)) = (&self.store_rv, rv.parse::<u64>()) {
            #[allow(clippy::cast_precision_loss, reason = "15 digits fit an f64 exactly")]
            g.set((n % 1_000_000_000_000_000) as f64);
        }
    }
}

impl fmt::Debug for InformerMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerMetrics")
            .field("enabled", &self.provider.is_some())
            .finish()
    }
}
