//! Warm restarts of the demo's informers (`--snapshot-dir DIR`, with the `etcd` feature): each
//! informer starts from the snapshot `DIR/<informer>.snap` its last run left and watches from
//! its version, writes a snapshot every [`SNAPSHOT_PERIOD`] and once more when it stops. The
//! list calls of every informer are counted (streaming lists too), so the report shows whether a
//! restart relisted.

use kcache_core::ResourceVersion;
use kcache_reflector::{ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// A list-watcher that counts its lists: complete lists (last pages served) and streaming lists
/// (watches opened with `send_initial_events`). It streams when the wrapped source can.
pub(crate) struct CountingLists<L> {
    inner: L,
    lists: Arc<AtomicU64>,
}

impl<L> CountingLists<L> {
    /// `inner`, and the counter of its lists.
    pub(crate) fn new(inner: L) -> (Self, Arc<AtomicU64>) {
        let lists = Arc::new(AtomicU64::new(0));
        (
            Self {
                inner,
                lists: lists.clone(),
            },
            lists,
        )
    }
}

impl<T, L: ListWatcher<T>> ListWatcher<T> for CountingLists<L> {
    type Error = L::Error;

    async fn list(&self, opts: &ListOptions) -> Result<ListPage<T>, L::Error> {
        let page = self.inner.list(opts).await?;
        if page.continue_token.is_none() {
            self.lists.fetch_add(1, Relaxed);
        }
        Ok(page)
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchStream<T, L::Error>, L::Error> {
        let stream = self.inner.watch(opts).await?;
        if opts.send_initial_events {
            self.lists.fetch_add(1, Relaxed);
        }
        Ok(stream)
    }

    async fn current_resource_version(&self) -> Result<Option<ResourceVersion>, L::Error> {
        self.inner.current_resource_version().await
    }

    fn supports_watch_list(&self) -> bool {
        self.inner.supports_watch_list()
    }
}

#[cfg(test)]
mod tests {
    use super::CountingLists;
    use crate::world::Pod;
    use futures::StreamExt;
    use kcache_memory::MemorySource;
    use kcache_reflector::{ListOptions, ListWatcher, WatchOptions};
    use std::sync::atomic::Ordering::Relaxed;

    #[tokio::test]
    async fn a_streaming_list_counts_as_a_list_and_the_memory_source_still_streams() {
        let source: MemorySource<Pod> = MemorySource::new();
        source
            .create(Pod {
                name: "p".into(),
                owner: "s".into(),
                rv: Default::default(),
            })
            .unwrap();
        let (counting, lists) = CountingLists::new(source);
        assert!(
            counting.supports_watch_list(),
            "the wrapper hides no capability"
        );
        let opts = WatchOptions {
            send_initial_events: true,
            allow_bookmarks: true,
            ..WatchOptions::default()
        };
        let mut stream = counting.watch(&opts).await.unwrap();
        assert!(stream.next().await.is_some());
        assert_eq!(lists.load(Relaxed), 1);
        counting.list(&ListOptions::default()).await.unwrap();
        assert_eq!(lists.load(Relaxed), 2);
        let _plain = counting.watch(&WatchOptions::default()).await.unwrap();
        assert_eq!(lists.load(Relaxed), 2, "a plain watch is no list");
    }
}

#[cfg(feature = "etcd")]
pub(crate) use self::snapshots::*;

#[cfg(feature = "etcd")]
mod snapshots {
    use kcache_core::{Meta, ObjectAccessor, SetResourceVersion};
    use kcache_informer::snapshot::{
        CodecError, PostcardCodec, RestoreOutcome, SnapshotCodec, SnapshotFile,
    };
    use std::path::Path;
    use std::time::Duration;

    /// How often a running demo writes its snapshots (when its caches moved).
    pub(crate) const SNAPSHOT_PERIOD: Duration = Duration::from_secs(5);

    /// The demo's objects in a snapshot: their serde form in postcard (as
    /// [`PostcardCodec`]) and their resource version, which their serde form leaves out (etcd
    /// stamps it from the key's revision): a `u32` length, the postcard bytes, the version.
    pub(crate) struct WithVersion<T> {
        inner: PostcardCodec<T>,
    }

    impl<T> WithVersion<T> {
        pub(crate) fn named(name: &str) -> Self {
            Self {
                inner: PostcardCodec::named(name),
            }
        }
    }

    impl<T> SnapshotCodec<T> for WithVersion<T>
    where
        T: serde::Serialize + serde::de::DeserializeOwned + SetResourceVersion,
        ObjectAccessor: Meta<T>,
    {
        fn type_name(&self) -> &str {
            self.inner.type_name()
        }

        fn encode(&self, obj: &T, out: &mut Vec<u8>) -> Result<(), CodecError> {
            let mut body = Vec::new();
            self.inner.encode(obj, &mut body)?;
            let len = u32::try_from(body.len()).map_err(CodecError::new)?;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&body);
            out.extend_from_slice(ObjectAccessor::resource_version(obj).as_str().as_bytes());
            Ok(())
        }

        fn decode(&self, bytes: &[u8]) -> Result<T, CodecError> {
            let (len, rest) = bytes
                .split_first_chunk::<4>()
                .ok_or_else(|| CodecError::new("no length"))?;
            let (body, rv) = rest
                .split_at_checked(u32::from_le_bytes(*len) as usize)
                .ok_or_else(|| CodecError::new("length past the end"))?;
            let mut obj = self.inner.decode(body)?;
            let rv = std::str::from_utf8(rv).map_err(CodecError::new)?;
            obj.set_resource_version(rv.into());
            Ok(obj)
        }
    }

    /// The snapshot file of the informer `name` in `dir`.
    pub(crate) fn file<T>(dir: &Path, name: &str) -> SnapshotFile<T, WithVersion<T>>
    where
        T: serde::Serialize + serde::de::DeserializeOwned + SetResourceVersion,
        ObjectAccessor: Meta<T>,
    {
        SnapshotFile::new(
            dir.join(format!("{name}.snap")),
            WithVersion::named(&format!("kcache-demo/{name}/v1")),
        )
    }

    /// One report line about how an informer started.
    pub(crate) fn describe(name: &str, outcome: &RestoreOutcome, lists: u64) -> String {
        let how = match outcome {
            RestoreOutcome::Restored {
                objects,
                resource_version,
                target,
            } => format!(
                "restored {objects} objects from its snapshot at {resource_version}, caught up to {target}"
            ),
            RestoreOutcome::Cold(reason) => format!("started cold ({reason})"),
            RestoreOutcome::NotAttempted => "no restore".to_owned(),
            other => format!("{other:?}"),
        };
        format!("{name}: {how}; {lists} list call(s)")
    }
}
