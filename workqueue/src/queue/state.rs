//! The queue's bookkeeping as a plain data structure: no locks, no threads, time as an argument.
//!
//! Every item known to the queue has one [`Slot`]. The ready deque holds exactly the items whose
//! slot is `Queued`, once each, in first-add order. The delay heap may hold stale entries; an entry
//! is live only while the item's slot is `Waiting` with that entry's deadline and push number (the
//! deadline alone is not enough: an item can wait again for a deadline it had before, and its old
//! entry, pushed earlier, must not fire in the new one's place).

use super::delays::Delays;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::Instant;

type Hasher = foldhash::fast::RandomState;

/// Where an item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// In the ready deque. `since` is the first add (only kept when metrics are on).
    Queued { since: Option<Instant> },
    /// Handed out by `get`, not yet `done`. `started` is kept when metrics are on.
    Processing {
        started: Option<Instant>,
        then: Then,
    },
    /// Waiting in the delay heap until `at`, as its entry number `seq`.
    Waiting { at: Instant, seq: u64 },
}

/// What happens to an item in flight when its `done` comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// Forget it.
    Nothing,
    /// It was added again while processing: queue it (dirty).
    Requeue { since: Option<Instant> },
    /// It was added with a delay while processing: wait until `at` (or queue it if past).
    Wait { at: Instant },
}

/// The outcome of an add.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Added {
    /// Refused: the queue is shutting down.
    Refused,
    /// Already pending (queued, or already marked to be requeued): nothing changed.
    Deduplicated,
    /// Newly dirty and pushed to the ready deque: wake a worker.
    Pushed,
    /// Newly dirty but in flight: it is queued at `done`.
    Deferred,
    /// In flight, and to wait until a deadline after its `done`: not pending yet (it counts as
    /// added when it becomes ready, at `done` or when the delay fires).
    DeferredDelay,
    /// Put in (or moved earlier in) the delay heap; `earliest` if it is now the first deadline.
    Delayed { earliest: bool },
}

/// The outcome of a `done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finished {
    /// The item was not being processed: nothing changed.
    NotProcessing,
    /// The item left the queue. `idle` when nothing is in flight any more.
    Removed {
        started: Option<Instant>,
        idle: bool,
    },
    /// The item went back to the ready deque; `newly` when it becomes pending only now (a delayed
    /// re-add whose deadline passed while it was in flight), not at an earlier add.
    Requeued {
        started: Option<Instant>,
        newly: bool,
    },
    /// The item went to the delay heap; `earliest` if it is now the first deadline.
    Delayed {
        started: Option<Instant>,
        earliest: bool,
    },
}

/// The whole bookkeeping of a queue.
#[derive(Debug)]
pub(crate) struct State<T> {
    ready: VecDeque<T>,
    slots: HashMap<T, Slot, Hasher>,
    delays: Delays<T>,
    waiting: usize,
    in_flight: usize,
    shutting_down: bool,
    draining: bool,
}

impl<T: Clone + Eq + Hash> State<T> {
    pub(crate) fn new() -> Self {
        Self {
            ready: VecDeque::new(),
            slots: HashMap::with_hasher(Hasher::default()),
            delays: Delays::new(),
            waiting: 0,
            in_flight: 0,
            shutting_down: false,
            draining: false,
        }
    }

    /// Items ready to be handed out.
    pub(crate) fn len(&self) -> usize {
        self.ready.len()
    }

    /// Items waiting in the delay heap (live entries only).
    pub(crate) fn waiting(&self) -> usize {
        self.waiting
    }

