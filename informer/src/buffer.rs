//! `Buffer`: one handler's queue of notifications, with its sync tracking.
//!
//! The dispatcher pushes (never blocks beyond the buffer's short lock); one consumer, the
//! handler's delivery thread or its event stream, pops. Built on `crate::sync` so the loom model
//! (`tests/loom_dispatch.rs`) drives it directly.
//!
//! Sync tracking: every notification that belongs to the handler's initial population (an add of
//! the first list, or of the replay a late handler receives) is counted when pushed and
//! uncounted when its delivery completes (or when coalescing makes it unnecessary). The handler
//! has synced once the informer has (`upstream_synced`) and the count is zero.

mod chunked;
mod coalesce;

use crate::event::Notification;
use crate::sync::{wait_timeout, Condvar, Mutex, MutexGuard};
use chunked::ChunkedQueue;
use coalesce::Coalescing;
use std::task::{Context, Poll, Waker};

/// How a handler's buffer holds notifications it has not received yet.
///
/// # Examples
/// ```
/// use kcache_informer::{BufferMode, HandlerOptions};
///
/// let options = HandlerOptions::new().buffer_mode(BufferMode::Coalescing);
/// assert_eq!(options.mode(), BufferMode::Coalescing);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BufferMode {
    /// Every notification, in order, none lost (client-go's behaviour). Memory grows with a
    /// slow handler's backlog; watch [`pending`](crate::HandlerRegistration::pending).
    #[default]
    Ordered,
    /// At most one pending notification per key, the latest state: an update after an
    /// undelivered add stays an add with the newest object, an add followed by a delete cancels
    /// out, a delete after an update is the delete (carrying the final state), a re-add after an
    /// undelivered delete is an update from the state the handler last saw. Every notification
    /// still makes sense for what the handler saw before (adds of unknown keys, updates and
    /// deletes of known ones), and once drained its view equals the cache. For level-triggered
    /// handlers: memory is bounded by the number of keys, not of events.
    Coalescing,
}

/// How many times an idle consumer yields, re-checking its queue, before it parks.
#[cfg(not(kcache_loom))]
const POP_SPINS: u32 = 4;

enum Queue<T> {
    Ordered(ChunkedQueue<Notification<T>>),
    Coalescing(Coalescing<T>),
}

impl<T> Queue<T> {
    fn len(&self) -> usize {
        match self {
            Self::Ordered(q) => q.len(),
            Self::Coalescing(q) => q.len(),
        }
    }
}

struct State<T> {
    queue: Queue<T>,
    /// Initial notifications pushed and not yet delivered (or resolved by coalescing).
    initial_outstanding: usize,
    upstream_synced: bool,
    /// No more pushes; the consumer gets `None`.
    closed: bool,
    /// The consumer has finished its last delivery and will take no more.
    consumer_done: bool,
    in_flight: bool,
    /// Threads blocked on `cond` (the consumer waiting for a notification, threads waiting for
    /// the consumer to finish): a push or completion only signals the condvar when one may be
    /// parked, so a push to a busy consumer costs no wake-up.
    parked: usize,
    consumer_waker: Option<Waker>,
    waiters: Vec<Waker>,
}

impl<T> State<T> {
    fn synced(&self) -> bool {
        self.upstream_synced && self.initial_outstanding == 0
    }
}

/// One handler's buffer (see the module documentation).
pub(crate) struct Buffer<T> {
    state: Mutex<State<T>>,
    cond: Condvar,
}

impl<T> Buffer<T> {
    pub(crate) fn new(mode: BufferMode) -> Self {
        let queue = match mode {
            BufferMode::Ordered => Queue::Ordered(ChunkedQueue::default()),
            BufferMode::Coalescing => Queue::Coalescing(Coalescing::new()),
        };
        Self {
            state: Mutex::new(State {
                queue,
                initial_outstanding: 0,
                upstream_synced: false,
                closed: false,
                consumer_done: false,
                in_flight: false,
                parked: 0,
                consumer_waker: None,
                waiters: Vec::new(),
            }),
            cond: Condvar::new(),
        }
    }

