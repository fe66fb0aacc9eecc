//! The reflector's errors: what its watch-error hook receives.

use kcache_core::KeyError;
use std::time::Duration;

/// A reflector setting that makes no sense, refused by
/// [`ReflectorBuilder::try_build`](crate::ReflectorBuilder::try_build) (and by an informer's
/// `run`).
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// [`BackoffConfig::factor`](crate::BackoffConfig::factor) is negative, NaN or infinite.
    #[error("backoff factor {0} is not a finite, non-negative number")]
    BackoffFactor(f64),
    /// [`BackoffConfig::jitter`](crate::BackoffConfig::jitter) is negative, NaN or infinite.
    #[error("backoff jitter {0} is not a finite, non-negative number")]
    BackoffJitter(f64),
}

/// Which store call failed (see [`ReflectorError::Store`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOperation {
    /// `ReflectorStore::add` (a watch `Added` event).
    Add,
    /// `ReflectorStore::update` (a watch `Modified` event).
    Update,
    /// `ReflectorStore::delete` (a watch `Deleted` event).
    Delete,
    /// `ReflectorStore::replace` (the end of a list or of a streaming list).
    Replace,
    /// `ReflectorStore::resync` (the resync timer).
    Resync,
    /// `ReflectorStore::bookmark` (a watch bookmark).
    Bookmark,
}

impl std::fmt::Display for StoreOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            Self::Add => "add",
            Self::Update => "update",
            Self::Delete => "delete",
            Self::Replace => "replace",
            Self::Resync => "resync",
            Self::Bookmark => "bookmark",
        };
        f.write_str(s)
    }
}

/// Data from a backend that breaks the list/watch protocol. The reflector reports it and relists
/// (or, during a streaming list, falls back to a normal list); it never panics on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadInput {
    /// An object whose key cannot be read through the reflector's `Meta` accessor.
    #[error("an object's key cannot be read")]
    ObjectKey(#[source] KeyError),
    /// A watch event whose object carries no resource version, from a source whose list had one
    /// (a source without versions at all is accepted: its events are applied, nothing recorded).
    #[error("a watch event's object has no resource version")]
    EventWithoutResourceVersion,
    /// A bookmark without a resource version.
    #[error("a bookmark has no resource version")]
    BookmarkWithoutResourceVersion,
    /// A list page without a resource version. No longer reported: such a list is accepted, as
    /// in client-go (the next watch starts from ""); kept so matches on it still compile.
    #[error("a list page has no resource version")]
    ListWithoutResourceVersion,
    /// A list went on past the reflector's bounds
    /// ([`max_list_pages`](crate::ReflectorBuilder::max_list_pages),
    /// [`max_list_objects`](crate::ReflectorBuilder::max_list_objects)): a source that returns a
    /// continue token on every page, or streams initial events without end. The list is
    /// abandoned; the reflector backs off and lists again.
    #[error("a list went on past the reflector's bounds ({pages} pages, {objects} objects)")]
    ListTooLong {
        /// Pages received when the list was abandoned.
        pages: u64,
        /// Objects received when the list was abandoned.
        objects: usize,
    },
    /// A `Modified` or `Deleted` event before the end bookmark of a streaming list. No longer
    /// reported: such events are applied to the streaming list's temporary store, as in
    /// client-go; kept so matches on it still compile.
    #[error("a {event} event arrived before the end of a streaming list's initial events")]
    UnexpectedEventDuringInitialEvents {
        /// `"Modified"` or `"Deleted"`.
        event: &'static str,
    },
}

/// An error the reflector met, handed to the watch-error hook. The reflector recovers from every
/// one of them by itself (re-watch, relist or fallback, after backoff where client-go backs off).
///
/// `E` is the backend's error ([`crate::ListWatcher::Error`]), `SE` the store's
/// ([`kcache_core::ReflectorStore::Error`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReflectorError<E, SE> {
    /// A list request failed.
    #[error("list failed")]
    List(#[source] E),
    /// A watch request failed before any event.
    #[error("watch could not be opened")]
    WatchOpen(#[source] E),
    /// An open watch ended with an error.
    #[error("watch ended with an error")]
    Watch(#[source] E),
    /// A store call failed. Failures of add/update/delete/bookmark are reported and the watch goes
    /// on (as in client-go); a failed replace or resync ends the cycle and the reflector relists,
    /// except a replace the store says it applied all the same
    /// ([`ReflectorStore::replace_applied`](kcache_core::ReflectorStore::replace_applied): it
    /// left out objects it cannot store): that is reported and the watch starts.
    #[error("store {operation} failed")]
    Store {
        /// The failed call.
        operation: StoreOperation,
        /// The store's error.
        #[source]
        source: SE,
    },
    /// The backend sent data that breaks the protocol.
    #[error("bad input from the backend")]
    BadInput(#[source] BadInput),
    /// A watch closed cleanly, without a single event, sooner than `within` after it was opened
    /// (client-go's `VeryShortWatchError`): the reflector backs off and relists instead of
    /// reconnecting in a hot loop.
    #[error("watch closed after less than {within:?} without any event")]
    VeryShortWatch {
        /// The threshold (one second).
        within: Duration,
    },
    /// `count` watches in a row closed cleanly sooner than `within` after they opened, each
    /// after at least one event (a misbehaving server or proxy): the reflector backs off before
    /// it re-watches, instead of re-watching at once as client-go does.
    #[error("{count} watches in a row closed within {within:?} of opening; backing off")]
    ShortWatches {
        /// The watches in the run.
        count: u32,
        /// The threshold (one second, or the minimum watch timeout if smaller).
        within: Duration,
    },
    /// A streaming list's watch closed cleanly before its end-of-initial-events bookmark; the
    /// reflector starts a new streaming list at once, as client-go does (a stream that closed
    /// within a second without any event is a [`VeryShortWatch`](Self::VeryShortWatch)
    /// instead, and a normal list follows).
    #[error("streaming list closed before the end of its initial events")]
    InitialEventsIncomplete,
}
