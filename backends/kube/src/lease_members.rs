//! [`LeaseMembers`]: the member records of a sharded controller as labelled Kubernetes Leases.

use crate::lease::{micro_time, system_time, write_error};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcache_core::ResourceVersion;
use kcache_leaderelection::{LockError, MemberRecord, MemberStore, VersionedMember};
use kube::api::{DeleteParams, ListParams, PostParams, Preconditions};
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The label naming the group a member Lease belongs to.
pub const SHARD_GROUP_LABEL: &str = "sharding.kcache.io/group";
/// The annotation holding a member's published view (a JSON array of identities).
pub const SHARD_VIEW_ANNOTATION: &str = "sharding.kcache.io/view";
/// The annotation holding the generation of a member's view.
pub const SHARD_VIEW_GENERATION_ANNOTATION: &str = "sharding.kcache.io/view-generation";

/// A [`MemberStore`] on Kubernetes Leases (`coordination.k8s.io/v1`), one per replica: the Lease
/// `{group}-{identity}` in one namespace, labelled [`SHARD_GROUP_LABEL`]` = group`, with
/// `holderIdentity`, `leaseDurationSeconds` (rounded up) and `renewTime` in its spec and the
/// view in the [`SHARD_VIEW_ANNOTATION`] annotation. Writes are `replace`s naming the
/// `resourceVersion` (409 Conflict if it changed), deletes carry it as a precondition, and
/// `list` is a label-selected list without a `resourceVersion` (a consistent read from etcd).
///
/// # Examples
/// ```no_run
/// use kcache_kube::LeaseMembers;
/// use kcache_leaderelection::MemberStore;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kube::Client::try_default().await?;
/// let members = LeaseMembers::new(client, "kube-system", "replicaset-controller");
/// println!("{} members", members.list().await?.len());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaseMembers {
    api: Api<Lease>,
    namespace: String,
    group: String,
}

impl LeaseMembers {
    /// The members of `group` (a label value: at most 63 characters of `[-A-Za-z0-9_.]`) in
    /// `namespace`.
    pub fn new(client: Client, namespace: impl Into<String>, group: impl Into<String>) -> Self {
        let namespace = namespace.into();
        Self {
            api: Api::namespaced(client, &namespace),
            namespace,
            group: group.into(),
        }
    }

    fn name(&self, identity: &str) -> String {
        format!("{}-{identity}", self.group)
    }

    fn lease(
        &self,
        record: &MemberRecord,
        version: Option<&ResourceVersion>,
    ) -> Result<Lease, LockError> {
        let secs =
            record.lease_duration.as_secs() + u64::from(record.lease_duration.subsec_nanos() > 0);
        let view =
            serde_json::to_string(&record.view).map_err(|e| LockError::Malformed(e.to_string()))?;
        Ok(Lease {
            metadata: ObjectMeta {
                name: Some(self.name(&record.holder_identity)),
                namespace: Some(self.namespace.clone()),
                resource_version: version.map(|v| v.as_str().to_owned()),
                labels: Some(BTreeMap::from([(
                    SHARD_GROUP_LABEL.to_owned(),
                    self.group.clone(),
                )])),
                annotations: Some(BTreeMap::from([
                    (SHARD_VIEW_ANNOTATION.to_owned(), view),
                    (
                        SHARD_VIEW_GENERATION_ANNOTATION.to_owned(),
                        record.view_generation.to_string(),
                    ),
                ])),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(record.holder_identity.clone()),
                lease_duration_seconds: Some(i32::try_from(secs).unwrap_or(i32::MAX)),
                renew_time: micro_time(record.renew_time),
                ..LeaseSpec::default()
            }),
        })
    }
}

