//! The streaming-list half of the machine (watch-list): the initial events until the
//! end-of-initial-events bookmark become one list, then the same stream goes on as the watch;
//! errors retry, reset or fall back to a list.
//!
//! For a store that takes whole lists, the initial events gather in a temporary store keyed by
//! object (client-go's `temporaryStore`) and go in one replace at the end bookmark. For a store
//! that takes lists page by page ([`Config::paged`](super::Config)), they go to the store in
//! pages as they arrive (so a relist holds about a page beside what the store keeps), a
//! `Deleted` initial event as its own call, and the end bookmark finishes the list.

use super::{cmd, After, Command, Input, Machine, Out, Output, Phase, StoreCall, VERY_SHORT_WATCH};
use crate::error::{BadInput, ReflectorError, StoreOperation};
use crate::list_watcher::{BackendError, ErrorKind, WatchEvent};
use kcache_core::{Meta, ObjectKey, ResourceVersion};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The initial events of a streaming list so far.
pub(crate) enum InitialEvents<T> {
    /// Gathered for one replace: every object by key, in the order its key first arrived; a
    /// later event for a key replaces its object in place (the last one wins), a `Deleted` one
    /// leaves a hole (`None`) that the replace skips.
    Gathered {
        items: Vec<Option<Arc<T>>>,
        index: HashMap<ObjectKey, usize>,
    },
    /// Handed to a paged store: the page being filled, and what went to the store so far.
    Paged {
        page: Vec<Arc<T>>,
        /// A page (or a delete) of this attempt went to the store: the next is not its first.
        begun: bool,
        /// Objects streamed by this attempt (bounded by the list limits).
        objects: usize,
    },
}

/// What follows a page of initial events handed to a paged store.
pub(crate) enum AfterPage<T> {
    /// Read the stream on.
    Read,
    /// Hand the store this `Deleted` initial event (it came after the page's objects).
    Delete(Arc<T>),
    /// The end bookmark came: finish the list at this version.
    Finish(ResourceVersion),
}

impl<T> InitialEvents<T> {
    pub(super) fn new(paged: bool) -> Self {
        if paged {
            Self::Paged {
                page: Vec::new(),
                begun: false,
                objects: 0,
            }
        } else {
            Self::Gathered {
                items: Vec::new(),
                index: HashMap::new(),
            }
        }
    }

    /// Objects streamed so far.
    fn objects(&self) -> usize {
        match self {
            Self::Gathered { items, .. } => items.len(),
            Self::Paged { objects, .. } => *objects,
        }
    }

    /// Adds or replaces the object (an `Added` or `Modified` initial event).
    fn upsert<M: Meta<T>>(&mut self, obj: Arc<T>) {
        match self {
            Self::Gathered { items, index } => {
                let Ok(key) = M::key(&obj) else { return };
                match index.get(&key) {
                    Some(&i) => items[i] = Some(obj),
                    None => {
                        index.insert(key, items.len());
                        items.push(Some(obj));
                    }
                }
            }
            Self::Paged { page, objects, .. } => {
                page.push(obj);
                *objects += 1;
            }
        }
    }

    /// Removes a gathered object with `obj`'s key, if held (a `Deleted` initial event).
    fn delete_gathered<M: Meta<T>>(
        items: &mut [Option<Arc<T>>],
        index: &mut HashMap<ObjectKey, usize>,
        obj: &T,
    ) {
        let Ok(key) = M::key(obj) else { return };
        if let Some(slot) = index.remove(&key).and_then(|i| items.get_mut(i)) {
            *slot = None;
        }
    }

    /// The page to hand to a paged store now, with its `first` flag, if `due`.
    fn take_page(&mut self, due: bool) -> Option<(Vec<Arc<T>>, bool)> {
        match self {
            Self::Paged { page, begun, .. } if due => {
                let first = !*begun;
                *begun = true;
                Some((std::mem::take(page), first))
            }
            _ => None,
        }
    }
}

