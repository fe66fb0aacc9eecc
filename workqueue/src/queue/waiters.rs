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
    /// How many tasks are parked.
    pub(crate) fn len(&self) -> usize {
        self.parked.len()
    }

    /// Re-registers `waker` under `id` if that id is still parked; `false` if it is not (it was
    /// woken, or never parked).
    pub(crate) fn refresh(&mut self, id: u64, waker: &Waker) -> bool {
        match self.parked.iter_mut().find(|(i, _)| *i == id) {
            Some((_, w)) => {
                if !w.will_wake(waker) {
                    w.clone_from(waker);
                }
                true
            }
            None => false,
        }
    }

    /// Parks a new task; returns its id.
    pub(crate) fn park(&mut self, waker: &Waker) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.parked.push_back((id, waker.clone()));
        id
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

    /// Unparks the longest-parked task; the caller wakes it after releasing its lock.
    pub(crate) fn pop(&mut self) -> Option<Waker> {
        self.parked.pop_front().map(|(_, w)| w)
    }

    /// Unparks every task; the caller wakes them after releasing its lock.
    pub(crate) fn take_all(&mut self) -> Vec<Waker> {
        self.parked.drain(..).map(|(_, w)| w).collect()
    }
}
