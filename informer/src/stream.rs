//! `EventStream`: a handler as a `futures::Stream`, for async users.

use crate::event::Event;
use crate::registration::HandlerRegistration;
use futures::Stream;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The notifications of one registration as a [`Stream`] (see
/// [`SharedIndexInformer::event_stream`](crate::SharedIndexInformer::event_stream)).
///
/// It has its own buffer like any handler (ordered by default, or coalescing), so a stream that
/// is not polled delays nobody else. An event counts as delivered when the stream yields it. The
/// stream ends when the informer stops or the registration is removed; dropping it removes the
/// registration.
pub struct EventStream<T> {
    registration: HandlerRegistration<T>,
    finished: bool,
}

impl<T> EventStream<T> {
    pub(crate) fn new(registration: HandlerRegistration<T>) -> Self {
        Self {
            registration,
            finished: false,
        }
    }

    /// The registration behind the stream (its `has_synced`, `pending`, `remove`).
    pub fn registration(&self) -> &HandlerRegistration<T> {
        &self.registration
    }
}

impl<T> Stream for EventStream<T> {
    type Item = Event<T>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event<T>>> {
        if self.finished {
            return Poll::Ready(None);
        }
        let listener = &self.registration.listener;
        match listener.buffer.poll_pop(cx) {
            Poll::Ready(Some(n)) => {
                listener.buffer.complete(n.initial);
                listener.update_gauge();
                Poll::Ready(Some(n.event))
            }
            Poll::Ready(None) => {
                listener.buffer.finish_consumer();
                self.finished = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

// No field is structurally pinned.
impl<T> Unpin for EventStream<T> {}

impl<T> Drop for EventStream<T> {
    fn drop(&mut self) {
        self.registration.remove();
        self.registration.listener.buffer.finish_consumer();
    }
}

impl<T> fmt::Debug for EventStream<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream")
            .field("registration", &self.registration)
            .field("finished", &self.finished)
            .finish()
    }
}
