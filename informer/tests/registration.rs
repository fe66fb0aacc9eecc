//! Registrations and streams: removal, waiting, coalescing streams, metrics.

mod common;

use common::*;
use futures::StreamExt;
use kcache_informer::{
    wait_for_cache_sync, BufferMode, Event, GaugeMetric, HandlerFuncs, HandlerOptions, HasSynced,
    HistogramMetric, InformerMetricsProvider, InformerOptions, SharedIndexInformer, WaitError,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_and_wait_from_inside_the_handler_is_refused_not_a_deadlock() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, Duration::ZERO);
    let slot: Arc<Mutex<Option<kcache_informer::HandlerRegistration<Pod>>>> =
        Arc::new(Mutex::new(None));
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = Mutex::new(tx);
    let s = slot.clone();
    let reg = inf
        .add_event_handler(HandlerFuncs::new().add_func(move |_: &Arc<Pod>, _| {
            let reg = s.lock().unwrap().clone();
            if let Some(reg) = reg {
                let _ = tx.lock().unwrap().send(reg.remove_and_wait());
            }
        }))
        .unwrap();
    *slot.lock().unwrap() = Some(reg.clone());
    let running = run(&inf);
    synced(&inf).await;
    src.create(Pod::new("a", 0)).unwrap();
    let got = tokio::task::block_in_place(|| rx.recv_timeout(WAIT)).unwrap();
    assert_eq!(got, Err(WaitError::FromHandler));
    assert!(reg.is_removed());
    tokio::time::timeout(WAIT, reg.stopped()).await.unwrap();
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_an_event_stream_removes_its_registration() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, Duration::ZERO);
    let stream = inf.event_stream().unwrap();
    assert_eq!(inf.handler_count(), 1);
    let reg = stream.registration().clone();
    drop(stream);
    assert_eq!(inf.handler_count(), 0);
    assert!(reg.is_removed());
    tokio::time::timeout(WAIT, reg.stopped()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coalescing_stream_that_is_not_polled_keeps_one_event_per_key() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, Duration::ZERO);
    let mut stream = inf
        .event_stream_with(HandlerOptions::new().buffer_mode(BufferMode::Coalescing))
        .unwrap();
    let running = run(&inf);
    synced(&inf).await;
    let mut last = None;
    for v in 0..50 {
        for k in ["a", "b"] {
            let p = if v == 0 {
                src.create(Pod::new(k, v))
            } else {
                src.update(Pod::new(k, v))
            };
            last = Some(p.unwrap().rv.clone());
        }
    }
    applied(&inf, &last.unwrap()).await;
    assert_eq!(stream.registration().pending(), 2);
    let mut seen = BTreeMap::new();
    for _ in 0..2 {
        match tokio::time::timeout(WAIT, stream.next())
            .await
            .unwrap()
            .unwrap()
        {
            Event::Added {
                obj,
                is_in_initial_list,
            } => {
                assert!(!is_in_initial_list);
                seen.insert(obj.name.clone(), obj.value);
            }
            other => panic!("expected a coalesced add, got {other:?}"),
        }
    }
    assert_eq!(seen, BTreeMap::from([("a".into(), 49), ("b".into(), 49)]));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_cache_sync_covers_informers_and_registrations_together() {
    let (clock, src) = source();
    src.create(Pod::new("a", 0)).unwrap();
    let first = informer(&clock, &src, Duration::ZERO);
    let second = informer(&clock, &src, Duration::ZERO);
    let reg = second.add_event_handler(Recorder::new()).unwrap();
    let (r1, r2) = (run(&first), run(&second));
    let all: [&dyn HasSynced; 3] = [&*first, &*second, &reg];
    assert!(tokio::time::timeout(WAIT, wait_for_cache_sync(&all))
        .await
        .unwrap());
    assert!(all.iter().all(|s| s.has_synced()));
    r1.stop().await;
    r2.stop().await;
    // Stopped before syncing: false, not a hang.
    let third = informer(&clock, &src, Duration::ZERO);
    let r3 = run(&third);
    r3.stop().await;
    let late = third.add_event_handler(Recorder::new());
    assert!(late.is_err());
}

#[derive(Default)]
struct Recorded {
    gauges: Mutex<BTreeMap<String, f64>>,
    observations: Mutex<usize>,
}

