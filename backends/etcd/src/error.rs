//! [`EtcdError`]: every failure of the etcd backend, classified for the reflector.

use crate::CodecError;
use kcache_core::{KeyError, ResourceVersion};
use kcache_reflector::{BackendError, ErrorKind};
use std::fmt;

/// gRPC status codes (`tonic::Code`) that mean "the server or the connection is (temporarily) not
/// there": Cancelled, Unknown (a broken HTTP/2 connection), DeadlineExceeded, ResourceExhausted
/// ("too many requests"), Aborted, Unavailable (connection refused, no leader).
const RETRY_CODES: [i32; 6] = [1, 2, 4, 8, 10, 14];

/// The etcd server's message for a read at a compacted revision.
const COMPACTED: &str = "required revision has been compacted";
/// The etcd server's message for a read at a revision it has not reached.
const FUTURE: &str = "required revision is a future revision";

/// An error of the etcd backend.
///
/// Every variant maps to an [`ErrorKind`] through [`BackendError::kind`], which tells the
/// reflector whether to relist (`Expired`, `TooLargeResourceVersion`, `Other`) or to back off and
/// re-watch (`Retry`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EtcdError {
    /// The server could not be reached or the connection broke (connection refused, reset, no
    /// leader, deadline exceeded, throttled). Kind: `Retry`.
    #[error("etcd is unavailable")]
    Unavailable(#[source] etcd_client::Error),
    /// Any other failed request. Kind: `Other`.
    #[error("etcd request failed")]
    Request(#[source] etcd_client::Error),
    /// A read or a watch at a revision that etcd has compacted (the range error "required revision
    /// has been compacted", or a watch cancelled with `compact_revision` set). Kind: `Expired`.
    #[error("revision {requested} has been compacted{}", compact_suffix(*.compact_revision))]
    Compacted {
        /// The revision asked for.
        requested: i64,
        /// The compaction revision, when etcd reported it (watches do).
        compact_revision: Option<i64>,
    },
    /// A read or a watch at a revision etcd has not reached yet. Kind: `TooLargeResourceVersion`.
    #[error("revision {requested} is newer than etcd's current revision{}", current_suffix(*.current))]
    FutureRevision {
        /// The revision asked for.
        requested: i64,
        /// etcd's current revision, when known.
        current: Option<i64>,
    },
    /// A resource version that is not a decimal etcd revision (or is empty where one is needed).
    /// Kind: `Other`.
    #[error("invalid resource version {0:?}: an etcd revision in decimal is expected")]
    InvalidResourceVersion(ResourceVersion),
    /// A continue token this backend did not issue. Kind: `Other`.
    #[error("invalid continue token {0:?}")]
    InvalidContinueToken(String),
    /// etcd cancelled the watch for a reason other than compaction. Kind: `Other`.
    #[error("etcd cancelled the watch: {reason}")]
    WatchCanceled {
        /// etcd's `cancel_reason`.
        reason: String,
    },
    /// The watch stream ended without a cancellation (the server or a proxy closed it). Kind:
    /// `Retry`.
    #[error("the etcd watch stream ended unexpectedly")]
    WatchEnded,
    /// Values under the prefix that the codec could not decode. They were skipped (a list leaves
    /// them out; a watch turns an undecodable update into a deletion of the last good state), and
    /// this error reports them. Kind: `Retry` (the stream position is past them, so re-watching
    /// makes progress). See the crate documentation, "Malformed values".
    #[error("{}", malformed_summary(.0))]
    Malformed(Vec<MalformedValue>),
    /// A deletion seen by a watch without the deleted key's previous value (etcd had compacted it):
    /// the object to delete cannot be named. Kind: `Other` (relisting removes it).
    #[error(
        "key {key:?} was deleted at revision {resource_version} but etcd sent no previous value"
    )]
    DeletedWithoutPreviousValue {
        /// The key below the prefix.
        key: String,
        /// The revision of the deletion.
        resource_version: ResourceVersion,
    },
    /// A response that breaks etcd's protocol (no header). Kind: `Other`.
    #[error("unexpected response from etcd: {0}")]
    Protocol(String),
    /// `create` of a key that exists. Kind: `Other`.
    #[error("key {key:?} already exists")]
    AlreadyExists {
        /// The key below the prefix.
        key: String,
    },
    /// `update` or `delete` of a key that does not exist. Kind: `Other`.
    #[error("key {key:?} not found")]
    NotFound {
        /// The key below the prefix.
        key: String,
    },
    /// `update` or `delete_at` whose expected resource version is not the key's current one (an
    /// optimistic-concurrency conflict: read again, then retry). Kind: `Other`.
    #[error("conflict on key {key:?}: expected resource version {expected}, found {current}")]
    Conflict {
        /// The key below the prefix.
        key: String,
        /// The resource version the caller expected.
        expected: ResourceVersion,
        /// The key's current resource version.
        current: ResourceVersion,
    },
    /// An object to write whose key cannot be read. Kind: `Other`.
    #[error("the object's key cannot be read")]
    Key(#[source] KeyError),
    /// An object to write that the codec could not encode. Kind: `Other`.
    #[error("the object for key {key:?} cannot be encoded")]
    Encode {
        /// The key below the prefix.
        key: String,
        /// The codec's error.
        #[source]
        source: CodecError,
    },
}

