//! Ported from client-go's `util/workqueue/default_rate_limiters_test.go` (kubernetes/client-go,
//! also kubernetes/kubernetes `staging/src/k8s.io/client-go/util/workqueue/`), rewritten in our
//! words. The Go tests use no clock for these limiters; neither do we.

use kcache_workqueue::{
    ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter, RateLimiter,
    WithMaxWaitRateLimiter,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn delays<T, L: RateLimiter<T>>(limiter: &L, item: &T, n: usize) -> Vec<Duration> {
    (0..n).map(|_| limiter.when(item)).collect()
}

#[test]
fn exponential_limiter_doubles_per_item_and_starts_over_after_forget() {
    let limiter = ItemExponentialFailureRateLimiter::new(ms(1), Duration::from_secs(1));

    assert_eq!(
        delays(&limiter, &"one", 5),
        [ms(1), ms(2), ms(4), ms(8), ms(16)]
    );
    assert_eq!(limiter.num_requeues(&"one"), 5);

    assert_eq!(delays(&limiter, &"two", 2), [ms(1), ms(2)]);
    assert_eq!(limiter.num_requeues(&"two"), 2);

    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), ms(1));
}

#[test]
fn exponential_limiter_caps_at_max_after_a_thousand_failures_instead_of_overflowing() {
    let limiter = ItemExponentialFailureRateLimiter::new(ms(1), Duration::from_secs(1000));
    delays(&limiter, &"one", 5);
    assert_eq!(limiter.when(&"one"), ms(32));

    delays(&limiter, &"overflow1", 1000);
    assert_eq!(limiter.when(&"overflow1"), Duration::from_secs(1000));

    let minute = Duration::from_secs(60);
    let hour = Duration::from_secs(3600);
    let limiter = ItemExponentialFailureRateLimiter::new(minute, 1000 * hour);
    delays(&limiter, &"two", 2);
    assert_eq!(limiter.when(&"two"), 4 * minute);

    delays(&limiter, &"overflow2", 1000);
    assert_eq!(limiter.when(&"overflow2"), 1000 * hour);
}

#[test]
fn fast_slow_limiter_is_fast_for_the_first_attempts_then_slow() {
    let (fast, slow) = (ms(5), Duration::from_secs(10));
    let limiter = ItemFastSlowRateLimiter::new(fast, slow, 3);

    assert_eq!(delays(&limiter, &"one", 5), [fast, fast, fast, slow, slow]);
    assert_eq!(limiter.num_requeues(&"one"), 5);

    assert_eq!(delays(&limiter, &"two", 2), [fast, fast]);
    assert_eq!(limiter.num_requeues(&"two"), 2);

    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), fast);
}

#[test]
fn max_of_limiter_returns_the_longest_delay_of_fast_slow_and_exponential() {
    let slow = Duration::from_secs(3);
    let limiter: MaxOfRateLimiter<&str> = MaxOfRateLimiter::new(vec![
        Box::new(ItemFastSlowRateLimiter::new(ms(5), slow, 3)),
        Box::new(ItemExponentialFailureRateLimiter::new(
            ms(1),
            Duration::from_secs(1),
        )),
    ]);

    assert_eq!(
        delays(&limiter, &"one", 5),
        [ms(5), ms(5), ms(5), slow, slow]
    );
    assert_eq!(limiter.num_requeues(&"one"), 5);

    assert_eq!(delays(&limiter, &"two", 2), [ms(5), ms(5)]);
    assert_eq!(limiter.num_requeues(&"two"), 2);

    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), ms(5));
}

/// Gives `base` for the first `threshold` calls (whatever the item), then `max`; no per-item state.
struct StepLimiter {
    calls: AtomicUsize,
    threshold: usize,
    base: Duration,
    max: Duration,
}

impl RateLimiter<usize> for StepLimiter {
    fn when(&self, _: &usize) -> Duration {
        if self.calls.fetch_add(1, Ordering::SeqCst) < self.threshold {
            self.base
        } else {
            self.max
        }
    }
    fn forget(&self, _: &usize) {}
    fn num_requeues(&self, _: &usize) -> usize {
        0
    }
}

#[test]
fn with_max_wait_limiter_caps_the_wrapped_delay() {
    let step = StepLimiter {
        calls: AtomicUsize::new(0),
        threshold: 100,
        base: ms(5),
        max: Duration::from_secs(1000),
    };
    let limiter = WithMaxWaitRateLimiter::new(step, Duration::from_secs(500));
    for i in 0..100 {
        assert_eq!(limiter.when(&i), ms(5), "call {i}");
    }
    for i in 100..200 {
        assert_eq!(limiter.when(&i), Duration::from_secs(500), "call {i}");
    }
}
