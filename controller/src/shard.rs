//! Active-active sharding: every replica reconciles its own share of the keys, and a key is
//! never reconciled by two replicas at once, also while keys move between them.
//!
//! - Membership: each replica renews a lease-like [`MemberRecord`](kcache_leaderelection::MemberRecord)
//!   in a shared [`MemberStore`](kcache_leaderelection::MemberStore) (etcd: `kcache-etcd`'s
//!   `EtcdMembers`; Kubernetes Leases: `kcache-kube`'s `LeaseMembers`; in-process:
//!   [`InProcessMembers`](kcache_leaderelection::InProcessMembers)). A record is live while its
//!   reader has seen it change within its lease duration; every replica computes the live set
//!   the same way.
//! - Assignment: a consistent [`HashRing`] with virtual nodes over the live members, keys
//!   placed by their FNV-1a 64-bit hash (mixed); a join or a leave moves about 1/N of the keys.
//! - Handover: a record also carries the *view* (member set) whose share its replica claims;
//!   a replica withdraws a key from its view only after it stopped taking the key and its
//!   in-flight reconcile finished, and starts a key only when no other live record claims it
//!   ([`ShardTable`]). A dead replica's keys move once its lease expired.
//! - Controller: [`ControllerBuilder::shard`](crate::ControllerBuilder::shard) makes the workers
//!   ask the [`ShardGate`] before each reconcile. Keys of owned objects are mapped to their
//!   owner's key (`owns`) before the check, so a child goes to the replica of its owner.
//! - Metrics: [`ShardGate::stats`]; with the feature `prometheus`, `PrometheusShardMetrics`
//!   exports them to a `prometheus-client` registry (`shard_owned_ranges`,
//!   `shard_keys_skipped_not_owned_total`, `shard_rebalances_total`, …).
//! - Not (yet) pushed down to the source: every replica's informers cache every object, and
//!   the workers skip the keys they do not own. The ring places keys by a mixed FNV-1a hash of
//!   the key, so its ranges are not KEP-5866's `shardRange` over `metadata.uid` either.
//!
//! # Timing
//! - A dead replica's keys move at its lease expiry as the others see it: at most a lease
//!   duration plus a retry period after its last renewal (the others list every retry period,
//!   so they may see that renewal up to one period late; [`Shard::run`] ticks at the expiry
//!   itself). The reconcile of a moved key comes on top.
//! - A graceful leave ([`Shard::leave`]) hands the keys over at the others' next tick.
//! - One rebalance waits for its slowest drain: a replica publishes its new view only once no
//!   key the new view takes away from it is in flight, and that one view is also how it claims
//!   the keys it gains. So a single long reconcile of a key that moves away delays this
//!   replica's whole side of the rebalance, gained keys included (keys that keep their owner
//!   are processed throughout). A record that could list its draining keys beside the view would
//!   let the rest move at once; the records do not carry that.

mod ring;
mod table;

#[cfg(not(kcache_loom))]
mod gate;
#[cfg(not(kcache_loom))]
mod member;
#[cfg(all(feature = "prometheus", not(kcache_loom)))]
mod prometheus;

#[cfg(not(kcache_loom))]
pub use gate::{ShardClaim, ShardGate, ShardStats};
#[cfg(not(kcache_loom))]
pub use member::{Shard, ShardConfig, ShardConfigError};
#[cfg(all(feature = "prometheus", not(kcache_loom)))]
pub use prometheus::PrometheusShardMetrics;
pub use ring::{fnv1a_64, key_position, HashRing, ShardRange, DEFAULT_VNODES};
pub use table::{ShardTable, Start};
