//! The informer's error types.

use kcache_core::ResourceVersion;
use kcache_indexer::AddIndexersError;

/// Why an informer operation was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InformerError {
    /// `run` was called a second time, or a setting that only applies before the start
    /// (`set_transform`, `set_watch_error_handler`) was changed after it (client-go's
    /// "informer has already started").
    #[error("the informer has already started")]
    AlreadyStarted,
    /// The informer has stopped: it takes no more handlers or indexes and cannot run again.
    #[error("the informer has stopped")]
    Stopped,
    /// The new indexes conflict with installed ones or fail on a cached object; none was added.
    #[error("cannot add the indexers")]
    Indexers(#[from] AddIndexersError),
    /// The reflector settings of the informer's options make no sense; the informer did not
    /// start and is stopped.
    #[cfg(not(kcache_loom))]
    #[error("invalid reflector settings")]
    Config(#[from] kcache_reflector::ConfigError),
    /// A panic (from user code outside handlers, transforms and index functions, say a
    /// `ListWatcher`) ended `run`; the informer is stopped. The text is the panic's message.
    #[error("the informer's run panicked: {0}")]
    Panicked(String),
    /// The handler's delivery thread could not be started.
    #[error("cannot start the handler's delivery thread")]
    Spawn(#[source] std::io::Error),
}

/// Why [`SharedIndexInformer::replace_all`](crate::SharedIndexInformer::replace_all) was
/// refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplaceAllError {
    /// An object has no key; nothing was changed.
    #[error("cannot compute an object's key")]
    Key(#[from] kcache_core::KeyError),
    /// The informer has stopped.
    #[error("the informer has stopped")]
    Stopped,
}

/// Why waiting for a handler to stop was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WaitError {
    /// Called from the handler's own delivery thread, where it would wait for itself forever.
    #[error("cannot wait for a handler to stop from inside that handler")]
    FromHandler,
}

/// Why [`wait_for_resource_version`](crate::SharedIndexInformer::wait_for_resource_version)
/// gave up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResourceVersionError {
    /// The resource version is not a decimal integer, so it cannot be ordered; use
    /// [`wait_for_resource_version_by`](crate::SharedIndexInformer::wait_for_resource_version_by)
    /// with the backend's own comparison.
    #[error("resource version {0:?} is not numeric: pass the backend's comparison instead")]
    NotNumeric(ResourceVersion),
    /// The informer stopped before its cache reached the version.
    #[error("the informer stopped before its cache reached the resource version")]
    Stopped,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_error<E: std::error::Error + Send + Sync + 'static>() {}

    #[test]
    fn every_public_error_is_send_sync_static() {
        assert_error::<InformerError>();
        assert_error::<WaitError>();
        assert_error::<ResourceVersionError>();
    }
}