    /// Items handed out and not yet done.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.draining
    }

    /// Whether a drain is complete: nothing queued and nothing in flight.
    pub(crate) fn is_drained(&self) -> bool {
        self.ready.is_empty() && self.in_flight == 0
    }

    /// Makes `item` ready now. `now` is the time for metrics (None when metrics are off). Hands
    /// back the item when the state did not keep it, so the caller can drop it after releasing its
    /// lock (dropping an `Arc` key touches a count shared with other threads).
    pub(crate) fn insert(&mut self, item: T, now: Option<Instant>) -> (Added, Option<T>) {
        if self.shutting_down {
            return (Added::Refused, Some(item));
        }
        match self.slots.get_mut(&item) {
            None => {
                self.slots.insert(item.clone(), Slot::Queued { since: now });
                self.ready.push_back(item);
                (Added::Pushed, None)
            }
            Some(Slot::Queued { .. }) => (Added::Deduplicated, Some(item)),
            Some(Slot::Processing { then, .. }) => match then {
                Then::Requeue { .. } => (Added::Deduplicated, Some(item)),
                Then::Nothing | Then::Wait { .. } => {
                    *then = Then::Requeue { since: now };
                    (Added::Deferred, Some(item))
                }
            },
            Some(slot @ Slot::Waiting { .. }) => {
                // Ready now: the delay entry becomes stale (deduplicated against the ready queue).
                *slot = Slot::Queued { since: now };
                self.waiting -= 1;
                self.ready.push_back(item);
                (Added::Pushed, None)
            }
        }
    }

    /// Makes `item` ready at `at`. A deadline not after `now` is an immediate add. `stamp` says
    /// whether metrics want timestamps.
    pub(crate) fn add_at(&mut self, item: T, at: Instant, now: Instant, stamp: bool) -> Added {
        self.schedule(item, at, now, stamp).0
    }

    /// [`add_at`](State::add_at) that hands back the item when the state did not keep it.
    pub(crate) fn schedule(
        &mut self,
        item: T,
        at: Instant,
        now: Instant,
        stamp: bool,
    ) -> (Added, Option<T>) {
        if self.shutting_down {
            return (Added::Refused, Some(item));
        }
        if at <= now {
            return self.insert(item, stamp.then_some(now));
        }
        match self.slots.get_mut(&item) {
            None => {
                let (earliest, seq) = self.delays.push(item.clone(), at);
                self.slots.insert(item, Slot::Waiting { at, seq });
                self.waiting += 1;
                (Added::Delayed { earliest }, None)
            }
            Some(Slot::Queued { .. }) => (Added::Deduplicated, Some(item)),
            Some(Slot::Processing { then, .. }) => match then {
                Then::Requeue { .. } => (Added::Deduplicated, Some(item)),
                Then::Wait { at: old } if *old <= at => (Added::Deduplicated, Some(item)),
                Then::Nothing | Then::Wait { .. } => {
                    *then = Then::Wait { at };
                    (Added::DeferredDelay, Some(item))
                }
            },
            Some(slot @ Slot::Waiting { .. }) => {
                if matches!(*slot, Slot::Waiting { at: old, .. } if old <= at) {
                    return (Added::Deduplicated, Some(item));
                }
                let (earliest, seq) = self.delays.push(item, at);
                *slot = Slot::Waiting { at, seq };
                (Added::Delayed { earliest }, None)
            }
        }
    }

    /// Hands out the oldest ready item, with when it was first added (metrics).
    pub(crate) fn get(&mut self, now: Option<Instant>) -> Option<(T, Option<Instant>)> {
        let item = self.ready.pop_front()?;
        let since = match self.slots.get_mut(&item) {
            Some(slot) => {
                let since = match *slot {
                    Slot::Queued { since } => since,
                    _ => None,
                };
                *slot = Slot::Processing {
                    started: now,
                    then: Then::Nothing,
                };
                since
            }
            None => None,
        };
        self.in_flight += 1;
        Some((item, since))
    }

    /// Marks `item` as processed. `now` is asked only when a delayed re-add must be resolved.
    pub(crate) fn done(
        &mut self,
        item: &T,
        now: impl FnOnce() -> Instant,
        stamp: bool,
    ) -> Finished {
        let Some(Slot::Processing { started, then }) = self.slots.get(item).copied() else {
            return Finished::NotProcessing;
        };
        self.in_flight -= 1;
        let requeue = |st: &mut Self, since, newly| {
            st.slots.insert(item.clone(), Slot::Queued { since });
            st.ready.push_back(item.clone());
            Finished::Requeued { started, newly }
        };
        match then {
            Then::Requeue { since } => requeue(self, since, false),
            Then::Wait { at } if !self.shutting_down => {
                let now = now();
                if at <= now {
                    return requeue(self, stamp.then_some(now), true);
                }
                let (earliest, seq) = self.delays.push(item.clone(), at);
                self.slots.insert(item.clone(), Slot::Waiting { at, seq });
                self.waiting += 1;
                Finished::Delayed { started, earliest }
            }
            // Nothing to do, or a delayed re-add whose heap went away with the shutdown.
            Then::Nothing | Then::Wait { .. } => {
                self.slots.remove(item);
                Finished::Removed {
                    started,
                    idle: self.in_flight == 0,
                }
            }
        }
    }

    /// Moves every item whose deadline is not after `now` to the ready deque. Returns how many.
    pub(crate) fn fire_due(&mut self, now: Instant, stamp: bool) -> usize {
        let mut fired = 0;
        while self.delays.peek().is_some_and(|e| e.at <= now) {
            let Some(e) = self.delays.pop() else {
                break;
            };
            if let Some(slot) = self.slots.get_mut(&e.item) {
                if *slot
                    == (Slot::Waiting {
                        at: e.at,
                        seq: e.seq,
                    })
                {
                    *slot = Slot::Queued {
                        since: stamp.then_some(now),
                    };
                    self.waiting -= 1;
                    self.ready.push_back(e.item);
                    fired += 1;
                }
            }
        }
        fired
    }

    /// The earliest live deadline in the heap (dropping stale entries on the way).
    pub(crate) fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(e) = self.delays.peek() {
            if self.slots.get(&e.item)
                == Some(&Slot::Waiting {
                    at: e.at,
                    seq: e.seq,
                })
            {
                return Some(e.at);
            }
            self.delays.pop();
        }
        None
    }

    /// Starts shutting down: later adds are refused and the delay heap is dropped. Items in flight
    /// that were re-added with a delay are forgotten at their `done`; items re-added (without a
    /// delay) while in flight are still handed out after their `done`.
    pub(crate) fn shut_down(&mut self, drain: bool) {
        self.shutting_down = true;
        self.draining = drain;
        if self.waiting > 0 {
            self.slots.retain(|_, s| !matches!(s, Slot::Waiting { .. }));
            self.waiting = 0;
        }
        self.delays.clear();
    }

    /// Stops waiting for a drain (a later plain shutdown).
    pub(crate) fn stop_draining(&mut self) {
        self.draining = false;
    }

    /// Start times of the items in flight (for the unfinished-work metrics).
    pub(crate) fn processing_starts(&self) -> impl Iterator<Item = Instant> + '_ {
        self.slots.values().filter_map(|s| match s {
            Slot::Processing { started, .. } => *started,
            _ => None,
        })
    }

    /// The slot of `item` (tests and the fuzz model).
    #[allow(dead_code, reason = "used by tests and the fuzz model")]
    pub(crate) fn slot(&self, item: &T) -> Option<Slot> {
        self.slots.get(item).copied()
    }

    /// The ready items in order (tests and the fuzz model).
    #[allow(dead_code, reason = "used by tests and the fuzz model")]
    pub(crate) fn ready(&self) -> impl Iterator<Item = &T> + '_ {
        self.ready.iter()
    }
}
