//! The watch stream of a [`super::FaultInjector`]: cuts it after N events, duplicates events.

use super::{FaultError, FaultShared, FaultSite, InjectedFault};
use crate::sync::Arc;
use crate::{Bookmark, ErrorKind, WatchEvent, WatchStream};
use futures::Stream;
use kcache_core::Sleep;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A scheduled cut: after `after` events, end cleanly (`error == None`) or with an error.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cut {
    pub(crate) after: u64,
    pub(crate) error: Option<ErrorKind>,
    /// A misbehaving server's close right after an event (counted apart from cuts).
    pub(crate) instant: bool,
}

pub(crate) struct FaultyStream<T, E> {
    inner: WatchStream<T, E>,
    cut: Option<Cut>,
    /// Ends the watch when it fires ([`super::FaultPlan::max_watch_lifetime`]).
    lifetime: Option<Sleep>,
    seen: u64,
    done: bool,
    duplicate: Option<WatchEvent<T>>,
    shared: Arc<FaultShared>,
}

impl<T, E> FaultyStream<T, E> {
    pub(crate) fn new(
        inner: WatchStream<T, E>,
        cut: Option<Cut>,
        lifetime: Option<Sleep>,
        shared: Arc<FaultShared>,
    ) -> Self {
        Self {
            inner,
            cut,
            lifetime,
            seen: 0,
            done: false,
            duplicate: None,
            shared,
        }
    }
}

fn copy_event<T>(ev: &WatchEvent<T>) -> WatchEvent<T> {
    match ev {
        WatchEvent::Added(o) => WatchEvent::Added(o.clone()),
        WatchEvent::Modified(o) => WatchEvent::Modified(o.clone()),
        WatchEvent::Deleted(o) => WatchEvent::Deleted(o.clone()),
        WatchEvent::Bookmark(b) => WatchEvent::Bookmark(b.clone()),
    }
}

impl<T, E> Stream for FaultyStream<T, E> {
    type Item = Result<WatchEvent<T>, FaultError<E>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // All fields are Unpin (the inner stream is a `Pin<Box<_>>`).
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(ev) = this.duplicate.take() {
            return Poll::Ready(Some(Ok(ev)));
        }
        if let Some(lifetime) = this.lifetime.as_mut() {
            if lifetime.as_mut().poll(cx).is_ready() {
                this.lifetime = None;
                if !this.shared.healed() {
                    this.done = true;
                    this.shared.count(|s| s.lifetime_cuts += 1);
                    return Poll::Ready(None);
                }
            }
        }
        if let Some(cut) = this.cut {
            if this.seen >= cut.after && !this.shared.healed() {
                this.done = true;
                return Poll::Ready(match cut.error {
                    None if cut.instant => {
                        this.shared.count(|s| s.instant_closes += 1);
                        None
                    }
                    None => {
                        this.shared.count(|s| s.clean_cuts += 1);
                        None
                    }
                    Some(kind) => {
                        this.shared.count(|s| s.error_cuts += 1);
                        let fault = InjectedFault {
                            kind,
                            site: FaultSite::WatchStream,
                        };
                        Some(Err(FaultError::Injected(fault)))
                    }
                });
            }
        }
        match this.inner.as_mut().poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                this.done = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(FaultError::Backend(e)))),
            Poll::Ready(Some(Ok(ev))) => {
                if this.shared.unversioned_bookmark() {
                    // The event comes next (after this bookmark), as a duplicate would.
                    this.shared.count(|s| s.unversioned_bookmarks += 1);
                    this.duplicate = Some(ev);
                    return Poll::Ready(Some(Ok(WatchEvent::Bookmark(Bookmark {
                        resource_version: Default::default(),
                        initial_events_end: false,
                    }))));
                }
                this.seen += 1;
                if this.shared.duplicate() {
                    this.shared.count(|s| s.duplicates += 1);
                    this.duplicate = Some(copy_event(&ev));
                }
                if let Some(error) = this.shared.cut_after_event() {
                    // The next poll ends the watch (after a duplicate, if one was drawn).
                    this.cut = Some(Cut {
                        after: this.seen,
                        error,
                        instant: false,
                    });
                }
                Poll::Ready(Some(Ok(ev)))
            }
        }
    }
}
