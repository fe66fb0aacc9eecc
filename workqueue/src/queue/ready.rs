//! The ready queue: the FIFO of items ready to be handed out, and the workers (threads and
//! tasks) that sleep until there is one.
//!
//! # The protocol
//! - A producer pushes the item to the lock-free FIFO, then (after a `SeqCst` fence) reads the
//!   state word: the number of registered sleepers and the closed flag. A busy queue's producers
//!   only read that word, which workers write only when they go to sleep, so the hand-off itself
//!   touches no lock and no counter shared with the workers beyond the FIFO's own indices. The
//!   timer, which fires many items at once, pushes its whole batch, then fences and reads the
//!   word once.
//! - A worker pops from the FIFO. One that found nothing spins briefly (in `Queue::get`), then
//!   registers as a sleeper under the parking mutex (an atomic add to the state word), fences, and
//!   looks at the FIFO once more before it waits on the condition variable. The two fences make
//!   the race symmetric (Dekker's pattern): either the producer sees the sleeper, or the worker
//!   sees the item and does not sleep.
//! - Sleeper registrations and wake-ups happen only under the parking mutex, so the count of
//!   sleepers in the word always equals the threads plus tasks registered in [`Park`]. A producer
//!   that saw a sleeper takes the mutex and wakes exactly one: it takes the sleeper off the count
//!   and gives a thread a token (or wakes a task).
//! - Closing sets the flag in the word and wakes every sleeper. The queue closes only after every
//!   accepted add has pushed (see `shared.rs`), so a worker that sees the flag and then an empty
//!   FIFO knows nothing more is coming.
//!
//! Under loom the FIFO is a `Mutex<VecDeque>` stand-in (see `fifo.rs`), whose lock orders the two
//! sides by itself; the models check the parking protocol and the slots around it, not the fences
//! against `SegQueue`'s own atomics.

use super::fifo::Fifo;
use super::ranked::Ranked;
use super::waiters::Waiters;
use crate::sync::atomic::{fence, AtomicU64, Ordering};
use crate::sync::{wait_timeout, Condvar, Mutex, MutexGuard};
use crossbeam_utils::CachePadded;
use std::hash::Hash;
use std::task::Waker;

const SLEEPER: u64 = 1;
const SLEEPER_MASK: u64 = (1 << 32) - 1;
const CLOSED: u64 = 1 << 63;

fn sleepers_of(word: u64) -> u64 {
    word & SLEEPER_MASK
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
}

/// The ready queue. See the module docs for the protocol.
#[derive(Debug)]
pub(crate) struct Ready<T> {
    /// Sleepers and the closed flag.
    word: CachePadded<AtomicU64>,
    fifo: Store<T>,
    park: Mutex<Park>,
    /// Blocked `get` callers wait here for a token.
    threads: Condvar,
    /// `shut_down_with_drain` waits here.
    drained: Condvar,
}

/// Where ready items wait: the plain queue's lock-free FIFO, or the priority queue's ranks.
#[derive(Debug)]
pub(crate) enum Store<T> {
    /// Items with their tickets (see `slots.rs`).
    Fifo(Fifo<(T, u64)>),
    Ranked(Ranked<T>),
}

impl<T: Clone + Eq + Hash> Store<T> {
    fn push(&self, item: T, priority: i32, ticket: u64) {
        match self {
            Store::Fifo(f) => f.push((item, ticket)),
            Store::Ranked(r) => r.push(item, priority),
        }
    }

    /// The next item and its ticket (0 from the ranked store, which gives none).
    fn pop(&self) -> Option<(T, u64)> {
        match self {
            Store::Fifo(f) => f.pop(),
            // An empty store is seen without its mutex (idle workers poll it).
            Store::Ranked(r) if r.is_empty() => None,
            Store::Ranked(r) => r.pop().map(|item| (item, 0)),
        }
    }
}

impl<T> Store<T> {
    fn len(&self) -> usize {
        match self {
            Store::Fifo(f) => f.len(),
            Store::Ranked(r) => r.len(),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Store::Fifo(f) => f.is_empty(),
            Store::Ranked(r) => r.is_empty(),
        }
    }
}

impl<T: Clone + Eq + Hash> Ready<T> {
    /// Appends an item that just became ready, at `priority` (which the plain FIFO ignores) and
    /// under `ticket` (which the priority store ignores).
    /// Returns whether a sleeper was registered: the caller then calls
    /// [`wake_one`](Ready::wake_one), after releasing its own locks.
    ///
    /// Pushes are accepted after [`close`](Ready::close) too (an item re-added while in flight
    /// is still handed out after its `done`).
    pub(crate) fn push(&self, item: T, priority: i32, ticket: u64) -> bool {
        self.fifo.push(item, priority, ticket);
        fence(Ordering::SeqCst);
        sleepers_of(self.word.load(Ordering::SeqCst)) != 0
    }

    /// Appends one item of a batch without looking for sleepers: after the batch, the caller
    /// calls [`sleepers_after_batch`](Ready::sleepers_after_batch) once (one fence per batch, not
    /// one per item, for the timer that fires many items at once).
    pub(crate) fn push_batched(&self, item: T, priority: i32, ticket: u64) {
        self.fifo.push(item, priority, ticket);
    }

