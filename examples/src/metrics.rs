//! A small in-memory `MetricsProvider`: atomic counters, gauges and log-bucketed histograms.
//!
//! A real program would use `kcache_workqueue::metrics::PrometheusMetricsProvider` (feature
//! `prometheus`); this one shows what the queue reports and lets the demo check its own counts
//! against the queue's.

use kcache_workqueue::metrics::{CounterMetric, GaugeMetric, HistogramMetric, SettableGaugeMetric};
use kcache_workqueue::MetricsProvider;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// Every metric of one queue (the demo has a single queue, so the `name` label is not kept).
#[derive(Debug, Default)]
pub(crate) struct DemoMetrics {
    pub(crate) depth: Arc<Gauge>,
    pub(crate) adds: Arc<Counter>,
    pub(crate) retries: Arc<Counter>,
    pub(crate) queue_latency: Arc<Histogram>,
    pub(crate) work_duration: Arc<Histogram>,
    pub(crate) unfinished_work_seconds: Arc<MaxGauge>,
    pub(crate) longest_running_seconds: Arc<MaxGauge>,
    pub(crate) delayed_depth: Arc<MaxGauge>,
}

/// The provider handed to the queue; it gives out handles to the metrics in [`DemoMetrics`].
#[derive(Debug, Clone, Default)]
pub(crate) struct DemoMetricsProvider(pub(crate) Arc<DemoMetrics>);

impl MetricsProvider for DemoMetricsProvider {
    fn new_depth_metric(&self, _: &str) -> Arc<dyn GaugeMetric> {
        self.0.depth.clone()
    }
    fn new_adds_metric(&self, _: &str) -> Arc<dyn CounterMetric> {
        self.0.adds.clone()
    }
    fn new_latency_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        self.0.queue_latency.clone()
    }
    fn new_work_duration_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        self.0.work_duration.clone()
    }
    fn new_unfinished_work_seconds_metric(&self, _: &str) -> Arc<dyn SettableGaugeMetric> {
        self.0.unfinished_work_seconds.clone()
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        _: &str,
    ) -> Arc<dyn SettableGaugeMetric> {
        self.0.longest_running_seconds.clone()
    }
    fn new_retries_metric(&self, _: &str) -> Arc<dyn CounterMetric> {
        self.0.retries.clone()
    }
    fn new_delayed_depth_metric(&self, _: &str) -> Arc<dyn SettableGaugeMetric> {
        self.0.delayed_depth.clone()
    }
}

/// A counter.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

impl CounterMetric for Counter {
    fn inc(&self) {
        self.0.fetch_add(1, Relaxed);
    }
}

/// An up/down gauge that also remembers its peak.
#[derive(Debug, Default)]
pub(crate) struct Gauge {
    value: AtomicI64,
    peak: AtomicI64,
}

impl Gauge {
    pub(crate) fn peak(&self) -> i64 {
        self.peak.load(Relaxed)
    }
}

impl GaugeMetric for Gauge {
    fn inc(&self) {
        let now = self.value.fetch_add(1, Relaxed) + 1;
        self.peak.fetch_max(now, Relaxed);
    }
    fn dec(&self) {
        self.value.fetch_sub(1, Relaxed);
    }
}

/// A settable gauge that keeps its last and its largest value (f64 bits in atomics).
#[derive(Debug, Default)]
pub(crate) struct MaxGauge {
    last: AtomicU64,
    max: AtomicU64,
}

impl MaxGauge {
    pub(crate) fn max(&self) -> f64 {
        f64::from_bits(self.max.load(Relaxed))
    }
}

impl SettableGaugeMetric for MaxGauge {
    fn set(&self, value: f64) {
        self.last.store(value.to_bits(), Relaxed);
        // Non-negative f64s order like their bit patterns, so `fetch_max` on the bits works.
        if value >= 0.0 {
            self.max.fetch_max(value.to_bits(), Relaxed);
        }
    }
}

/// Buckets per doubling: each bucket spans a factor of 2^(1/4) ≈ 1.19, so a quantile read from the
/// histogram is within about 19% of the true value.
const STEPS_PER_DOUBLING: f64 = 4.0;
/// Enough buckets for 1 ns .. 2^40 ns (about 18 minutes); longer observations land in the last.
const BUCKETS: usize = 161;

/// A histogram of durations with logarithmic buckets, plus count, sum and max.
#[derive(Debug)]
pub(crate) struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_ns: AtomicU64,
    max_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    pub(crate) fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns.load(Relaxed))
    }

    /// The upper bound of the bucket holding the `q` quantile (capped by the largest observation).
    pub(crate) fn quantile(&self, q: f64) -> Duration {
        let count = self.count();
        if count == 0 {
            return Duration::ZERO;
        }
        let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
        let mut seen = 0;
        for (i, bucket) in self.buckets.iter().enumerate() {
            seen += bucket.load(Relaxed);
            if seen >= rank {
                let upper = 2f64.powf((i + 1) as f64 / STEPS_PER_DOUBLING);
                return Duration::from_nanos(upper as u64).min(self.max());
            }
        }
        self.max()
    }
}

impl HistogramMetric for Histogram {
    fn observe(&self, seconds: f64) {
        let ns = (seconds.max(0.0) * 1e9).round() as u64;
        let index = if ns <= 1 {
            0
        } else {
            ((ns as f64).log2() * STEPS_PER_DOUBLING) as usize
        };
        self.buckets[index.min(BUCKETS - 1)].fetch_add(1, Relaxed);
        self.count.fetch_add(1, Relaxed);
        self.sum_ns.fetch_add(ns, Relaxed);
        self.max_ns.fetch_max(ns, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_a_bucket_of_the_truth() {
        let h = Histogram::default();
        for us in 1..=1000u64 {
            h.observe(us as f64 * 1e-6);
        }
        let p50 = h.quantile(0.5).as_secs_f64() * 1e6;
        let p99 = h.quantile(0.99).as_secs_f64() * 1e6;
        assert!((500.0..=500.0 * 1.2).contains(&p50), "p50 {p50}");
        assert!((990.0..=1000.0).contains(&p99), "p99 {p99}");
        assert_eq!(h.count(), 1000);
        assert_eq!(h.max(), Duration::from_micros(1000));
    }

    #[test]
    fn an_empty_histogram_reports_zero() {
        assert_eq!(Histogram::default().quantile(0.99), Duration::ZERO);
    }

    #[test]
    fn gauges_remember_their_peak() {
        let g = Gauge::default();
        g.inc();
        g.inc();
        g.dec();
        assert_eq!(g.peak(), 2);
        let m = MaxGauge::default();
        m.set(2.5);
        m.set(1.0);
        assert_eq!(m.max(), 2.5);
    }
}
