//! [`EtcdObjects`]: create, update (optimistic concurrency), delete and read objects through the
//! same codec and key layout as [`EtcdListWatcher`].

use crate::decoder::Decoder;
use crate::error::classify;
use crate::keys::{parse_revision, revision_rv, Prefix};
use crate::{Codec, EtcdError, EtcdListWatcher, JsonCodec};
use etcd_client::{
    Client, Compare, CompareOp, GetOptions, KeyValue, Txn, TxnOp, TxnOpResponse, TxnResponse,
};
use kcache_core::{Meta, ObjectAccessor, ObjectKey, ResourceVersion};
use std::fmt;
use std::sync::Arc;

/// The write side of a prefix: controllers write through the codec and key layout their
/// [`EtcdListWatcher`] reads.
///
/// Each object goes to `prefix + key`, where the key (`"namespace/name"` or `"name"`) is read
/// from the object through `M`. Writes return the object as stored, decoded again through the
/// codec and so stamped with its new resource version (the write's revision).
///
/// # Examples
/// ```no_run
/// # use kcache_core::{Object, ResourceVersion};
/// # use kcache_etcd::{EtcdError, EtcdObjects, SetResourceVersion};
/// # #[derive(serde::Serialize, serde::Deserialize)]
/// # struct Job { name: String, replicas: u32, #[serde(skip)] rv: ResourceVersion }
/// # impl Object for Job {
/// #     fn namespace(&self) -> Option<&str> { None }
/// #     fn name(&self) -> &str { &self.name }
/// #     fn resource_version(&self) -> ResourceVersion { self.rv.clone() }
/// # }
/// # impl SetResourceVersion for Job {
/// #     fn set_resource_version(&mut self, rv: ResourceVersion) { self.rv = rv; }
/// # }
/// # async fn demo(client: etcd_client::Client) -> Result<(), EtcdError> {
/// let jobs = EtcdObjects::<Job>::new(client, "/jobs/");
/// let mut job = jobs.create(&Job { name: "nightly".into(), replicas: 1, rv: Default::default() }).await?;
/// job.replicas = 3;
/// let job = jobs.update(&job).await?; // fails with EtcdError::Conflict if someone wrote in between
/// let key = kcache_core::ObjectKey::cluster("nightly").map_err(EtcdError::Key)?;
/// jobs.delete_at(&key, &job.rv).await?;
/// # Ok(()) }
/// ```
pub struct EtcdObjects<T, C = JsonCodec, M = ObjectAccessor> {
    client: Client,
    decoder: Decoder<T, C, M>,
}

impl<T> EtcdObjects<T, JsonCodec, ObjectAccessor>
where
    JsonCodec: Codec<T>,
    ObjectAccessor: Meta<T>,
{
    /// A writer for `prefix` on `client`, with the [`JsonCodec`] and keys read through
    /// [`ObjectAccessor`]. A `/` is appended to `prefix` unless it ends with one.
    pub fn new(client: Client, prefix: &str) -> Self {
        Self {
            client,
            decoder: Decoder::new(Arc::new(JsonCodec), Prefix::new(prefix)),
        }
    }
}

impl<T, C: Codec<T>, M: Meta<T>> EtcdObjects<T, C, M> {
    /// A writer with the client, prefix, codec and key accessor of `lw`.
    pub fn for_list_watcher(lw: &EtcdListWatcher<T, C, M>) -> Self {
        Self {
            client: lw.client.clone(),
            decoder: lw.decoder.clone(),
        }
    }

    /// Uses `codec` instead.
    pub fn with_codec<C2: Codec<T>>(self, codec: C2) -> EtcdObjects<T, C2, M> {
        EtcdObjects {
            client: self.client,
            decoder: Decoder::new(Arc::new(codec), self.decoder.prefix),
        }
    }

    /// Reads keys and resource versions through `M2` instead.
    pub fn meta<M2: Meta<T>>(self) -> EtcdObjects<T, C, M2> {
        EtcdObjects {
            client: self.client,
            decoder: Decoder::new(self.decoder.codec, self.decoder.prefix),
        }
    }

    /// The key prefix, with its trailing `/`.
    pub fn prefix(&self) -> &str {
        self.decoder.prefix.as_str()
    }

