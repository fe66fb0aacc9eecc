//! Queue metrics with client-go's names, so existing dashboards work unchanged.

#[cfg(feature = "prometheus")]
mod prometheus;

#[cfg(feature = "prometheus")]
pub use self::prometheus::PrometheusMetricsProvider;

use std::fmt;
use std::sync::Arc;

/// A gauge that goes up and down by one (`workqueue_depth`).
pub trait GaugeMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
    /// Subtracts one.
    fn dec(&self);
}

/// A gauge set to a value (`workqueue_unfinished_work_seconds`, …).
pub trait SettableGaugeMetric: Send + Sync {
    /// Sets the value.
    fn set(&self, value: f64);
}

/// A monotonically increasing counter (`workqueue_adds_total`, `workqueue_retries_total`).
pub trait CounterMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
}

/// A histogram or summary of seconds (`workqueue_queue_duration_seconds`, …).
pub trait HistogramMetric: Send + Sync {
    /// Records one observation.
    fn observe(&self, value: f64);
}

/// Creates the metrics of a named queue (client-go's `workqueue.MetricsProvider`).
///
/// Each method receives the queue's name, which implementations use as the `name` label. The
/// metric names client-go's Prometheus adapter registers, and that `PrometheusMetricsProvider`
/// (feature `prometheus`) uses too, are given per method. A queue only asks for metrics when it has
/// a name and a provider (see [`QueueConfig`](crate::QueueConfig)); otherwise it does no metrics
/// work at all.
pub trait MetricsProvider: Send + Sync + 'static {
    /// `workqueue_depth` (gauge): items added and not yet handed out.
    fn new_depth_metric(&self, name: &str) -> Arc<dyn GaugeMetric>;
    /// `workqueue_adds_total` (counter): adds that made an item newly pending.
    fn new_adds_metric(&self, name: &str) -> Arc<dyn CounterMetric>;
    /// `workqueue_queue_duration_seconds` (histogram): from first add to `get`.
    fn new_latency_metric(&self, name: &str) -> Arc<dyn HistogramMetric>;
    /// `workqueue_work_duration_seconds` (histogram): from `get` to `done`.
    fn new_work_duration_metric(&self, name: &str) -> Arc<dyn HistogramMetric>;
    /// `workqueue_unfinished_work_seconds` (gauge): summed age of the items in flight.
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric>;
    /// `workqueue_longest_running_processor_seconds` (gauge): age of the oldest item in flight.
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Arc<dyn SettableGaugeMetric>;
    /// `workqueue_retries_total` (counter): every delayed add (so every `add_rate_limited`).
    fn new_retries_metric(&self, name: &str) -> Arc<dyn CounterMetric>;
    /// `workqueue_delayed_depth` (gauge, kcache's addition that client-go lacks): items waiting in
    /// the delay heap. The default returns a no-op gauge, so older providers keep compiling.
    fn new_delayed_depth_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric> {
        let _ = name;
        Arc::new(Noop)
    }
    /// `workqueue_depth` of one priority (gauge, label `priority` beside `name`): a
    /// [`PriorityQueue`](crate::PriorityQueue)'s ready items at `priority`, asked for the first
    /// time an item is ready at that priority. The default returns a no-op gauge.
    fn new_priority_depth_metric(&self, name: &str, priority: i32) -> Arc<dyn GaugeMetric> {
        let _ = (name, priority);
        Arc::new(Noop)
    }
}

/// A provider whose metrics do nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopMetricsProvider;

#[derive(Debug, Clone, Copy)]
struct Noop;

impl GaugeMetric for Noop {
    fn inc(&self) {}
    fn dec(&self) {}
}
impl SettableGaugeMetric for Noop {
    fn set(&self, _: f64) {}
}
impl CounterMetric for Noop {
    fn inc(&self) {}
}
impl HistogramMetric for Noop {
    fn observe(&self, _: f64) {}
}

impl MetricsProvider for NoopMetricsProvider {
    fn new_depth_metric(&self, _: &str) -> Arc<dyn GaugeMetric> {
        Arc::new(Noop)
    }
    fn new_adds_metric(&self, _: &str) -> Arc<dyn CounterMetric> {
        Arc::new(Noop)
    }
    fn new_latency_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(Noop)
    }
    fn new_work_duration_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(Noop)
    }
    fn new_unfinished_work_seconds_metric(&self, _: &str) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(Noop)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        _: &str,
    ) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(Noop)
    }
    fn new_retries_metric(&self, _: &str) -> Arc<dyn CounterMetric> {
        Arc::new(Noop)
    }
}

/// The metrics of one queue, created once from the provider.
pub(crate) struct QueueMetrics {
    pub(crate) depth: Arc<dyn GaugeMetric>,
    pub(crate) adds: Arc<dyn CounterMetric>,
    pub(crate) latency: Arc<dyn HistogramMetric>,
    pub(crate) work_duration: Arc<dyn HistogramMetric>,
    pub(crate) unfinished_work: Arc<dyn SettableGaugeMetric>,
    pub(crate) longest_running: Arc<dyn SettableGaugeMetric>,
    pub(crate) retries: Arc<dyn CounterMetric>,
    pub(crate) delayed_depth: Arc<dyn SettableGaugeMetric>,
}

impl QueueMetrics {
    pub(crate) fn new(provider: &dyn MetricsProvider, name: &str) -> Self {
        Self {
            depth: provider.new_depth_metric(name),
            adds: provider.new_adds_metric(name),
            latency: provider.new_latency_metric(name),
            work_duration: provider.new_work_duration_metric(name),
            unfinished_work: provider.new_unfinished_work_seconds_metric(name),
            longest_running: provider.new_longest_running_processor_seconds_metric(name),
            retries: provider.new_retries_metric(name),
            delayed_depth: provider.new_delayed_depth_metric(name),
        }
    }
}

impl fmt::Debug for QueueMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueMetrics").finish_non_exhaustive()
    }
}
