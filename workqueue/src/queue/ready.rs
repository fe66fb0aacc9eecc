//! The ready queue: the FIFO of items ready to be handed out, one atomic word that counts them,
//! and the workers (threads and tasks) that sleep until there is one.
//!
//! # The word
//! One `AtomicU64` holds the ready count (low 40 bits), the number of registered sleepers (next 23
//! bits) and the closed flag (top bit). Keeping them in one word is what makes the hand-off
//! race-free without a lock: a producer's increment of the count returns, in the same atomic step,
//! whether anyone was registered asleep before it, and a worker registers as a sleeper only with a
//! compare-and-swap that also proves the count is still zero. Whichever comes first in the word's
//! modification order, the other sees it: either the producer learns of the sleeper and wakes it,
//! or the worker sees the item and does not sleep.
//!
//! # The protocol
//! - A producer pushes the item to the FIFO *then* increments the count, so a claimed count always
//!   has an item behind it.
//! - A worker claims by decrementing a non-zero count, then pops (the pop cannot miss: every claim
//!   is backed by a completed push).
//! - A worker that found nothing spins briefly (in `Queue::get`), then registers as a sleeper under
//!   the parking mutex and waits on the condition variable. Sleeper registrations and wake-ups
//!   happen only under that mutex, so the count of sleepers in the word always equals the threads
//!   plus tasks registered in [`Park`].
//! - A producer whose increment saw a sleeper takes the parking mutex and wakes exactly one: it
//!   removes the sleeper from the count and gives a thread a token (or wakes a task). Producers
//!   that see no sleeper never touch the mutex: a busy queue hands off without syscalls.
//! - Closing sets the flag with the same kind of atomic step and wakes every sleeper; a worker
//!   returns `None` only when it sees the flag and a zero count in one load.

use super::fifo::Fifo;
use super::waiters::Waiters;
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::{wait_timeout, Condvar, Mutex, MutexGuard};
use crossbeam_utils::CachePadded;
use std::task::Waker;

const LEN_MASK: u64 = (1 << 40) - 1;
const SLEEPER: u64 = 1 << 40;
const SLEEPER_MASK: u64 = ((1 << 23) - 1) << 40;
const CLOSED: u64 = 1 << 63;

fn len_of(word: u64) -> u64 {
    word & LEN_MASK
}

fn sleepers_of(word: u64) -> u64 {
    (word & SLEEPER_MASK) >> 40
}

/// Who sleeps, under the parking mutex.
#[derive(Debug, Default)]
pub(crate) struct Park {
    /// Threads registered asleep (counted in the word) and not yet given a token.
    threads: usize,
    /// Wake-ups given to sleeping threads and not yet taken by one.
    tokens: usize,
    /// Tasks registered asleep (counted in the word).
    tasks: Waiters,
}

/// What a task's attempt to park found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskPark {
    /// An item is ready: try to take it again.
    Retry,
    /// Closed and empty.
    Closed,
    /// Parked under this id.
    Parked(u64),
    /// Too many sleepers to count one more: the task was woken to poll again soon.
    Yield,
}

/// The ready queue. See the module docs for the protocol.
#[derive(Debug)]
pub(crate) struct Ready<T> {
    word: CachePadded<AtomicU64>,
    fifo: Fifo<T>,
    park: Mutex<Park>,
    /// Blocked `get` callers wait here for a token.
    threads: Condvar,
    /// `shut_down_with_drain` waits here.
    drained: Condvar,
}

impl<T> Ready<T> {
    pub(crate) fn new() -> Self {
        Self {
            word: CachePadded::new(AtomicU64::new(0)),
            fifo: Fifo::new(),
            park: Mutex::new(Park::default()),
            threads: Condvar::new(),
            drained: Condvar::new(),
        }
    }

    /// Appends an item that just became ready. Returns whether a sleeper was registered: the
    /// caller then calls [`wake_one`](Ready::wake_one), after releasing its own locks.
    ///
    /// Pushes are accepted after [`close`](Ready::close) too (an item re-added while in flight
    /// is still handed out after its `done`).
    pub(crate) fn push(&self, item: T) -> bool {
        self.fifo.push(item);
        let before = self.word.fetch_add(1, Ordering::AcqRel);
        sleepers_of(before) != 0
    }

    /// Items ready to be handed out.
    pub(crate) fn len(&self) -> usize {
        len_of(self.word.load(Ordering::Acquire)) as usize
    }

    /// Whether [`close`](Ready::close) ran and nothing is ready (a worker's cue to stop).
    pub(crate) fn is_closed_and_empty(&self) -> bool {
        let w = self.word.load(Ordering::Acquire);
        w & CLOSED != 0 && len_of(w) == 0
    }

    /// Whether an item is ready or the queue is closed (what a spinning worker waits for).
    pub(crate) fn has_news(&self) -> bool {
        let w = self.word.load(Ordering::Acquire);
        w & CLOSED != 0 || len_of(w) != 0
    }

