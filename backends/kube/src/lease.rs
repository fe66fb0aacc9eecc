//! [`LeaseLock`]: a leader election lock on a `coordination.k8s.io/v1` Lease.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kcache_core::ResourceVersion;
use kcache_leaderelection::{LeaderElectionRecord, Lock, LockError, VersionedRecord};
use kube::api::PostParams;
use kube::{Api, Client};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A [`Lock`] for `kcache-leaderelection` on a Kubernetes Lease (`coordination.k8s.io/v1`),
/// client-go's `LeaseLock`: the record is the Lease's spec, and every write is a `replace` naming
/// the `resourceVersion` read, which the API server refuses with 409 Conflict if the Lease changed
/// meanwhile.
///
/// Field mapping: `holderIdentity`, `leaseDurationSeconds` (the duration rounded up to whole
/// seconds), `acquireTime`, `renewTime` (microsecond timestamps, informational: electors judge
/// expiry by their own clocks), `leaseTransitions`. A released lease has no holder.
///
/// # Examples
/// ```no_run
/// use kcache_kube::LeaseLock;
/// use kcache_leaderelection::{LeaderElectionConfig, LeaderElector};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kube::Client::try_default().await?;
/// let lock = LeaseLock::new(client, "kube-system", "my-controller", "pod-abc123");
/// let elector = LeaderElector::new(lock, LeaderElectionConfig::new())?;
/// let status = elector.status();
/// tokio::spawn(async move { elector.run(std::future::pending()).await });
/// status.wait_for_leadership().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaseLock {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
}

pub(crate) fn micro_time(t: SystemTime) -> Option<MicroTime> {
    let micros = t.duration_since(UNIX_EPOCH).ok()?.as_micros();
    Timestamp::from_microsecond(i64::try_from(micros).ok()?)
        .ok()
        .map(MicroTime)
}

pub(crate) fn system_time(t: Option<&MicroTime>) -> SystemTime {
    t.and_then(|t| u64::try_from(t.0.as_microsecond()).ok())
        .and_then(|m| UNIX_EPOCH.checked_add(Duration::from_micros(m)))
        .unwrap_or(UNIX_EPOCH)
}

/// The spec for `record` (client-go's `LeaderElectionRecordToLeaseSpec`).
fn spec(record: &LeaderElectionRecord) -> LeaseSpec {
    let secs =
        record.lease_duration.as_secs() + u64::from(record.lease_duration.subsec_nanos() > 0);
    LeaseSpec {
        holder_identity: Some(record.holder_identity.clone()),
        lease_duration_seconds: Some(i32::try_from(secs).unwrap_or(i32::MAX)),
        acquire_time: micro_time(record.acquire_time),
        renew_time: micro_time(record.renew_time),
        lease_transitions: Some(i32::try_from(record.leader_transitions).unwrap_or(i32::MAX)),
        ..LeaseSpec::default()
    }
}

/// The record in `lease` (client-go's `LeaseSpecToLeaderElectionRecord`).
fn record(lease: &Lease) -> Result<VersionedRecord, LockError> {
    let version = lease
        .metadata
        .resource_version
        .clone()
        .filter(|rv| !rv.is_empty())
        .ok_or_else(|| LockError::Malformed("the Lease has no resourceVersion".into()))?;
    let spec = lease.spec.clone().unwrap_or_default();
    let seconds = spec.lease_duration_seconds.unwrap_or(0);
    let transitions = spec.lease_transitions.unwrap_or(0);
    if seconds < 0 || transitions < 0 {
        return Err(LockError::Malformed(format!(
            "negative leaseDurationSeconds ({seconds}) or leaseTransitions ({transitions})"
        )));
    }
    Ok(VersionedRecord {
        record: LeaderElectionRecord {
            holder_identity: spec.holder_identity.unwrap_or_default(),
            lease_duration: Duration::from_secs(seconds.unsigned_abs().into()),
            acquire_time: system_time(spec.acquire_time.as_ref()),
            renew_time: system_time(spec.renew_time.as_ref()),
            leader_transitions: transitions.unsigned_abs(),
        },
        version: ResourceVersion::from(version),
    })
}

