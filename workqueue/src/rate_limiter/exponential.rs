//! `ItemExponentialFailureRateLimiter`: per-item exponential backoff.

use super::failures::FailureCounts;
use super::RateLimiter;
use std::fmt;
use std::hash::Hash;
use std::time::Duration;

/// Per-item exponential backoff (client-go's `ItemExponentialFailureRateLimiter`).
///
/// The `n`-th retry of an item since it was last forgotten waits `base · 2^(n-1)`, capped at `max`:
/// `base`, `2·base`, `4·base`, … [`when`](RateLimiter::when) counts the failure;
/// [`forget`](RateLimiter::forget) drops the item's entry (call it once the item succeeded, or the
/// entry stays forever, as in client-go); [`num_requeues`](RateLimiter::num_requeues) is the failure
/// count.
///
/// The arithmetic saturates: a huge `base` (even [`Duration::MAX`]) or thousands of failures give
/// `max`, never an overflow or a panic (client-go's kubernetes#31396 fix, without floats).
///
/// Items are tracked in a sharded map, so workers on several threads rarely contend.
///
/// # Examples
/// ```
/// use kcache_workqueue::{ItemExponentialFailureRateLimiter, RateLimiter};
/// use std::time::Duration;
///
/// let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1));
/// let ms = |d: Duration| d.as_millis();
/// let delays: Vec<_> = (0..10).map(|_| ms(limiter.when(&"web"))).collect();
/// assert_eq!(delays, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
/// assert_eq!(limiter.num_requeues(&"web"), 10);
///
/// limiter.forget(&"web"); // it succeeded: start over
/// assert_eq!(limiter.when(&"web"), Duration::from_millis(5));
/// ```
#[doc(alias = "TypedItemExponentialFailureRateLimiter")]
pub struct ItemExponentialFailureRateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: FailureCounts<T>,
}

impl<T: Clone + Eq + Hash> ItemExponentialFailureRateLimiter<T> {
    /// A limiter whose first retry of an item waits `base`, doubling per failure up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: FailureCounts::new(),
        }
    }

    /// The delay of the first retry.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The longest delay this limiter gives.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// How many items have a failure history (were retried and not forgotten since).
    pub fn tracked_items(&self) -> usize {
        self.failures.len()
    }
}

/// `base · 2^exp`, or `max` if that is larger (or does not fit).
pub(crate) fn backoff(base: Duration, exp: usize, max: Duration) -> Duration {
    let base = base.as_nanos();
    if base == 0 {
        return Duration::ZERO;
    }
    let max_nanos = max.as_nanos();
    // `base << exp` fits in a u128 iff `base <= u128::MAX >> exp` (and exp < 128).
    let delay = match u32::try_from(exp) {
        Ok(exp) if exp < u128::BITS && base <= u128::MAX >> exp => base << exp,
        _ => return max,
    };
    if delay >= max_nanos {
        return max;
    }
    // delay < max's nanoseconds, so its whole seconds fit in a u64.
    let secs = u64::try_from(delay / 1_000_000_000).unwrap_or(u64::MAX);
    let nanos = u32::try_from(delay % 1_000_000_000).unwrap_or(0);
    Duration::new(secs, nanos)
}

impl<T: Clone + Eq + Hash + Send> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let before = self.failures.record(item);
        backoff(self.base, before, self.max)
    }

    fn forget(&self, item: &T) {
        self.failures.forget(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.failures.get(item)
    }
}

impl<T> fmt::Debug for ItemExponentialFailureRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemExponentialFailureRateLimiter")
            .field("base", &self.base)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::backoff;
    use std::time::Duration;

    #[test]
    fn backoff_doubles_then_caps_and_never_overflows() {
        let ms = Duration::from_millis;
        assert_eq!(backoff(ms(1), 0, ms(100)), ms(1));
        assert_eq!(backoff(ms(1), 6, ms(100)), ms(64));
        assert_eq!(backoff(ms(1), 7, ms(100)), ms(100));
        assert_eq!(backoff(ms(1), 127, ms(100)), ms(100));
        assert_eq!(backoff(ms(1), 128, ms(100)), ms(100));
        assert_eq!(backoff(ms(1), usize::MAX, ms(100)), ms(100));
        assert_eq!(backoff(Duration::MAX, 0, Duration::MAX), Duration::MAX);
        assert_eq!(backoff(Duration::MAX, 40, Duration::MAX), Duration::MAX);
        assert_eq!(backoff(Duration::MAX, 1, ms(7)), ms(7));
        assert_eq!(backoff(Duration::ZERO, usize::MAX, ms(7)), Duration::ZERO);
        assert_eq!(
            backoff(Duration::new(1, 500), 1, Duration::MAX),
            Duration::new(2, 1000)
        );
    }
}
