//! The `prometheus-client` provider: client-go's metric names, help texts and `name` label, and
//! the values after real queue operations on a `FakeClock`.
//! Run with `cargo test -p kcache-workqueue --features prometheus`.
#![cfg(feature = "prometheus")]

use kcache_core::FakeClock;
use kcache_workqueue::metrics::PrometheusMetricsProvider;
use kcache_workqueue::{DelayingQueue, Queue, QueueConfig};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::Duration;

fn text(registry: &Registry) -> String {
    let mut out = String::new();
    assert!(encode(&mut out, registry).is_ok());
    out
}

/// The value of the sample line starting with `series` (name and labels, exactly as encoded).
fn value(registry: &Registry, series: &str) -> Option<f64> {
    text(registry).lines().find_map(|line| {
        let rest = line.strip_prefix(series)?.strip_prefix(' ')?;
        rest.parse().ok()
    })
}

/// Waits, without sleeping, for the queue's timer thread to make `series` equal `want`.
fn eventually(registry: &Registry, series: &str, want: f64) -> Option<f64> {
    for _ in 0..20_000 {
        if value(registry, series) == Some(want) {
            break;
        }
        std::thread::yield_now();
    }
    value(registry, series)
}

fn setup(name: &str) -> (Registry, DelayingQueue<&'static str>, FakeClock) {
    let mut registry = Registry::default();
    let provider = Arc::new(PrometheusMetricsProvider::new(&mut registry));
    let clock = FakeClock::new();
    let config = QueueConfig::new()
        .name(name)
        .metrics_provider(provider)
        .clock(Arc::new(clock.clone()));
    (registry, DelayingQueue::with_config(config), clock)
}

