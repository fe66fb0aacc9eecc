//! Hostile input to the work queues: rate limiters built from zero, negative, NaN, infinite or
//! huge parameters, and calls after shutdown. Each case asserts the documented behaviour; nothing
//! panics, and nothing blocks (every `get` here has something to return or is shut down).

use kcache_core::FakeClock;
use kcache_workqueue::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter,
    MaxOfRateLimiter, Queue, RateLimiter, WithMaxWaitRateLimiter,
};
use std::sync::Arc;
use std::time::Duration;

fn bucket(qps: f64, burst: u32) -> (FakeClock, BucketRateLimiter) {
    let clock = FakeClock::new();
    let limiter = BucketRateLimiter::with_clock(qps, burst, Arc::new(clock.clone()));
    (clock, limiter)
}

fn when(limiter: &impl RateLimiter<u32>) -> Duration {
    limiter.when(&1)
}

#[test]
fn above_a_billion_qps_every_call_waits_zero() {
    // 1.5·10⁹ qps is a token every 0.67 ns: `1/qps` rounds to 1 ns, which used to make every
    // call past the burst wait one more nanosecond instead of zero, as documented.
    for qps in [1.000_001e9, 1.5e9, 1e12, f64::INFINITY] {
        let (_clock, limiter) = bucket(qps, 1);
        for _ in 0..5 {
            assert_eq!(when(&limiter), Duration::ZERO, "qps {qps}");
        }
    }
    let (_clock, limiter) = bucket(1e9, 1);
    when(&limiter);
    assert_eq!(
        when(&limiter),
        Duration::from_nanos(1),
        "10⁹ qps is a token per ns"
    );
}

#[test]
fn a_bucket_that_never_refills_gives_its_burst_then_the_max_delay() {
    for qps in [0.0, -1.0, f64::NAN, f64::NEG_INFINITY, 1e-300] {
        let (clock, limiter) = bucket(qps, 2);
        assert_eq!(when(&limiter), Duration::ZERO, "qps {qps}");
        assert_eq!(when(&limiter), Duration::ZERO, "qps {qps}");
        assert_eq!(
            when(&limiter),
            BucketRateLimiter::DEFAULT_MAX_DELAY,
            "qps {qps}"
        );
        clock.advance(Duration::from_secs(3600));
        assert_eq!(
            when(&limiter),
            BucketRateLimiter::DEFAULT_MAX_DELAY,
            "qps {qps}: no refill"
        );
    }
}

#[test]
fn a_bucket_of_zero_tokens_always_waits_the_max_delay() {
    let (_clock, limiter) = bucket(10.0, 0);
    for _ in 0..3 {
        assert_eq!(when(&limiter), BucketRateLimiter::DEFAULT_MAX_DELAY);
    }
}

#[test]
fn exponential_and_fast_slow_limiters_saturate_with_extreme_durations() {
    let limiter = ItemExponentialFailureRateLimiter::new(Duration::MAX, Duration::MAX);
    for _ in 0..200 {
        assert_eq!(when(&limiter), Duration::MAX);
    }
    let limiter = ItemExponentialFailureRateLimiter::new(Duration::ZERO, Duration::MAX);
    for _ in 0..200 {
        assert_eq!(when(&limiter), Duration::ZERO);
    }
    let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_nanos(1), Duration::MAX);
    let mut last = Duration::ZERO;
    for _ in 0..300 {
        last = when(&limiter);
    }
    assert_eq!(
        last,
        Duration::MAX,
        "doubling saturates instead of overflowing"
    );
    let limiter = ItemFastSlowRateLimiter::new(Duration::ZERO, Duration::MAX, usize::MAX);
    for _ in 0..10 {
        assert_eq!(when(&limiter), Duration::ZERO);
    }
    let limiter = ItemFastSlowRateLimiter::new(Duration::MAX, Duration::MAX, 0);
    assert_eq!(when(&limiter), Duration::MAX);
}

#[test]
fn composite_limiters_with_nothing_inside_or_a_zero_cap_wait_zero() {
    let empty: MaxOfRateLimiter<u32> = MaxOfRateLimiter::new(Vec::new());
    assert_eq!(when(&empty), Duration::ZERO);
    let capped = WithMaxWaitRateLimiter::new(
        ItemExponentialFailureRateLimiter::new(Duration::MAX, Duration::MAX),
        Duration::ZERO,
    );
    assert_eq!(when(&capped), Duration::ZERO);
}

#[test]
fn calls_after_shutdown_are_refused_or_answered_without_blocking() {
    let q: Queue<u32> = Queue::new();
    assert!(q.add(1));
    q.shut_down();
    assert!(!q.add(2), "adds after shutdown are refused");
    assert_eq!(q.get(), Some(1), "what was queued is still handed out");
    assert!(q.done(&1).is_ok());
    assert_eq!(q.get(), None, "then None at once, no blocking");
    assert!(q.done(&1).is_err(), "done on an item not being processed");
    q.shut_down();
    q.shut_down_with_drain();
    assert!(q.is_shutting_down());
}
