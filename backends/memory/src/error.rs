//! [`MemoryError`]: every way a call on the in-memory source can fail.

use kcache_core::{KeyError, ObjectKey, ResourceVersion};
use kcache_reflector::{BackendError, ErrorKind};

/// An error of the in-memory source: a rejected write, or a list/watch request it cannot serve.
///
/// Through [`BackendError::kind`] a reflector learns how to react: [`MemoryError::Expired`] and
/// [`MemoryError::Evicted`] are [`ErrorKind::Expired`] (relist), [`MemoryError::TooLargeResourceVersion`]
/// is [`ErrorKind::TooLargeResourceVersion`], everything else is [`ErrorKind::Other`]. The source
/// never fails transiently, so it never reports [`ErrorKind::Retry`] (wrap it in a fault injector to
/// test that path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// `create` of a key that already exists.
    #[error("object {key} already exists")]
    AlreadyExists {
        /// The key.
        key: ObjectKey,
    },
    /// `update` or `delete` of a key that does not exist.
    #[error("object {key} not found")]
    NotFound {
        /// The key.
        key: ObjectKey,
    },
    /// `update_if` / `delete_if` with a resource version that is not the stored object's.
    #[error("conflict on {key}: expected resource version {expected:?}, stored {stored:?}")]
    Conflict {
        /// The key.
        key: ObjectKey,
        /// The version the caller expected.
        expected: ResourceVersion,
        /// The version of the stored object.
        stored: ResourceVersion,
    },
    /// The object's (or the given) key cannot be read.
    #[error("bad object key")]
    Key(#[from] KeyError),
    /// A request names a resource version older than the history window keeps (HTTP 410 Gone):
    /// relist from the most recent state.
    #[error("resource version {requested:?} is too old: the oldest available is {oldest:?}")]
    Expired {
        /// The version asked for.
        requested: ResourceVersion,
        /// The oldest version the source can still serve.
        oldest: ResourceVersion,
    },
    /// A watcher fell so far behind that its buffer overflowed; the source ended its stream
    /// (like a Kubernetes watch cache evicting a slow watcher). Relist and watch again.
    #[error("watch evicted: the watcher fell more than {capacity} events behind")]
    Evicted {
        /// The watcher buffer's capacity.
        capacity: usize,
    },
    /// A request names a resource version newer than the source's current one.
    #[error("too large resource version: requested {requested:?}, current {current:?}")]
    TooLargeResourceVersion {
        /// The version asked for.
        requested: ResourceVersion,
        /// The source's current version.
        current: ResourceVersion,
    },
    /// A resource version that is not a decimal counter value.
    #[error("invalid resource version {0:?}: the in-memory source uses decimal numbers")]
    InvalidResourceVersion(ResourceVersion),
    /// A continue token this source did not issue.
    #[error("invalid continue token {0:?}")]
    InvalidContinueToken(String),
    /// The resource version counter reached `u64::MAX` (no further write is possible).
    #[error("resource versions exhausted")]
    ResourceVersionsExhausted,
}

impl BackendError for MemoryError {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Expired { .. } | Self::Evicted { .. } => ErrorKind::Expired,
            Self::TooLargeResourceVersion { .. } => ErrorKind::TooLargeResourceVersion,
            _ => ErrorKind::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_error<E: std::error::Error + Send + Sync + 'static>() {}

    #[test]
    fn memory_error_is_a_sendable_static_error() {
        assert_error::<MemoryError>();
    }

    #[test]
    fn errors_are_classified_for_the_reflector() {
        let rv = ResourceVersion::from;
        let expired = MemoryError::Expired {
            requested: rv("1"),
            oldest: rv("5"),
        };
        assert_eq!(expired.kind(), ErrorKind::Expired);
        assert_eq!(
            MemoryError::Evicted { capacity: 3 }.kind(),
            ErrorKind::Expired
        );
        let large = MemoryError::TooLargeResourceVersion {
            requested: rv("9"),
            current: rv("5"),
        };
        assert_eq!(large.kind(), ErrorKind::TooLargeResourceVersion);
        assert_eq!(
            MemoryError::InvalidResourceVersion(rv("x")).kind(),
            ErrorKind::Other
        );
        assert_eq!(
            MemoryError::Key(KeyError::MissingName).kind(),
            ErrorKind::Other
        );
    }
}
