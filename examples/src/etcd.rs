//! The world in etcd (feature `etcd`): each kind of object under its own key prefix, written
//! through [`EtcdObjects`] and watched through [`EtcdListWatcher`], both with the JSON codec.

use crate::sharded::Markers;
use crate::source::Source;
use crate::world::{Pod, ReplicaSet};
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, Txn, TxnOp,
    TxnOpResponse,
};
use futures::future::{select, BoxFuture, Either};
use kcache_core::{Clock, Meta, ObjectAccessor, ObjectKey, ResourceVersion, SetResourceVersion};
use kcache_etcd::{EtcdError, EtcdListWatcher, EtcdLock, EtcdMembers, EtcdObjects, JsonCodec};
use kcache_reflector::{ListOptions, ListWatcher};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

/// How long connecting to etcd and clearing the demo's prefixes may take.
const CONNECT_LIMIT: Duration = Duration::from_secs(10);

/// One kind of object under one etcd prefix.
pub(crate) struct EtcdSource<T> {
    client: Client,
    prefix: String,
    clock: Arc<dyn Clock>,
    objects: EtcdObjects<T>,
}

impl<T> Clone for EtcdSource<T> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            prefix: self.prefix.clone(),
            clock: self.clock.clone(),
            objects: self.objects.clone(),
        }
    }
}

impl<T> EtcdSource<T>
where
    T: Serialize + DeserializeOwned + SetResourceVersion + Send + Sync + 'static,
    ObjectAccessor: Meta<T>,
{
    fn new(client: Client, prefix: String, clock: Arc<dyn Clock>) -> Self {
        let objects = EtcdObjects::new(client.clone(), &prefix);
        Self {
            client,
            prefix,
            clock,
            objects,
        }
    }
}

/// Connects to etcd at `url` and returns the sets (under `prefix + "replicasets/"`) and the pods
/// (under `prefix + "pods/"`), after deleting whatever an earlier run left under those two
/// prefixes if `clear` (nothing else under `prefix` is touched).
///
/// # Errors
/// A message when etcd cannot be reached (within [`CONNECT_LIMIT`]) or the prefixes cannot be
/// cleared.
pub(crate) async fn connect(
    url: &str,
    prefix: &str,
    clock: Arc<dyn Clock>,
    clear: bool,
) -> Result<(EtcdSource<ReplicaSet>, EtcdSource<Pod>), String> {
    let base = base_prefix(prefix);
    let sets_prefix = format!("{base}replicasets/");
    let pods_prefix = format!("{base}pods/");
    let setup = async {
        let options = ConnectOptions::new().with_connect_timeout(Duration::from_secs(5));
        let mut client = Client::connect([url], Some(options))
            .await
            .map_err(|e| format!("cannot connect to etcd at {url}: {e}"))?;
        for p in [&sets_prefix, &pods_prefix].into_iter().filter(|_| clear) {
            client
                .delete(p.as_str(), Some(DeleteOptions::new().with_prefix()))
                .await
                .map_err(|e| format!("cannot clear {p} in etcd at {url}: {e}"))?;
        }
        Ok::<_, String>(client)
    };
    let timeout = clock.sleep_async(CONNECT_LIMIT);
    let client = match select(pin!(setup), timeout).await {
        Either::Left((result, _)) => result?,
        Either::Right(_) => {
            return Err(format!(
                "etcd at {url} did not answer within {CONNECT_LIMIT:?}"
            ))
        }
    };
    Ok((
        EtcdSource::new(client.clone(), sets_prefix, clock.clone()),
        EtcdSource::new(client, pods_prefix, clock),
    ))
}

fn base_prefix(prefix: &str) -> String {
    if prefix.ends_with('/') {
        prefix.to_owned()
    } else {
        format!("{prefix}/")
    }
}

/// The `--leader-elect` lock of the replica `identity`: the key `prefix + "leader"`.
pub(crate) fn leader_lock<T>(source: &EtcdSource<T>, prefix: &str, identity: &str) -> EtcdLock {
    EtcdLock::new(
        source.client.clone(),
        format!("{}leader", base_prefix(prefix)),
        identity,
    )
}

/// `--shard`: the member records under `prefix + "shard-members/"`.
pub(crate) fn shard_members<T>(source: &EtcdSource<T>, prefix: &str) -> EtcdMembers {
    EtcdMembers::new(
        source.client.clone(),
        format!("{}shard-members/", base_prefix(prefix)),
    )
}

