//! The reflector's backoff (client-go's default: 800 ms, ×2, jitter 1.0, cap 30 s, reset after
//! 2 healthy minutes) and the seeded pseudo-random numbers behind its jitter.

use crate::error::ConfigError;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant};

/// The parameters of the reflector's exponential backoff.
///
/// Each delay is drawn uniformly from `[d, d + jitter·d)`, where `d` starts at `initial`, is
/// multiplied by `factor` after each use and is capped at `cap` (so with the defaults the delays
/// are in `[0.8 s, 1.6 s)`, `[1.6 s, 3.2 s)`, … and finally `[30 s, 60 s)`). After `reset_after`
/// without a backoff, `d` starts again at `initial`. These are client-go's reflector defaults.
///
/// The arithmetic saturates: a huge `factor` (or `initial`, or `cap` up to [`Duration::MAX`])
/// reaches `cap` and stays there, and the jitter's extra wait is at most `cap`, so no value makes
/// the reflector panic. Values that make no sense (a negative, NaN or infinite `factor` or
/// `jitter`) are refused by [`BackoffConfig::validate`], which
/// [`ReflectorBuilder::try_build`](crate::ReflectorBuilder::try_build) calls.
///
/// # Examples
/// ```
/// use kcache_reflector::BackoffConfig;
/// use std::time::Duration;
///
/// let b = BackoffConfig::default();
/// assert_eq!(b.initial, Duration::from_millis(800));
/// assert_eq!(b.cap, Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// The first delay (before jitter).
    pub initial: Duration,
    /// The growth factor per backoff (values from 0 to 1 are treated as 1; negative, NaN and
    /// infinite values are refused by [`validate`](Self::validate)).
    pub factor: f64,
    /// The jitter fraction: each delay is uniform in `[d, d + jitter·d)` (negative, NaN and
    /// infinite values are refused by [`validate`](Self::validate)).
    pub jitter: f64,
    /// The largest delay before jitter.
    pub cap: Duration,
    /// After this long without a backoff, the next one starts again at `initial`.
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(800),
            factor: 2.0,
            jitter: 1.0,
            cap: Duration::from_secs(30),
            reset_after: Duration::from_secs(120),
        }
    }
}

impl BackoffConfig {
    /// Checks that `factor` and `jitter` are finite and not negative.
    ///
    /// # Errors
    /// [`ConfigError::BackoffFactor`] or [`ConfigError::BackoffJitter`] with the refused value.
    ///
    /// # Examples
    /// ```
    /// use kcache_reflector::{BackoffConfig, ConfigError};
    ///
    /// assert!(BackoffConfig::default().validate().is_ok());
    /// let bad = BackoffConfig { factor: f64::INFINITY, ..BackoffConfig::default() };
    /// assert!(matches!(bad.validate(), Err(ConfigError::BackoffFactor(_))));
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        let sound = |x: f64| x.is_finite() && x >= 0.0;
        if !sound(self.factor) {
            return Err(ConfigError::BackoffFactor(self.factor));
        }
        if !sound(self.jitter) {
            return Err(ConfigError::BackoffJitter(self.jitter));
        }
        Ok(())
    }
}

/// `d · f`, saturating at `max`; zero for a zero `d` and for an `f` that is not positive (NaN
/// included).
fn mul_saturating(d: Duration, f: f64, max: Duration) -> Duration {
    if d.is_zero() || f.is_nan() || f <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(d.as_secs_f64() * f).map_or(max, |x| x.min(max))
}

/// A small, seedable pseudo-random generator (SplitMix64): deterministic per seed, good enough
/// for jitter and fault schedules, not for cryptography.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A generator seeded from the process's hash randomness (no clock read).
    pub(crate) fn from_entropy() -> Self {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x6b63_6163_6865);
        Self(h.finish())
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[0, n)` (0 when `n == 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.next_f64() < p
    }
}

/// The backoff state: the next base delay and when the last backoff was asked for.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    config: BackoffConfig,
    current: Duration,
    last: Option<Instant>,
}

impl Backoff {
    pub(crate) fn new(config: BackoffConfig) -> Self {
        Self {
            current: config.initial,
            config,
            last: None,
        }
    }

