//! `DelayingQueue`: the delay rules the crate docs state that the
//! client-go port does not already cover. Time is a `FakeClock`; a worker blocked in `get` waits
//! for the timer thread, and "nothing became ready" is shown by a sentinel that must come out next.

use kcache_core::{Clock, FakeClock};
use kcache_workqueue::{metrics, DelayingQueue, MetricsProvider, QueueConfig};
use std::sync::Arc;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

fn delaying() -> (DelayingQueue<&'static str>, FakeClock) {
    let clock = FakeClock::new();
    let q = DelayingQueue::with_config(QueueConfig::new().clock(Arc::new(clock.clone())));
    (q, clock)
}

/// Proves the timer thread made nothing ready up to now: a sentinel due in 1 ms comes out first.
fn assert_nothing_fired(q: &DelayingQueue<&'static str>, clock: &FakeClock) {
    assert!(q.add_after("sentinel", MS));
    clock.advance(MS);
    assert_eq!(q.get(), Some("sentinel"));
    q.done(&"sentinel").unwrap();
    assert_eq!(q.len(), 0);
}

#[test]
fn a_zero_delay_is_an_immediate_add() {
    let (q, _clock) = delaying();
    assert!(q.add_after("a", Duration::ZERO));
    assert_eq!((q.len(), q.waiting_len()), (1, 0));
    assert_eq!(q.try_get(), Some("a"));
}

#[test]
fn a_deadline_not_in_the_future_is_an_immediate_add() {
    let (q, clock) = delaying();
    assert!(q.add_at("a", clock.now()));
    clock.advance(SEC);
    assert!(q.add_at("b", clock.now() - MS));
    assert_eq!((q.len(), q.waiting_len()), (2, 0));
    assert_eq!([q.try_get(), q.try_get()], [Some("a"), Some("b")]);
}

#[test]
fn add_at_a_future_instant_fires_then() {
    let (q, clock) = delaying();
    assert!(q.add_at("a", clock.now() + 3 * SEC));
    assert_eq!((q.len(), q.waiting_len()), (0, 1));
    clock.advance(2 * SEC);
    assert_nothing_fired(&q, &clock);
    clock.advance(SEC);
    assert_eq!(q.get(), Some("a"));
}

#[test]
fn huge_delays_and_duration_max_do_not_overflow() {
    let (q, clock) = delaying();
    assert!(q.add_after("max", Duration::MAX));
    assert!(q.add_after("century", Duration::from_secs(100 * 365 * 24 * 3600)));
    assert!(
        q.add_after("max", Duration::MAX),
        "a repeated Duration::MAX is deduplicated"
    );
    assert_eq!((q.len(), q.waiting_len()), (0, 2));
    clock.advance(Duration::from_secs(365 * 24 * 3600));
    assert_nothing_fired(&q, &clock);
    assert_eq!(q.waiting_len(), 2);
    // An earlier deadline still replaces the far one.
    assert!(q.add_after("max", SEC));
    clock.advance(SEC);
    assert_eq!(q.get(), Some("max"));
    assert_eq!(q.waiting_len(), 1);
}

#[test]
fn add_after_of_a_queued_item_is_a_no_op() {
    let (q, clock) = delaying();
    q.add("a");
    assert!(q.add_after("a", SEC));
    assert_eq!((q.len(), q.waiting_len()), (1, 0));
    assert_eq!(q.get(), Some("a"));
    q.done(&"a").unwrap();
    clock.advance(SEC);
    assert_nothing_fired(&q, &clock);
}

#[test]
fn add_after_of_an_item_in_flight_waits_for_the_delay_when_done_comes_first() {
    let (q, clock) = delaying();
    q.add("a");
    assert_eq!(q.get(), Some("a"));
    assert!(q.add_after("a", SEC));
    assert_eq!((q.len(), q.waiting_len()), (0, 0));
    q.done(&"a").unwrap();
    assert_eq!((q.len(), q.waiting_len()), (0, 1));
    // The sentinel check itself moves the clock by 1 ms: to 999 ms, just before "a" is due.
    clock.advance(998 * MS);
    assert_nothing_fired(&q, &clock);
    clock.advance(MS);
    assert_eq!(q.get(), Some("a"));
}

#[test]
fn add_after_of_an_item_in_flight_waits_for_done_when_the_delay_passes_first() {
    let (q, clock) = delaying();
    q.add("a");
    assert_eq!(q.get(), Some("a"));
    assert!(q.add_after("a", SEC));
    clock.advance(2 * SEC);
    // The delay passed, but "a" is still in flight: not handed out to a second worker.
    assert_nothing_fired(&q, &clock);
    q.done(&"a").unwrap();
    assert_eq!((q.len(), q.waiting_len()), (1, 0));
    assert_eq!(q.try_get(), Some("a"));
}

