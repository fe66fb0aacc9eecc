//! The tasks parked in `get_async`.

use std::collections::VecDeque;
use std::task::Waker;

/// Parked tasks in arrival order, each under an id its future keeps.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    next_id: u64,
    parked: VecDeque<(u64, Waker)>,
}

impl Waiters {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Parks (or re-parks) the task of the future holding `id`.
    pub(crate) fn register(&mut self, id: &mut Option<u64>, waker: &Waker) {
        if let Some(id) = *id {
            if let Some((_, w)) = self.parked.iter_mut().find(|(i, _)| *i == id) {
                if !w.will_wake(waker) {
                    w.clone_from(waker);
                }
                return;
            }
        }
        let new = self.next_id;
        self.next_id += 1;
        self.parked.push_back((new, waker.clone()));
        *id = Some(new);
    }

    /// Unparks `id` without waking it. `false` if it was no longer parked (it was woken).
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        match self.parked.iter().position(|(i, _)| *i == id) {
            Some(pos) => {
                self.parked.remove(pos);
                true
            }
            None => false,
        }
    }

    /// Wakes the longest-parked task. `false` if none was parked.
    pub(crate) fn wake_one(&mut self) -> bool {
        match self.parked.pop_front() {
            Some((_, w)) => {
                w.wake();
                true
            }
            None => false,
        }
    }

    /// Wakes every parked task.
    pub(crate) fn wake_all(&mut self) {
        for (_, w) in self.parked.drain(..) {
            w.wake();
        }
    }
}