/// Maps a write's failure: 409 is a conflict (or, for a create, an existing Lease), 404 a missing
/// one, anything else a backend error.
pub(crate) fn write_error(e: kube::Error, creating: bool) -> LockError {
    match &e {
        kube::Error::Api(status) if status.is_conflict() || status.is_already_exists() => {
            if creating {
                LockError::AlreadyExists
            } else {
                LockError::Conflict
            }
        }
        kube::Error::Api(status) if status.is_not_found() && !creating => LockError::NotFound,
        _ => LockError::backend(e),
    }
}

impl LeaseLock {
    /// The candidate `identity`'s lock on the Lease `namespace/name`.
    pub fn new(
        client: Client,
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        let namespace = namespace.into();
        Self {
            api: Api::namespaced(client, &namespace),
            namespace,
            name: name.into(),
            identity: identity.into(),
        }
    }

    fn lease(&self, record: &LeaderElectionRecord, version: Option<&ResourceVersion>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                resource_version: version.map(|v| v.as_str().to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(spec(record)),
        }
    }
}

impl Lock for LeaseLock {
    async fn get(&self) -> Result<Option<VersionedRecord>, LockError> {
        match self.api.get_opt(&self.name).await {
            Ok(Some(lease)) => record(&lease).map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(LockError::backend(e)),
        }
    }

    async fn create(&self, record: &LeaderElectionRecord) -> Result<ResourceVersion, LockError> {
        let lease = self
            .api
            .create(&PostParams::default(), &self.lease(record, None))
            .await
            .map_err(|e| write_error(e, true))?;
        self::record(&lease).map(|r| r.version)
    }

    async fn update(
        &self,
        version: &ResourceVersion,
        record: &LeaderElectionRecord,
    ) -> Result<ResourceVersion, LockError> {
        let lease = self
            .api
            .replace(
                &self.name,
                &PostParams::default(),
                &self.lease(record, Some(version)),
            )
            .await
            .map_err(|e| write_error(e, false))?;
        self::record(&lease).map(|r| r.version)
    }

    fn identity(&self) -> &str {
        &self.identity
    }

    fn describe(&self) -> String {
        format!("Lease {}/{}", self.namespace, self.name)
    }
}

impl fmt::Debug for LeaseLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseLock")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_survives_the_lease_spec() {
        let t = UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456);
        let rec = LeaderElectionRecord {
            holder_identity: "a".into(),
            lease_duration: Duration::from_secs(15),
            acquire_time: t,
            renew_time: t + Duration::from_secs(2),
            leader_transitions: 4,
        };
        let lease = Lease {
            metadata: ObjectMeta {
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            spec: Some(spec(&rec)),
        };
        let back = record(&lease).expect("a valid lease");
        assert_eq!(back.record, rec);
        assert_eq!(back.version.as_str(), "7");
    }

    #[test]
    fn a_fractional_lease_rounds_up_to_whole_seconds() {
        let rec = LeaderElectionRecord {
            holder_identity: "a".into(),
            lease_duration: Duration::from_millis(2500),
            acquire_time: UNIX_EPOCH,
            renew_time: UNIX_EPOCH,
            leader_transitions: 0,
        };
        assert_eq!(spec(&rec).lease_duration_seconds, Some(3));
    }

    #[test]
    fn malformed_leases_are_typed_errors() {
        let mut lease = Lease::default();
        assert!(matches!(record(&lease), Err(LockError::Malformed(_))));
        lease.metadata.resource_version = Some("1".into());
        lease.spec = Some(LeaseSpec {
            lease_duration_seconds: Some(-1),
            ..LeaseSpec::default()
        });
        assert!(matches!(record(&lease), Err(LockError::Malformed(_))));
    }
}
