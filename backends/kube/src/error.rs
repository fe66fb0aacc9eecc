//! [`KubeError`]: a failed list or watch, classified for the reflector.

use kcache_reflector::{BackendError, ErrorKind};
use kube::core::Status;
use std::error::Error as StdError;
use std::io;

/// The error of [`KubeListWatcher`](crate::KubeListWatcher) and
/// [`KubeMetadataListWatcher`](crate::KubeMetadataListWatcher).
///
/// [`BackendError::kind`] tells the reflector how to react, following client-go's reflector:
///
/// | what happened | kind |
/// |---|---|
/// | Status code 410 (Gone), or reason `Expired` / `Gone`: the resource version was compacted | [`ErrorKind::Expired`] (relist from the most recent state) |
/// | "too large resource version": code 504 or reason `Timeout` with that message, or the cause `ResourceVersionTooLarge` | [`ErrorKind::TooLargeResourceVersion`] |
/// | code 429 (throttled); connection refused, reset or aborted | [`ErrorKind::Retry`] (back off, re-watch) |
/// | anything else (other statuses, undecodable data, bad parameters) | [`ErrorKind::Other`] (back off, relist) |
///
/// The same rules apply to an HTTP error answer and to a watch `ERROR` event carrying a `Status`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KubeError {
    /// The API server answered with a failure `Status`: an HTTP error response, or an `ERROR`
    /// event in a watch stream.
    #[error("the API server answered {code} {reason}: {message}", code = .status.code, reason = .status.reason, message = .status.message)]
    Status {
        /// The `Status` object the server sent.
        status: Box<Status>,
        /// Whether it came as a watch `ERROR` event (rather than as an HTTP error response).
        in_watch_stream: bool,
    },
    /// A response body or a watch event could not be decoded into the expected type (malformed
    /// JSON, a field of the wrong type, a watch event type this crate does not know).
    #[error("cannot decode what the API server sent")]
    Decode(#[source] serde_json::Error),
    /// The connection failed (refused, reset, timed out, closed mid-stream) or the HTTP exchange
    /// broke.
    #[error("transport error talking to the API server")]
    Transport(#[source] kube::Error),
    /// Any other kube-rs error, such as a request that could not be built from its parameters.
    #[error("kube client error")]
    Client(#[source] kube::Error),
}

impl KubeError {
    /// The `Status` the server sent, if this error carries one.
    pub fn status(&self) -> Option<&Status> {
        match self {
            Self::Status { status, .. } => Some(status),
            _ => None,
        }
    }

    /// Wraps an error of kube-rs, moving a `Status` answer and a decode error into their own
    /// variants.
    pub(crate) fn from_kube(err: kube::Error) -> Self {
        match err {
            kube::Error::Api(status) => Self::Status {
                status,
                in_watch_stream: false,
            },
            kube::Error::SerdeError(e) => Self::Decode(e),
            e @ (kube::Error::HyperError(_)
            | kube::Error::Service(_)
            | kube::Error::ReadEvents(_)
            | kube::Error::HttpError(_)
            | kube::Error::FromUtf8(_)
            | kube::Error::LinesCodecMaxLineLengthExceeded) => Self::Transport(e),
            e => Self::Client(e),
        }
    }
}

impl BackendError for KubeError {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Status { status, .. } => status_kind(status),
            Self::Transport(e) => transport_kind(e),
            Self::Decode(_) | Self::Client(_) => ErrorKind::Other,
        }
    }
}