    /// Queues `n` for the consumer. Returns false (and drops `n`) once closed.
    pub(crate) fn push(&self, n: Notification<T>) -> bool {
        self.push_all(std::iter::once(n))
    }

    /// Queues every notification of `batch`, in order, under one lock, emptying `batch`.
    /// Returns false (and drops them) once closed.
    pub(crate) fn push_batch(&self, batch: &mut Vec<Notification<T>>) -> bool {
        self.push_all(batch.drain(..))
    }

    fn push_all(&self, batch: impl Iterator<Item = Notification<T>>) -> bool {
        let mut guard = self.state.lock();
        if guard.closed {
            return false;
        }
        let st = &mut *guard;
        for n in batch {
            if n.initial {
                st.initial_outstanding += 1;
            }
            let resolved = match &mut st.queue {
                Queue::Ordered(q) => {
                    q.push_back(n);
                    0
                }
                Queue::Coalescing(q) => q.push(n),
            };
            st.initial_outstanding = st.initial_outstanding.saturating_sub(resolved);
        }
        let consumer = st.consumer_waker.take();
        let waiters = if st.synced() {
            std::mem::take(&mut st.waiters)
        } else {
            Vec::new()
        };
        let parked = st.parked > 0;
        drop(guard);
        if parked {
            self.cond.notify_all();
        }
        wake(consumer, waiters);
        true
    }

    /// Blocks until a notification is ready (and marks it in flight) or the buffer is closed.
    pub(crate) fn pop_blocking(&self) -> Option<Notification<T>> {
        self.pop_locked(self.state.lock()).0
    }

    /// [`complete`](Self::complete) then [`pop_blocking`](Self::pop_blocking), under one lock
    /// acquisition when nobody has to be told of the completion. Also returns whether the pop
    /// had to wait for a notification (the consumer times its calls without counting waits).
    pub(crate) fn complete_and_pop(&self, initial: bool) -> (Option<Notification<T>>, bool) {
        let mut st = self.state.lock();
        st.in_flight = false;
        if initial {
            st.initial_outstanding = st.initial_outstanding.saturating_sub(1);
        }
        let waiters_due = (st.synced() || st.closed) && !st.waiters.is_empty();
        if waiters_due || st.parked > 0 {
            self.notify_waiters(st);
            return self.pop_locked(self.state.lock());
        }
        self.pop_locked(st)
    }

    /// The next notification (or `None` once closed), and whether it had to be waited for.
    fn pop_locked(&self, mut st: MutexGuard<'_, State<T>>) -> (Option<Notification<T>>, bool) {
        let mut waited = false;
        #[cfg(not(kcache_loom))]
        let mut spins = 0;
        loop {
            if let Some(n) = Self::take(&mut st) {
                return (Some(n), waited);
            }
            if st.closed {
                return (None, waited);
            }
            waited = true;
            // Before parking, give the producer a few chances to push (a yield is far cheaper
            // than the futex wake-up a push to a parked consumer costs, on both sides).
            #[cfg(not(kcache_loom))]
            if spins < POP_SPINS {
                spins += 1;
                MutexGuard::unlocked(&mut st, std::thread::yield_now);
                continue;
            }
            Self::park(&self.cond, &mut st);
        }
    }

    /// Waits on the condvar, counted in `parked`.
    fn park(cond: &Condvar, st: &mut MutexGuard<'_, State<T>>) {
        st.parked += 1;
        wait_timeout(cond, st, None);
        st.parked -= 1;
    }

