//! kcache's own rules for the rate limiters: the bucket's cap, saturation, concurrency, max-of.

use kcache_core::FakeClock;
use kcache_workqueue::{
    default_controller_rate_limiter_with_clock, BucketRateLimiter,
    ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter, QueueConfig,
    RateLimiter, RateLimitingQueue, WithMaxWaitRateLimiter,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn bucket(qps: f64, burst: u32) -> (BucketRateLimiter, FakeClock) {
    let clock = FakeClock::new();
    (
        BucketRateLimiter::with_clock(qps, burst, Arc::new(clock.clone())),
        clock,
    )
}

fn take(limiter: &BucketRateLimiter) -> Duration {
    RateLimiter::<()>::when(limiter, &())
}

#[test]
fn bucket_delays_grow_by_one_interval_per_call_beyond_the_burst() {
    let (limiter, _) = bucket(10.0, 3);
    let got: Vec<_> = (0..6).map(|_| take(&limiter).as_millis()).collect();
    assert_eq!(got, [0, 0, 0, 100, 200, 300]);
    assert_eq!(RateLimiter::<()>::num_requeues(&limiter, &()), 0);
}

#[test]
fn bucket_delay_is_capped_at_1000_seconds_by_default() {
    let (limiter, _) = bucket(10.0, 100);
    let delays: Vec<_> = (0..20_000).map(|_| take(&limiter)).collect();
    assert!(delays.iter().all(|d| *d <= Duration::from_secs(1000)));
    assert_eq!(delays[100 + 9_999], Duration::from_secs(1000));
    assert_eq!(delays.last(), Some(&Duration::from_secs(1000)));
}

#[test]
fn bucket_debt_stops_growing_at_the_cap_so_it_recovers_after_waiting_it_out() {
    let (limiter, clock) = bucket(10.0, 100);
    for _ in 0..50_000 {
        take(&limiter);
    }
    clock.advance(Duration::from_secs(1000));
    // Uncapped, client-go's bucket would still owe about 4000 s here.
    assert_eq!(take(&limiter), Duration::from_millis(100));
}

#[test]
fn bucket_with_max_delay_uses_that_cap_and_duration_max_means_uncapped() {
    let (limiter, _) = bucket(1.0, 1);
    let limiter = limiter.with_max_delay(Duration::from_secs(3));
    let got: Vec<_> = (0..6).map(|_| take(&limiter).as_secs()).collect();
    assert_eq!(got, [0, 1, 2, 3, 3, 3]);

    let (limiter, _) = bucket(10.0, 1);
    let limiter = limiter.with_max_delay(Duration::MAX);
    let last = (0..20_001).map(|_| take(&limiter)).last();
    assert_eq!(last, Some(Duration::from_secs(2000)));
}

#[test]
fn bucket_refills_as_the_fake_clock_advances_and_clones_of_the_clock_share_time() {
    let (limiter, clock) = bucket(2.0, 1);
    assert_eq!(take(&limiter), Duration::ZERO);
    assert_eq!(take(&limiter), Duration::from_millis(500));
    clock.clone().advance(Duration::from_secs(1));
    assert_eq!(take(&limiter), Duration::ZERO);
}

#[test]
fn exponential_limiter_saturates_with_duration_max_and_many_failures() {
    let limiter = ItemExponentialFailureRateLimiter::new(Duration::MAX, Duration::MAX);
    for _ in 0..10_000 {
        assert_eq!(limiter.when(&"x"), Duration::MAX);
    }
    assert_eq!(limiter.num_requeues(&"x"), 10_000);

    let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_nanos(1), Duration::MAX);
    let delays: Vec<_> = (0..5_000).map(|_| limiter.when(&"y")).collect();
    assert_eq!(delays[63], Duration::from_nanos(1 << 63));
    assert!(delays.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(delays.last(), Some(&Duration::MAX));
}

#[test]
fn a_rate_limited_add_with_a_duration_max_delay_waits_without_panicking() {
    let clock = FakeClock::new();
    let limiter = ItemExponentialFailureRateLimiter::new(Duration::MAX, Duration::MAX);
    let queue =
        RateLimitingQueue::with_config(limiter, QueueConfig::new().clock(Arc::new(clock.clone())));
    assert!(queue.add_rate_limited("x"));
    assert!(queue.add_rate_limited("x"));
    clock.advance(Duration::from_secs(365 * 24 * 3600));
    assert_eq!((queue.len(), queue.waiting_len()), (0, 1));
    queue.shut_down();
}

fn hammer_then_forget(limiter: Arc<dyn RateLimiter<u32>>) {
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let limiter = limiter.clone();
            std::thread::spawn(move || {
                for round in 0..20 {
                    for key in 0..500u32 {
                        limiter.when(&key);
                        if (key + round + t) % 3 == 0 {
                            limiter.forget(&key);
                        }
                    }
                }
                for key in 0..500u32 {
                    limiter.forget(&key);
                }
            })
        })
        .collect();
    for t in threads {
        assert!(t.join().is_ok());
    }
}

#[test]
fn concurrent_when_and_forget_from_two_threads_leave_no_tracked_items() {
    let exponential = Arc::new(ItemExponentialFailureRateLimiter::new(
        Duration::from_millis(1),
        Duration::from_secs(1),
    ));
    hammer_then_forget(exponential.clone());
    assert_eq!(exponential.tracked_items(), 0);

    let fast_slow = Arc::new(ItemFastSlowRateLimiter::new(
        Duration::from_millis(1),
        Duration::from_secs(1),
        3,
    ));
    hammer_then_forget(fast_slow.clone());
    assert_eq!(fast_slow.tracked_items(), 0);
}

