//! A snapshot on disk: [`SnapshotFile`] writes atomically and loads with typed refusals.

use crate::format::{self, LoadPolicy, Snapshot, SnapshotHeader};
use crate::{LoadError, RefusalReason, SnapshotCodec, SnapshotMetrics, WriteError};
use kcache_core::{Clock, ResourceVersion, SystemClock};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// One snapshot file of objects of type `T`, encoded by the codec `C`.
///
/// [`write`](Self::write) replaces the file atomically: the new snapshot goes to a temporary file
/// beside it (`.NAME.tmp`), which is synced, renamed over the old one, and the directory is
/// synced. A crash at any moment leaves either the old snapshot or the new one, whole. One
/// writer per path: two processes (or two `SnapshotFile`s) writing the same path at once would
/// share the temporary file.
///
/// [`load`](Self::load) refuses, with a typed [`LoadError`], a logged warning and a
/// [`SnapshotMetrics::refused`] call, a file that is not a snapshot, has another format version,
/// fails a checksum, is truncated, holds another type, or is older than the maximum age.
///
/// # Examples
/// ```
/// use kcache_core::ResourceVersion;
/// use kcache_snapshot::{LoadError, PostcardCodec, SnapshotFile};
///
/// # let dir = std::env::temp_dir().join(format!("kcache-snapshot-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let file = SnapshotFile::new(dir.join("pods.snap"), PostcardCodec::<(String, u32)>::named("pods/v1"));
/// assert!(matches!(file.load(), Err(LoadError::Missing)));
///
/// let pods = vec![("web-0".to_string(), 1), ("web-1".to_string(), 2)];
/// file.write(&ResourceVersion::new("42"), pods.iter())?;
///
/// let snapshot = file.load()?;
/// assert_eq!(snapshot.header.resource_version.as_str(), "42");
/// assert_eq!(snapshot.objects, pods);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SnapshotFile<T, C> {
    path: PathBuf,
    temp: PathBuf,
    codec: C,
    clock: Arc<dyn Clock>,
    policy: LoadPolicy,
    metrics: Option<Arc<dyn SnapshotMetrics>>,
    _type: std::marker::PhantomData<fn() -> T>,
}

/// What one [`SnapshotFile::write`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteStats {
    /// Objects written.
    pub objects: u64,
    /// The file's size in bytes.
    pub bytes: u64,
    /// Encoding plus file system steps, by the file's clock.
    pub took: Duration,
}

impl<T, C: SnapshotCodec<T>> SnapshotFile<T, C> {
    /// A snapshot file at `path`, with the system clock, no maximum age and no metrics.
    pub fn new(path: impl Into<PathBuf>, codec: C) -> Self {
        let path = path.into();
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(path.file_name().unwrap_or_default());
        temp_name.push(".tmp");
        let temp = path.with_file_name(temp_name);
        Self {
            path,
            temp,
            codec,
            clock: Arc::new(SystemClock),
            policy: LoadPolicy::default(),
            metrics: None,
            _type: std::marker::PhantomData,
        }
    }

