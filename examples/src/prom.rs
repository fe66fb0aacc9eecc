//! `--listen`: the metrics in a `prometheus-client` registry, under client-go's names, and the
//! checks behind /healthz and /readyz, served by [`kcache_demo::ops`].
//!
//! The queue's metrics go to the demo's own provider (for the report) and to kcache-workqueue's
//! `PrometheusMetricsProvider` (`workqueue_*`) at once; the informers record into
//! kcache-informer's `PrometheusInformerMetrics` (`informer_*`); the controller's KEP-5647 skips
//! count in `stale_sync_skips_total`; with `--shard`, kcache-controller's
//! `PrometheusShardMetrics` reads the member's sharding stats at each scrape (`shard_*`).

use kcache_controller::shard::PrometheusShardMetrics;
use kcache_controller::ControllerHandle;
use kcache_core::health::HealthChecks;
use kcache_demo::ops::{Endpoints, OpsServer};
use kcache_informer::{InformerFactory, PrometheusInformerMetrics};
use kcache_leaderelection::{LeaderHealthCheck, LeaderStatus};
use kcache_workqueue::metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, PrometheusMetricsProvider, SettableGaugeMetric,
};
use kcache_workqueue::MetricsProvider;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How long one reconcile may run before /healthz reports its worker as stuck (the demo's take
/// milliseconds).
const RECONCILE_LIMIT: Duration = Duration::from_secs(60);

/// The registry and what records into it.
pub(crate) struct Prometheus {
    pub(crate) registry: Registry,
    pub(crate) queue: PrometheusMetricsProvider,
    pub(crate) informers: PrometheusInformerMetrics,
    pub(crate) stale_sync_skips: Arc<PromCounter>,
    /// `--shard`: the member's gate is added here.
    pub(crate) shard: PrometheusShardMetrics,
}

impl Prometheus {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::default();
        let queue = PrometheusMetricsProvider::new(&mut registry);
        let informers = PrometheusInformerMetrics::new(&mut registry);
        let skips = Counter::default();
        registry.register(
            "stale_sync_skips",
            "Reconciles skipped because the informer caches had not yet shown the writes of \
             the key's last reconcile",
            skips.clone(),
        );
        let shard = PrometheusShardMetrics::new(&mut registry);
        Self {
            registry,
            queue,
            informers,
            stale_sync_skips: Arc::new(PromCounter(skips)),
            shard,
        }
    }
}

/// Serves `prometheus`'s registry on `addr`, with
/// - /readyz: the factory's informers synced (`informer-sync`), and the workers' check;
/// - /healthz: the controller's workers running and none stuck in one reconcile for
///   [`RECONCILE_LIMIT`] (`replicaset-controller-workers`), and with `--leader-elect` the
///   lease's renewal (`leaderElection`: it fails once this replica holds the lease without
///   having renewed it for the lease duration plus `lease` again).
pub(crate) fn serve(
    addr: SocketAddr,
    prometheus: Prometheus,
    factory: &InformerFactory,
    controller: &ControllerHandle,
    leader: Option<(LeaderStatus, Duration)>,
) -> Result<OpsServer, String> {
    let workers = controller.workers_check(RECONCILE_LIMIT);
    let readyz = HealthChecks::new()
        .with(factory.sync_check())
        .with(workers.clone());
    let mut healthz = HealthChecks::new().with(workers);
    if let Some((status, lease)) = leader {
        let check = LeaderHealthCheck::new(lease);
        check.set_leader_election(status);
        healthz.push(check);
    }
    let endpoints = Endpoints::new(prometheus.registry, healthz, readyz);
    OpsServer::start(addr, Arc::new(endpoints)).map_err(|e| format!("--listen: {e}"))
}

/// A `prometheus-client` counter as the controller's [`CounterMetric`].
pub(crate) struct PromCounter(Counter);

impl CounterMetric for PromCounter {
    fn inc(&self) {
        self.0.inc();
    }
}

/// A [`MetricsProvider`] that feeds two providers: each metric it hands out records into both.
pub(crate) struct Tee(
    pub(crate) Arc<dyn MetricsProvider>,
    pub(crate) Arc<dyn MetricsProvider>,
);

struct Both<M: ?Sized>(Arc<M>, Arc<M>);

