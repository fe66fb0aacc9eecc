//! The reflector: keeps a store in step with a source through list and watch (being written).

mod list_watcher;

pub use list_watcher::{
    BackendError, Bookmark, ErrorKind, ListOptions, ListPage, ListWatcher, ResourceVersionMatch,
    WatchEvent, WatchOptions, WatchStream,
};
