//! The controller's periodic resync: every key of the watched (primary) informers goes back into
//! the queue once per period, as client-go's informer resync and controller-runtime's
//! `SyncPeriod` do: the backstop of a level-triggered controller, so that a change no event
//! announced (a write lost while a cache was blind, a bug in an event mapping) is still
//! reconciled.

use super::worker::Core;
use kcache_core::{saturating_add, Clock, ObjectKey};
use std::hash::{BuildHasher, Hasher};
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The default resync period: 10 hours, as controller-runtime's `SyncPeriod`.
pub(crate) const DEFAULT_RESYNC_PERIOD: Duration = Duration::from_secs(10 * 60 * 60);
/// Each wait is the period stretched by up to this fraction, drawn anew every round, so that
/// replicas and controllers started together do not resync in step (client-go's
/// `wait.Jitter`, controller-runtime's 10 %).
pub(crate) const RESYNC_JITTER: f64 = 0.1;

/// Lists the keys of one watched informer's cache.
pub(crate) type KeyLister = Box<dyn Fn() -> Vec<ObjectKey> + Send + Sync>;

/// What the resync needs: its period (zero: no resync), the clock it waits on, and the key
/// listers of the watched informers.
pub(crate) struct Resync {
    pub(crate) period: Duration,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) listers: Vec<KeyLister>,
}

impl Resync {
    /// How long to wait before round `round`: the period plus a jitter in `[0, 10 %)` of it.
    fn wait(&self, seed: u64, round: u64) -> Duration {
        let fraction = (mix(seed ^ round) >> 11) as f64 / (1u64 << 53) as f64;
        self.period.mul_f64(1.0 + RESYNC_JITTER * fraction)
    }
}

impl Resync {
    /// The schedule of the rounds, whose first deadline is one jittered period from now; `None`
    /// when the resync is off. Taken when the workers are let go, before anyone can see them
    /// started, so that a clock moved after that point counts towards the first round.
    pub(crate) fn start(&self) -> Option<Schedule> {
        if self.period.is_zero() || self.listers.is_empty() {
            return None;
        }
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let deadline = saturating_add(self.clock.now(), self.wait(seed, 0));
        Some(Schedule { seed, deadline })
    }
}

/// When the next resync round is due.
pub(crate) struct Schedule {
    seed: u64,
    deadline: Instant,
}

/// Runs resync rounds until `stop` turns true: each waits until its deadline on the clock, then
/// adds every key of every watched informer to the queue (a key already queued is not queued
/// twice; one being reconciled is queued again once it is done). The next deadline is one
/// jittered period after the round started.
pub(crate) async fn run(
    core: &Core,
    resync: &Resync,
    mut schedule: Schedule,
    stop: &mut watch::Receiver<bool>,
) {
    for round in 1.. {
        let sleep = resync.clock.sleep_until_async(schedule.deadline);
        let stopped = pin!(stop.wait_for(|s| *s));
        if let futures::future::Either::Right(_) = futures::future::select(sleep, stopped).await {
            return;
        }
        // The next deadline first: whoever sees this round's count may move the clock next.
        schedule.deadline = saturating_add(resync.clock.now(), resync.wait(schedule.seed, round));
        let mut added = 0u64;
        for list in &resync.listers {
            for key in list() {
                if core
                    .queue
                    .add_with_priority(key, super::queue::ControllerQueue::LOW)
                {
                    added += 1;
                }
            }
        }
        core.counters.resyncs.inc();
        tracing::debug!(controller = %core.name, keys = added, "resync: every watched key enqueued");
    }
}

/// SplitMix64's finalizer: a well-spread 64-bit value from a counter.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcache_core::SystemClock;

    #[test]
    fn waits_stay_within_the_period_and_its_jitter_and_vary() {
        let resync = Resync {
            period: Duration::from_secs(100),
            clock: Arc::new(SystemClock),
            listers: Vec::new(),
        };
        let waits: Vec<Duration> = (0..1000).map(|round| resync.wait(42, round)).collect();
        assert!(waits
            .iter()
            .all(|w| *w >= Duration::from_secs(100) && *w < Duration::from_secs(110)));
        let distinct: std::collections::BTreeSet<_> = waits.iter().collect();
        assert!(distinct.len() > 900, "the jitter is drawn anew each round");
        let mean = waits.iter().map(Duration::as_secs_f64).sum::<f64>() / 1000.0;
        assert!(
            (104.0..106.0).contains(&mean),
            "uniform jitter, mean {mean}"
        );
    }
}
