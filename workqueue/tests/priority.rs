//! `PriorityQueue`: priorities, raises, the no-starvation bound, delays and rate limiting at a
//! priority, metrics per priority, and the queue rules around them.

use kcache_core::FakeClock;
use kcache_workqueue::metrics::{CounterMetric, GaugeMetric, HistogramMetric, SettableGaugeMetric};
use kcache_workqueue::{
    ItemExponentialFailureRateLimiter, MetricsProvider, PriorityQueue, QueueConfig,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const LOW: i32 = PriorityQueue::<u32>::LOW;

fn queue(clock: &FakeClock) -> PriorityQueue<u32> {
    let limiter =
        ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(10));
    PriorityQueue::with_config(limiter, QueueConfig::new().clock(Arc::new(clock.clone())))
}

fn drain(q: &PriorityQueue<u32>) -> Vec<u32> {
    std::iter::from_fn(|| {
        let item = q.try_get()?;
        q.done(&item).unwrap();
        Some(item)
    })
    .collect()
}

#[test]
fn higher_priorities_go_first_and_each_priority_in_the_order_of_first_add() {
    let q = queue(&FakeClock::new());
    for (item, p) in [(1, LOW), (2, 0), (3, 5), (4, LOW), (5, 5), (6, 0)] {
        assert!(q.add_with_priority(item, p));
    }
    q.add_with_priority(1, LOW); // dedup: keeps its place
    assert_eq!(q.len(), 6);
    assert_eq!(drain(&q), [3, 5, 2, 6, 1, 4]);
}

#[test]
fn a_re_add_with_a_higher_priority_moves_the_item_up_and_a_lower_one_never_down() {
    let q = queue(&FakeClock::new());
    for item in [1, 2, 3] {
        q.add_with_priority(item, LOW);
    }
    q.add(9);
    q.add_with_priority(3, 0); // up to NORMAL, keeping its first add: before 9
    q.add_with_priority(9, LOW); // never down
    assert_eq!(q.priority_of(&3), Some(0));
    assert_eq!(q.priority_of(&9), Some(0));
    assert_eq!(q.depth_by_priority(), [(0, 2), (LOW, 2)]);
    assert_eq!(drain(&q), [3, 9, 1, 2]);
}

#[test]
fn an_item_re_added_while_processing_is_requeued_once_at_its_highest_priority() {
    let q = queue(&FakeClock::new());
    q.add_with_priority(1, LOW);
    assert_eq!(q.try_get(), Some(1));
    q.add_with_priority(1, LOW);
    q.add_with_priority(1, 7);
    q.add_with_priority(1, 2); // never down
    q.add(2);
    assert_eq!(q.len(), 1, "in flight: not queued until done");
    q.done(&1).unwrap();
    assert_eq!(q.priority_of(&1), Some(7));
    assert_eq!(drain(&q), [1, 2]);
}

#[test]
fn a_low_priority_item_is_handed_out_within_the_documented_bound_under_endless_high_load() {
    let q = queue(&FakeClock::new());
    for i in 0..20 {
        q.add_with_priority(i, LOW);
    }
    let n = q.len() as u64;
    q.add_with_priority(1_000, LOW);
    let bound = PriorityQueue::<u32>::HANDOFF_SHARE * (n + 1);
    let mut next = 10_000;
    for handoff in 1..=bound + 1 {
        // Always more high-priority work than the workers can take.
        for _ in 0..3 {
            q.add_with_priority(next, 100);
            next += 1;
        }
        let item = q.try_get().unwrap();
        q.done(&item).unwrap();
        if item == 1_000 {
            assert!(handoff <= bound, "handed out at {handoff}, bound {bound}");
            return;
        }
    }
    panic!("the low-priority item waited past {bound} hand-offs");
}

#[test]
fn a_delayed_add_becomes_ready_at_its_priority_and_a_later_immediate_add_raises_it() {
    let clock = FakeClock::new();
    let q = queue(&clock);
    q.add_after_with_priority(1, Duration::from_secs(1), 5);
    q.add_after_with_priority(2, Duration::from_secs(1), LOW);
    q.add_after_with_priority(2, Duration::from_secs(2), 9); // later deadline: only the priority
    assert_eq!(q.waiting_len(), 2);
    q.add(3);
    clock.advance(Duration::from_secs(1));
    // The timer thread moves both; `get` blocks until it has.
    let mut got = vec![q.get().unwrap()];
    got.push(q.get().unwrap());
    got.push(q.get().unwrap());
    // 3 was taken first only if the timer had not fired yet when the first get ran.
    let expected_after_fire = [2, 1, 3];
    if got[0] == 3 {
        assert_eq!(&got[1..], [2, 1]);
    } else {
        assert_eq!(got, expected_after_fire);
    }
    for item in got {
        q.done(&item).unwrap();
    }
    q.add_after_with_priority(4, Duration::from_secs(60), LOW);
    q.add_with_priority(4, 3); // ready now, at the higher of the two
    assert_eq!(q.priority_of(&4), Some(3));
    assert_eq!(q.waiting_len(), 0);
}