#[test]
fn a_delayed_re_add_in_flight_only_moves_earlier() {
    let (q, clock) = delaying();
    q.add("a");
    assert_eq!(q.get(), Some("a"));
    assert!(q.add_after("a", 2 * SEC));
    assert!(q.add_after("a", 5 * SEC));
    assert!(q.add_after("a", SEC));
    q.done(&"a").unwrap();
    clock.advance(SEC);
    assert_eq!(q.get(), Some("a"));
    q.done(&"a").unwrap();
    clock.advance(5 * SEC);
    assert_nothing_fired(&q, &clock);
}

#[test]
fn a_pending_delay_only_moves_earlier() {
    let (q, clock) = delaying();
    assert!(q.add_after("a", SEC));
    assert!(q.add_after("a", 2 * SEC));
    assert_eq!(q.waiting_len(), 1);
    clock.advance(SEC);
    assert_eq!(q.get(), Some("a"));
    q.done(&"a").unwrap();
    clock.advance(SEC);
    assert_nothing_fired(&q, &clock);

    assert!(q.add_after("b", 5 * SEC));
    assert!(q.add_after("b", SEC));
    clock.advance(SEC);
    assert_eq!(q.get(), Some("b"));
    q.done(&"b").unwrap();
    // The replaced 5 s deadline does not fire a second time.
    clock.advance(5 * SEC);
    assert_nothing_fired(&q, &clock);
}

#[test]
fn waiting_len_counts_the_items_waiting_for_their_delay() {
    let (q, clock) = delaying();
    for (item, secs) in [("a", 1), ("b", 2), ("c", 3)] {
        q.add_after(item, secs * SEC);
    }
    assert_eq!((q.len(), q.waiting_len()), (0, 3));
    q.add("b");
    assert_eq!((q.len(), q.waiting_len()), (1, 2));
    clock.advance(SEC);
    assert_eq!(q.get(), Some("b"));
    assert_eq!(q.get(), Some("a"));
    assert_eq!(q.waiting_len(), 1);
    clock.advance(2 * SEC);
    assert_eq!(q.get(), Some("c"));
    assert_eq!((q.len(), q.waiting_len()), (0, 0));
}

#[test]
fn shut_down_drops_items_waiting_in_the_delay_heap() {
    let (q, clock) = delaying();
    q.add("ready");
    q.add_after("later", SEC);
    q.shut_down();
    assert_eq!((q.len(), q.waiting_len()), (1, 0));
    clock.advance(2 * SEC);
    assert_eq!(q.get(), Some("ready"));
    assert_eq!(q.get(), None);
}

#[test]
fn add_after_returns_false_after_shut_down() {
    let (q, _clock) = delaying();
    q.shut_down();
    assert!(!q.add_after("a", SEC));
    assert!(!q.add_after("a", Duration::ZERO));
    assert_eq!((q.len(), q.waiting_len()), (0, 0));
}

#[test]
fn a_delayed_re_add_of_an_item_in_flight_is_dropped_by_shut_down() {
    let (q, _clock) = delaying();
    q.add("a");
    assert_eq!(q.get(), Some("a"));
    assert!(q.add_after("a", SEC));
    q.shut_down();
    q.done(&"a").unwrap();
    assert_eq!((q.len(), q.waiting_len(), q.in_flight()), (0, 0, 0));
    assert_eq!(q.get(), None);
}

#[test]
fn many_delayed_items_with_one_deadline_come_out_in_add_order() {
    let (q, clock) = delaying();
    let items = ["e", "d", "c", "b", "a"];
    for item in items {
        q.add_after(item, SEC);
    }
    clock.advance(SEC);
    let got: Vec<_> = (0..items.len()).map(|_| q.get().unwrap()).collect();
    assert_eq!(got, items);
}

/// A metrics provider that keeps only `workqueue_depth` and `workqueue_adds_total`.
#[derive(Default)]
struct DepthProvider {
    depth: Arc<Gauge>,
    adds: Arc<Gauge>,
}

#[derive(Default)]
struct Gauge(std::sync::atomic::AtomicI64);