    /// The delay to wait now, with jitter from `rng`; advances the schedule.
    pub(crate) fn next_delay(&mut self, now: Instant, rng: &mut SplitMix64) -> Duration {
        if let Some(last) = self.last {
            if now.saturating_duration_since(last) >= self.config.reset_after {
                self.current = self.config.initial;
            }
        }
        self.last = Some(now);
        let cap = self.config.cap;
        let base = self.current.min(cap);
        // `f64::max` ignores NaN: a NaN factor grows nothing.
        self.current = mul_saturating(base, self.config.factor.max(1.0), cap);
        base.saturating_add(mul_saturating(
            base,
            self.config.jitter * rng.next_f64(),
            cap,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn delays_start_at_800ms_double_and_stay_in_the_jitter_range() {
        let t0 = kcache_core::FakeClock::new();
        let now = kcache_core::Clock::now(&t0);
        let mut b = Backoff::new(BackoffConfig::default());
        let mut rng = SplitMix64::new(7);
        let bases = [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000];
        for base in bases {
            let d = b.next_delay(now, &mut rng);
            assert!(
                d >= ms(base) && d < ms(2 * base),
                "{d:?} not in [{base}ms, {}ms)",
                2 * base
            );
        }
    }

    #[test]
    fn two_healthy_minutes_reset_the_delay() {
        let clock = kcache_core::FakeClock::new();
        let now = kcache_core::Clock::now(&clock);
        let mut b = Backoff::new(BackoffConfig::default());
        let mut rng = SplitMix64::new(1);
        for _ in 0..5 {
            b.next_delay(now, &mut rng);
        }
        let almost = now + Duration::from_secs(119);
        assert!(b.next_delay(almost, &mut rng) >= ms(25_600));
        let later = almost + Duration::from_secs(120);
        assert!(b.next_delay(later, &mut rng) < ms(1600));
    }

    #[test]
    fn zero_jitter_gives_exact_delays() {
        let clock = kcache_core::FakeClock::new();
        let now = kcache_core::Clock::now(&clock);
        let cfg = BackoffConfig {
            jitter: 0.0,
            ..BackoffConfig::default()
        };
        let mut b = Backoff::new(cfg);
        let mut rng = SplitMix64::new(3);
        assert_eq!(b.next_delay(now, &mut rng), ms(800));
        assert_eq!(b.next_delay(now, &mut rng), ms(1600));
    }

    #[test]
    fn huge_and_infinite_parameters_saturate_at_the_cap_instead_of_panicking() {
        let clock = kcache_core::FakeClock::new();
        let now = kcache_core::Clock::now(&clock);
        let mut rng = SplitMix64::new(5);
        let d = BackoffConfig::default();
        let cases = [
            BackoffConfig { factor: 1e30, ..d },
            BackoffConfig {
                factor: f64::INFINITY,
                ..d
            },
            BackoffConfig {
                factor: f64::NAN,
                ..d
            },
            BackoffConfig { factor: -3.0, ..d },
            BackoffConfig {
                jitter: f64::INFINITY,
                ..d
            },
            BackoffConfig { jitter: 1e300, ..d },
            BackoffConfig {
                jitter: f64::NAN,
                ..d
            },
            BackoffConfig { jitter: -1.0, ..d },
            BackoffConfig {
                initial: Duration::MAX,
                cap: Duration::MAX,
                ..d
            },
            BackoffConfig {
                initial: Duration::MAX,
                cap: Duration::MAX,
                factor: f64::INFINITY,
                jitter: f64::INFINITY,
                ..d
            },
        ];
        for cfg in cases {
            let mut b = Backoff::new(cfg);
            for _ in 0..70 {
                let delay = b.next_delay(now, &mut rng);
                let cap = cfg.cap;
                assert!(delay >= cfg.initial.min(cap), "{cfg:?}: {delay:?}");
                assert!(delay <= cap.saturating_mul(2), "{cfg:?}: {delay:?}");
            }
        }
    }

    #[test]
    fn validate_refuses_negative_nan_and_infinite_factor_and_jitter() {
        let d = BackoffConfig::default();
        assert_eq!(d.validate(), Ok(()));
        assert_eq!(BackoffConfig { factor: 0.5, ..d }.validate(), Ok(()));
        assert_eq!(BackoffConfig { factor: 1e30, ..d }.validate(), Ok(()));
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0] {
            let f = BackoffConfig { factor: bad, ..d }.validate();
            assert!(
                matches!(f, Err(ConfigError::BackoffFactor(_))),
                "{bad}: {f:?}"
            );
            let j = BackoffConfig { jitter: bad, ..d }.validate();
            assert!(
                matches!(j, Err(ConfigError::BackoffJitter(_))),
                "{bad}: {j:?}"
            );
        }
    }

    #[test]
    fn the_generator_is_deterministic_per_seed_and_uniform_enough() {
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        let mut r = SplitMix64::new(9);
        let mean = (0..10_000).map(|_| r.next_f64()).sum::<f64>() / 10_000.0;
        assert!((mean - 0.5).abs() < 0.02, "mean {mean}");
        assert!(!SplitMix64::new(1).chance(0.0));
        assert_eq!(r.below(0), 0);
    }
}