    /// Refuse snapshots older than `max_age` (by the clock's [`system_time`](Clock::system_time)).
    #[must_use]
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.policy.max_age = Some(max_age);
        self
    }

    /// The clock giving creation times and ages (a `FakeClock` in tests).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Reports writes, loads and refusals to `metrics`.
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<dyn SnapshotMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The snapshot's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The codec.
    pub fn codec(&self) -> &C {
        &self.codec
    }

    /// Writes `objects`, consistent at `resource_version`, replacing the previous snapshot
    /// atomically. On error the previous snapshot is intact (and the temporary file removed
    /// when possible).
    pub fn write<'a>(
        &self,
        resource_version: &ResourceVersion,
        objects: impl ExactSizeIterator<Item = &'a T>,
    ) -> Result<WriteStats, WriteError>
    where
        T: 'a,
    {
        let start = self.clock.now();
        let count = objects.len() as u64;
        let result = format::encode(
            &self.codec,
            resource_version,
            self.clock.system_time(),
            objects,
        )
        .and_then(|bytes| {
            self.replace_with(&bytes)?;
            Ok(bytes.len() as u64)
        });
        match result {
            Ok(bytes) => {
                let took = self.clock.now().saturating_duration_since(start);
                if let Some(m) = &self.metrics {
                    m.written(count, bytes, took);
                }
                tracing::debug!(path = %self.path.display(), objects = count, bytes, ?took, "snapshot written");
                Ok(WriteStats {
                    objects: count,
                    bytes,
                    took,
                })
            }
            Err(e) => {
                if let Some(m) = &self.metrics {
                    m.write_failed();
                }
                tracing::warn!(path = %self.path.display(), error = %e, "snapshot not written");
                Err(e)
            }
        }
    }

    /// Loads and checks the snapshot (see the type's documentation for what is refused).
    pub fn load(&self) -> Result<Snapshot<T>, LoadError> {
        self.load_with(|obj| obj)
    }

    /// [`load`](Self::load), handing each object to `f` as it is decoded and keeping what `f`
    /// returns: `load_with(Arc::new)` gives the objects in `Arc`s without ever holding a second
    /// vector of them.
    pub fn load_with<U>(&self, f: impl FnMut(T) -> U) -> Result<Snapshot<U>, LoadError> {
        let result = self.read().and_then(|bytes| {
            let now = self.clock.system_time();
            format::decode_map(&bytes, &self.codec, &self.policy, now, f).map(|s| (s, bytes.len()))
        });
        match result {
            Ok((snapshot, bytes)) => {
                if let Some(m) = &self.metrics {
                    m.loaded(snapshot.header.object_count, bytes as u64);
                }
                Ok(snapshot)
            }
            Err(e) => {
                self.refused(&e);
                Err(e)
            }
        }
    }

    /// Reads and checks only the header (the body's checksum and objects are not read), with
    /// the same refusals as [`load`](Self::load) for the header's part.
    pub fn load_header(&self) -> Result<SnapshotHeader, LoadError> {
        let result = self.read().and_then(|bytes| {
            let now = self.clock.system_time();
            format::decode_header(&bytes, self.codec.type_name(), &self.policy, now)
        });
        if let Err(e) = &result {
            self.refused(e);
        }
        result
    }

    /// Reports that a snapshot this file loaded is not used, for `reason` (a caller's decision,
    /// say [`RefusalReason::NoSourceVersion`]): logged as a warning with `detail`, and counted
    /// by the metrics as a refusal, like the refusals of [`load`](Self::load).
    pub fn refuse(&self, reason: RefusalReason, detail: &str) {
        if let Some(m) = &self.metrics {
            m.refused(reason);
        }
        tracing::warn!(path = %self.path.display(), %reason, detail, "snapshot not used");
    }

    fn refused(&self, e: &LoadError) {
        if let Some(m) = &self.metrics {
            m.refused(e.reason());
        }
        if matches!(e, LoadError::Missing) {
            tracing::info!(path = %self.path.display(), "no snapshot to load");
        } else {
            tracing::warn!(path = %self.path.display(), reason = %e.reason(), error = %e, "snapshot refused");
        }
    }

    fn read(&self) -> Result<Vec<u8>, LoadError> {
        fs::read(&self.path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => LoadError::Missing,
            _ => LoadError::Io(e),
        })
    }

    fn replace_with(&self, bytes: &[u8]) -> Result<(), WriteError> {
        let io = |step| move |source| WriteError::Io { step, source };
        let written = File::create(&self.temp)
            .map_err(io("create"))
            .and_then(|mut f| {
                f.write_all(bytes).map_err(io("write"))?;
                f.sync_all().map_err(io("sync"))
            })
            .and_then(|()| fs::rename(&self.temp, &self.path).map_err(io("rename")));
        if written.is_err() {
            let _ = fs::remove_file(&self.temp);
        }
        written?;
        sync_dir(&self.path).map_err(io("sync the directory of"))
    }
}

/// Syncs the directory holding `path`, so that a rename in it survives a crash.
fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    OpenOptions::new().read(true).open(dir)?.sync_all()
}

impl<T, C: fmt::Debug> fmt::Debug for SnapshotFile<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotFile")
            .field("path", &self.path)
            .field("codec", &self.codec)
            .field("max_age", &self.policy.max_age)
            .finish()
    }
}
