//! Snapshot files of an informer's cache, so that a restarted informer can start from them
//! instead of listing everything again (kcache's warm restart).
//!
//! A snapshot holds objects and the resource version they are consistent at. This crate is its
//! file layer, usable on its own:
//! - a versioned binary format: a header (format version, the object type's name, the resource
//!   version, the object count, the creation time) with its own checksum, then the body (each
//!   object encoded by a [`SnapshotCodec`]) with a CRC-32C checksum (see [`mod@format`]);
//! - [`SnapshotFile`]: writes atomically (temporary file, fsync, rename, directory fsync: a crash
//!   at any moment leaves the previous snapshot or the new one, whole) and loads with a typed
//!   [`LoadError`] for each refusal (not a snapshot, another format version, a bad checksum, a
//!   truncated file, another type, too old), logged and counted by [`SnapshotMetrics`];
//! - the default codec [`PostcardCodec`] (feature `postcard`, on by default): serde in
//!   postcard's compact format. Without the feature the crate has no serde dependency; bring a
//!   codec of your own.
//!
//! Reading never trusts the file: every count and length is checked against the bytes present
//! before anything is allocated, and the `snapshot_load` fuzz target holds the loader to it.
//!
//! # Examples
//! ```
//! use kcache_core::{FakeClock, ResourceVersion};
//! use kcache_snapshot::{LoadError, PostcardCodec, RefusalReason, SnapshotCounters, SnapshotFile};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
//! struct ConfigMap { name: String, data: Vec<(String, String)> }
//!
//! # let dir = std::env::temp_dir().join(format!("kcache-snapshot-lib-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let clock = Arc::new(FakeClock::new());
//! let counters = Arc::new(SnapshotCounters::default());
//! let file = SnapshotFile::new(dir.join("configmaps.snap"), PostcardCodec::named("ConfigMap/v1"))
//!     .clock(clock.clone())
//!     .max_age(Duration::from_secs(3600))
//!     .metrics(counters.clone());
//!
//! let maps = vec![ConfigMap { name: "app".into(), data: vec![("mode".into(), "fast".into())] }];
//! file.write(&ResourceVersion::new("1017"), maps.iter())?;
//! let snapshot = file.load()?;
//! assert_eq!((snapshot.header.resource_version.as_str(), snapshot.objects), ("1017", maps));
//!
//! // Two hours later the snapshot is too old: refused, and counted.
//! clock.advance(Duration::from_secs(7200));
//! assert!(matches!(file.load(), Err(LoadError::TooOld { .. })));
//! assert_eq!(counters.refusals(RefusalReason::TooOld), 1);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod codec;
mod crc;
mod error;
mod file;
pub mod format;
#[cfg(feature = "fuzz")]
pub mod fuzz;
mod metrics;
mod sync;

#[cfg(feature = "postcard")]
pub use codec::PostcardCodec;
pub use codec::SnapshotCodec;
pub use error::{CodecError, LoadError, Part, RefusalReason, WriteError};
pub use file::{SnapshotFile, WriteStats};
pub use format::{LoadPolicy, Snapshot, SnapshotHeader, FORMAT_VERSION};
pub use metrics::{SnapshotCounters, SnapshotMetrics};

/// This crate's README.md, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