/// The record in a member Lease.
fn member(lease: &Lease) -> Result<VersionedMember, LockError> {
    let version = lease
        .metadata
        .resource_version
        .clone()
        .filter(|rv| !rv.is_empty())
        .ok_or_else(|| LockError::Malformed("the Lease has no resourceVersion".into()))?;
    let spec = lease.spec.clone().unwrap_or_default();
    let seconds = spec.lease_duration_seconds.unwrap_or(0);
    if seconds < 0 {
        return Err(LockError::Malformed(format!(
            "negative leaseDurationSeconds ({seconds})"
        )));
    }
    let annotations = lease.metadata.annotations.clone().unwrap_or_default();
    let view: Vec<String> = match annotations.get(SHARD_VIEW_ANNOTATION) {
        Some(v) => serde_json::from_str(v)
            .map_err(|e| LockError::Malformed(format!("{SHARD_VIEW_ANNOTATION}: {e}")))?,
        None => Vec::new(),
    };
    let view_generation = match annotations.get(SHARD_VIEW_GENERATION_ANNOTATION) {
        Some(g) => g.parse().map_err(|e| {
            LockError::Malformed(format!("{SHARD_VIEW_GENERATION_ANNOTATION}: {e}"))
        })?,
        None => 0,
    };
    Ok(VersionedMember {
        record: MemberRecord {
            holder_identity: spec.holder_identity.unwrap_or_default(),
            lease_duration: Duration::from_secs(seconds.unsigned_abs().into()),
            renew_time: system_time(spec.renew_time.as_ref()),
            view,
            view_generation,
        },
        version: ResourceVersion::from(version),
    })
}

impl MemberStore for LeaseMembers {
    async fn list(&self) -> Result<Vec<VersionedMember>, LockError> {
        let params = ListParams::default().labels(&format!("{SHARD_GROUP_LABEL}={}", self.group));
        let leases = self.api.list(&params).await.map_err(LockError::backend)?;
        leases.items.iter().map(member).collect()
    }

    async fn create(&self, record: &MemberRecord) -> Result<ResourceVersion, LockError> {
        let lease = self
            .api
            .create(&PostParams::default(), &self.lease(record, None)?)
            .await
            .map_err(|e| write_error(e, true))?;
        member(&lease).map(|m| m.version)
    }

    async fn update(
        &self,
        version: &ResourceVersion,
        record: &MemberRecord,
    ) -> Result<ResourceVersion, LockError> {
        let lease = self
            .api
            .replace(
                &self.name(&record.holder_identity),
                &PostParams::default(),
                &self.lease(record, Some(version))?,
            )
            .await
            .map_err(|e| write_error(e, false))?;
        member(&lease).map(|m| m.version)
    }

    async fn delete(&self, identity: &str, version: &ResourceVersion) -> Result<(), LockError> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(version.as_str().to_owned()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match self.api.delete(&self.name(identity), &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            Err(e) => Err(write_error(e, false)),
        }
    }

    fn describe(&self) -> String {
        format!(
            "Leases {}/{}-* ({SHARD_GROUP_LABEL}={})",
            self.namespace, self.group, self.group
        )
    }
}

impl fmt::Debug for LeaseMembers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseMembers")
            .field("namespace", &self.namespace)
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn a_member_record_survives_the_lease_and_bad_annotations_are_typed_errors() {
        let record = MemberRecord {
            holder_identity: "a".into(),
            lease_duration: Duration::from_millis(2500),
            renew_time: UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456),
            view: vec!["a".into(), "b".into()],
            view_generation: 4,
        };
        let client_free = |rv: &str| -> Lease {
            let mut lease = Lease {
                metadata: ObjectMeta {
                    resource_version: Some(rv.into()),
                    annotations: Some(BTreeMap::from([
                        (SHARD_VIEW_ANNOTATION.to_owned(), "[\"a\",\"b\"]".to_owned()),
                        (SHARD_VIEW_GENERATION_ANNOTATION.to_owned(), "4".to_owned()),
                    ])),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some("a".into()),
                    lease_duration_seconds: Some(3),
                    renew_time: micro_time(record.renew_time),
                    ..LeaseSpec::default()
                }),
            };
            lease.metadata.name = Some("g-a".into());
            lease
        };
        let back = member(&client_free("9")).unwrap();
        assert_eq!(back.version.as_str(), "9");
        assert_eq!(back.record.view, record.view);
        assert_eq!(
            back.record.lease_duration,
            Duration::from_secs(3),
            "rounded up"
        );
        let mut bad = client_free("9");
        bad.metadata.annotations = Some(BTreeMap::from([(
            SHARD_VIEW_ANNOTATION.to_owned(),
            "{".to_owned(),
        )]));
        assert!(matches!(member(&bad), Err(LockError::Malformed(_))));
    }
}
