//! [`EtcdLock`]: a leader election lock on one etcd key, with compare-and-swap on `mod_revision`.

use crate::error::classify;
use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp, TxnOpResponse};
use kcache_core::ResourceVersion;
use kcache_leaderelection::{LeaderElectionRecord, Lock, LockError, VersionedRecord};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A [`Lock`] for `kcache-leaderelection` on one etcd key: the election record as JSON under the
/// key, every write a transaction conditional on the key's `mod_revision`.
///
/// # Why compare-and-swap on `mod_revision`, not an etcd lease
/// etcd has its own leases (a TTL on the server, kept alive by the holder), and a lock could be a
/// key attached to one. We chose a plain record with compare-and-swap, the model of client-go's
/// resource locks, because the guarantee that matters — two electors never both believe they
/// lead, for longer than the clock-rate margin `lease_duration - renew_deadline` — then rests only
/// on what each elector measures on its own monotonic clock:
///
/// - the holder ends its term `renew_deadline` after its last successful renewal was *sent*;
/// - a candidate takes over only after it has seen the same `mod_revision` for `lease_duration`
///   on its own clock, and its write names that revision, so it fails if the holder renewed
///   meanwhile.
///
/// With an etcd lease, expiry is decided by the etcd leader's clock, and the holder learns of it
/// late (a keep-alive answer) or not at all (a partition); etcd also extends every lease's TTL when
/// its own leader changes or restarts, so the holder's idea of the remaining time and the
/// server's drift apart exactly when things go wrong. The record keeps both sides' reasoning
/// local, works identically for a Kubernetes Lease, and survives an etcd restart: renewals fail
/// while etcd is down (the holder stops at its renew deadline), and candidates start counting again
/// from the first record they read after it is back.
///
/// # Record format
/// `{"holderIdentity": "...", "leaseDurationMillis": 15000, "acquireTimeMicros": ...,
/// "renewTimeMicros": ..., "leaderTransitions": 0}` (times in microseconds since the Unix epoch,
/// informational). The version is the key's `mod_revision`.
///
/// # Examples
/// ```no_run
/// use kcache_etcd::EtcdLock;
/// use kcache_leaderelection::{LeaderElectionConfig, LeaderElector};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = etcd_client::Client::connect(["http://127.0.0.1:2379"], None).await?;
/// let lock = EtcdLock::new(client, "/locks/replicaset-controller", "replica-a");
/// let elector = LeaderElector::new(lock, LeaderElectionConfig::new())?;
/// let status = elector.status();
/// tokio::spawn(async move { elector.run(std::future::pending()).await });
/// status.wait_for_leadership().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct EtcdLock {
    client: Client,
    key: String,
    identity: String,
}

/// The record as stored in etcd.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    holder_identity: String,
    lease_duration_millis: u64,
    acquire_time_micros: u64,
    renew_time_micros: u64,
    leader_transitions: u32,
}

