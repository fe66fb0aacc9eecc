//! The streaming-list half of the machine (watch-list): collect `Added` events until the
//! end-of-initial-events bookmark, then one replace; fall back to a list on errors.

use super::{cmd, After, Command, Input, Machine, Out, Output, Phase, StoreCall};
use crate::error::{BadInput, ReflectorError};
use crate::list_watcher::{BackendError, ErrorKind, WatchEvent};
use kcache_core::{Meta, ResourceVersion};
use std::sync::Arc;
use std::time::Instant;

impl<T, M: Meta<T>> Machine<T, M> {
    pub(super) fn on_stream_input<E: BackendError, SE>(
        &mut self,
        requested: ResourceVersion,
        mut items: Vec<Arc<T>>,
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
            Input::Event(WatchEvent::Added(o)) => {
                let report = self
                    .key_error(&o)
                    .map(|k| ReflectorError::BadInput(BadInput::ObjectKey(k)));
                // An object whose key cannot be read is skipped and reported, as in a watch.
                if report.is_none() {
                    items.push(o);
                }
                if items.len() > self.config.limits.max_objects {
                    let bad = BadInput::ListTooLong {
                        pages: 0,
                        objects: items.len(),
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
            Input::Event(WatchEvent::Modified(_)) => {
                let bad = BadInput::UnexpectedEventDuringInitialEvents { event: "Modified" };
                return self.start_list(Some(ReflectorError::BadInput(bad)));
            }
            Input::Event(WatchEvent::Deleted(_)) => {
                let bad = BadInput::UnexpectedEventDuringInitialEvents { event: "Deleted" };
                return self.start_list(Some(ReflectorError::BadInput(bad)));
            }
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
                    items,
                    b.resource_version,
                )));
            }
            Input::Event(WatchEvent::Bookmark(_)) => {
                self.phase = Phase::Streaming { requested, items };
                return cmd(Command::ReadWatch { resync_at: None });
            }
            Input::WatchClosed => {
                return self.start_list(Some(ReflectorError::InitialEventsIncomplete))
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