/// client-go's classification of a failure `Status` (`apierrors.IsResourceExpired`, `IsGone`,
/// `IsTooLargeResourceVersion`, `IsTooManyRequests`).
pub(crate) fn status_kind(status: &Status) -> ErrorKind {
    if status.code == 410 || status.reason == "Expired" || status.reason == "Gone" {
        return ErrorKind::Expired;
    }
    let too_large_cause = status.details.as_ref().is_some_and(|d| {
        d.causes
            .iter()
            .any(|c| c.reason == "ResourceVersionTooLarge")
    });
    let too_large_message = status
        .message
        .to_ascii_lowercase()
        .contains("too large resource version");
    if too_large_cause || (too_large_message && (status.code == 504 || status.reason == "Timeout"))
    {
        return ErrorKind::TooLargeResourceVersion;
    }
    if status.code == 429 || status.reason == "TooManyRequests" {
        return ErrorKind::Retry;
    }
    ErrorKind::Other
}

/// Connection refused / reset / aborted anywhere in the error's source chain → retry.
fn transport_kind(err: &kube::Error) -> ErrorKind {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            if matches!(
                io.kind(),
                io::ErrorKind::ConnectionRefused
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
            ) {
                return ErrorKind::Retry;
            }
        }
        cur = e.source();
    }
    ErrorKind::Other
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::response::{StatusCause, StatusDetails};

    fn status(code: u16, reason: &str, message: &str) -> Status {
        let mut s = Status::failure(message, reason);
        s.code = code;
        s
    }

    fn kind_of(s: Status) -> ErrorKind {
        KubeError::Status {
            status: Box::new(s),
            in_watch_stream: true,
        }
        .kind()
    }

    #[test]
    fn gone_and_expired_statuses_are_expired() {
        assert_eq!(
            kind_of(status(410, "Expired", "too old resource version: 1 (5)")),
            ErrorKind::Expired
        );
        assert_eq!(kind_of(status(410, "Gone", "")), ErrorKind::Expired);
        assert_eq!(kind_of(status(0, "Expired", "")), ErrorKind::Expired);
    }

    #[test]
    fn too_large_resource_version_is_recognised_by_message_or_cause() {
        let msg = "Too large resource version: 99, current: 12";
        assert_eq!(
            kind_of(status(504, "Timeout", msg)),
            ErrorKind::TooLargeResourceVersion
        );
        assert_eq!(
            kind_of(status(0, "Timeout", msg)),
            ErrorKind::TooLargeResourceVersion
        );
        let mut caused = status(504, "Timeout", "timeout");
        caused.details = Some(StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: vec![StatusCause {
                reason: "ResourceVersionTooLarge".into(),
                message: String::new(),
                field: String::new(),
            }],
            retry_after_seconds: 0,
        });
        assert_eq!(kind_of(caused), ErrorKind::TooLargeResourceVersion);
        // A plain gateway timeout is not a too-large resource version.
        assert_eq!(
            kind_of(status(504, "Timeout", "deadline")),
            ErrorKind::Other
        );
    }

    #[test]
    fn throttling_is_retried_and_other_statuses_relist() {
        assert_eq!(
            kind_of(status(429, "TooManyRequests", "")),
            ErrorKind::Retry
        );
        assert_eq!(kind_of(status(500, "InternalError", "")), ErrorKind::Other);
        assert_eq!(kind_of(status(403, "Forbidden", "")), ErrorKind::Other);
    }

    #[test]
    fn decode_errors_are_other() {
        let Err(e) = serde_json::from_str::<u8>("x") else {
            panic!("'x' decoded as a number");
        };
        assert_eq!(KubeError::Decode(e).kind(), ErrorKind::Other);
    }

    #[test]
    fn connection_refused_or_reset_is_retried() {
        for kind in [
            io::ErrorKind::ConnectionRefused,
            io::ErrorKind::ConnectionReset,
        ] {
            let e = kube::Error::ReadEvents(io::Error::new(kind, "boom"));
            assert_eq!(KubeError::from_kube(e).kind(), ErrorKind::Retry);
        }
        let other = kube::Error::ReadEvents(io::Error::other("boom"));
        assert_eq!(KubeError::from_kube(other).kind(), ErrorKind::Other);
    }

    #[test]
    fn the_error_is_send_sync_and_static() {
        fn check<E: StdError + Send + Sync + 'static>() {}
        check::<KubeError>();
    }
}
