//! The streaming-list half of the machine (watch-list): apply the initial events to a temporary
//! store until the end-of-initial-events bookmark, then one replace; fall back to a list on
//! errors.

use super::{cmd, After, Command, Input, Machine, Out, Output, Phase, StoreCall, VERY_SHORT_WATCH};
use crate::error::{BadInput, ReflectorError};
use crate::list_watcher::{BackendError, ErrorKind, WatchEvent};
use kcache_core::{Meta, ObjectKey, ResourceVersion};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The temporary store of a streaming list (client-go's `temporaryStore`): the objects of the
/// initial events, in arrival order. `Added` events only append; the key index is built at the
/// first `Modified` or `Deleted` (rare during initial events), which then update or remove.
pub(crate) struct InitialEvents<T> {
    items: Vec<Arc<T>>,
    index: Option<HashMap<ObjectKey, usize>>,
}

impl<T> InitialEvents<T> {
    pub(super) fn new() -> Self {
        Self {
            items: Vec::new(),
            index: None,
        }
    }

    fn index<M: Meta<T>>(&mut self) -> &mut HashMap<ObjectKey, usize> {
        let items = &self.items;
        self.index.get_or_insert_with(|| {
            items
                .iter()
                .enumerate()
                .filter_map(|(i, o)| M::key(o).ok().map(|k| (k, i)))
                .collect()
        })
    }

    /// Adds or replaces the object (an `Added` or `Modified` event).
    fn upsert<M: Meta<T>>(&mut self, obj: Arc<T>, modified: bool) {
        if self.index.is_none() && !modified {
            self.items.push(obj);
            return;
        }
        let Ok(key) = M::key(&obj) else { return };
        let len = self.items.len();
        match self.index::<M>().get(&key).copied() {
            Some(i) => self.items[i] = obj,
            None => {
                self.index::<M>().insert(key, len);
                self.items.push(obj);
            }
        }
    }

    /// Removes the object with `obj`'s key, if held (a `Deleted` event).
    fn delete<M: Meta<T>>(&mut self, obj: &T) {
        let Ok(key) = M::key(obj) else { return };
        let Some(i) = self.index::<M>().remove(&key) else {
            return;
        };
        self.items.swap_remove(i);
        if let Some(moved) = self.items.get(i).and_then(|o| M::key(o).ok()) {
            self.index::<M>().insert(moved, i);
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
                self.phase = Phase::Replacing {
                    rv: b.resource_version.clone(),
                    from_stream: true,
                };
                return cmd(Command::Store(StoreCall::Replace(
                    items.items,
                    b.resource_version,
                )));
            }
            Input::Event(ev) => {
                self.watch_events += 1;
                // client-go applies every initial event to its temporary store; only the end
                // bookmark's version is recorded (at the replace).
                let report = match ev {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)
                        if self.key_error(&o).is_some() =>
                    {
                        // Skipped and reported, as in a watch.
                        self.key_error(&o)
                            .map(|k| ReflectorError::BadInput(BadInput::ObjectKey(k)))
                    }
                    WatchEvent::Added(o) => {
                        items.upsert::<M>(o, false);
                        None
                    }
                    WatchEvent::Modified(o) => {
                        items.upsert::<M>(o, true);
                        None
                    }
                    WatchEvent::Deleted(o) => {
                        items.delete::<M>(&o);
                        None
                    }
                    WatchEvent::Bookmark(_) => None,
                };
                if items.items.len() > self.config.limits.max_objects {
                    let bad = BadInput::ListTooLong {
                        pages: 0,
                        objects: items.items.len(),
                    };
                    drop(items);
                    return self.fail_cycle(ReflectorError::BadInput(bad), now);
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
}
