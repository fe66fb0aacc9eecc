//! `PrometheusMetricsProvider`: the queue metrics on `prometheus-client`, with client-go's names.

use super::{CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// The `name` label of every workqueue metric.
type Labels = [(&'static str, String); 1];
type FloatGauge = Gauge<f64, AtomicU64>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// client-go's buckets for both duration histograms: `ExponentialBuckets(10e-7, 10, 10)`, that is
/// 1 µs to 1000 s by powers of ten, computed by repeated multiplication as Go does.
fn duration_buckets() -> Vec<f64> {
    let mut bucket = 10e-7;
    let mut buckets = Vec::with_capacity(10);
    for _ in 0..10 {
        buckets.push(bucket);
        bucket *= 10.0;
    }
    buckets
}

fn duration_histogram() -> Histogram {
    Histogram::new(duration_buckets())
}

/// A [`MetricsProvider`] recording into a `prometheus-client` [`Registry`] under client-go's metric
/// names, so the dashboards and alerts written for client-go's workqueues work unchanged (feature
/// `prometheus`).
///
/// [`new`](PrometheusMetricsProvider::new) registers one family per metric, each labelled by the
/// queue's `name`:
///
/// | metric | type |
/// |---|---|
/// | `workqueue_depth` | gauge |
/// | `workqueue_adds_total` | counter |
/// | `workqueue_queue_duration_seconds` | histogram, buckets 1e-6 … 1e3 s (×10) |
/// | `workqueue_work_duration_seconds` | histogram, same buckets |
/// | `workqueue_unfinished_work_seconds` | gauge |
/// | `workqueue_longest_running_processor_seconds` | gauge |
/// | `workqueue_retries_total` | counter |
/// | `workqueue_delayed_depth` | gauge (kcache's: items waiting for their delay) |
/// | `workqueue_priority_depth` | gauge, labels `name` and `priority` (a [`PriorityQueue`](crate::PriorityQueue)'s ready items per priority) |
///
/// The help texts are client-go's (`prometheus-client` ends each with a full stop). Create one
/// provider per registry and share it (it is a cheap [`Clone`]) between queues: creating a second
/// one on the same registry registers every family twice. Two queues with the same name share
/// their series.
///
/// # Examples
/// ```
/// use kcache_workqueue::metrics::PrometheusMetricsProvider;
/// use kcache_workqueue::{Queue, QueueConfig};
/// use prometheus_client::{encoding::text::encode, registry::Registry};
/// use std::sync::Arc;
///
/// let mut registry = Registry::default();
/// let provider = PrometheusMetricsProvider::new(&mut registry);
/// let queue = Queue::with_config(QueueConfig::new().name("pods").metrics_provider(Arc::new(provider)));
/// queue.add("default/web");
///
/// let mut text = String::new();
/// encode(&mut text, &registry)?;
/// assert!(text.contains(r#"workqueue_adds_total{name="pods"} 1"#));
/// # Ok::<(), std::fmt::Error>(())
/// ```
#[derive(Clone)]
pub struct PrometheusMetricsProvider {
    depth: Family<Labels, Gauge>,
    adds: Family<Labels, Counter>,
    latency: Histograms,
    work_duration: Histograms,
    unfinished_work: Family<Labels, FloatGauge>,
    longest_running: Family<Labels, FloatGauge>,
    retries: Family<Labels, Counter>,
    delayed_depth: Family<Labels, FloatGauge>,
    priority_depth: Family<[(&'static str, String); 2], Gauge>,
}

impl PrometheusMetricsProvider {
    /// Registers the workqueue metric families in `registry` and returns a provider feeding them.
    pub fn new(registry: &mut Registry) -> Self {
        let histograms =
            || Histograms::new_with_constructor(duration_histogram as fn() -> Histogram);
        let this = Self {
            depth: Family::default(),
            adds: Family::default(),
            latency: histograms(),
            work_duration: histograms(),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            retries: Family::default(),
            delayed_depth: Family::default(),
            priority_depth: Family::default(),
        };
        // prometheus-client appends `_total` to counters and a full stop to help texts itself.
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            this.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            this.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            this.latency.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            this.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has done that is in progress and hasn't been observed by \
             work_duration. Large values indicate stuck threads. One can deduce the number of \
             stuck threads by observing the rate at which this increases",
            this.unfinished_work.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            this.longest_running.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            this.retries.clone(),
        );
        registry.register(
            "workqueue_delayed_depth",
            "Current number of items waiting for their delay in workqueue",
            this.delayed_depth.clone(),
        );
        registry.register(
            "workqueue_priority_depth",
            "Current depth of workqueue per priority",
            this.priority_depth.clone(),
        );
        this
    }
}

fn labels(name: &str) -> Labels {
    [("name", name.to_owned())]
}

struct DepthGauge(Gauge);
impl GaugeMetric for DepthGauge {
    fn inc(&self) {
        self.0.inc();
    }
    fn dec(&self) {
        self.0.dec();
    }
}

struct Settable(FloatGauge);
impl SettableGaugeMetric for Settable {
    fn set(&self, value: f64) {
        self.0.set(value);
    }
}

struct Count(Counter);
impl CounterMetric for Count {
    fn inc(&self) {
        self.0.inc();
    }
}

struct Observe(Histogram);
impl HistogramMetric for Observe {
    fn observe(&self, value: f64) {
        self.0.observe(value);
    }
}

impl MetricsProvider for PrometheusMetricsProvider {
    fn new_depth_metric(&self, name: &str) -> Arc<dyn GaugeMetric> {
        Arc::new(DepthGauge(self.depth.get_or_create_owned(&labels(name))))
    }
    fn new_adds_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        Arc::new(Count(self.adds.get_or_create_owned(&labels(name))))
    }
    fn new_latency_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(Observe(self.latency.get_or_create_owned(&labels(name))))
    }
    fn new_work_duration_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(Observe(
            self.work_duration.get_or_create_owned(&labels(name)),
        ))
    }
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(Settable(
            self.unfinished_work.get_or_create_owned(&labels(name)),
        ))
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(Settable(
            self.longest_running.get_or_create_owned(&labels(name)),
        ))
    }
    fn new_retries_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        Arc::new(Count(self.retries.get_or_create_owned(&labels(name))))
    }
    fn new_delayed_depth_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(Settable(
            self.delayed_depth.get_or_create_owned(&labels(name)),
        ))
    }
    fn new_priority_depth_metric(&self, name: &str, priority: i32) -> Arc<dyn GaugeMetric> {
        let labels = [
            ("name", name.to_owned()),
            ("priority", priority.to_string()),
        ];
        Arc::new(DepthGauge(self.priority_depth.get_or_create_owned(&labels)))
    }
}

impl fmt::Debug for PrometheusMetricsProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrometheusMetricsProvider")
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::duration_buckets;

    #[test]
    fn duration_buckets_are_client_go_powers_of_ten_from_a_microsecond() {
        let b = duration_buckets();
        assert_eq!(b.len(), 10);
        for (i, want) in [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3]
            .iter()
            .enumerate()
        {
            assert!(
                (b[i] - want).abs() <= want * 1e-12,
                "bucket {i}: {} vs {want}",
                b[i]
            );
        }
    }
}