impl Gauge {
    fn get(&self) -> i64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl metrics::GaugeMetric for Gauge {
    fn inc(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    fn dec(&self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl metrics::CounterMetric for Gauge {
    fn inc(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

struct Ignored;
impl metrics::CounterMetric for Ignored {
    fn inc(&self) {}
}
impl metrics::HistogramMetric for Ignored {
    fn observe(&self, _: f64) {}
}
impl metrics::SettableGaugeMetric for Ignored {
    fn set(&self, _: f64) {}
}

impl MetricsProvider for DepthProvider {
    fn new_depth_metric(&self, _: &str) -> Arc<dyn metrics::GaugeMetric> {
        self.depth.clone()
    }
    fn new_adds_metric(&self, _: &str) -> Arc<dyn metrics::CounterMetric> {
        self.adds.clone()
    }
    fn new_latency_metric(&self, _: &str) -> Arc<dyn metrics::HistogramMetric> {
        Arc::new(Ignored)
    }
    fn new_work_duration_metric(&self, _: &str) -> Arc<dyn metrics::HistogramMetric> {
        Arc::new(Ignored)
    }
    fn new_unfinished_work_seconds_metric(&self, _: &str) -> Arc<dyn metrics::SettableGaugeMetric> {
        Arc::new(Ignored)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        _: &str,
    ) -> Arc<dyn metrics::SettableGaugeMetric> {
        Arc::new(Ignored)
    }
    fn new_retries_metric(&self, _: &str) -> Arc<dyn metrics::CounterMetric> {
        Arc::new(Ignored)
    }
}

fn delaying_with_depth() -> (
    DelayingQueue<&'static str>,
    FakeClock,
    Arc<Gauge>,
    Arc<Gauge>,
) {
    let clock = FakeClock::new();
    let provider = DepthProvider::default();
    let (depth, adds) = (provider.depth.clone(), provider.adds.clone());
    let config = QueueConfig::new()
        .name("depth")
        .metrics_provider(Arc::new(provider))
        .clock(Arc::new(clock.clone()));
    (DelayingQueue::with_config(config), clock, depth, adds)
}

#[test]
fn workqueue_depth_counts_a_delayed_re_add_of_an_item_in_flight_once_it_is_ready() {
    // Found by the model test (`fuzz::run` with a counting provider): the delayed re-add of an
    // item in flight was counted when scheduled and again when it became ready.
    let (q, clock, depth, adds) = delaying_with_depth();
    q.add("a");
    assert_eq!((depth.get(), adds.get()), (1, 1));
    assert_eq!(q.get(), Some("a"));
    assert_eq!(depth.get(), 0);
    // In flight and due later: not pending yet, like an item waiting in the heap.
    assert!(q.add_after("a", SEC));
    assert!(q.add_after("a", 500 * MS));
    assert_eq!((depth.get(), adds.get()), (0, 1));
    q.done(&"a").unwrap();
    assert_eq!((depth.get(), adds.get(), q.waiting_len()), (0, 1, 1));
    clock.advance(500 * MS);
    assert_eq!(q.get(), Some("a"));
    assert_eq!((depth.get(), adds.get()), (0, 2));

    // Due before its done: it becomes pending at the done.
    assert!(q.add_after("a", SEC));
    clock.advance(SEC);
    assert_eq!(depth.get(), 0);
    q.done(&"a").unwrap();
    // `len` first: the delayed add may still sit in the inbox until the state is read.
    let len = q.len();
    assert_eq!((depth.get(), adds.get(), len), (1, 3, 1));
    assert_eq!(q.get(), Some("a"));
    assert_eq!(depth.get(), 0);

    // Dropped by the shutdown: never pending.
    assert!(q.add_after("a", SEC));
    q.shut_down();
    q.done(&"a").unwrap();
    assert_eq!((depth.get(), adds.get(), q.len()), (0, 3, 0));
}

#[test]
fn an_item_waiting_again_for_a_deadline_it_had_before_keeps_its_new_place() {
    // "a" waits for t+10 ms, then is added at once (its delay entry goes stale) and processed.
    // "b" then waits for t+10 ms, and "a" waits for t+10 ms again: "a" came second this time,
    // so it must fire second (its stale first entry, pushed before "b", must not stand in).
    let (q, clock) = delaying();
    let at = clock.now() + 10 * MS;
    assert!(q.add_at("a", at));
    assert!(q.add("a"));
    assert_eq!(q.try_get(), Some("a"));
    q.done(&"a").unwrap();
    assert!(q.add_at("b", at));
    assert!(q.add_at("a", at));
    clock.advance(10 * MS);
    assert_eq!(q.get(), Some("b"));
    assert_eq!(q.get(), Some("a"));
}