    /// Claims one ready item: `true` if the count was above zero; the caller must then
    /// [`pop_claimed`](Ready::pop_claimed).
    pub(crate) fn try_claim(&self) -> bool {
        let mut w = self.word.load(Ordering::Acquire);
        loop {
            if len_of(w) == 0 {
                return false;
            }
            match self
                .word
                .compare_exchange_weak(w, w - 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(now) => w = now,
            }
        }
    }

    /// Pops the item a successful [`try_claim`](Ready::try_claim) reserved. Its push completed
    /// before the count it claimed was published, so the pop finds an item at once; the loop is
    /// only a guard.
    pub(crate) fn pop_claimed(&self) -> T {
        loop {
            if let Some(item) = self.fifo.pop() {
                return item;
            }
            crate::sync::thread::yield_now();
        }
    }

    /// Blocks the calling thread until it is woken (an item may be ready) or the queue is closed
    /// and empty. Returns `false` in the second case.
    pub(crate) fn sleep(&self) -> bool {
        let mut g = self.park.lock();
        let mut w = self.word.load(Ordering::Acquire);
        loop {
            if len_of(w) != 0 {
                return true;
            }
            if w & CLOSED != 0 {
                return false;
            }
            if w & SLEEPER_MASK == SLEEPER_MASK {
                // 8 million sleepers: do not overflow the field, just look again soon.
                drop(g);
                crate::sync::thread::yield_now();
                return true;
            }
            match self.word.compare_exchange_weak(
                w,
                w + SLEEPER,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => w = now,
            }
        }
        g.threads += 1;
        loop {
            wait_timeout(&self.threads, &mut g, None);
            if g.tokens > 0 {
                g.tokens -= 1;
                return true;
            }
        }
    }

    /// Parks a task (or refreshes the waker of the one parked as `id`), unless an item is ready
    /// or the queue is closed and empty.
    pub(crate) fn park_task(&self, id: Option<u64>, waker: &Waker) -> TaskPark {
        let mut g = self.park.lock();
        let mut w = self.word.load(Ordering::Acquire);
        loop {
            if len_of(w) != 0 {
                return TaskPark::Retry;
            }
            if w & CLOSED != 0 {
                return TaskPark::Closed;
            }
            if let Some(id) = id {
                if g.tasks.refresh(id, waker) {
                    return TaskPark::Parked(id);
                }
            }
            if w & SLEEPER_MASK == SLEEPER_MASK {
                drop(g);
                waker.wake_by_ref();
                return TaskPark::Yield;
            }
            match self.word.compare_exchange_weak(
                w,
                w + SLEEPER,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return TaskPark::Parked(g.tasks.park(waker)),
                Err(now) => w = now,
            }
        }
    }

    /// Unparks the task parked as `id`. If it was already woken (and so will not take the item it
    /// was woken for) and `pass_on`, the wake-up goes to another sleeper.
    pub(crate) fn unpark_task(&self, id: u64, pass_on: bool) {
        let mut g = self.park.lock();
        if g.tasks.remove(id) {
            self.word.fetch_sub(SLEEPER, Ordering::AcqRel);
            return;
        }
        if pass_on && self.len() > 0 {
            self.wake_locked(g);
        }
    }

    /// Wakes one registered sleeper, if there is one (a blocked thread before a parked task).
    pub(crate) fn wake_one(&self) {
        self.wake_locked(self.park.lock());
    }

    fn wake_locked(&self, mut g: MutexGuard<'_, Park>) {
        if sleepers_of(self.word.load(Ordering::Acquire)) == 0 {
            return;
        }
        self.word.fetch_sub(SLEEPER, Ordering::AcqRel);
        if g.threads > 0 {
            g.threads -= 1;
            g.tokens += 1;
            self.threads.notify_one();
        } else {
            let task = g.tasks.pop();
            drop(g);
            if let Some(w) = task {
                w.wake();
            }
        }
    }

    /// Closes the queue for good: [`is_closed_and_empty`](Ready::is_closed_and_empty) turns true
    /// once the count is zero, and every sleeper wakes. Idempotent.
    pub(crate) fn close(&self) {
        let mut g = self.park.lock();
        let sleepers = (g.threads + g.tasks.len()) as u64;
        let mut w = self.word.load(Ordering::Acquire);
        loop {
            let new = (w | CLOSED) - sleepers * SLEEPER;
            match self
                .word
                .compare_exchange_weak(w, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(now) => w = now,
            }
        }
        g.tokens += g.threads;
        g.threads = 0;
        self.threads.notify_all();
        let tasks = g.tasks.take_all();
        drop(g);
        for t in tasks {
            t.wake();
        }
    }

    /// Waits on the drain condition variable until `done()` says so; `done` is evaluated under
    /// the parking mutex, which [`notify_drained`](Ready::notify_drained) also takes.
    pub(crate) fn wait_drained(&self, mut done: impl FnMut(usize) -> bool) {
        let mut g = self.park.lock();
        while !done(self.len()) {
            wait_timeout(&self.drained, &mut g, None);
        }
    }

    /// Wakes `wait_drained` to look again.
    pub(crate) fn notify_drained(&self) {
        let _g = self.park.lock();
        self.drained.notify_all();
    }
}