impl<T, M: Meta<T>> Machine<T, M> {
    pub(super) fn on_stream_input<E: BackendError, SE>(
        &mut self,
        requested: ResourceVersion,
        mut items: InitialEvents<T>,
        input: Input<T, E, SE>,
        now: Instant,
    ) -> Out<T, E, SE> {
        let err = match input {
            Input::WatchOpened(Ok(())) => {
                self.opened(now);
                self.phase = Phase::Streaming { requested, items };
                return cmd(Command::ReadWatch { resync_at: None });
            }
            Input::WatchOpened(Err(e)) | Input::WatchFailed(e) => e,
            Input::Event(WatchEvent::Bookmark(b)) if b.initial_events_end => {
                if b.resource_version.is_empty() {
                    let bad = BadInput::BookmarkWithoutResourceVersion;
                    return self.start_list(Some(ReflectorError::BadInput(bad)));
                }
                self.watch_events += 1;
                return match items {
                    InitialEvents::Gathered { items, .. } => {
                        self.phase = Phase::Replacing {
                            rv: b.resource_version.clone(),
                            from_stream: true,
                        };
                        let items = items.into_iter().flatten().collect();
                        cmd(Command::Store(StoreCall::Replace(
                            items,
                            b.resource_version,
                        )))
                    }
                    paged => {
                        // The last page (the first too if nothing reached the store: that
                        // starts this attempt's list there), then the finish.
                        self.hand_page(requested, paged, AfterPage::Finish(b.resource_version))
                    }
                };
            }
            Input::Event(ev) => {
                self.watch_events += 1;
                // client-go applies every initial event to its temporary store; only the end
                // bookmark's version is recorded (at the replace).
                let mut after = AfterPage::Read;
                let report = match ev {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)
                        if self.key_error(&o).is_some() =>
                    {
                        // Skipped and reported, as in a watch.
                        self.key_error(&o)
                            .map(|k| ReflectorError::BadInput(BadInput::ObjectKey(k)))
                    }
                    WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                        items.upsert::<M>(o);
                        None
                    }
                    WatchEvent::Deleted(o) => {
                        match &mut items {
                            InitialEvents::Gathered { items, index } => {
                                InitialEvents::delete_gathered::<M>(items, index, &o);
                            }
                            InitialEvents::Paged { .. } => after = AfterPage::Delete(o),
                        }
                        None
                    }
                    WatchEvent::Bookmark(_) => None,
                };
                if items.objects() > self.config.limits.max_objects {
                    let bad = BadInput::ListTooLong {
                        pages: 0,
                        objects: items.objects(),
                    };
                    drop(items);
                    return self.fail_cycle(ReflectorError::BadInput(bad), now);
                }
                let page_full = matches!(
                    &items,
                    InitialEvents::Paged { page, .. } if page.len() >= crate::DEFAULT_PAGE_SIZE as usize
                );
                if page_full || !matches!(after, AfterPage::Read) {
                    let mut out = self.hand_page(requested, items, after);
                    out.report = report;
                    return out;
                }
                self.phase = Phase::Streaming { requested, items };
                return Output {
                    report,
                    command: Command::ReadWatch { resync_at: None },
                };
            }
            Input::WatchClosed => {
                // client-go loops: a stream that ends before its end bookmark starts a new
                // watch-list (from the same version), unless it was a very short watch (no event
                // within a second), which falls back to a list.
                let short = self.watch_events == 0
                    && self
                        .watch_opened_at
                        .is_some_and(|t| now.saturating_duration_since(t) < VERY_SHORT_WATCH);
                if short {
                    let err = ReflectorError::VeryShortWatch {
                        within: VERY_SHORT_WATCH,
                    };
                    return self.start_list(Some(err));
                }
                return self.start_stream(Some(ReflectorError::InitialEventsIncomplete));
            }
            _ => {
                self.phase = Phase::Streaming { requested, items };
                return cmd(Command::ReadWatch { resync_at: None });
            }
        };
        drop(items);
        match err.kind() {
            ErrorKind::Retry => self.back_off(After::Stream, ReflectorError::WatchOpen(err), now),
            ErrorKind::Expired | ErrorKind::TooLargeResourceVersion if !requested.is_empty() => {
                self.rv_unavailable = true;
                self.start_stream(Some(ReflectorError::WatchOpen(err)))
            }
            _ => self.start_list(Some(ReflectorError::WatchOpen(err))),
        }
    }

    /// Hands a paged store the page filled so far (when it has objects, or when nothing of
    /// this attempt reached the store yet and the list ends or a delete must follow it), then
    /// does `after`.
    fn hand_page<E, SE>(
        &mut self,
        requested: ResourceVersion,
        mut items: InitialEvents<T>,
        after: AfterPage<T>,
    ) -> Out<T, E, SE> {
        let due = match &items {
            InitialEvents::Paged { page, begun, .. } => {
                !page.is_empty() || (!*begun && !matches!(after, AfterPage::Read))
            }
            InitialEvents::Gathered { .. } => false,
        };
        match items.take_page(due) {
            Some((page, first)) => {
                self.phase = Phase::StreamPaging {
                    requested,
                    items,
                    after,
                };
                cmd(Command::Store(StoreCall::ListPage { items: page, first }))
            }
            None => self.after_stream_page(requested, items, after),
        }
    }

    /// A page of initial events was handed to the store; `after` follows.
    pub(super) fn on_stream_page_taken<E, SE>(
        &mut self,
        requested: ResourceVersion,
        items: InitialEvents<T>,
        after: AfterPage<T>,
        res: Result<(), SE>,
        now: Instant,
    ) -> Out<T, E, SE> {
        match res {
            Ok(()) => self.after_stream_page(requested, items, after),
            Err(e) => self.fail_cycle(super::store_error(StoreOperation::Replace, e), now),
        }
    }

    fn after_stream_page<E, SE>(
        &mut self,
        requested: ResourceVersion,
        items: InitialEvents<T>,
        after: AfterPage<T>,
    ) -> Out<T, E, SE> {
        match after {
            AfterPage::Read => {
                self.phase = Phase::Streaming { requested, items };
                cmd(Command::ReadWatch { resync_at: None })
            }
            AfterPage::Delete(obj) => {
                self.phase = Phase::StreamPaging {
                    requested,
                    items,
                    after: AfterPage::Read,
                };
                cmd(Command::Store(StoreCall::ListDelete(obj)))
            }
            AfterPage::Finish(rv) => {
                self.phase = Phase::Replacing {
                    rv: rv.clone(),
                    from_stream: true,
                };
                cmd(Command::Store(StoreCall::FinishList(rv)))
            }
        }
    }
}