#[test]
fn rate_limited_adds_keep_their_priority_and_count_requeues() {
    let clock = FakeClock::new();
    let q = queue(&clock);
    q.add_rate_limited_with_priority(1, LOW);
    q.add_rate_limited(2);
    assert_eq!((q.num_requeues(&1), q.num_requeues(&2)), (1, 1));
    assert_eq!(q.waiting_len(), 2);
    clock.advance(Duration::from_millis(5));
    assert_eq!(q.get(), Some(2));
    assert_eq!(q.get(), Some(1));
    q.forget(&1);
    assert_eq!(q.num_requeues(&1), 0);
}

#[test]
fn shutdown_refuses_adds_at_any_priority_and_drains_by_rank() {
    let clock = FakeClock::new();
    let q = queue(&clock);
    q.add_with_priority(1, LOW);
    q.add_with_priority(2, 3);
    q.shut_down();
    assert!(!q.add_with_priority(3, 100));
    assert!(!q.add_after_with_priority(3, Duration::from_secs(1), 100));
    assert_eq!(q.get(), Some(2));
    assert_eq!(q.get(), Some(1));
    assert_eq!(q.get(), None);
}

#[test]
fn get_async_hands_out_by_rank() {
    let q = queue(&FakeClock::new());
    q.add_with_priority(1, LOW);
    q.add_with_priority(2, 1);
    let got = futures::executor::block_on(async { (q.get_async().await, q.get_async().await) });
    assert_eq!(got, (Some(2), Some(1)));
}

#[derive(Default)]
struct Gauges(Mutex<HashMap<i32, Arc<Gauge>>>);

#[derive(Default)]
struct Gauge(AtomicI64);

impl GaugeMetric for Gauge {
    fn inc(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn dec(&self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
struct Nothing;
impl CounterMetric for Nothing {
    fn inc(&self) {}
}
impl HistogramMetric for Nothing {
    fn observe(&self, _: f64) {}
}
impl SettableGaugeMetric for Nothing {
    fn set(&self, _: f64) {}
}

struct ByPriority(Arc<Gauges>);

impl MetricsProvider for ByPriority {
    fn new_depth_metric(&self, _: &str) -> Arc<dyn GaugeMetric> {
        Arc::new(Gauge::default())
    }
    fn new_adds_metric(&self, _: &str) -> Arc<dyn CounterMetric> {
        Arc::new(Nothing)
    }
    fn new_latency_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(Nothing)
    }
    fn new_work_duration_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(Nothing)
    }
    fn new_unfinished_work_seconds_metric(&self, _: &str) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(Nothing)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        _: &str,
    ) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(Nothing)
    }
    fn new_retries_metric(&self, _: &str) -> Arc<dyn CounterMetric> {
        Arc::new(Nothing)
    }
    fn new_priority_depth_metric(&self, _: &str, priority: i32) -> Arc<dyn GaugeMetric> {
        self.0
             .0
            .lock()
            .unwrap()
            .entry(priority)
            .or_default()
            .clone()
    }
}

#[test]
fn the_depth_of_each_priority_is_a_gauge_that_follows_adds_raises_and_gets() {
    let clock = FakeClock::new();
    let gauges = Arc::new(Gauges::default());
    let config = QueueConfig::new()
        .name("prio")
        .metrics_provider(Arc::new(ByPriority(gauges.clone())))
        .clock(Arc::new(clock.clone()));
    let limiter =
        ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(10));
    let q = PriorityQueue::with_config(limiter, config);
    let depth = |p: i32| {
        gauges
            .0
            .lock()
            .unwrap()
            .get(&p)
            .map_or(0, |g| g.0.load(Ordering::SeqCst))
    };
    for i in 0..3u32 {
        q.add_with_priority(i, LOW);
    }
    q.add(10u32);
    assert_eq!((depth(LOW), depth(0)), (3, 1));
    q.add_with_priority(2, 0);
    assert_eq!((depth(LOW), depth(0)), (2, 2));
    assert_eq!(q.try_get(), Some(2)); // raised, and added before 10
    assert_eq!((depth(LOW), depth(0)), (2, 1));
}