struct Gauge(Arc<Recorded>, String);
impl GaugeMetric for Gauge {
    fn set(&self, value: f64) {
        self.0.gauges.lock().unwrap().insert(self.1.clone(), value);
    }
}
struct Histogram(Arc<Recorded>);
impl HistogramMetric for Histogram {
    fn observe(&self, _: f64) {
        *self.0.observations.lock().unwrap() += 1;
    }
}
struct Provider(Arc<Recorded>);
impl InformerMetricsProvider for Provider {
    fn new_queued_items_metric(&self, informer: &str, handler: &str) -> Arc<dyn GaugeMetric> {
        Arc::new(Gauge(
            self.0.clone(),
            format!("informer_queued_items{{{informer},{handler}}}"),
        ))
    }
    fn new_processing_latency_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(Histogram(self.0.clone()))
    }
    fn new_store_resource_version_metric(&self, informer: &str) -> Arc<dyn GaugeMetric> {
        Arc::new(Gauge(
            self.0.clone(),
            format!("informer_store_resource_version{{{informer}}}"),
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_provider_sees_queued_items_latency_and_the_store_version() {
    let (clock, src) = source();
    let recorded = Arc::new(Recorded::default());
    let inf = Arc::new(SharedIndexInformer::with_options(
        src.clone(),
        InformerOptions::new()
            .name("pods")
            .clock(Arc::new(clock.clone()))
            .metrics(Arc::new(Provider(recorded.clone()))),
    ));
    let rec = Recorder::new();
    inf.add_event_handler_with_options(rec.clone(), HandlerOptions::new().name("h"))
        .unwrap();
    let running = run(&inf);
    synced(&inf).await;
    let mut last = None;
    for i in 0..5 {
        last = Some(src.create(Pod::new(&format!("p{i}"), i)).unwrap());
    }
    let last = last.unwrap();
    applied(&inf, &last.rv).await;
    rec.wait_for(5).await;
    let rv: f64 = last.rv.as_str().parse().unwrap();
    let gauges = recorded.gauges.lock().unwrap().clone();
    assert_eq!(
        gauges.get("informer_store_resource_version{pods}"),
        Some(&rv)
    );
    assert!(
        gauges.contains_key("informer_queued_items{pods,h}"),
        "{gauges:?}"
    );
    assert!(*recorded.observations.lock().unwrap() >= 5);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_an_informer_that_never_ran_ends_its_handlers() {
    let (clock, src) = source();
    let inf = informer(&clock, &src, Duration::ZERO);
    let reg = inf.add_event_handler(Recorder::new()).unwrap();
    assert!(!reg.is_removed());
    drop(inf);
    assert!(reg.is_removed());
    tokio::time::timeout(WAIT, reg.stopped()).await.unwrap();
    assert!(!tokio::time::timeout(WAIT, reg.synced()).await.unwrap());
}

#[cfg(feature = "prometheus")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prometheus_provider_exports_client_go_names_after_real_events() {
    use kcache_informer::PrometheusInformerMetrics;
    use prometheus_client::{encoding::text::encode, registry::Registry};
    let (clock, src) = source();
    let mut registry = Registry::default();
    let metrics = PrometheusInformerMetrics::new(&mut registry);
    let inf = Arc::new(SharedIndexInformer::with_options(
        src.clone(),
        InformerOptions::new()
            .name("pods")
            .clock(Arc::new(clock.clone()))
            .metrics(Arc::new(metrics)),
    ));
    let rec = Recorder::new();
    inf.add_event_handler_with_options(rec.clone(), HandlerOptions::new().name("h"))
        .unwrap();
    let running = run(&inf);
    synced(&inf).await;
    let p = src.create(Pod::new("a", 0)).unwrap();
    applied(&inf, &p.rv).await;
    rec.wait_for(1).await;
    running.stop().await;
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    assert!(
        text.contains(r#"informer_queued_items{name="pods",handler="h"} 0"#),
        "{text}"
    );
    // Two processing calls: the (empty) first list, one `ReplacedAll` entry, and the create.
    assert!(
        text.contains(r#"informer_processing_latency_seconds_count{name="pods"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            r#"informer_store_resource_version{{name="pods"}} {}"#,
            p.rv
        )),
        "{text}"
    );
}

/// client-go's `HasSynced` promise, in the order it is published: a registration reports synced
/// only once its informer does (a controller's workers wait on their registration and then read
/// the informer's cache). A thread spins on one registration of an informer with many handlers
/// and checks the informer's flag the moment the registration turns synced; the informer's flag
/// must already be up. A stress test: with the reverse order the window is the time it takes to
/// mark every other handler synced, which the spinning thread catches within a few rounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_is_never_synced_before_its_informer() {
    const ROUNDS: usize = 200;
    const HANDLERS: usize = 64;
    for round in 0..ROUNDS {
        let (clock, src) = source();
        let inf = informer(&clock, &src, Duration::ZERO);
        let regs: Vec<_> = (0..HANDLERS)
            .map(|_| inf.add_event_handler(HandlerFuncs::new()).unwrap())
            .collect();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let observer = {
            let (reg, inf, done) = (regs[0].clone(), inf.clone(), done.clone());
            std::thread::spawn(move || loop {
                // Read before the registration: once `done` is up, the registration has synced.
                let done = done.load(std::sync::atomic::Ordering::Acquire);
                if reg.has_synced() {
                    return Some(inf.has_synced());
                }
                if done {
                    return None;
                }
                std::hint::spin_loop();
            })
        };
        let running = run(&inf);
        let synced = tokio::time::timeout(WAIT, regs[0].synced()).await;
        done.store(true, std::sync::atomic::Ordering::Release);
        let seen = tokio::task::block_in_place(|| observer.join()).unwrap();
        assert_eq!(synced, Ok(true));
        assert_eq!(
            seen,
            Some(true),
            "round {round}: a registration reported synced while its informer did not"
        );
        running.stop().await;
    }
}
