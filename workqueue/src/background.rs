//! The one background thread a queue may have: it moves due items out of the delay heap and, for
//! a queue with metrics, refreshes the unfinished-work gauges every 500 ms.

use crate::queue::Shared;
use std::hash::Hash;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How late the timer may wake after a deadline on a real clock (batching nearby deadlines).
pub(crate) const TIMER_SLACK: Duration = Duration::from_micros(200);

/// How often the unfinished-work gauges are refreshed (client-go's 500 ms).
pub(crate) const METRICS_PERIOD: Duration = Duration::from_millis(500);

/// Starts the queue's background thread. It holds only a weak handle, so dropping every handle of
/// the queue (or shutting it down) ends the thread.
pub(crate) fn spawn<T: Clone + Eq + Hash + Send + 'static>(shared: &Arc<Shared<T>>) {
    let weak = Arc::downgrade(shared);
    let signal = shared.signal.clone();
    let clock = shared.clock.clone();
    let run = move || {
        let _subscription = signal.subscribe(clock.as_ref());
        let mut next_metrics = None;
        loop {
            signal.clear();
            let Some(next) = tick(&weak, &mut next_metrics) else {
                break;
            };
            // Wake a little after the deadline, so one wake-up fires a batch of nearby deadlines
            // instead of one item per futex round trip. A fake clock is not affected: it wakes the
            // thread on every advance and the thread fires what is due at that instant.
            signal.wait(clock.as_ref(), next.map(|d| d + TIMER_SLACK));
        }
    };
    #[cfg(not(kcache_loom))]
    {
        // Without a thread the queue still works for immediate adds; delayed items would never
        // become ready, so a failed spawn must not pass silently.
        if let Err(e) = std::thread::Builder::new()
            .name("kcache-workqueue".into())
            .spawn(run)
        {
            panic!("kcache-workqueue: cannot start the queue's timer thread: {e}");
        }
    }
    #[cfg(kcache_loom)]
    {
        crate::sync::thread::spawn(run);
    }
}

/// One round of the background loop. `None` when the thread should exit; otherwise the next
/// deadline to wake up at (`Some(None)`: only when signalled).
pub(crate) fn tick<T: Clone + Eq + Hash + Send + 'static>(
    weak: &Weak<Shared<T>>,
    next_metrics: &mut Option<Instant>,
) -> Option<Option<Instant>> {
    let shared = weak.upgrade()?;
    if shared.is_shutting_down() {
        return None;
    }
    let (now, mut next) = loop {
        let now = shared.clock.now();
        shared.fire_due(now);
        let next = shared.next_deadline();
        shared.timer.plan(next);
        // An entry that arrived since the drain and is due before the plan: go round again
        // (see `queue::timer` for why nothing is missed).
        if !shared.timer.has_entry_before(next) {
            break (now, next.map(|t| shared.epoch.instant(t)));
        }
    };
    if let Some(m) = &shared.metrics {
        m.delayed_depth.set(shared.waiting() as f64);
        if next_metrics.is_none_or(|t| t <= now) {
            let (mut sum, mut longest) = (0.0, 0.0f64);
            let now_tick = shared.epoch.tick(now);
            for started in shared.processing_starts() {
                let age = now_tick.since(started).as_secs_f64();
                sum += age;
                longest = longest.max(age);
            }
            m.unfinished_work.set(sum);
            m.longest_running.set(longest);
            *next_metrics = Some(now + METRICS_PERIOD);
        }
        next = match (next, *next_metrics) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    Some(next)
}
