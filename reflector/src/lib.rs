//! The reflector: keeps a store in step with a source through list and watch.

mod backoff;
mod builder;
mod error;
mod fault;
mod handle;
mod list_watcher;
mod machine;
mod reflector;
mod sync;

pub use backoff::BackoffConfig;
pub use builder::{ReflectorBuilder, DEFAULT_MIN_WATCH_TIMEOUT, DEFAULT_PAGE_SIZE};
pub use error::{BadInput, ReflectorError, StoreOperation};
pub use fault::{
    FaultError, FaultHandle, FaultInjector, FaultPlan, FaultSite, FaultStats, InjectedFault,
};
pub use handle::ReflectorHandle;
pub use list_watcher::{
    BackendError, Bookmark, ErrorKind, ListOptions, ListPage, ListWatcher, ResourceVersionMatch,
    WatchEvent, WatchOptions, WatchStream,
};
pub use reflector::Reflector;