fn micros(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn from_micros(m: u64) -> SystemTime {
    UNIX_EPOCH
        .checked_add(Duration::from_micros(m))
        .unwrap_or(UNIX_EPOCH)
}

fn encode(record: &LeaderElectionRecord) -> Result<Vec<u8>, LockError> {
    let wire = Wire {
        holder_identity: record.holder_identity.clone(),
        lease_duration_millis: u64::try_from(record.lease_duration.as_millis()).unwrap_or(u64::MAX),
        acquire_time_micros: micros(record.acquire_time),
        renew_time_micros: micros(record.renew_time),
        leader_transitions: record.leader_transitions,
    };
    serde_json::to_vec(&wire).map_err(|e| LockError::Malformed(e.to_string()))
}

fn decode(value: &[u8]) -> Result<LeaderElectionRecord, LockError> {
    let wire: Wire =
        serde_json::from_slice(value).map_err(|e| LockError::Malformed(e.to_string()))?;
    Ok(LeaderElectionRecord {
        holder_identity: wire.holder_identity,
        lease_duration: Duration::from_millis(wire.lease_duration_millis),
        acquire_time: from_micros(wire.acquire_time_micros),
        renew_time: from_micros(wire.renew_time_micros),
        leader_transitions: wire.leader_transitions,
    })
}

fn request_error(e: etcd_client::Error) -> LockError {
    LockError::backend(classify(e, 0))
}

impl EtcdLock {
    /// The candidate `identity`'s lock on `key`.
    pub fn new(client: Client, key: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            client,
            key: key.into(),
            identity: identity.into(),
        }
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Runs `txn`; the new revision if it succeeded, else the key's current state (from the
    /// `or_else` get).
    async fn conditional_put(&self, txn: Txn) -> Result<Result<i64, bool>, LockError> {
        let resp = self
            .client
            .kv_client()
            .txn(txn)
            .await
            .map_err(request_error)?;
        if resp.succeeded() {
            let rev = resp.header().map(|h| h.revision()).ok_or_else(|| {
                LockError::Malformed("etcd sent a response without a header".into())
            })?;
            return Ok(Ok(rev));
        }
        let exists = resp.op_responses().iter().any(|op| match op {
            TxnOpResponse::Get(g) => !g.kvs().is_empty(),
            _ => false,
        });
        Ok(Err(exists))
    }
}

impl Lock for EtcdLock {
    async fn get(&self) -> Result<Option<VersionedRecord>, LockError> {
        let resp = self
            .client
            .kv_client()
            .get(self.key.as_str(), None)
            .await
            .map_err(request_error)?;
        let Some(kv) = resp.kvs().first() else {
            return Ok(None);
        };
        Ok(Some(VersionedRecord {
            record: decode(kv.value())?,
            version: ResourceVersion::from(kv.mod_revision().to_string()),
        }))
    }

    async fn create(&self, record: &LeaderElectionRecord) -> Result<ResourceVersion, LockError> {
        let value = encode(record)?;
        let txn = Txn::new()
            .when([Compare::create_revision(
                self.key.as_str(),
                CompareOp::Equal,
                0,
            )])
            .and_then([TxnOp::put(self.key.as_str(), value, None)]);
        match self.conditional_put(txn).await? {
            Ok(rev) => Ok(ResourceVersion::from(rev.to_string())),
            Err(_) => Err(LockError::AlreadyExists),
        }
    }

    async fn update(
        &self,
        version: &ResourceVersion,
        record: &LeaderElectionRecord,
    ) -> Result<ResourceVersion, LockError> {
        let rev: i64 = version
            .as_str()
            .parse()
            .map_err(|_| LockError::Malformed(format!("not an etcd revision: {version:?}")))?;
        let value = encode(record)?;
        let txn = Txn::new()
            .when([Compare::mod_revision(
                self.key.as_str(),
                CompareOp::Equal,
                rev,
            )])
            .and_then([TxnOp::put(self.key.as_str(), value, None)])
            .or_else([TxnOp::get(self.key.as_str(), None)]);
        match self.conditional_put(txn).await? {
            Ok(rev) => Ok(ResourceVersion::from(rev.to_string())),
            Err(true) => Err(LockError::Conflict),
            Err(false) => Err(LockError::NotFound),
        }
    }

    fn identity(&self) -> &str {
        &self.identity
    }

    fn describe(&self) -> String {
        format!("etcd key {}", self.key)
    }
}

impl fmt::Debug for EtcdLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdLock")
            .field("key", &self.key)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_the_wire_format() {
        let t = UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456);
        let record = LeaderElectionRecord {
            holder_identity: "a".into(),
            lease_duration: Duration::from_millis(2500),
            acquire_time: t,
            renew_time: t + Duration::from_secs(2),
            leader_transitions: 3,
        };
        let bytes = encode(&record).expect("encodes");
        assert_eq!(decode(&bytes).expect("decodes"), record);
    }

    #[test]
    fn a_malformed_record_is_a_typed_error() {
        assert!(matches!(
            decode(b"{\"holder\":1}"),
            Err(LockError::Malformed(_))
        ));
        assert!(matches!(decode(b"\xff"), Err(LockError::Malformed(_))));
    }
}
