//! `BucketRateLimiter`: one token bucket for all items.
//!
//! The bucket is GCRA (the generic cell rate algorithm) on a theoretical arrival time (TAT), the
//! same arithmetic `governor` uses. We do not call `governor` itself: its `check` only takes a
//! token when one is free and otherwise reports when to come back without recording anything,
//! while client-go's limiter is `x/time/rate`'s `Reserve().Delay()`, a reservation that always
//! succeeds and pushes the next caller further out. Expressing that is a few lines of TAT
//! arithmetic on our own [`Clock`].

use super::RateLimiter;
use crate::sync::Mutex;
use kcache_core::{Clock, SystemClock};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the bucket refills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refill {
    /// One token per interval.
    Every(Duration),
    /// Never (qps zero, negative, NaN or too small to represent): only the burst is free.
    Never,
    /// Instantly (qps infinite or above one per nanosecond): no delay ever.
    Free,
}

#[derive(Debug, Default)]
struct State {
    /// Theoretical arrival time, measured from `origin`: when the bucket will be full again.
    tat: Duration,
    /// Tokens taken, for [`Refill::Never`].
    taken: u64,
}

/// An overall token bucket shared by all items (client-go's `BucketRateLimiter`).
///
/// The bucket holds `burst` tokens and refills at `qps` tokens per second.
/// [`when`](RateLimiter::when) always takes a token: while one is free the delay is zero; otherwise
/// the caller reserves the next token to come and gets the time until then, so successive calls
/// beyond the burst get delays growing by `1/qps` each, like client-go's
/// `rate.Limiter.Reserve().Delay()`. The limiter is not per item:
/// [`forget`](RateLimiter::forget) does nothing and [`num_requeues`](RateLimiter::num_requeues) is
/// always 0.
///
/// Unlike client-go, the delay is capped at [`max_delay`](BucketRateLimiter::with_max_delay)
/// ([`DEFAULT_MAX_DELAY`](BucketRateLimiter::DEFAULT_MAX_DELAY), 1000 s, unless set): a call that
/// would wait longer waits `max_delay`, and the bucket's debt stops growing there, so a burst of
/// failures cannot push every later retry out by hours.
///
/// Input that describes no usable bucket does not panic and behaves like `x/time/rate`:
/// - `qps` zero, negative or NaN (or so small that `1/qps` does not fit a [`Duration`]): the bucket
///   never refills: the first `burst` calls wait zero, every later one `max_delay`.
/// - `qps` infinite (or above 10⁹, one token per nanosecond): every call waits zero.
/// - `burst` 0 with a finite `qps`: the bucket holds nothing, so every call waits `max_delay`.
///
/// # Examples
/// ```
/// use kcache_core::FakeClock;
/// use kcache_workqueue::{BucketRateLimiter, RateLimiter};
/// use std::{sync::Arc, time::Duration};
///
/// let clock = FakeClock::new();
/// let limiter = BucketRateLimiter::with_clock(10.0, 2, Arc::new(clock.clone()));
/// let when = || RateLimiter::<()>::when(&limiter, &());
/// assert_eq!(when(), Duration::ZERO); // the burst
/// assert_eq!(when(), Duration::ZERO);
/// assert_eq!(when(), Duration::from_millis(100)); // then one token per 100 ms
/// assert_eq!(when(), Duration::from_millis(200));
///
/// clock.advance(Duration::from_millis(200)); // the two reserved tokens have come
/// assert_eq!(when(), Duration::from_millis(100)); // and the next one is 100 ms away
/// ```
#[doc(alias = "TypedBucketRateLimiter")]
pub struct BucketRateLimiter {
    clock: Arc<dyn Clock>,
    origin: Instant,
    qps: f64,
    refill: Refill,
    burst: u32,
    max_delay: Duration,
    state: Mutex<State>,
}

impl BucketRateLimiter {
    /// The default cap on a delay: 1000 s, the per-item ceiling of
    /// [`default_controller_rate_limiter`](crate::default_controller_rate_limiter).
    pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(1000);

    /// A bucket of `burst` tokens refilling at `qps` per second, on the system clock.
    pub fn new(qps: f64, burst: u32) -> Self {
        Self::with_clock(qps, burst, Arc::new(SystemClock))
    }

