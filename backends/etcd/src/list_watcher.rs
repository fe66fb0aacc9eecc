//! [`EtcdListWatcher`]: list and watch the objects under an etcd key prefix.

use crate::decoder::Decoder;
use crate::error::classify;
use crate::keys::{decode_continue, encode_continue, parse_revision, revision_rv, Prefix};
use crate::{watch, Codec, EtcdError, JsonCodec, MalformedValue};
use etcd_client::{Client, ConnectOptions, GetOptions, KeyValue};
use kcache_core::sync::Mutex;
use kcache_core::{Clock, Meta, ObjectAccessor, ResourceVersion, SystemClock};
use kcache_reflector::{
    ListOptions, ListPage, ListWatcher, ResourceVersionMatch, WatchOptions, WatchStream,
};
use std::fmt;
use std::sync::Arc;

/// The page size used when a caller asks for a whole list at once, and for the initial events of
/// a streaming list: etcd is still read in pages (all at one revision), so no single response
/// grows with the prefix.
pub const DEFAULT_INTERNAL_PAGE_SIZE: u32 = 1000;

/// The default limit on the size of one decoded gRPC message (a list page or a watch response).
/// A watch that catches up sends up to 1000 revisions per response, so this is generous.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 512 * 1024 * 1024;

/// A [`ListWatcher`] over the objects stored under one etcd key prefix.
///
/// See the crate documentation for the key layout, resource versions, list and watch semantics,
/// compaction, and malformed values. Cheap to clone (clones share the connection and the report
/// of skipped values).
pub struct EtcdListWatcher<T, C = JsonCodec, M = ObjectAccessor> {
    pub(crate) client: Client,
    pub(crate) decoder: Decoder<T, C, M>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) page_size: u32,
    pub(crate) max_message_size: usize,
    /// Values a list skipped, reported by the next watch (see "Malformed values").
    pub(crate) skipped: Arc<Mutex<Vec<MalformedValue>>>,
}

impl<T> EtcdListWatcher<T, JsonCodec, ObjectAccessor>
where
    JsonCodec: Codec<T>,
    ObjectAccessor: Meta<T>,
{
    /// A list-watcher over `prefix` on `client`, with the [`JsonCodec`], keys read through
    /// [`ObjectAccessor`] and the [`SystemClock`]. A `/` is appended to `prefix` unless it ends
    /// with one.
    pub fn new(client: Client, prefix: &str) -> Self {
        Self {
            client,
            decoder: Decoder::new(Arc::new(JsonCodec), Prefix::new(prefix)),
            clock: Arc::new(SystemClock),
            page_size: DEFAULT_INTERNAL_PAGE_SIZE,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            skipped: Arc::default(),
        }
    }

    /// Connects to `endpoints` (`"http://127.0.0.1:2379"`, …) with `options` (TLS, user and
    /// password, timeouts, keep-alive: [`ConnectOptions`], passed through as is) and returns
    /// [`EtcdListWatcher::new`] over `prefix`.
    ///
    /// # Errors
    /// [`EtcdError::Unavailable`] or [`EtcdError::Request`] when the client cannot be built or
    /// (with authentication) cannot log in.
    pub async fn connect<E: AsRef<str>, S: AsRef<[E]>>(
        endpoints: S,
        options: Option<ConnectOptions>,
        prefix: &str,
    ) -> Result<Self, EtcdError> {
        let client = Client::connect(endpoints, options)
            .await
            .map_err(|e| classify(e, 0))?;
        Ok(Self::new(client, prefix))
    }
}

impl<T, C: Codec<T>, M: Meta<T>> EtcdListWatcher<T, C, M> {
    /// Uses `codec` instead (keeps every other setting).
    pub fn with_codec<C2: Codec<T>>(self, codec: C2) -> EtcdListWatcher<T, C2, M> {
        EtcdListWatcher {
            client: self.client,
            decoder: Decoder::new(Arc::new(codec), self.decoder.prefix),
            clock: self.clock,
            page_size: self.page_size,
            max_message_size: self.max_message_size,
            skipped: self.skipped,
        }
    }