/// One value under the prefix that could not be turned into an object.
#[derive(Debug, thiserror::Error)]
#[error("malformed value under key {key:?} at resource version {resource_version}")]
pub struct MalformedValue {
    /// The key below the prefix (lossy UTF-8 if the key itself is not UTF-8).
    pub key: String,
    /// The value's `mod_revision`.
    pub resource_version: ResourceVersion,
    /// Why it could not be decoded.
    #[source]
    pub source: CodecError,
}

fn compact_suffix(rev: Option<i64>) -> String {
    rev.map(|r| format!(" (compacted up to {r})"))
        .unwrap_or_default()
}

fn current_suffix(rev: Option<i64>) -> String {
    rev.map(|r| format!(" ({r})")).unwrap_or_default()
}

/// At most this many skipped values are described in the error's message (all are in the error).
const MALFORMED_SHOWN: usize = 5;

fn malformed_summary(values: &[MalformedValue]) -> String {
    let mut msg = match values.len() {
        1 => "skipped 1 malformed value: ".to_owned(),
        n => format!("skipped {n} malformed values: "),
    };
    for (i, v) in values.iter().take(MALFORMED_SHOWN).enumerate() {
        if i > 0 {
            msg.push_str("; ");
        }
        msg.push_str(&Detail(v).to_string());
    }
    if values.len() > MALFORMED_SHOWN {
        msg.push_str(&format!("; and {} more", values.len() - MALFORMED_SHOWN));
    }
    msg
}

struct Detail<'a>(&'a MalformedValue);

impl fmt::Display for Detail<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "key {:?} at resource version {}: {}",
            self.0.key, self.0.resource_version, self.0.source
        )
    }
}

impl BackendError for EtcdError {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Unavailable(_) | Self::WatchEnded | Self::Malformed(_) => ErrorKind::Retry,
            Self::Compacted { .. } => ErrorKind::Expired,
            Self::FutureRevision { .. } => ErrorKind::TooLargeResourceVersion,
            Self::Request(_)
            | Self::InvalidResourceVersion(_)
            | Self::InvalidContinueToken(_)
            | Self::WatchCanceled { .. }
            | Self::DeletedWithoutPreviousValue { .. }
            | Self::Protocol(_)
            | Self::AlreadyExists { .. }
            | Self::NotFound { .. }
            | Self::Conflict { .. }
            | Self::Key(_)
            | Self::Encode { .. } => ErrorKind::Other,
        }
    }
}

/// Classifies a failed etcd request. `requested` is the revision the request read at (0: current).
pub(crate) fn classify(err: etcd_client::Error, requested: i64) -> EtcdError {
    match &err {
        etcd_client::Error::GRpcStatus(status) => {
            let msg = status.message();
            if msg.contains(COMPACTED) {
                EtcdError::Compacted {
                    requested,
                    compact_revision: None,
                }
            } else if msg.contains(FUTURE) {
                EtcdError::FutureRevision {
                    requested,
                    current: None,
                }
            } else if RETRY_CODES.contains(&(status.code() as i32)) {
                EtcdError::Unavailable(err)
            } else {
                EtcdError::Request(err)
            }
        }
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => {
            EtcdError::Unavailable(err)
        }
        _ => EtcdError::Request(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_error<E: std::error::Error + Send + Sync + 'static>() {}

    #[test]
    fn public_errors_are_send_sync_static() {
        assert_error::<EtcdError>();
        assert_error::<MalformedValue>();
        assert_error::<CodecError>();
    }

    #[test]
    fn kinds_follow_the_reflector_protocol() {
        let compacted = EtcdError::Compacted {
            requested: 3,
            compact_revision: Some(9),
        };
        assert_eq!(compacted.kind(), ErrorKind::Expired);
        assert_eq!(
            compacted.to_string(),
            "revision 3 has been compacted (compacted up to 9)"
        );
        let future = EtcdError::FutureRevision {
            requested: 30,
            current: None,
        };
        assert_eq!(future.kind(), ErrorKind::TooLargeResourceVersion);
        assert_eq!(EtcdError::WatchEnded.kind(), ErrorKind::Retry);
        let bad = EtcdError::Malformed(vec![MalformedValue {
            key: "ns/a".into(),
            resource_version: "5".into(),
            source: CodecError::msg("boom"),
        }]);
        assert_eq!(bad.kind(), ErrorKind::Retry);
        assert_eq!(
            bad.to_string(),
            "skipped 1 malformed value: key \"ns/a\" at resource version 5: boom"
        );
    }
}
