//! `Processor`: the fan-out from the pop loop into every handler's buffer.
//!
//! Its lock is client-go's `blockDeltas`: the pop loop holds it while it applies one key's
//! deltas to the cache and distributes them, and handler registration holds it while it replays
//! the cache to a new handler. So a new handler sees every object exactly once: either in the
//! replay or as a later notification.
//!
//! Distributing stages each notification per listener; [`Dispatch::flush`] hands the staged
//! ones to the buffers, one lock of each buffer per batch instead of per notification. The pop
//! loop flushes after every batch of keys it takes from the FIFO, and the processor flushes
//! before anything that must see the buffers complete: marking the informer synced (a
//! handler's sync counts its staged initial notifications only once they are in its buffer) and
//! registering a listener.

use crate::event::Notification;
use crate::listener::Listener;
use crate::resync::{clamp_request, effective_period};
use crate::sync::{Mutex, MutexGuard};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Entry<T> {
    listener: Arc<Listener<T>>,
    /// The period asked for (after the 1 s minimum and the started-informer rule).
    requested: Duration,
    /// The period in force (see `effective_period`).
    period: Duration,
    next_resync: Instant,
    /// Whether RV-unchanged updates currently reach this handler.
    syncing: bool,
    /// Notifications distributed and not yet flushed into the listener's buffer.
    staged: Vec<Notification<T>>,
}

/// The dispatcher's state, behind the processor's lock.
pub(crate) struct Dispatch<T> {
    entries: Vec<Entry<T>>,
    /// The informer has synced (its first list was fully applied).
    pub(crate) synced: bool,
    /// The informer has stopped: no more handlers.
    pub(crate) stopped: bool,
    /// The informer is running: resync periods are final.
    pub(crate) started: bool,
    /// How often the informer asks whether some handler's resync is due (0: never).
    pub(crate) check_period: Duration,
    next_id: u64,
}

/// The fan-out (see the module documentation).
pub(crate) struct Processor<T> {
    state: Mutex<Dispatch<T>>,
}

impl<T> Processor<T> {
    pub(crate) fn new(default_resync: Duration) -> Self {
        Self {
            state: Mutex::new(Dispatch {
                entries: Vec::new(),
                synced: false,
                stopped: false,
                started: false,
                check_period: clamp_request(default_resync),
                next_id: 0,
            }),
        }
    }

    /// Takes the dispatch lock.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Dispatch<T>> {
        self.state.lock()
    }
}

impl<T> Dispatch<T> {
    /// A fresh listener id.
    pub(crate) fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Applies client-go's rules to a handler's requested period; returns what it will be
    /// registered with.
    pub(crate) fn adjust_request(&mut self, requested: Duration) -> Duration {
        let mut p = clamp_request(requested);
        if !p.is_zero() && p < self.check_period {
            if self.started {
                tracing::warn!(
                    requested = ?p,
                    check_period = ?self.check_period,
                    "the informer is running: a handler's resync period cannot go below its check period"
                );
                p = self.check_period;
            } else {
                self.check_period = p;
                for e in &mut self.entries {
                    e.period = effective_period(e.requested, p);
                }
            }
        }
        p
    }

    /// Registers a listener (its resync request already adjusted). It starts flagged as
    /// syncing, as in client-go. If the informer has synced, so has its upstream.
    pub(crate) fn add(&mut self, listener: Arc<Listener<T>>, requested: Duration, now: Instant) {
        self.flush();
        let period = effective_period(requested, self.check_period);
        if self.synced {
            listener.buffer.set_upstream_synced();
        }
        self.entries.push(Entry {
            listener,
            requested,
            period,
            next_resync: kcache_core::saturating_add(now, period),
            syncing: true,
            staged: Vec::new(),
        });
    }

    /// Unregisters the listener `id`; returns it if it was registered.
    pub(crate) fn remove(&mut self, id: u64) -> Option<Arc<Listener<T>>> {
        let i = self.entries.iter().position(|e| e.listener.id == id)?;
        Some(self.entries.swap_remove(i).listener)
    }

    /// Whether an RV-unchanged update reaches fewer listeners than a changed one: some listener
    /// is not flagged syncing (after a resync check that found it not due). Until then, and
    /// forever in an informer without resync, every listener gets every update, so the caller
    /// can skip comparing versions (which reads the replaced object, rarely still in a CPU
    /// cache).
    pub(crate) fn filters_unchanged(&self) -> bool {
        self.entries.iter().any(|e| !e.syncing)
    }