    /// Creates `obj`; fails if its key exists.
    ///
    /// # Errors
    /// [`EtcdError::AlreadyExists`]; [`EtcdError::Key`] / [`EtcdError::Encode`] for an object that
    /// cannot be written; a request error ([`EtcdError::Unavailable`], …).
    pub async fn create(&self, obj: &T) -> Result<T, EtcdError> {
        let (key, full, value) = self.encode(obj)?;
        let txn = Txn::new()
            .when([Compare::create_revision(full.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(full.clone(), value.clone(), None)]);
        let resp = self.txn(txn).await?;
        if !resp.succeeded() {
            return Err(EtcdError::AlreadyExists { key });
        }
        self.stored(&full, &value, &resp)
    }

    /// Replaces the object under `obj`'s key if its current resource version is `obj`'s
    /// (optimistic concurrency on etcd's `mod_revision`).
    ///
    /// # Errors
    /// [`EtcdError::Conflict`] when the key was written since `obj` was read;
    /// [`EtcdError::NotFound`] when it was deleted; [`EtcdError::InvalidResourceVersion`] when
    /// `obj` carries no etcd revision; write and request errors as for [`EtcdObjects::create`].
    pub async fn update(&self, obj: &T) -> Result<T, EtcdError> {
        let expected = M::resource_version(obj);
        let rev = parse_revision(&expected)?
            .ok_or(EtcdError::InvalidResourceVersion(expected.clone()))?;
        let (key, full, value) = self.encode(obj)?;
        let txn = Txn::new()
            .when([Compare::mod_revision(full.clone(), CompareOp::Equal, rev)])
            .and_then([TxnOp::put(full.clone(), value.clone(), None)])
            .or_else([TxnOp::get(full.clone(), None)]);
        let resp = self.txn(txn).await?;
        if !resp.succeeded() {
            return Err(self.precondition_failed(key, expected, &resp));
        }
        self.stored(&full, &value, &resp)
    }

    /// Creates or replaces `obj`, whatever is stored (no concurrency check).
    ///
    /// # Errors
    /// Write and request errors as for [`EtcdObjects::create`].
    pub async fn put(&self, obj: &T) -> Result<T, EtcdError> {
        let (_, full, value) = self.encode(obj)?;
        let txn = Txn::new().and_then([TxnOp::put(full.clone(), value.clone(), None)]);
        let resp = self.txn(txn).await?;
        self.stored(&full, &value, &resp)
    }

    /// Deletes the object under `key`; returns the deletion's resource version.
    ///
    /// # Errors
    /// [`EtcdError::NotFound`]; request errors.
    pub async fn delete(&self, key: &ObjectKey) -> Result<ResourceVersion, EtcdError> {
        let full = self.decoder.prefix.key(key.as_str());
        let txn = Txn::new()
            .when([Compare::create_revision(
                full.clone(),
                CompareOp::Greater,
                0,
            )])
            .and_then([TxnOp::delete(full, None)]);
        let resp = self.txn(txn).await?;
        if !resp.succeeded() {
            return Err(EtcdError::NotFound {
                key: key.as_str().to_owned(),
            });
        }
        header_rv(&resp)
    }

    /// Deletes the object under `key` if its current resource version is `rv`; returns the
    /// deletion's resource version.
    ///
    /// # Errors
    /// [`EtcdError::Conflict`], [`EtcdError::NotFound`], [`EtcdError::InvalidResourceVersion`];
    /// request errors.
    pub async fn delete_at(
        &self,
        key: &ObjectKey,
        rv: &ResourceVersion,
    ) -> Result<ResourceVersion, EtcdError> {
        let rev = parse_revision(rv)?.ok_or(EtcdError::InvalidResourceVersion(rv.clone()))?;
        let full = self.decoder.prefix.key(key.as_str());
        let txn = Txn::new()
            .when([Compare::mod_revision(full.clone(), CompareOp::Equal, rev)])
            .and_then([TxnOp::delete(full.clone(), None)])
            .or_else([TxnOp::get(full, None)]);
        let resp = self.txn(txn).await?;
        if !resp.succeeded() {
            return Err(self.precondition_failed(key.as_str().to_owned(), rv.clone(), &resp));
        }
        header_rv(&resp)
    }

    /// The object under `key` now (a linearizable read), or `None`.
    ///
    /// # Errors
    /// [`EtcdError::Malformed`] when the stored value cannot be decoded; request errors.
    pub async fn get(&self, key: &ObjectKey) -> Result<Option<T>, EtcdError> {
        let full = self.decoder.prefix.key(key.as_str());
        let resp = self
            .client
            .kv_client()
            .get(full, None::<GetOptions>)
            .await
            .map_err(|e| classify(e, 0))?;
        match resp.kvs().first() {
            None => Ok(None),
            Some(kv) => self.decode_kv(kv).map(Some),
        }
    }

    fn encode(&self, obj: &T) -> Result<(String, Vec<u8>, Vec<u8>), EtcdError> {
        let key = M::key(obj).map_err(EtcdError::Key)?;
        let value = self
            .decoder
            .codec
            .encode(obj)
            .map_err(|source| EtcdError::Encode {
                key: key.as_str().to_owned(),
                source,
            })?;
        let full = self.decoder.prefix.key(key.as_str());
        Ok((key.as_str().to_owned(), full, value))
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse, EtcdError> {
        self.client
            .kv_client()
            .txn(txn)
            .await
            .map_err(|e| classify(e, 0))
    }

    /// The written value decoded at the write's revision.
    fn stored(&self, full: &[u8], value: &[u8], resp: &TxnResponse) -> Result<T, EtcdError> {
        let rev = header_revision(resp)?;
        self.decoder
            .decode(full, value, rev)
            .map_err(|m| EtcdError::Malformed(vec![m]))
    }

    fn decode_kv(&self, kv: &KeyValue) -> Result<T, EtcdError> {
        self.decoder
            .decode(kv.key(), kv.value(), kv.mod_revision())
            .map_err(|m| EtcdError::Malformed(vec![m]))
    }

    /// `Conflict` or `NotFound`, from the `get` in the failed transaction's else branch.
    fn precondition_failed(
        &self,
        key: String,
        expected: ResourceVersion,
        resp: &TxnResponse,
    ) -> EtcdError {
        let current = resp.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(get) => Some(get.kvs().first().map(|kv| kv.mod_revision())),
            _ => None,
        });
        match current {
            Some(Some(rev)) => EtcdError::Conflict {
                key,
                expected,
                current: revision_rv(rev),
            },
            _ => EtcdError::NotFound { key },
        }
    }
}

fn header_revision(resp: &TxnResponse) -> Result<i64, EtcdError> {
    resp.header()
        .map(|h| h.revision())
        .ok_or_else(|| EtcdError::Protocol("a txn response without a header".into()))
}

fn header_rv(resp: &TxnResponse) -> Result<ResourceVersion, EtcdError> {
    header_revision(resp).map(revision_rv)
}

impl<T, C, M> Clone for EtcdObjects<T, C, M> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            decoder: self.decoder.clone(),
        }
    }
}

impl<T, C, M> fmt::Debug for EtcdObjects<T, C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdObjects")
            .field("prefix", &self.decoder.prefix.as_str())
            .finish_non_exhaustive()
    }
}