    /// Reads keys and resource versions through the accessor `M2` instead (use the same one in
    /// the reflector).
    pub fn meta<M2: Meta<T>>(self) -> EtcdListWatcher<T, C, M2> {
        EtcdListWatcher {
            client: self.client,
            decoder: Decoder::new(self.decoder.codec, self.decoder.prefix),
            clock: self.clock,
            page_size: self.page_size,
            max_message_size: self.max_message_size,
            skipped: self.skipped,
        }
    }

    /// The clock on which watch timeouts run ([`kcache_core::FakeClock`] in tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The page size of reads that the caller did not page (a list without `limit`, the initial
    /// events of a streaming list); `0` is taken as 1. Default [`DEFAULT_INTERNAL_PAGE_SIZE`].
    pub fn with_internal_page_size(mut self, size: u32) -> Self {
        self.page_size = size.max(1);
        self
    }

    /// The largest gRPC message (list page, watch response) accepted. Default
    /// [`DEFAULT_MAX_MESSAGE_SIZE`].
    pub fn with_max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes;
        self
    }

    /// The etcd client (for your own requests; clones share the connection).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The key prefix, with its trailing `/`.
    pub fn prefix(&self) -> &str {
        self.decoder.prefix.as_str()
    }

    /// Takes the values that lists skipped as malformed and that no watch has reported yet (a
    /// watch reports and clears them when it is opened; see the crate documentation).
    pub fn take_skipped(&self) -> Vec<MalformedValue> {
        std::mem::take(&mut *self.skipped.lock())
    }

    /// One range read of at most `limit` keys from `start` (inclusive) to the end of the prefix,
    /// at `rev` (`None`: the current revision). Returns the key-values, whether more remain, and
    /// the revision the read was served at.
    pub(crate) async fn range(
        &self,
        start: Vec<u8>,
        rev: Option<i64>,
        limit: u32,
    ) -> Result<(Vec<KeyValue>, bool, i64), EtcdError> {
        let mut opts = GetOptions::new()
            .with_range(self.decoder.prefix.end())
            .with_limit(i64::from(limit));
        if let Some(r) = rev {
            opts = opts.with_revision(r);
        }
        let mut kv = self
            .client
            .kv_client()
            .max_decoding_message_size(self.max_message_size);
        let mut resp = kv
            .get(start, Some(opts))
            .await
            .map_err(|e| classify(e, rev.unwrap_or(0)))?;
        let header_rev = resp
            .header()
            .map(|h| h.revision())
            .ok_or_else(|| EtcdError::Protocol("a range response without a header".into()))?;
        let more = resp.more();
        Ok((resp.take_kvs(), more, rev.unwrap_or(header_rev)))
    }

    /// Decodes one page, collecting what cannot be decoded into `bad`.
    pub(crate) fn decode_page(
        &self,
        kvs: &[KeyValue],
        bad: &mut Vec<MalformedValue>,
    ) -> Vec<Arc<T>> {
        let mut items = Vec::with_capacity(kvs.len());
        for kv in kvs {
            match self.decoder.decode(kv.key(), kv.value(), kv.mod_revision()) {
                Ok(obj) => items.push(Arc::new(obj)),
                Err(m) => bad.push(m),
            }
        }
        items
    }

    /// Every object from `start` to the end of the prefix at `rev` (`None`: now), read in pages
    /// at one revision; `min` is a lower bound on the revision of a current read (`NotOlderThan`).
    pub(crate) async fn read_all(
        &self,
        start: Vec<u8>,
        rev: Option<i64>,
        min: Option<i64>,
        bad: &mut Vec<MalformedValue>,
    ) -> Result<(Vec<Arc<T>>, i64), EtcdError> {
        let (kvs, mut more, read_rev) = self.range(start, rev, self.page_size).await?;
        check_not_older(min, read_rev)?;
        let mut items = self.decode_page(&kvs, bad);
        let mut last = kvs.last().map(|kv| kv.key().to_vec());
        while more {
            let Some(mut next) = last.take() else { break };
            next.push(0);
            let (kvs, m, _) = self.range(next, Some(read_rev), self.page_size).await?;
            more = m;
            items.extend(self.decode_page(&kvs, bad));
            last = kvs.last().map(|kv| kv.key().to_vec());
        }
        Ok((items, read_rev))
    }

    async fn list_page(&self, opts: &ListOptions) -> Result<ListPage<T>, EtcdError> {
        let prefix = &self.decoder.prefix;
        let (rev, start, min) = match &opts.continue_token {
            Some(token) => {
                let (rev, key) = decode_continue(token, prefix)?;
                (Some(rev), key, None)
            }
            None => {
                let asked = parse_revision(&opts.resource_version)?;
                match (asked, opts.resource_version_match) {
                    (Some(r), Some(ResourceVersionMatch::NotOlderThan)) => {
                        (None, prefix.start().to_vec(), Some(r))
                    }
                    (asked, _) => (asked, prefix.start().to_vec(), None),
                }
            }
        };
        let mut bad = Vec::new();
        let page = match opts.limit {
            Some(limit) if limit > 0 => {
                let (kvs, more, read_rev) = self.range(start, rev, limit).await?;
                check_not_older(min, read_rev)?;
                let items = self.decode_page(&kvs, &mut bad);
                let continue_token = match (more, kvs.last()) {
                    (true, Some(last)) => {
                        let mut next = last.key().to_vec();
                        next.push(0);
                        Some(encode_continue(read_rev, &next))
                    }
                    _ => None,
                };
                ListPage {
                    items,
                    resource_version: revision_rv(read_rev),
                    continue_token,
                }
            }
            _ => {
                // The whole rest of the list, in pages at one revision.
                let (items, read_rev) = self.read_all(start, rev, min, &mut bad).await?;
                ListPage {
                    items,
                    resource_version: revision_rv(read_rev),
                    continue_token: None,
                }
            }
        };
        if !bad.is_empty() {
            self.skipped.lock().extend(bad);
        }
        Ok(page)
    }
}

