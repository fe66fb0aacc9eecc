//! Watch streams: a bounded per-watcher buffer filled by writers, and the stream that drains it,
//! adds bookmarks on the clock and ends at its timeout.

use crate::source::Shared;
use crate::sync::{Arc, Mutex};
use crate::MemoryError;
use futures::Stream;
use kcache_core::{saturating_add, Clock, Sleep};
use kcache_reflector::{Bookmark, WatchEvent};
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// One watcher's mailbox: writers push live events into it under the source's lock, its stream
/// takes them out. Bounded: the push that would exceed the capacity evicts the watcher instead.
#[derive(Debug)]
pub(crate) struct Slot<T> {
    state: Mutex<SlotState<T>>,
}

#[derive(Debug)]
struct SlotState<T> {
    buffer: VecDeque<WatchEvent<T>>,
    capacity: usize,
    /// The source's version when this watcher last heard from it (a bookmark may report it once
    /// the buffer is empty).
    seen_rv: u64,
    evicted: bool,
    /// Every handle of the source is gone: no event will ever come.
    source_closed: bool,
    waker: Option<Waker>,
}

/// What the stream found in its slot.
enum Taken {
    /// The buffered events were moved into the stream's queue.
    Events,
    Evicted(usize),
    Closed,
    Empty {
        seen_rv: u64,
    },
}

impl<T> Slot<T> {
    pub(crate) fn new(capacity: usize, seen_rv: u64) -> Self {
        Self {
            state: Mutex::new(SlotState {
                buffer: VecDeque::new(),
                capacity,
                seen_rv,
                evicted: false,
                source_closed: false,
                waker: None,
            }),
        }
    }

    /// Delivers the event of the write that made version `rv`; on overflow evicts the watcher
    /// (dropping what it had not taken). Returns the waker to call once the source's lock is
    /// released, and whether writers must go on pushing to this slot (false once the watcher is
    /// evicted or the source closed). Never blocks beyond this slot's short critical section.
    pub(crate) fn push(&self, event: WatchEvent<T>, rv: u64) -> (Option<Waker>, bool) {
        let mut st = self.state.lock();
        if st.evicted || st.source_closed {
            return (None, false);
        }
        if st.buffer.len() >= st.capacity {
            st.evicted = true;
            let dropped = std::mem::take(&mut st.buffer);
            let waker = st.waker.take();
            drop(st);
            drop(dropped);
            return (waker, false);
        }
        st.buffer.push_back(event);
        st.seen_rv = rv;
        (st.waker.take(), true)
    }

    /// Marks the source as gone; the stream ends after the events it still holds.
    pub(crate) fn close(&self) -> Option<Waker> {
        let mut st = self.state.lock();
        st.source_closed = true;
        st.waker.take()
    }

    /// How many events wait in the buffer.
    pub(crate) fn pending(&self) -> usize {
        self.state.lock().buffer.len()
    }

    /// Moves every buffered event into `into` (which must be empty) at once, so the stream
    /// takes the slot's lock once per batch rather than once per event; the two buffers trade
    /// places, so neither allocates again.
    fn take(&self, waker: &Waker, into: &mut VecDeque<WatchEvent<T>>) -> Taken {
        let mut st = self.state.lock();
        if st.evicted {
            return Taken::Evicted(st.capacity);
        }
        if !st.buffer.is_empty() {
            debug_assert!(into.is_empty());
            std::mem::swap(&mut st.buffer, into);
            return Taken::Events;
        }
        if st.source_closed {
            return Taken::Closed;
        }
        if !st.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            st.waker = Some(waker.clone());
        }
        Taken::Empty {
            seen_rv: st.seen_rv,
        }
    }
}

/// Room for events a watch keeps after handing out what it opened with (see `Watch::opening`).
const OPENING_KEEP: usize = 1024;

/// The stream behind a [`WatchStream`](kcache_reflector::WatchStream) of the memory source.
pub(crate) struct Watch<T> {
    shared: Arc<Shared<T>>,
    id: u64,
    slot: Arc<Slot<T>>,
    /// Events to hand out before looking at the slot again: first those decided when the
    /// watch opened (history replay, or initial events and their end bookmark), then each batch
    /// of live events taken from the slot. An evicted watcher still hands out the batch it
    /// took, then reports the eviction.
    queue: VecDeque<WatchEvent<T>>,
    /// `queue` still holds what the watch opened with (a streaming list's initial events: a
    /// whole snapshot): once handed out, its room is released rather than kept for the batches.
    opening: bool,
    timeout: Option<Sleep>,
    bookmarks: Option<(Sleep, Duration)>,
    clock: Arc<dyn Clock>,
    done: bool,
}

impl<T> Watch<T> {
    pub(crate) fn new(
        shared: Arc<Shared<T>>,
        id: u64,
        slot: Arc<Slot<T>>,
        replay: VecDeque<WatchEvent<T>>,
        timeout: Option<Duration>,
        bookmark_interval: Option<Duration>,
    ) -> Self {
        let clock = shared.config.clock.clone();
        let now = clock.now();
        let timeout = timeout.map(|d| clock.sleep_until_async(saturating_add(now, d)));
        let bookmarks =
            bookmark_interval.map(|d| (clock.sleep_until_async(saturating_add(now, d)), d));
        Self {
            shared,
            id,
            slot,
            opening: true,
            queue: replay,
            timeout,
            bookmarks,
            clock,
            done: false,
        }
    }
}

impl<T> Stream for Watch<T> {
    type Item = Result<WatchEvent<T>, MemoryError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(timeout) = this.timeout.as_mut() {
            if timeout.as_mut().poll(cx).is_ready() {
                this.finish();
                return Poll::Ready(None);
            }
        }
        if let Some(event) = this.queue.pop_front() {
            return Poll::Ready(Some(Ok(event)));
        }
        if std::mem::take(&mut this.opening) && this.queue.capacity() > OPENING_KEEP {
            // The queue trades places with the slot's buffer from here on: a snapshot's room
            // would stay allocated for as long as the watch lives.
            this.queue = VecDeque::new();
        }
        let seen_rv = match this.slot.take(cx.waker(), &mut this.queue) {
            Taken::Events => {
                if let Some(event) = this.queue.pop_front() {
                    return Poll::Ready(Some(Ok(event)));
                }
                // `take` only moves a non-empty buffer; poll again to be safe.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Taken::Evicted(capacity) => {
                this.finish();
                return Poll::Ready(Some(Err(MemoryError::Evicted { capacity })));
            }
            Taken::Closed => {
                this.finish();
                return Poll::Ready(None);
            }
            Taken::Empty { seen_rv } => seen_rv,
        };
        if let Some((sleep, interval)) = this.bookmarks.as_mut() {
            if sleep.as_mut().poll(cx).is_ready() {
                let next = saturating_add(this.clock.now(), *interval);
                *sleep = this.clock.sleep_until_async(next);
                let bookmark = Bookmark {
                    resource_version: seen_rv.into(),
                    initial_events_end: false,
                };
                return Poll::Ready(Some(Ok(WatchEvent::Bookmark(bookmark))));
            }
        }
        Poll::Pending
    }
}

impl<T> Watch<T> {
    fn finish(&mut self) {
        self.done = true;
        self.queue.clear();
        self.timeout = None;
        self.bookmarks = None;
        self.shared.remove_watcher(self.id);
    }
}

impl<T> Drop for Watch<T> {
    fn drop(&mut self) {
        if !self.done {
            self.shared.remove_watcher(self.id);
        }
    }
}