/// `--shard`'s markers: the key `prefix + "shard-user"` names the replica that runs the user
/// (created only if absent), `prefix + "shard-user-done"` says the user has finished.
pub(crate) struct EtcdMarkers {
    client: Client,
    user: String,
    done: String,
}

impl EtcdMarkers {
    pub(crate) fn new<T>(source: &EtcdSource<T>, prefix: &str) -> Self {
        let base = base_prefix(prefix);
        Self {
            client: source.client.clone(),
            user: format!("{base}shard-user"),
            done: format!("{base}shard-user-done"),
        }
    }
}

impl Markers for EtcdMarkers {
    fn claim_user<'a>(&'a self, identity: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let txn = Txn::new()
                .when([Compare::create_revision(
                    self.user.as_str(),
                    CompareOp::Equal,
                    0,
                )])
                .and_then([TxnOp::put(self.user.as_str(), identity, None)])
                .or_else([TxnOp::get(self.user.as_str(), None)]);
            let resp = self
                .client
                .kv_client()
                .txn(txn)
                .await
                .map_err(|e| format!("cannot claim the user at {}: {e}", self.user))?;
            if resp.succeeded() {
                return Ok(());
            }
            let holder = resp
                .op_responses()
                .into_iter()
                .find_map(|op| match op {
                    TxnOpResponse::Get(g) => g
                        .kvs()
                        .first()
                        .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()),
                    _ => None,
                })
                .unwrap_or_default();
            if holder == identity {
                // This replica's own claim, from an earlier start.
                return Ok(());
            }
            Err(format!(
                "--user: replica {holder:?} already runs the user of this world ({})",
                self.user
            ))
        })
    }

    fn mark_user_done(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            self.client
                .kv_client()
                .put(self.done.as_str(), "done", None)
                .await
                .map(|_| ())
                .map_err(|e| format!("cannot write the marker {}: {e}", self.done))
        })
    }

    fn user_done(&self) -> BoxFuture<'_, Result<bool, String>> {
        Box::pin(async move {
            self.client
                .kv_client()
                .get(
                    self.done.as_str(),
                    Some(GetOptions::new().with_count_only()),
                )
                .await
                .map(|r| r.count() > 0)
                .map_err(|e| format!("cannot read the marker {}: {e}", self.done))
        })
    }
}

impl<T> Source<T> for EtcdSource<T>
where
    T: Serialize + DeserializeOwned + SetResourceVersion + Send + Sync + 'static,
    ObjectAccessor: Meta<T>,
    JsonCodec: kcache_etcd::Codec<T>,
{
    type ListWatcher = EtcdListWatcher<T>;

    /// A list-watcher of its own (not a clone of another): a list-watcher's report of malformed
    /// values goes to its own next watch, and the user's reads must not take it.
    fn list_watcher(&self) -> Self::ListWatcher {
        EtcdListWatcher::new(self.client.clone(), &self.prefix).with_clock(self.clock.clone())
    }

    async fn create(&self, obj: T) -> Result<ResourceVersion, String> {
        self.objects
            .create(&obj)
            .await
            .map(|o| ObjectAccessor::resource_version(&o))
            .map_err(|e| e.to_string())
    }

    async fn update(&self, obj: T) -> Result<ResourceVersion, String> {
        self.objects
            .update(&obj)
            .await
            .map(|o| ObjectAccessor::resource_version(&o))
            .map_err(|e| e.to_string())
    }

    async fn delete(&self, key: &ObjectKey) -> Result<Option<ResourceVersion>, String> {
        match self.objects.delete(key).await {
            Ok(rv) => Ok(Some(rv)),
            Err(EtcdError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn get(&self, key: &ObjectKey) -> Result<Option<Arc<T>>, String> {
        self.objects
            .get(key)
            .await
            .map(|o| o.map(Arc::new))
            .map_err(|e| e.to_string())
    }

    async fn list(&self) -> Result<Vec<Arc<T>>, String> {
        // A list-watcher of its own for every read (see `list_watcher`), so the values it could
        // not decode are this read's to report.
        let lw = self.list_watcher();
        let page = ListWatcher::list(&lw, &ListOptions::default())
            .await
            .map_err(|e| format!("reading {} from etcd: {e}", self.prefix))?;
        let skipped = lw.take_skipped();
        if let Some(first) = skipped.first() {
            return Err(format!(
                "{} malformed value(s) under {} in etcd, the first: {first}",
                skipped.len(),
                self.prefix
            ));
        }
        Ok(page.items)
    }
}