/// `NotOlderThan min`: a current read at `read_rev` older than `min` means `min` is in the future.
fn check_not_older(min: Option<i64>, read_rev: i64) -> Result<(), EtcdError> {
    match min {
        Some(min) if min > read_rev => Err(EtcdError::FutureRevision {
            requested: min,
            current: Some(read_rev),
        }),
        _ => Ok(()),
    }
}

impl<T, C, M> ListWatcher<T> for EtcdListWatcher<T, C, M>
where
    T: Send + Sync + 'static,
    C: Codec<T>,
    M: Meta<T>,
{
    type Error = EtcdError;

    async fn list(&self, opts: &ListOptions) -> Result<ListPage<T>, EtcdError> {
        self.list_page(opts).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchStream<T, EtcdError>, EtcdError> {
        watch::open(self, opts).await
    }

    /// The revision in the header of a count-only range read of the prefix (no key or value is
    /// sent): etcd's current revision, of the whole store, so possibly newer than the prefix's
    /// last change.
    async fn current_resource_version(&self) -> Result<Option<ResourceVersion>, EtcdError> {
        let opts = GetOptions::new()
            .with_range(self.decoder.prefix.end())
            .with_count_only();
        let resp = self
            .client
            .kv_client()
            .get(self.decoder.prefix.start().to_vec(), Some(opts))
            .await
            .map_err(|e| classify(e, 0))?;
        let rev = resp
            .header()
            .map(|h| h.revision())
            .ok_or_else(|| EtcdError::Protocol("a range response without a header".into()))?;
        Ok(Some(revision_rv(rev)))
    }
}

impl<T, C, M> Clone for EtcdListWatcher<T, C, M> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            decoder: self.decoder.clone(),
            clock: self.clock.clone(),
            page_size: self.page_size,
            max_message_size: self.max_message_size,
            skipped: self.skipped.clone(),
        }
    }
}

impl<T, C, M> fmt::Debug for EtcdListWatcher<T, C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdListWatcher")
            .field("prefix", &self.decoder.prefix.as_str())
            .field("internal_page_size", &self.page_size)
            .field("max_message_size", &self.max_message_size)
            .finish_non_exhaustive()
    }
}