    /// A bucket of `burst` tokens refilling at `qps` per second, on `clock` (a `FakeClock` in
    /// tests). The bucket starts full.
    pub fn with_clock(qps: f64, burst: u32, clock: Arc<dyn Clock>) -> Self {
        let refill = if qps.is_nan() || qps <= 0.0 {
            Refill::Never
        } else if qps > 1e9 {
            // More than one token per nanosecond: `1/qps` would round to 1 ns up to 2·10⁹ qps,
            // and delays would grow by a nanosecond a call instead of staying zero.
            Refill::Free
        } else {
            match Duration::try_from_secs_f64(1.0 / qps) {
                Ok(d) if d.is_zero() => Refill::Free,
                Ok(d) => Refill::Every(d),
                Err(_) => Refill::Never,
            }
        };
        let origin = clock.now();
        Self {
            clock,
            origin,
            qps,
            refill,
            burst,
            max_delay: Self::DEFAULT_MAX_DELAY,
            state: Mutex::new(State::default()),
        }
    }

    /// Caps every delay at `max_delay` instead of [`DEFAULT_MAX_DELAY`](Self::DEFAULT_MAX_DELAY).
    /// [`Duration::MAX`] gives client-go's uncapped behaviour.
    pub fn with_max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay;
        self
    }

    /// The cap on a delay.
    pub fn max_delay(&self) -> Duration {
        self.max_delay
    }

    /// The refill rate, in tokens per second, as given.
    pub fn qps(&self) -> f64 {
        self.qps
    }

    /// The bucket's size.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// Takes a token and returns how long the caller must wait for it.
    fn reserve(&self) -> Duration {
        let now = self.clock.now().saturating_duration_since(self.origin);
        let mut state = self.state.lock();
        match self.refill {
            Refill::Free => Duration::ZERO,
            _ if self.burst == 0 => self.max_delay,
            Refill::Never => {
                if state.taken < u64::from(self.burst) {
                    state.taken += 1;
                    Duration::ZERO
                } else {
                    self.max_delay
                }
            }
            Refill::Every(interval) => {
                // The bucket is full at `tat`; it may run `burst` intervals ahead of now.
                let tolerance = interval.saturating_mul(self.burst);
                let tat = state.tat.max(now).saturating_add(interval);
                let delay = tat.saturating_sub(tolerance).saturating_sub(now);
                if delay <= self.max_delay {
                    state.tat = tat;
                    delay
                } else {
                    // Reserve no further out than the cap, so the debt stops growing.
                    state.tat = now
                        .saturating_add(self.max_delay)
                        .saturating_add(tolerance)
                        .min(tat);
                    self.max_delay
                }
            }
        }
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.reserve()
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> usize {
        0
    }
}

impl fmt::Debug for BucketRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketRateLimiter")
            .field("qps", &self.qps)
            .field("burst", &self.burst)
            .field("max_delay", &self.max_delay)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcache_core::FakeClock;

    fn bucket(qps: f64, burst: u32) -> (BucketRateLimiter, FakeClock) {
        let clock = FakeClock::new();
        (
            BucketRateLimiter::with_clock(qps, burst, Arc::new(clock.clone())),
            clock,
        )
    }

    #[test]
    fn zero_qps_gives_the_burst_then_max_delay() {
        let (b, _) = bucket(0.0, 2);
        let b = b.with_max_delay(Duration::from_secs(7));
        let got: Vec<_> = (0..4).map(|_| b.reserve().as_secs()).collect();
        assert_eq!(got, [0, 0, 7, 7]);
    }

    #[test]
    fn nan_and_negative_qps_behave_like_zero_qps() {
        for qps in [f64::NAN, -3.0, f64::NEG_INFINITY, 1e-300] {
            let (b, _) = bucket(qps, 1);
            assert_eq!(b.reserve(), Duration::ZERO, "qps {qps}");
            assert_eq!(
                b.reserve(),
                BucketRateLimiter::DEFAULT_MAX_DELAY,
                "qps {qps}"
            );
        }
    }

    #[test]
    fn infinite_qps_never_delays_even_with_zero_burst() {
        let (b, _) = bucket(f64::INFINITY, 0);
        assert!((0..1000).all(|_| b.reserve().is_zero()));
    }

    #[test]
    fn zero_burst_always_waits_max_delay() {
        let (b, _) = bucket(10.0, 0);
        assert_eq!(b.reserve(), BucketRateLimiter::DEFAULT_MAX_DELAY);
        assert_eq!(b.reserve(), BucketRateLimiter::DEFAULT_MAX_DELAY);
    }

    #[test]
    fn refill_after_idle_time_never_exceeds_the_burst() {
        let (b, clock) = bucket(1.0, 3);
        clock.advance(Duration::from_secs(3600));
        let got: Vec<_> = (0..5).map(|_| b.reserve().as_secs()).collect();
        assert_eq!(got, [0, 0, 0, 1, 2]);
    }
}