    /// The async form of [`pop_blocking`](Self::pop_blocking).
    pub(crate) fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Option<Notification<T>>> {
        let mut st = self.state.lock();
        if let Some(n) = Self::take(&mut st) {
            return Poll::Ready(Some(n));
        }
        if st.closed {
            return Poll::Ready(None);
        }
        st.consumer_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    fn take(st: &mut MutexGuard<'_, State<T>>) -> Option<Notification<T>> {
        let n = match &mut st.queue {
            Queue::Ordered(q) => q.pop_front(),
            Queue::Coalescing(q) => q.pop(),
        }?;
        st.in_flight = true;
        Some(n)
    }

    /// The consumer finished delivering a notification (normally or by a caught panic).
    pub(crate) fn complete(&self, initial: bool) {
        let mut st = self.state.lock();
        st.in_flight = false;
        if initial {
            st.initial_outstanding = st.initial_outstanding.saturating_sub(1);
        }
        self.notify_waiters(st);
    }

    /// The informer has synced: from now on the handler is synced once its count is zero.
    pub(crate) fn set_upstream_synced(&self) {
        let mut st = self.state.lock();
        st.upstream_synced = true;
        self.notify_waiters(st);
    }

    /// Stops accepting notifications and drops the undelivered ones (client-go drops them too).
    /// A delivery in flight finishes.
    pub(crate) fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        let dropped_initial = match &mut st.queue {
            Queue::Ordered(q) => {
                let n = q.iter().filter(|n| n.initial).count();
                q.clear();
                n
            }
            Queue::Coalescing(q) => q.clear(),
        };
        st.initial_outstanding = st.initial_outstanding.saturating_sub(dropped_initial);
        let consumer = st.consumer_waker.take();
        let waiters = std::mem::take(&mut st.waiters);
        let parked = st.parked > 0;
        drop(st);
        if parked {
            self.cond.notify_all();
        }
        wake(consumer, waiters);
    }

    /// The consumer will take nothing more (its thread is exiting, its stream was dropped).
    pub(crate) fn finish_consumer(&self) {
        let mut st = self.state.lock();
        st.consumer_done = true;
        st.in_flight = false;
        let waiters = std::mem::take(&mut st.waiters);
        let parked = st.parked > 0;
        drop(st);
        if parked {
            self.cond.notify_all();
        }
        wake(None, waiters);
    }

    fn notify_waiters(&self, mut st: MutexGuard<'_, State<T>>) {
        let waiters = if st.synced() || st.closed {
            std::mem::take(&mut st.waiters)
        } else {
            Vec::new()
        };
        let parked = st.parked > 0;
        drop(st);
        if parked {
            self.cond.notify_all();
        }
        wake(None, waiters);
    }

    /// Whether the informer has synced and every initial notification was delivered.
    pub(crate) fn has_synced(&self) -> bool {
        self.state.lock().synced()
    }

    /// `Ready(true)` once synced, `Ready(false)` if closed first.
    pub(crate) fn poll_synced(&self, cx: &mut Context<'_>) -> Poll<bool> {
        let mut st = self.state.lock();
        if st.synced() {
            return Poll::Ready(true);
        }
        if st.closed {
            return Poll::Ready(false);
        }
        push_waker(&mut st.waiters, cx.waker());
        Poll::Pending
    }

    /// `Ready` once the consumer is done.
    pub(crate) fn poll_consumer_done(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.state.lock();
        if st.consumer_done {
            return Poll::Ready(());
        }
        push_waker(&mut st.waiters, cx.waker());
        Poll::Pending
    }

    /// Blocks until the consumer is done.
    pub(crate) fn wait_consumer_done(&self) {
        let mut st = self.state.lock();
        while !st.consumer_done {
            Self::park(&self.cond, &mut st);
        }
    }

    /// Notifications queued and not yet taken by the consumer.
    pub(crate) fn pending(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Whether [`close`](Self::close) was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.state.lock().closed
    }
}

fn push_waker(waiters: &mut Vec<Waker>, waker: &Waker) {
    if !waiters.iter().any(|w| w.will_wake(waker)) {
        waiters.push(waker.clone());
    }
}

fn wake(consumer: Option<Waker>, waiters: Vec<Waker>) {
    if let Some(w) = consumer {
        w.wake();
    }
    for w in waiters {
        w.wake();
    }
}

#[cfg(all(test, not(kcache_loom)))]
mod tests;
