//! [`EtcdMembers`]: the member records of a sharded controller under one etcd key prefix.

use crate::error::classify;
use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp, TxnOpResponse};
use kcache_core::ResourceVersion;
use kcache_leaderelection::{LockError, MemberRecord, MemberStore, VersionedMember};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A [`MemberStore`] on etcd: each replica's record as JSON under `prefix + identity`, every
/// write a transaction conditional on the key's `mod_revision` (as [`EtcdLock`](crate::EtcdLock)),
/// `list` a linearizable range read of the prefix.
///
/// # Record format
/// `{"holderIdentity": "...", "leaseDurationMillis": 15000, "renewTimeMicros": ...,
/// "view": ["a", "b"], "viewGeneration": 3}`.
///
/// # Examples
/// ```no_run
/// use kcache_etcd::EtcdMembers;
/// use kcache_leaderelection::MemberStore;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = etcd_client::Client::connect(["http://127.0.0.1:2379"], None).await?;
/// let members = EtcdMembers::new(client, "/shards/replicasets/");
/// println!("{} members", members.list().await?.len());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct EtcdMembers {
    client: Client,
    prefix: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    holder_identity: String,
    lease_duration_millis: u64,
    renew_time_micros: u64,
    view: Vec<String>,
    view_generation: u64,
}

fn encode(record: &MemberRecord) -> Result<Vec<u8>, LockError> {
    let wire = Wire {
        holder_identity: record.holder_identity.clone(),
        lease_duration_millis: u64::try_from(record.lease_duration.as_millis()).unwrap_or(u64::MAX),
        renew_time_micros: record
            .renew_time
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
            .unwrap_or(0),
        view: record.view.clone(),
        view_generation: record.view_generation,
    };
    serde_json::to_vec(&wire).map_err(|e| LockError::Malformed(e.to_string()))
}

fn decode(value: &[u8]) -> Result<MemberRecord, LockError> {
    let wire: Wire =
        serde_json::from_slice(value).map_err(|e| LockError::Malformed(e.to_string()))?;
    Ok(MemberRecord {
        holder_identity: wire.holder_identity,
        lease_duration: Duration::from_millis(wire.lease_duration_millis),
        renew_time: UNIX_EPOCH
            .checked_add(Duration::from_micros(wire.renew_time_micros))
            .unwrap_or(SystemTime::UNIX_EPOCH),
        view: wire.view,
        view_generation: wire.view_generation,
    })
}

fn request_error(e: etcd_client::Error) -> LockError {
    LockError::backend(classify(e, 0))
}

fn revision(version: &ResourceVersion) -> Result<i64, LockError> {
    version
        .as_str()
        .parse()
        .map_err(|_| LockError::Malformed(format!("not an etcd revision: {version:?}")))
}

impl EtcdMembers {
    /// The records under `prefix` (end it with `/`: a record's key is `prefix + identity`).
    pub fn new(client: Client, prefix: impl Into<String>) -> Self {
        Self {
            client,
            prefix: prefix.into(),
        }
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn key(&self, identity: &str) -> Result<String, LockError> {
        if identity.is_empty() || identity.contains('/') {
            return Err(LockError::Malformed(format!(
                "a member identity must be non-empty and without '/': {identity:?}"
            )));
        }
        Ok(format!("{}{identity}", self.prefix))
    }

    /// Runs `txn`: the new revision if it succeeded, else whether the key exists.
    async fn run(&self, txn: Txn) -> Result<Result<i64, bool>, LockError> {
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

impl MemberStore for EtcdMembers {
    async fn list(&self) -> Result<Vec<VersionedMember>, LockError> {
        let resp = self
            .client
            .kv_client()
            .get(self.prefix.as_str(), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(request_error)?;
        resp.kvs()
            .iter()
            .map(|kv| {
                Ok(VersionedMember {
                    record: decode(kv.value())?,
                    version: ResourceVersion::from(kv.mod_revision().to_string()),
                })
            })
            .collect()
    }

    async fn create(&self, record: &MemberRecord) -> Result<ResourceVersion, LockError> {
        let key = self.key(&record.holder_identity)?;
        let txn = Txn::new()
            .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.as_str(), encode(record)?, None)]);
        match self.run(txn).await? {
            Ok(rev) => Ok(ResourceVersion::from(rev.to_string())),
            Err(_) => Err(LockError::AlreadyExists),
        }
    }

    async fn update(
        &self,
        version: &ResourceVersion,
        record: &MemberRecord,
    ) -> Result<ResourceVersion, LockError> {
        let key = self.key(&record.holder_identity)?;
        let txn = Txn::new()
            .when([Compare::mod_revision(
                key.as_str(),
                CompareOp::Equal,
                revision(version)?,
            )])
            .and_then([TxnOp::put(key.as_str(), encode(record)?, None)])
            .or_else([TxnOp::get(key.as_str(), None)]);
        match self.run(txn).await? {
            Ok(rev) => Ok(ResourceVersion::from(rev.to_string())),
            Err(true) => Err(LockError::Conflict),
            Err(false) => Err(LockError::NotFound),
        }
    }

    async fn delete(&self, identity: &str, version: &ResourceVersion) -> Result<(), LockError> {
        let key = self.key(identity)?;
        let txn = Txn::new()
            .when([Compare::mod_revision(
                key.as_str(),
                CompareOp::Equal,
                revision(version)?,
            )])
            .and_then([TxnOp::delete(key.as_str(), None)])
            .or_else([TxnOp::get(key.as_str(), None)]);
        match self.run(txn).await? {
            Ok(_) | Err(false) => Ok(()),
            Err(true) => Err(LockError::Conflict),
        }
    }

    fn describe(&self) -> String {
        format!("etcd prefix {}", self.prefix)
    }
}

impl fmt::Debug for EtcdMembers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdMembers")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_records_round_trip_through_the_wire_format() {
        let record = MemberRecord {
            holder_identity: "replica-a".into(),
            lease_duration: Duration::from_millis(3000),
            renew_time: UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456),
            view: vec!["replica-a".into(), "replica-b".into()],
            view_generation: 7,
        };
        assert_eq!(decode(&encode(&record).unwrap()).unwrap(), record);
        assert!(matches!(decode(b"{}"), Err(LockError::Malformed(_))));
    }
}