    /// Takes the next ready item, if any (the oldest, or for the priority queue the next by
    /// rank).
    pub(crate) fn pop(&self) -> Option<(T, u64)> {
        self.fifo.pop()
    }

    /// Whether items carry tickets (the plain FIFO; see `slots.rs`).
    pub(crate) fn has_tickets(&self) -> bool {
        matches!(self.fifo, Store::Fifo(_))
    }

    /// Raises the priority of a ready item (priority queue only; a no-op for the plain FIFO).
    pub(crate) fn raise(&self, item: &T, priority: i32) {
        if let Store::Ranked(r) = &self.fifo {
            r.raise(item, priority);
        }
    }

    /// The ranked store, for the priority queue's own queries.
    pub(crate) fn ranked(&self) -> Option<&Ranked<T>> {
        match &self.fifo {
            Store::Ranked(r) => Some(r),
            Store::Fifo(_) => None,
        }
    }
}

impl<T> Ready<T> {
    pub(crate) fn new(store: Store<T>) -> Self {
        Self {
            word: CachePadded::new(AtomicU64::new(0)),
            fifo: store,
            park: Mutex::new(Park::default()),
            threads: Condvar::new(),
            drained: Condvar::new(),
        }
    }

    /// After a batch of [`push_batched`](Ready::push_batched): the number of registered sleepers.
    /// The caller wakes as many as it pushed items, at most, after releasing its locks. The fence
    /// is the one [`push`](Ready::push) makes per item: a sleeper registered after it sees the
    /// batch in the FIFO when it looks again, one registered before it is counted here.
    pub(crate) fn sleepers_after_batch(&self) -> usize {
        fence(Ordering::SeqCst);
        usize::try_from(sleepers_of(self.word.load(Ordering::SeqCst))).unwrap_or(usize::MAX)
    }

    /// Items ready to be handed out.
    pub(crate) fn len(&self) -> usize {
        self.fifo.len()
    }

    fn is_closed(&self) -> bool {
        self.word.load(Ordering::Acquire) & CLOSED != 0
    }

    /// Whether [`close`](Ready::close) ran and nothing is ready (a worker's cue to stop). The flag
    /// is read first: every accepted push came before it.
    pub(crate) fn is_closed_and_empty(&self) -> bool {
        self.is_closed() && self.fifo.is_empty()
    }

    /// Whether an item is ready or the queue is closed (what a spinning worker waits for).
    pub(crate) fn has_news(&self) -> bool {
        !self.fifo.is_empty() || self.is_closed()
    }

    /// Registers one sleeper (under the parking mutex) unless the queue is closed, then looks at
    /// the FIFO again. `Some(true)`: registered and still empty; `Some(false)`: an item arrived
    /// (not registered); `None`: closed.
    fn register(&self, _g: &MutexGuard<'_, Park>) -> Option<bool> {
        let mut w = self.word.load(Ordering::Acquire);
        loop {
            if w & CLOSED != 0 {
                return None;
            }
            if w & SLEEPER_MASK == SLEEPER_MASK {
                // Four billion sleepers: do not overflow the field, just look again soon.
                return Some(false);
            }
            match self.word.compare_exchange_weak(
                w,
                w + SLEEPER,
                Ordering::SeqCst,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => w = now,
            }
        }
        fence(Ordering::SeqCst);
        if self.fifo.is_empty() {
            return Some(true);
        }
        self.word.fetch_sub(SLEEPER, Ordering::AcqRel);
        Some(false)
    }

    /// Blocks the calling thread until it is woken (an item may be ready) or the queue is closed
    /// and empty. Returns `false` in the second case.
    pub(crate) fn sleep(&self) -> bool {
        let mut g = self.park.lock();
        match self.register(&g) {
            None => return !self.fifo.is_empty(),
            Some(false) => return true,
            Some(true) => {}
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
    /// or the queue is closed.
    pub(crate) fn park_task(&self, id: Option<u64>, waker: &Waker) -> TaskPark {
        let mut g = self.park.lock();
        if let Some(id) = id {
            if g.tasks.refresh(id, waker) {
                // Still counted as a sleeper: the next push wakes it.
                return TaskPark::Parked(id);
            }
        }
        match self.register(&g) {
            None => TaskPark::Closed,
            Some(false) => TaskPark::Retry,
            Some(true) => TaskPark::Parked(g.tasks.park(waker)),
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
        if pass_on && !self.fifo.is_empty() {
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
    /// once the FIFO is empty, and every sleeper wakes. Idempotent.
    pub(crate) fn close(&self) {
        let mut g = self.park.lock();
        let sleepers = (g.threads + g.tasks.len()) as u64;
        let mut w = self.word.load(Ordering::Acquire);
        loop {
            let new = (w | CLOSED) - sleepers;
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
    pub(crate) fn wait_drained(&self, mut done: impl FnMut() -> bool) {
        let mut g = self.park.lock();
        while !done() {
            wait_timeout(&self.drained, &mut g, None);
        }
    }

    /// Wakes `wait_drained` to look again.
    pub(crate) fn notify_drained(&self) {
        let _g = self.park.lock();
        self.drained.notify_all();
    }
}
