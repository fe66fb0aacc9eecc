//! The source's side of the list/watch protocol: resource-version rules, continue tokens, and
//! opening watches at a consistent point.

use crate::history::parse_rv;
use crate::watch::{Slot, Watch};
use crate::{MemoryError, MemorySource};
use kcache_core::{ObjectKey, ResourceVersion};
use kcache_reflector::{
    Bookmark, ListOptions, ListPage, ListWatcher, ResourceVersionMatch, WatchEvent, WatchOptions,
    WatchStream,
};
use std::collections::VecDeque;
use std::future::Future;

impl<T, M> MemorySource<T, M>
where
    T: Send + Sync + 'static,
{
    /// Serves one list page (see the crate docs for the rules).
    pub(crate) fn list_page(&self, opts: &ListOptions) -> Result<ListPage<T>, MemoryError> {
        let shared = self.shared();
        let requested = opts.limit.filter(|&n| n > 0).map(|n| n as usize);
        let limit = match (requested, shared.config.page_size_limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let inner = shared.state.lock();
        let history = &inner.history;
        let token = opts.continue_token.as_deref().filter(|t| !t.is_empty());
        let (rv, after) = match token {
            Some(token) => {
                let (rv, key) = decode_token(token)?;
                (rv, Some(key))
            }
            None => {
                let rv = match (
                    parse_rv(&opts.resource_version)?,
                    opts.resource_version_match,
                ) {
                    (None | Some(0), _) => history.rv(),
                    (Some(rv), Some(ResourceVersionMatch::Exact)) => rv,
                    (Some(rv), _) => {
                        if rv > history.rv() {
                            history.check(rv)?;
                        }
                        history.rv()
                    }
                };
                (rv, None)
            }
        };
        let (items, more) = history.page_at(rv, after.as_ref(), limit)?;
        Ok(ListPage {
            items,
            resource_version: rv.into(),
            continue_token: more.map(|key| encode_token(rv, &key)),
        })
    }

    /// Opens a watch: decides its first events and registers its slot under one lock, so no
    /// write is missed or seen twice.
    pub(crate) fn open_watch(
        &self,
        opts: &WatchOptions,
    ) -> Result<WatchStream<T, MemoryError>, MemoryError> {
        let shared = self.shared().clone();
        let config = &shared.config;
        let mut inner = shared.state.lock();
        let current = inner.history.rv();
        let mut replay = VecDeque::new();
        match parse_rv(&opts.resource_version)? {
            Some(rv) if rv != 0 && !opts.send_initial_events => {
                replay.extend(inner.history.changes_after(rv)?.map(|c| c.event()));
            }
            requested => {
                if let Some(rv) = requested.filter(|&rv| rv > current) {
                    inner.history.check(rv)?;
                }
                replay.extend(
                    inner
                        .history
                        .objects()
                        .map(|o| WatchEvent::Added(o.clone())),
                );
                if opts.send_initial_events {
                    replay.push_back(WatchEvent::Bookmark(Bookmark {
                        resource_version: current.into(),
                        initial_events_end: true,
                    }));
                }
            }
        }
        let slot = crate::sync::Arc::new(Slot::new(config.watcher_buffer, current));
        let id = inner.add_watcher(slot.clone());
        drop(inner);
        let interval = config.bookmark_interval;
        let bookmarks = (opts.allow_bookmarks && !interval.is_zero()).then_some(interval);
        let watch = Watch::new(shared.clone(), id, slot, replay, opts.timeout, bookmarks);
        Ok(Box::pin(watch))
    }
}

/// A continue token: the list's version and the last key served, `"<rv>:<key>"`.
fn encode_token(rv: u64, last: &ObjectKey) -> String {
    format!("{rv}:{last}")
}

fn decode_token(token: &str) -> Result<(u64, ObjectKey), MemoryError> {
    let bad = || MemoryError::InvalidContinueToken(token.to_owned());
    let (rv, key) = token.split_once(':').ok_or_else(bad)?;
    let rv = rv.parse::<u64>().map_err(|_| bad())?;
    let key = ObjectKey::new(key).map_err(|_| bad())?;
    Ok((rv, key))
}

impl<T, M> ListWatcher<T> for MemorySource<T, M>
where
    T: Send + Sync + 'static,
    M: 'static,
{
    type Error = MemoryError;

    fn list(
        &self,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<ListPage<T>, Self::Error>> + Send {
        let source = self.clone();
        let opts = opts.clone();
        async move { source.list_page(&opts) }
    }

    fn watch(
        &self,
        opts: &WatchOptions,
    ) -> impl Future<Output = Result<WatchStream<T, Self::Error>, Self::Error>> + Send {
        let source = self.clone();
        let opts = opts.clone();
        async move { source.open_watch(&opts) }
    }

    /// The source's head: the version of its last write ([`MemorySource::resource_version`]).
    fn current_resource_version(
        &self,
    ) -> impl Future<Output = Result<Option<ResourceVersion>, Self::Error>> + Send {
        std::future::ready(Ok(Some(self.resource_version())))
    }

    /// Yes: a watch with `send_initial_events` streams a consistent snapshot, then the end
    /// bookmark, then the changes after it.
    fn supports_watch_list(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_foreign_text() {
        let key = ObjectKey::namespaced("ns", "a:b").unwrap_or_else(|e| panic!("{e}"));
        let token = encode_token(42, &key);
        assert_eq!(decode_token(&token), Ok((42, key)));
        for bad in ["", "42", "x:ns/a", "42:a/b/c", "42:"] {
            assert_eq!(
                decode_token(bad),
                Err(MemoryError::InvalidContinueToken(bad.into()))
            );
        }
    }
}
