//! The random part of acquisition waits (a tiny splitmix64: no cryptographic need, no dependency).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// Spreads waits over `[d, d + factor × d]`.
#[derive(Debug)]
pub(crate) struct Jitter {
    state: u64,
    factor: f64,
}

impl Jitter {
    /// Seeded from the process's random hasher keys and the identity.
    pub(crate) fn new(factor: f64, identity: &str) -> Self {
        let mut h = RandomState::new().build_hasher();
        h.write(identity.as_bytes());
        Self {
            state: h.finish(),
            factor,
        }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `d` plus a uniformly random part of up to `factor × d` (client-go's `wait.Jitter`).
    pub(crate) fn apply(&mut self, d: Duration) -> Duration {
        if self.factor == 0.0 {
            return d;
        }
        // 53 random bits as a fraction in [0, 1).
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let extra = Duration::try_from_secs_f64(d.as_secs_f64() * self.factor * unit)
            .unwrap_or(Duration::ZERO);
        d.saturating_add(extra)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jittered_waits_stay_within_the_factor() {
        let mut j = Jitter::new(1.2, "a");
        let d = Duration::from_secs(2);
        let waits: Vec<Duration> = (0..1000).map(|_| j.apply(d)).collect();
        assert!(waits
            .iter()
            .all(|w| *w >= d && *w <= Duration::from_millis(4400)));
        // Spread out, not constant.
        assert!(waits.iter().any(|w| *w > Duration::from_millis(3500)));
        assert!(waits.iter().any(|w| *w < Duration::from_millis(2500)));
    }

    #[test]
    fn zero_factor_means_no_jitter() {
        let mut j = Jitter::new(0.0, "a");
        assert_eq!(j.apply(Duration::from_secs(2)), Duration::from_secs(2));
    }
}