    /// Stages `n` for every listener; an RV-unchanged update (`is_sync`) only for those whose
    /// resync is due. The listeners get it at the next [`flush`](Self::flush). The last listener
    /// to get it takes `n` itself: one clone fewer (two reference counts fewer) per notification.
    pub(crate) fn distribute(&mut self, n: Notification<T>, is_sync: bool) {
        let mut takers = self
            .entries
            .iter_mut()
            .filter(|e| !is_sync || e.syncing)
            .peekable();
        while let Some(e) = takers.next() {
            if takers.peek().is_none() {
                e.staged.push(n);
                return;
            }
            e.staged.push(n.clone());
        }
    }

    /// Hands every staged notification to its listener's buffer, in order.
    pub(crate) fn flush(&mut self) {
        for e in &mut self.entries {
            if !e.staged.is_empty() {
                e.listener.push_batch(&mut e.staged);
            }
        }
    }

    /// client-go's `shouldResync`: flags the listeners whose period elapsed (and schedules their
    /// next one), unflags the others; true if any is due.
    pub(crate) fn should_resync(&mut self, now: Instant) -> bool {
        let mut any = false;
        for e in &mut self.entries {
            e.syncing = false;
            if !e.period.is_zero() && now >= e.next_resync {
                e.syncing = true;
                e.next_resync = kcache_core::saturating_add(now, e.period);
                any = true;
            }
        }
        any
    }

    /// Marks the informer synced and tells every listener.
    pub(crate) fn set_synced(&mut self) {
        self.flush();
        if !self.synced {
            self.synced = true;
            for e in &self.entries {
                e.listener.buffer.set_upstream_synced();
            }
        }
    }

    /// Stops: closes every listener's buffer (undelivered and staged notifications are dropped).
    pub(crate) fn stop(&mut self) {
        self.stopped = true;
        for e in self.entries.drain(..) {
            e.listener.buffer.close();
        }
    }

    /// How many listeners are registered.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The effective resync period of listener `id`, if registered.
    pub(crate) fn period_of(&self, id: u64) -> Option<Duration> {
        self.entries
            .iter()
            .find(|e| e.listener.id == id)
            .map(|e| e.period)
    }
}

#[cfg(all(test, not(kcache_loom)))]
mod tests {
    use super::*;
    use crate::buffer::{Buffer, BufferMode};
    use crate::event::Event;
    use kcache_core::ObjectKey;

    fn dispatch_with_listener() -> (Processor<u32>, Arc<Listener<u32>>) {
        let processor = Processor::new(Duration::ZERO);
        let listener = Arc::new(Listener::new(
            1,
            Arc::from("test"),
            Buffer::new(BufferMode::Ordered),
            None,
        ));
        processor
            .lock()
            .add(listener.clone(), Duration::ZERO, kcache_core::far_future());
        (processor, listener)
    }

    fn initial_add(v: u32) -> Notification<u32> {
        Notification::new(
            ObjectKey::new(format!("ns/o{v}").as_str()).unwrap().into(),
            Event::Added {
                obj: Arc::new(v),
                is_in_initial_list: true,
            },
        )
    }

    #[test]
    fn distributed_notifications_reach_the_buffer_at_the_flush_in_order() {
        let (processor, listener) = dispatch_with_listener();
        let mut d = processor.lock();
        for v in 0..3 {
            d.distribute(initial_add(v), false);
        }
        assert_eq!(listener.buffer.pending(), 0, "staged, not yet flushed");
        d.flush();
        assert_eq!(listener.buffer.pending(), 3);
        drop(d);
        for v in 0..3 {
            let n = listener.buffer.pop_blocking().unwrap();
            assert_eq!(**n.event.object().unwrap(), v);
            listener.buffer.complete(n.initial);
        }
    }

    #[test]
    fn marking_synced_flushes_first_so_staged_initial_adds_hold_the_handler_unsynced() {
        let (processor, listener) = dispatch_with_listener();
        let mut d = processor.lock();
        d.distribute(initial_add(7), false);
        d.set_synced();
        drop(d);
        assert!(
            !listener.buffer.has_synced(),
            "its initial add is not delivered yet"
        );
        let n = listener.buffer.pop_blocking().unwrap();
        listener.buffer.complete(n.initial);
        assert!(listener.buffer.has_synced());
    }
}
