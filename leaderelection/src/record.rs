//! [`LeaderElectionRecord`]: what a lock stores.

use kcache_core::ResourceVersion;
use std::time::{Duration, SystemTime};

/// The state of an election as a lock stores it: who holds the lease, for how long, since when.
///
/// client-go's `LeaderElectionRecord`. The timestamps are wall-clock times written by the holder's
/// clock and are informational: an elector never compares them with its own clock (clocks of two
/// machines disagree). It judges a lease expired by how long *it* has seen the record unchanged
/// (see [`LeaderElector`](crate::LeaderElector)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionRecord {
    /// The identity of the holder; empty when the lease was released.
    pub holder_identity: String,
    /// How long other candidates wait, after they last saw the record change, before they may
    /// take the lease over.
    pub lease_duration: Duration,
    /// When the holder acquired the lease (kept across its renewals).
    pub acquire_time: SystemTime,
    /// When the holder last renewed it.
    pub renew_time: SystemTime,
    /// How many times the lease changed hands.
    pub leader_transitions: u32,
}

impl LeaderElectionRecord {
    /// Whether the record names no holder (a released lease): any candidate may take it at once.
    pub fn is_released(&self) -> bool {
        self.holder_identity.is_empty()
    }
}

/// A record as read from a lock, with the version a conditional update must name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedRecord {
    /// The record.
    pub record: LeaderElectionRecord,
    /// The lock's version of it (etcd's `mod_revision`, a Lease's `resourceVersion`, …). Every
    /// successful write changes it.
    pub version: ResourceVersion,
}
