//! Shared by the test files: a small versioned object, sources on a fake clock, stream helpers.
#![allow(dead_code)]

use futures::{FutureExt, StreamExt};
use kcache_core::{FakeClock, Object, ResourceVersion};
use kcache_memory::{MemoryConfig, MemoryError, MemorySource, SetResourceVersion};
use kcache_reflector::{ListOptions, ListWatcher, WatchEvent, WatchOptions, WatchStream};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) value: u32,
    pub(crate) rv: ResourceVersion,
}

impl Object for Item {
    fn namespace(&self) -> Option<&str> {
        Some(self.namespace.as_str()).filter(|ns| !ns.is_empty())
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        self.rv.clone()
    }
}

impl SetResourceVersion for Item {
    fn set_resource_version(&mut self, rv: ResourceVersion) {
        self.rv = rv;
    }
}

/// `ns/name` with `value`, no version yet.
pub(crate) fn item(name: &str, value: u32) -> Item {
    Item {
        namespace: "ns".into(),
        name: name.into(),
        value,
        rv: ResourceVersion::default(),
    }
}

pub(crate) type Source = MemorySource<Item>;

/// A source on a fresh fake clock with `config`'s other settings.
pub(crate) fn source_with(config: MemoryConfig) -> (Source, FakeClock) {
    let clock = FakeClock::new();
    (
        MemorySource::with_config(config.with_clock(clock.clone())),
        clock,
    )
}

pub(crate) fn source() -> (Source, FakeClock) {
    source_with(MemoryConfig::new())
}

pub(crate) fn rv(text: &str) -> ResourceVersion {
    ResourceVersion::from(text)
}

pub(crate) fn list(
    source: &Source,
    opts: ListOptions,
) -> Result<kcache_reflector::ListPage<Item>, MemoryError> {
    futures::executor::block_on(source.list(&opts))
}

pub(crate) fn watch(source: &Source, opts: WatchOptions) -> Result<Stream, MemoryError> {
    futures::executor::block_on(source.watch(&opts))
}

pub(crate) fn watch_from(source: &Source, from: &str) -> Stream {
    match watch(
        source,
        WatchOptions {
            resource_version: rv(from),
            ..Default::default()
        },
    ) {
        Ok(s) => s,
        Err(e) => panic!("watch from {from:?} failed: {e}"),
    }
}

pub(crate) type Stream = WatchStream<Item, MemoryError>;

/// What the stream has ready now: `Some(item)`, or `None` when it would wait.
pub(crate) fn ready(stream: &mut Stream) -> Option<Option<Result<WatchEvent<Item>, MemoryError>>> {
    stream.next().now_or_never()
}

/// Takes every event the stream has ready, stopping when it would wait or has ended.
pub(crate) fn drain(stream: &mut Stream) -> Vec<Result<WatchEvent<Item>, MemoryError>> {
    let mut out = Vec::new();
    while let Some(Some(ev)) = ready(stream) {
        out.push(ev);
    }
    out
}

/// A compact, comparable description of an event: `("ADDED", "ns/a", value, rv)`;
/// bookmarks are `("BOOKMARK", "" or "END", 0, rv)`.
pub(crate) fn describe(
    ev: &Result<WatchEvent<Item>, MemoryError>,
) -> (String, String, u32, String) {
    let obj = |kind: &str, o: &Arc<Item>| {
        (
            kind.to_owned(),
            format!("{}/{}", o.namespace, o.name),
            o.value,
            o.rv.to_string(),
        )
    };
    match ev {
        Ok(WatchEvent::Added(o)) => obj("ADDED", o),
        Ok(WatchEvent::Modified(o)) => obj("MODIFIED", o),
        Ok(WatchEvent::Deleted(o)) => obj("DELETED", o),
        Ok(WatchEvent::Bookmark(b)) => {
            let end = if b.initial_events_end { "END" } else { "" };
            (
                "BOOKMARK".into(),
                end.into(),
                0,
                b.resource_version.to_string(),
            )
        }
        Err(e) => ("ERROR".into(), e.to_string(), 0, String::new()),
    }
}

pub(crate) fn ev(kind: &str, key: &str, value: u32, rv: u64) -> (String, String, u32, String) {
    (kind.into(), key.into(), value, rv.to_string())
}

/// Unwraps in tests with the error's message.
pub(crate) fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("unexpected error: {e}"))
}
