//! The watch stream of a [`PollingListWatcher`](super::PollingListWatcher): wait a period, list,
//! diff against the last poll this stream reported, send the difference and a bookmark.

use super::history::Published;
use super::snapshot::Snapshot;
use super::{PollError, Poller};
use crate::{Bookmark, WatchEvent, WatchStream};
use futures::StreamExt;
use kcache_core::{saturating_add, Meta, ResourceVersion};
use std::collections::VecDeque;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

/// One watch: the poll it compares against, when it polls next, and the events not yet taken.
pub(super) struct PollStream<T, F, M> {
    poller: Poller<T, F>,
    /// The last poll this stream reported (what its reader has applied once `pending` is empty).
    baseline: Arc<Snapshot<T>>,
    /// The version `baseline` was published as; `None` before a streaming list's first poll.
    baseline_rv: Option<ResourceVersion>,
    /// A streaming list (`send_initial_events`): the first poll sends every object as `Added`,
    /// then the initial-events-end bookmark.
    initial: bool,
    next_poll: Instant,
    /// When the stream ends cleanly (the watch timeout).
    deadline: Option<Instant>,
    allow_bookmarks: bool,
    pending: VecDeque<WatchEvent<T>>,
    done: bool,
    _meta: PhantomData<fn() -> M>,
}

impl<T, F, Fut, E, M> PollStream<T, F, M>
where
    T: Send + Sync + 'static,
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Vec<T>, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
    M: Meta<T>,
{
    /// A watch resuming from the published poll `from`, or a streaming list when `from` is
    /// `None` (it polls at once).
    pub(super) fn new(
        poller: Poller<T, F>,
        from: Option<Published<T>>,
        deadline: Option<Instant>,
        allow_bookmarks: bool,
        now: Instant,
    ) -> Self {
        let (baseline, baseline_rv, next_poll, initial) = match from {
            Some(p) => {
                let next = saturating_add(p.polled_at, poller.period);
                (p.snapshot, Some(p.rv), next, false)
            }
            None => (Arc::new(Snapshot::empty()), None, now, true),
        };
        Self {
            poller,
            baseline,
            baseline_rv,
            initial,
            next_poll,
            deadline,
            allow_bookmarks,
            pending: VecDeque::new(),
            done: false,
            _meta: PhantomData,
        }
    }

    pub(super) fn into_stream(self) -> WatchStream<T, PollError<E>> {
        futures::stream::unfold(self, Self::next).boxed()
    }

    /// The next event: a pending one, or whatever the next poll finds; `None` at the deadline or
    /// after an error.
    async fn next(mut self) -> Option<(Result<WatchEvent<T>, PollError<E>>, Self)> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some((Ok(ev), self));
            }
            if self.done {
                return None;
            }
            if let Some(deadline) = self.deadline.filter(|d| *d <= self.next_poll) {
                self.poller.clock.sleep_until_async(deadline).await;
                return None;
            }
            self.poller.clock.sleep_until_async(self.next_poll).await;
            if let Err(e) = self.poll().await {
                self.done = true;
                return Some((Err(e), self));
            }
        }
    }

    /// Lists the source once and queues the difference from `baseline`, then a bookmark.
    async fn poll(&mut self) -> Result<(), PollError<E>> {
        let items = (self.poller.list)().await.map_err(PollError::Source)?;
        let next = Snapshot::build::<M, E>(items, &self.poller.version, Some(&self.baseline))?;
        let now = self.poller.clock.now();
        self.next_poll = saturating_add(now, self.poller.period);
        let events = self.baseline.diff(&next);
        if events.is_empty() && !self.initial {
            if let Some(rv) = &self.baseline_rv {
                self.poller.history.lock().touch(rv, now);
            }
            return Ok(());
        }
        let next = Arc::new(next);
        let rv = self.poller.history.lock().publish(next.clone(), now);
        self.pending.extend(events);
        if self.initial || self.allow_bookmarks {
            self.pending.push_back(WatchEvent::Bookmark(Bookmark {
                resource_version: rv.clone(),
                initial_events_end: self.initial,
            }));
        }
        self.initial = false;
        self.baseline = next;
        self.baseline_rv = Some(rv);
        Ok(())
    }
}
