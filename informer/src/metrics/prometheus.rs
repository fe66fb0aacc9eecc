//! `PrometheusInformerMetrics`: the informer metrics on `prometheus-client`, with client-go's
//! names.

use super::{GaugeMetric, HistogramMetric, InformerMetricsProvider};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

type FloatGauge = Gauge<f64, AtomicU64>;
type NameLabel = [(&'static str, String); 1];
type HandlerLabels = [(&'static str, String); 2];
type Histograms = Family<NameLabel, Histogram, fn() -> Histogram>;

/// The processing latency buckets, 1 ms to 10 s.
const LATENCY_BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// An [`InformerMetricsProvider`] recording into a `prometheus-client` [`Registry`] under
/// client-go 1.36's informer metric names (feature `prometheus`):
///
/// | metric | type | labels |
/// |---|---|---|
/// | `informer_queued_items` | gauge | `name` (informer), `handler` |
/// | `informer_processing_latency_seconds` | histogram, 1 ms … 10 s | `name` |
/// | `informer_store_resource_version` | gauge (last 15 digits of a numeric version) | `name` |
///
/// Create one per registry and share it (a cheap [`Clone`]) between informers.
///
/// # Examples
/// ```
/// use kcache_informer::{InformerMetricsProvider, PrometheusInformerMetrics};
/// use prometheus_client::{encoding::text::encode, registry::Registry};
///
/// let mut registry = Registry::default();
/// let metrics = PrometheusInformerMetrics::new(&mut registry);
/// metrics.new_queued_items_metric("pods", "enqueue").set(3.0);
/// let mut text = String::new();
/// encode(&mut text, &registry)?;
/// assert!(text.contains(r#"informer_queued_items{name="pods",handler="enqueue"} 3"#));
/// # Ok::<(), std::fmt::Error>(())
/// ```
#[derive(Clone)]
pub struct PrometheusInformerMetrics {
    queued: Family<HandlerLabels, FloatGauge>,
    latency: Histograms,
    store_rv: Family<NameLabel, FloatGauge>,
}

impl PrometheusInformerMetrics {
    /// Registers the informer metric families in `registry` and returns a provider feeding them.
    pub fn new(registry: &mut Registry) -> Self {
        let this = Self {
            queued: Family::default(),
            latency: Histograms::new_with_constructor(latency_histogram as fn() -> Histogram),
            store_rv: Family::default(),
        };
        registry.register(
            "informer_queued_items",
            "Number of notifications waiting in an informer event handler's buffer",
            this.queued.clone(),
        );
        registry.register(
            "informer_processing_latency_seconds",
            "Time to apply one key's changes to an informer's cache and hand them to its handlers",
            this.latency.clone(),
        );
        registry.register(
            "informer_store_resource_version",
            "Resource version of an informer's cache (last 15 digits)",
            this.store_rv.clone(),
        );
        this
    }
}

impl fmt::Debug for PrometheusInformerMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrometheusInformerMetrics")
            .finish_non_exhaustive()
    }
}

struct Settable(FloatGauge);
impl GaugeMetric for Settable {
    fn set(&self, value: f64) {
        self.0.set(value);
    }
}

struct Observe(Histogram);
impl HistogramMetric for Observe {
    fn observe(&self, value: f64) {
        self.0.observe(value);
    }
}

impl InformerMetricsProvider for PrometheusInformerMetrics {
    fn new_queued_items_metric(&self, informer: &str, handler: &str) -> Arc<dyn GaugeMetric> {
        let labels = [
            ("name", informer.to_owned()),
            ("handler", handler.to_owned()),
        ];
        Arc::new(Settable(self.queued.get_or_create_owned(&labels)))
    }

    fn new_processing_latency_metric(&self, informer: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(Observe(
            self.latency
                .get_or_create_owned(&[("name", informer.to_owned())]),
        ))
    }

    fn new_store_resource_version_metric(&self, informer: &str) -> Arc<dyn GaugeMetric> {
        Arc::new(Settable(
            self.store_rv
                .get_or_create_owned(&[("name", informer.to_owned())]),
        ))
    }
}
