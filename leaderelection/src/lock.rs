//! The [`Lock`] trait: where an election's record lives.

use crate::record::{LeaderElectionRecord, VersionedRecord};
use kcache_core::ResourceVersion;
use std::error::Error as StdError;
use std::future::Future;

/// Why a lock operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// `update` named a version that is no longer current: someone else wrote the record since it
    /// was read. The elector reads it again.
    #[error("the lock record was changed by someone else since it was read")]
    Conflict,
    /// `create` found a record already there.
    #[error("the lock record already exists")]
    AlreadyExists,
    /// `update` found no record (it was deleted since it was read).
    #[error("the lock record does not exist")]
    NotFound,
    /// The stored record cannot be read as a [`LeaderElectionRecord`].
    #[error("malformed lock record: {0}")]
    Malformed(String),
    /// The store failed or could not be reached.
    #[error("lock backend error")]
    Backend(#[source] Box<dyn StdError + Send + Sync + 'static>),
}

impl LockError {
    /// Wraps a backend's error.
    pub fn backend(error: impl StdError + Send + Sync + 'static) -> Self {
        Self::Backend(Box::new(error))
    }
}

/// A place to keep a [`LeaderElectionRecord`] with optimistic concurrency: client-go's
/// `resourcelock.Interface`.
///
/// Every write names the version it replaces and fails with [`LockError::Conflict`] if the record
/// changed meanwhile; this compare-and-swap is what keeps two candidates from both acquiring the
/// lease. Implementations: [`InProcessLock`](crate::InProcessLock) here, an etcd key in
/// `kcache-etcd` (`EtcdLock`), a `coordination.k8s.io/v1` Lease in `kcache-kube` (`LeaseLock`).
///
/// A lock also carries the identity of the candidate using it (each candidate has its own lock
/// value pointing at the shared record), as client-go's does.
pub trait Lock: Send + Sync + 'static {
    /// Reads the record: `None` if there is none yet.
    fn get(&self) -> impl Future<Output = Result<Option<VersionedRecord>, LockError>> + Send;

    /// Creates the record; [`LockError::AlreadyExists`] if there is one. Returns its version.
    fn create(
        &self,
        record: &LeaderElectionRecord,
    ) -> impl Future<Output = Result<ResourceVersion, LockError>> + Send;

    /// Replaces the record if its version is still `version`; [`LockError::Conflict`] if not,
    /// [`LockError::NotFound`] if it is gone. Returns the new version.
    fn update(
        &self,
        version: &ResourceVersion,
        record: &LeaderElectionRecord,
    ) -> impl Future<Output = Result<ResourceVersion, LockError>> + Send;

    /// The identity this candidate writes as holder (unique per process: a host name plus a
    /// random suffix, say).
    fn identity(&self) -> &str;

    /// Where the record lives, for logs (`"etcd key /locks/demo"`).
    fn describe(&self) -> String;
}