impl GaugeMetric for Both<dyn GaugeMetric> {
    fn inc(&self) {
        self.0.inc();
        self.1.inc();
    }
    fn dec(&self) {
        self.0.dec();
        self.1.dec();
    }
}

impl CounterMetric for Both<dyn CounterMetric> {
    fn inc(&self) {
        self.0.inc();
        self.1.inc();
    }
}

impl HistogramMetric for Both<dyn HistogramMetric> {
    fn observe(&self, value: f64) {
        self.0.observe(value);
        self.1.observe(value);
    }
}

impl SettableGaugeMetric for Both<dyn SettableGaugeMetric> {
    fn set(&self, value: f64) {
        self.0.set(value);
        self.1.set(value);
    }
}

impl MetricsProvider for Tee {
    fn new_depth_metric(&self, name: &str) -> Arc<dyn GaugeMetric> {
        Arc::new(Both(
            self.0.new_depth_metric(name),
            self.1.new_depth_metric(name),
        ))
    }
    fn new_adds_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        Arc::new(Both(
            self.0.new_adds_metric(name),
            self.1.new_adds_metric(name),
        ))
    }
    fn new_latency_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(Both(
            self.0.new_latency_metric(name),
            self.1.new_latency_metric(name),
        ))
    }
    fn new_work_duration_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(Both(
            self.0.new_work_duration_metric(name),
            self.1.new_work_duration_metric(name),
        ))
    }
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(Both(
            self.0.new_unfinished_work_seconds_metric(name),
            self.1.new_unfinished_work_seconds_metric(name),
        ))
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(Both(
            self.0.new_longest_running_processor_seconds_metric(name),
            self.1.new_longest_running_processor_seconds_metric(name),
        ))
    }
    fn new_retries_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        Arc::new(Both(
            self.0.new_retries_metric(name),
            self.1.new_retries_metric(name),
        ))
    }
    fn new_delayed_depth_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(Both(
            self.0.new_delayed_depth_metric(name),
            self.1.new_delayed_depth_metric(name),
        ))
    }
    fn new_priority_depth_metric(&self, name: &str, priority: i32) -> Arc<dyn GaugeMetric> {
        Arc::new(Both(
            self.0.new_priority_depth_metric(name, priority),
            self.1.new_priority_depth_metric(name, priority),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::DemoMetricsProvider;
    use kcache_controller::shard::{Shard, ShardConfig};
    use kcache_leaderelection::InProcessMembers;

    #[test]
    fn a_shard_members_stats_are_in_the_registry() {
        let p = Prometheus::new();
        let shard =
            Shard::new(InProcessMembers::new(), ShardConfig::new("r1")).expect("valid config");
        p.shard.add(&shard.gate());
        futures::executor::block_on(shard.tick());
        let mut text = String::new();
        encode(&mut text, &p.registry).expect("encodes");
        assert!(text.contains(r#"shard_members{member="r1"} 1"#), "{text}");
        assert!(
            text.contains(r#"shard_rebalances_total{member="r1"} 1"#),
            "{text}"
        );
    }

    use kcache_informer::InformerMetricsProvider;
    use kcache_workqueue::{Queue, QueueConfig};
    use prometheus_client::encoding::text::encode;

    #[test]
    fn a_queue_on_the_tee_counts_in_both_providers() {
        let prom = Prometheus::new();
        let demo = DemoMetricsProvider::default();
        let tee = Tee(Arc::new(demo.clone()), Arc::new(prom.queue.clone()));
        let queue = Queue::with_config(
            QueueConfig::new()
                .name("sets")
                .metrics_provider(Arc::new(tee)),
        );
        queue.add("a");
        queue.add("b");
        prom.stale_sync_skips.inc();
        prom.informers.new_queued_items_metric("sets", "h").set(3.0);
        assert_eq!(demo.0.adds.get(), 2);
        let mut text = String::new();
        assert!(encode(&mut text, &prom.registry).is_ok());
        assert!(
            text.contains("workqueue_adds_total{name=\"sets\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_depth{name=\"sets\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("stale_sync_skips_total 1\n"), "{text}");
        assert!(
            text.contains("informer_queued_items{name=\"sets\",handler=\"h\"} 3.0\n"),
            "{text}"
        );
    }
}
