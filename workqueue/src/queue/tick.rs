//! Time inside the queue: nanoseconds since the queue was made, in one `u64`.
//!
//! Every deadline and timestamp the queue keeps per item (in its slot, in the delay schedule) is
//! a [`Tick`]: 8 bytes where an `Instant` takes 16 (and an `Option<Instant>` 16 more), compared
//! and bucketed with plain integer operations. The conversion from the clock's `Instant` happens
//! once per call, at the queue's edge ([`Epoch::tick`]). A `u64` of nanoseconds spans 584 years,
//! far past the 30 years at which the crate's deadlines saturate (`kcache_core::far_future`).

use std::time::{Duration, Instant};

/// Nanoseconds after the queue's [`Epoch`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Tick(pub(crate) u64);

impl Tick {
    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub(crate) fn since(self, earlier: Tick) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// The instant a queue counts its ticks from (its creation, on its clock).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Epoch(Instant);

impl Epoch {
    pub(crate) fn new(at: Instant) -> Self {
        Self(at)
    }

    /// `at` as a tick: 0 before the epoch, saturating 584 years after it.
    pub(crate) fn tick(&self, at: Instant) -> Tick {
        let d = at.saturating_duration_since(self.0);
        Tick(
            d.as_secs()
                .saturating_mul(1_000_000_000)
                .saturating_add(u64::from(d.subsec_nanos())),
        )
    }

    /// `now` and `now + delay` as ticks. The deadline is the tick of `saturating_add(now,
    /// delay)` (saturating at `far_future`, as every deadline of the crate does), computed with
    /// one addition for any delay under a year.
    pub(crate) fn after(&self, now: Instant, delay: Duration) -> (Tick, Tick) {
        const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
        let from = self.tick(now);
        if delay < YEAR {
            // Under a year of nanoseconds fits in a u64 with room for 500 more years of `from`.
            let nanos = delay.as_secs() * 1_000_000_000 + u64::from(delay.subsec_nanos());
            (from, Tick(from.0.saturating_add(nanos)))
        } else {
            (from, self.tick(kcache_core::saturating_add(now, delay)))
        }
    }

    /// `t` as an instant (saturating, like `saturating_add` for far deadlines).
    pub(crate) fn instant(&self, t: Tick) -> Instant {
        kcache_core::saturating_add(self.0, Duration::from_nanos(t.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcache_core::{Clock, FakeClock};

    #[test]
    fn ticks_round_trip_and_saturate_at_both_ends() {
        let clock = FakeClock::new();
        let base = clock.now();
        let epoch = Epoch::new(base);
        let later = base + Duration::from_millis(1500) + Duration::from_nanos(7);
        assert_eq!(epoch.tick(later), Tick(1_500_000_007));
        assert_eq!(epoch.instant(epoch.tick(later)), later);
        clock.advance(Duration::from_secs(1));
        assert_eq!(epoch.tick(base), Tick(0));
        let never = kcache_core::saturating_add(base, Duration::MAX);
        assert_eq!(epoch.instant(epoch.tick(never)), never);
        assert_eq!(Tick(10).since(Tick(4)), Duration::from_nanos(6));
        let now = clock.now();
        for delay in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(1500),
            Duration::from_secs(365 * 24 * 3600 - 1),
            Duration::from_secs(365 * 24 * 3600),
            Duration::MAX,
        ] {
            let want = epoch.tick(kcache_core::saturating_add(now, delay));
            assert_eq!(
                epoch.after(now, delay),
                (epoch.tick(now), want),
                "{delay:?}"
            );
        }
        assert_eq!(Tick(4).since(Tick(10)), Duration::ZERO);
    }
}
