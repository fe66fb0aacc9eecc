//! Membership of a sharded controller: one lease-like record per replica under a shared place,
//! and the [`MemberStore`] trait for where they live.
//!
//! Leader election keeps one record that replicas compete for; sharding keeps one record *per
//! replica*, each renewed by its holder only, and every replica lists them all to learn who is
//! alive. Besides the lease fields (holder, renew time, duration), a record carries the
//! replica's *adopted view*: the member set whose share of the keys this replica currently
//! claims. A replica publishes a view without a key only after it stopped taking that key and
//! its in-flight reconcile of it finished, which is the handshake `kcache-controller`'s sharding
//! builds its never-two-owners guarantee on.

mod in_process;

pub use in_process::InProcessMembers;

use crate::lock::LockError;
use kcache_core::ResourceVersion;
use std::future::Future;
use std::time::{Duration, SystemTime};

/// One replica's record: a lease it renews, and the view of the membership it has adopted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRecord {
    /// The replica's identity (unique per process); also the record's name in its store.
    pub holder_identity: String,
    /// How long others wait, after they last saw the record change, before they treat the
    /// replica as gone.
    pub lease_duration: Duration,
    /// When the holder last renewed (wall clock, informational: expiry is judged by how long a
    /// reader has seen the record unchanged, on the reader's own clock).
    pub renew_time: SystemTime,
    /// The members whose consistent-hash share this replica claims: it takes only keys it owns
    /// under this view, and has no reconcile in flight of any other key. Empty while it claims
    /// nothing (just joined, resumed after losing its lease, or leaving).
    pub view: Vec<String>,
    /// Bumped by the holder each time it publishes a new view (for logs and tests).
    pub view_generation: u64,
}

/// A record as listed, with the version a conditional write must name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedMember {
    /// The record.
    pub record: MemberRecord,
    /// The store's version of it (etcd `mod_revision`, a Lease's `resourceVersion`, …); every
    /// write changes it.
    pub version: ResourceVersion,
}

/// Where the member records of one sharded controller live: a key prefix in etcd
/// (`kcache-etcd`'s `EtcdMembers`), labelled `coordination.k8s.io/v1` Leases (`kcache-kube`'s
/// `LeaseMembers`), or memory ([`InProcessMembers`]).
///
/// Writes are compare-and-swap on the record's version, as [`Lock`](crate::Lock)'s, and
/// [`list`](Self::list) must be a linearizable read (a quorum read in etcd, not a watch cache):
/// the handshake relies on a replica that wrote its record and then lists seeing every write
/// that finished before its list began.
pub trait MemberStore: Send + Sync + 'static {
    /// Every record in the group, in no particular order.
    fn list(&self) -> impl Future<Output = Result<Vec<VersionedMember>, LockError>> + Send;

    /// Creates the record of `record.holder_identity`; [`LockError::AlreadyExists`] if there is
    /// one. Returns its version.
    fn create(
        &self,
        record: &MemberRecord,
    ) -> impl Future<Output = Result<ResourceVersion, LockError>> + Send;

    /// Replaces the record of `record.holder_identity` if its version is still `version`
    /// ([`LockError::Conflict`] if not, [`LockError::NotFound`] if it is gone).
    fn update(
        &self,
        version: &ResourceVersion,
        record: &MemberRecord,
    ) -> impl Future<Output = Result<ResourceVersion, LockError>> + Send;

    /// Deletes the record of `identity` if its version is still `version` (a graceful leave).
    /// Deleting a record that is already gone succeeds.
    fn delete(
        &self,
        identity: &str,
        version: &ResourceVersion,
    ) -> impl Future<Output = Result<(), LockError>> + Send;

    /// Where the records live, for logs (`"etcd prefix /shards/demo/"`).
    fn describe(&self) -> String;
}