#[test]
fn concurrent_when_counts_every_failure() {
    let limiter = Arc::new(ItemExponentialFailureRateLimiter::new(
        Duration::from_millis(1),
        Duration::MAX,
    ));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let limiter = limiter.clone();
            std::thread::spawn(move || {
                for _ in 0..10_000 {
                    limiter.when(&7u32);
                }
            })
        })
        .collect();
    for t in threads {
        assert!(t.join().is_ok());
    }
    assert_eq!(limiter.num_requeues(&7), 20_000);
    assert_eq!(limiter.tracked_items(), 1);
}

/// Counts the calls it gets and answers a fixed delay.
struct Counting {
    delay: Duration,
    whens: Arc<AtomicUsize>,
    forgets: Arc<AtomicUsize>,
}

impl RateLimiter<&'static str> for Counting {
    fn when(&self, _: &&'static str) -> Duration {
        self.whens.fetch_add(1, Ordering::SeqCst);
        self.delay
    }
    fn forget(&self, _: &&'static str) {
        self.forgets.fetch_add(1, Ordering::SeqCst);
    }
    fn num_requeues(&self, _: &&'static str) -> usize {
        self.whens.load(Ordering::SeqCst)
    }
}

#[test]
fn max_of_asks_and_forgets_every_limiter_even_when_an_earlier_one_dominates() {
    let whens: Vec<_> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let forgets: Vec<_> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let limiters = [7, 3, 5].iter().enumerate().map(|(i, secs)| {
        Box::new(Counting {
            delay: Duration::from_secs(*secs),
            whens: whens[i].clone(),
            forgets: forgets[i].clone(),
        }) as Box<dyn RateLimiter<&'static str>>
    });
    let limiter = MaxOfRateLimiter::new(limiters.collect());
    assert_eq!(limiter.when(&"a"), Duration::from_secs(7));
    assert_eq!(limiter.when(&"a"), Duration::from_secs(7));
    limiter.forget(&"a");
    for i in 0..3 {
        assert_eq!(whens[i].load(Ordering::SeqCst), 2, "limiter {i} asked");
        assert_eq!(forgets[i].load(Ordering::SeqCst), 1, "limiter {i} forgot");
    }
}

#[test]
fn max_of_consumes_a_bucket_token_even_when_the_exponential_delay_is_longer() {
    let clock = FakeClock::new();
    let bucket = Arc::new(BucketRateLimiter::with_clock(
        1.0,
        1,
        Arc::new(clock.clone()),
    ));
    let limiter = MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_secs(10),
            Duration::from_secs(100),
        )),
        Box::new(bucket.clone()),
    ]);
    assert_eq!(limiter.when(&"a"), Duration::from_secs(10));
    // The bucket's only token went to that call.
    assert_eq!(
        RateLimiter::<&str>::when(&bucket, &"b"),
        Duration::from_secs(1)
    );
    assert_eq!(limiter.num_requeues(&"a"), 1);
}

#[test]
fn max_of_with_no_limiters_gives_zero_delay_and_zero_requeues() {
    let limiter: MaxOfRateLimiter<&str> = MaxOfRateLimiter::new(Vec::new());
    assert!(limiter.is_empty());
    assert_eq!(limiter.when(&"a"), Duration::ZERO);
    assert_eq!(limiter.num_requeues(&"a"), 0);
    limiter.forget(&"a");
}

#[test]
fn with_max_wait_forwards_forget_and_num_requeues() {
    let limiter = WithMaxWaitRateLimiter::new(
        ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(100)),
        Duration::from_secs(2),
    );
    let secs: Vec<_> = (0..4).map(|_| limiter.when(&"a").as_secs()).collect();
    assert_eq!(secs, [1, 2, 2, 2]);
    assert_eq!(limiter.num_requeues(&"a"), 4);
    limiter.forget(&"a");
    assert_eq!(limiter.num_requeues(&"a"), 0);
    assert_eq!(limiter.when(&"a"), Duration::from_secs(1));
}

#[test]
fn fast_slow_with_zero_fast_attempts_is_always_slow() {
    let limiter = ItemFastSlowRateLimiter::new(Duration::from_millis(1), Duration::from_secs(9), 0);
    assert_eq!(limiter.when(&"a"), Duration::from_secs(9));
    assert_eq!(limiter.when(&"a"), Duration::from_secs(9));
}

#[test]
fn default_controller_limiter_is_per_item_exponential_until_the_burst_is_spent() {
    let clock = FakeClock::new();
    let limiter = default_controller_rate_limiter_with_clock::<u32>(Arc::new(clock.clone()));
    assert_eq!(limiter.len(), 2);
    // 100 distinct items spend the burst, each at its first 5 ms retry.
    for item in 0..100 {
        assert_eq!(limiter.when(&item), Duration::from_millis(5));
    }
    // Then the bucket dominates: the 101st first retry waits one interval (100 ms at 10 qps).
    assert_eq!(limiter.when(&100), Duration::from_millis(100));
    // An item with a long history: 19 failures reach the 1000 s ceiling (5 ms · 2^18 > 1000 s).
    let delays: Vec<_> = (0..19).map(|_| limiter.when(&7_000)).collect();
    assert_eq!(delays.last(), Some(&Duration::from_secs(1000)));
}
