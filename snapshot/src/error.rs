//! The snapshot's error types.

use std::fmt;
use std::time::Duration;

/// An object the [`SnapshotCodec`](crate::SnapshotCodec) could not encode or decode.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct CodecError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl CodecError {
    /// Wraps the codec's own error.
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        Self(error.into())
    }
}

/// Which part of a snapshot file a checksum covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The header (everything before the body, but its own checksum).
    Header,
    /// The encoded objects.
    Body,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Header => "header",
            Part::Body => "body",
        })
    }
}

/// Why a snapshot was not loaded. Every variant but [`Missing`](LoadError::Missing) is a
/// refusal: the file is there but cannot be trusted, and the caller starts cold (relists).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// There is no snapshot file (the first start).
    #[error("no snapshot file")]
    Missing,
    /// The file could not be read.
    #[error("cannot read the snapshot")]
    Io(#[source] std::io::Error),
    /// The file does not start with the snapshot magic bytes.
    #[error("not a kcache snapshot (bad magic bytes)")]
    NotASnapshot,
    /// The file was written in a format version this build does not read.
    #[error("snapshot format version {found}, this build reads version {supported}")]
    UnsupportedVersion {
        /// The file's version.
        found: u16,
        /// The version this build reads.
        supported: u16,
    },
    /// The file ends before the length its header (or the fixed header) announces.
    #[error("truncated snapshot: {needed} bytes needed, {found} present")]
    Truncated {
        /// How many bytes the file should have (at least).
        needed: u64,
        /// How many it has.
        found: u64,
    },
    /// A checksum does not match: the bytes changed after they were written.
    #[error("snapshot {part} checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// The part whose checksum failed.
        part: Part,
        /// The checksum stored in the file.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
    /// The structure is inconsistent although the checksums match (a writer bug, or a file
    /// crafted to pass them).
    #[error("malformed snapshot: {0}")]
    Malformed(&'static str),
    /// The snapshot holds objects of another type (or another schema version of the type).
    #[error("snapshot of type {found:?}, expected {expected:?}")]
    WrongType {
        /// The type name the codec expects.
        expected: String,
        /// The type name in the file.
        found: String,
    },
    /// The snapshot is older than the configured maximum age.
    #[error("snapshot is {age:?} old, the maximum is {max_age:?}")]
    TooOld {
        /// Its age.
        age: Duration,
        /// The configured maximum.
        max_age: Duration,
    },
    /// The codec refused one of the objects.
    #[error("cannot decode object {index} of the snapshot")]
    Decode {
        /// The object's position in the file.
        index: u64,
        /// The codec's error.
        #[source]
        source: CodecError,
    },
}

impl LoadError {
    /// The reason, as a small label (for logs and metrics).
    pub fn reason(&self) -> RefusalReason {
        match self {
            LoadError::Missing => RefusalReason::Missing,
            LoadError::Io(_) => RefusalReason::Io,
            LoadError::NotASnapshot => RefusalReason::NotASnapshot,
            LoadError::UnsupportedVersion { .. } => RefusalReason::FormatVersion,
            LoadError::Truncated { .. } => RefusalReason::Truncated,
            LoadError::Checksum { .. } => RefusalReason::Checksum,
            LoadError::Malformed(_) => RefusalReason::Malformed,
            LoadError::WrongType { .. } => RefusalReason::WrongType,
            LoadError::TooOld { .. } => RefusalReason::TooOld,
            LoadError::Decode { .. } => RefusalReason::Decode,
        }
    }
}

/// Why a snapshot was not loaded (or not used), without the details: one label per
/// [`LoadError`] variant, plus the reasons a restoring informer turns a valid snapshot down
/// ([`NoSourceVersion`](Self::NoSourceVersion), [`AheadOfSource`](Self::AheadOfSource)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalReason {
    /// [`LoadError::Missing`].
    Missing,
    /// [`LoadError::Io`].
    Io,
    /// [`LoadError::NotASnapshot`].
    NotASnapshot,
    /// [`LoadError::UnsupportedVersion`].
    FormatVersion,
    /// [`LoadError::Truncated`].
    Truncated,
    /// [`LoadError::Checksum`].
    Checksum,
    /// [`LoadError::Malformed`].
    Malformed,
    /// [`LoadError::WrongType`].
    WrongType,
    /// [`LoadError::TooOld`].
    TooOld,
    /// [`LoadError::Decode`].
    Decode,
    /// The source cannot report its current resource version (or failed to, or the versions
    /// cannot be ordered), so nobody could tell when a restored cache has caught up: not used.
    NoSourceVersion,
    /// The snapshot's resource version is newer than the source's current one (a source
    /// restored from a backup, or another source): not used.
    AheadOfSource,
}

impl RefusalReason {
    /// Every reason, in declaration order.
    pub const ALL: [RefusalReason; 12] = [
        RefusalReason::Missing,
        RefusalReason::Io,
        RefusalReason::NotASnapshot,
        RefusalReason::FormatVersion,
        RefusalReason::Truncated,
        RefusalReason::Checksum,
        RefusalReason::Malformed,
        RefusalReason::WrongType,
        RefusalReason::TooOld,
        RefusalReason::Decode,
        RefusalReason::NoSourceVersion,
        RefusalReason::AheadOfSource,
    ];

    /// A snake_case label, for a metric's `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::Missing => "missing",
            RefusalReason::Io => "io",
            RefusalReason::NotASnapshot => "not_a_snapshot",
            RefusalReason::FormatVersion => "format_version",
            RefusalReason::Truncated => "truncated",
            RefusalReason::Checksum => "checksum",
            RefusalReason::Malformed => "malformed",
            RefusalReason::WrongType => "wrong_type",
            RefusalReason::TooOld => "too_old",
            RefusalReason::Decode => "decode",
            RefusalReason::NoSourceVersion => "no_source_version",
            RefusalReason::AheadOfSource => "ahead_of_source",
        }
    }

    pub(crate) fn index(self) -> usize {
        Self::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

impl fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a snapshot could not be written. The previous snapshot file, if any, is left as it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The codec refused one of the objects.
    #[error("cannot encode object {index} for the snapshot")]
    Encode {
        /// The object's position in the snapshot.
        index: u64,
        /// The codec's error.
        #[source]
        source: CodecError,
    },
    /// A field is too long for the format (a type name or resource version over 65,535 bytes,
    /// one encoded object over 4 GiB).
    #[error("{0} is too long for the snapshot format")]
    TooLong(&'static str),
    /// A file system step failed.
    #[error("cannot {step} the snapshot")]
    Io {
        /// The step: "create", "write", "sync", "rename", "sync the directory of".
        step: &'static str,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_error<E: std::error::Error + Send + Sync + 'static>() {}

    #[test]
    fn every_public_error_is_send_sync_static() {
        assert_error::<LoadError>();
        assert_error::<WriteError>();
        assert_error::<CodecError>();
    }

    #[test]
    fn every_reason_has_its_own_label_and_index() {
        let labels: std::collections::HashSet<_> =
            RefusalReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(labels.len(), RefusalReason::ALL.len());
        for (i, r) in RefusalReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
    }
}