#[test]
fn families_have_client_go_names_types_and_help_texts() {
    let (registry, _queue, _) = setup("jobs");
    let text = text(&registry);
    for (family, kind) in [
        ("workqueue_depth", "gauge"),
        ("workqueue_adds", "counter"),
        ("workqueue_queue_duration_seconds", "histogram"),
        ("workqueue_work_duration_seconds", "histogram"),
        ("workqueue_unfinished_work_seconds", "gauge"),
        ("workqueue_longest_running_processor_seconds", "gauge"),
        ("workqueue_retries", "counter"),
        ("workqueue_delayed_depth", "gauge"),
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} {kind}\n")),
            "{family}:\n{text}"
        );
    }
    for help in [
        "# HELP workqueue_depth Current depth of workqueue.\n",
        "# HELP workqueue_adds Total number of adds handled by workqueue.\n",
        "# HELP workqueue_queue_duration_seconds How long in seconds an item stays in workqueue \
         before being requested.\n",
        "# HELP workqueue_work_duration_seconds How long in seconds processing an item from \
         workqueue takes.\n",
        "# HELP workqueue_unfinished_work_seconds How many seconds of work has done that is in \
         progress and hasn't been observed by work_duration. Large values indicate stuck threads. \
         One can deduce the number of stuck threads by observing the rate at which this \
         increases.\n",
        "# HELP workqueue_longest_running_processor_seconds How many seconds has the longest \
         running processor for workqueue been running.\n",
        "# HELP workqueue_retries Total number of retries handled by workqueue.\n",
    ] {
        assert!(text.contains(help), "{help}");
    }
    // The counters' samples carry client-go's `_total` names.
    assert_eq!(
        value(&registry, r#"workqueue_adds_total{name="jobs"}"#),
        Some(0.0)
    );
    assert_eq!(
        value(&registry, r#"workqueue_retries_total{name="jobs"}"#),
        Some(0.0)
    );
}

#[test]
fn duration_histograms_use_client_go_buckets_from_a_microsecond_to_1000_seconds() {
    let (registry, _queue, _) = setup("jobs");
    let text = text(&registry);
    let bounds: Vec<f64> = text
        .lines()
        .filter_map(|l| l.strip_prefix(r#"workqueue_queue_duration_seconds_bucket{le=""#))
        .filter_map(|l| l.split('"').next())
        .filter(|le| *le != "+Inf")
        .filter_map(|le| le.parse().ok())
        .collect();
    assert_eq!(bounds.len(), 10, "{text}");
    for (got, want) in bounds
        .iter()
        .zip([1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3])
    {
        assert!((got - want).abs() <= want * 1e-12, "{got} vs {want}");
    }
    assert!(text.contains(r#"workqueue_work_duration_seconds_bucket{le="+Inf",name="jobs"} 0"#));
}

#[test]
fn queue_operations_show_up_under_the_queue_name() {
    let (registry, queue, clock) = setup("jobs");
    let series = |metric: &str| format!(r#"{metric}{{name="jobs"}}"#);

    assert!(queue.add("a"));
    assert!(queue.add("b"));
    assert!(queue.add("a")); // deduplicated: not an add
                             // Adds may sit in the queue's add buffer until the queue is next looked at; `len` does.
    assert_eq!(queue.len(), 2);
    assert_eq!(value(&registry, &series("workqueue_adds_total")), Some(2.0));
    assert_eq!(value(&registry, &series("workqueue_depth")), Some(2.0));

    clock.advance(Duration::from_secs(3));
    assert_eq!(queue.get(), Some("a"));
    assert_eq!(queue.get(), Some("b"));
    assert_eq!(value(&registry, &series("workqueue_depth")), Some(0.0));
    assert_eq!(
        value(&registry, &series("workqueue_queue_duration_seconds_count")),
        Some(2.0)
    );
    assert_eq!(
        value(&registry, &series("workqueue_queue_duration_seconds_sum")),
        Some(6.0)
    );
    assert_eq!(
        value(
            &registry,
            r#"workqueue_queue_duration_seconds_bucket{le="1.0",name="jobs"}"#
        ),
        Some(0.0)
    );
    assert_eq!(
        value(
            &registry,
            r#"workqueue_queue_duration_seconds_bucket{le="10.0",name="jobs"}"#
        ),
        Some(2.0)
    );

    clock.advance(Duration::from_secs(2));
    assert!(queue.done(&"a").is_ok());
    assert_eq!(
        value(&registry, &series("workqueue_work_duration_seconds_count")),
        Some(1.0)
    );
    assert_eq!(
        value(&registry, &series("workqueue_work_duration_seconds_sum")),
        Some(2.0)
    );

    assert!(queue.add_after("c", Duration::from_secs(10)));
    assert_eq!(
        value(&registry, &series("workqueue_retries_total")),
        Some(1.0)
    );
    assert_eq!(
        value(&registry, &series("workqueue_delayed_depth")),
        Some(1.0)
    );

    // "b" has been in flight for 3 s once the clock moves one more second; the timer thread
    // refreshes the unfinished-work gauges when the clock moves.
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        eventually(&registry, &series("workqueue_unfinished_work_seconds"), 3.0),
        Some(3.0)
    );
    assert_eq!(
        eventually(
            &registry,
            &series("workqueue_longest_running_processor_seconds"),
            3.0
        ),
        Some(3.0)
    );

    // "c"'s delay runs out: the timer thread makes it ready, which counts as an add.
    clock.advance(Duration::from_secs(10));
    assert_eq!(queue.get(), Some("c"));
    assert_eq!(value(&registry, &series("workqueue_adds_total")), Some(3.0));
    assert_eq!(
        value(&registry, &series("workqueue_delayed_depth")),
        Some(0.0)
    );
    queue.shut_down();
}

#[test]
fn two_queues_sharing_one_provider_get_separate_series() {
    let mut registry = Registry::default();
    let provider = Arc::new(PrometheusMetricsProvider::new(&mut registry));
    let config = |name: &str| {
        QueueConfig::new()
            .name(name)
            .metrics_provider(provider.clone())
    };
    let pods: Queue<u32> = Queue::with_config(config("pods"));
    let nodes: Queue<u32> = Queue::with_config(config("nodes"));
    let unnamed: Queue<u32> =
        Queue::with_config(QueueConfig::new().metrics_provider(provider.clone()));
    for i in 0..3 {
        pods.add(i);
    }
    nodes.add(1);
    unnamed.add(1);
    // Adds may sit in a queue's add buffer until the queue is next looked at; `len` does.
    assert_eq!((pods.len(), nodes.len(), unnamed.len()), (3, 1, 1));
    assert_eq!(
        value(&registry, r#"workqueue_adds_total{name="pods"}"#),
        Some(3.0)
    );
    assert_eq!(
        value(&registry, r#"workqueue_adds_total{name="nodes"}"#),
        Some(1.0)
    );
    assert_eq!(text(&registry).matches("workqueue_adds_total{").count(), 2);
}

#[test]
fn a_priority_queue_exports_its_depth_per_priority() {
    let mut registry = Registry::default();
    let provider = Arc::new(PrometheusMetricsProvider::new(&mut registry));
    let config = QueueConfig::new()
        .name("prio")
        .metrics_provider(provider)
        .clock(Arc::new(FakeClock::new()));
    let q = kcache_workqueue::PriorityQueue::with_config(
        kcache_workqueue::ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1),
        ),
        config,
    );
    q.add_with_priority("a", -100);
    q.add_with_priority("b", -100);
    q.add("c");
    let series = |p: &str| format!(r#"workqueue_priority_depth{{name="prio",priority="{p}"}}"#);
    assert_eq!(value(&registry, &series("-100")), Some(2.0));
    assert_eq!(value(&registry, &series("0")), Some(1.0));
    assert_eq!(
        value(&registry, r#"workqueue_depth{name="prio"}"#),
        Some(3.0)
    );
    assert_eq!(q.try_get(), Some("c"));
    assert_eq!(value(&registry, &series("0")), Some(0.0));
}
