//! How objects become etcd values and back: the [`Codec`] trait and the default [`JsonCodec`].

use kcache_core::{ResourceVersion, SetResourceVersion};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt;

/// Turns objects into etcd values and values back into objects.
///
/// `decode` receives the key below the prefix (`"namespace/name"` or `"name"`), the stored bytes
/// and the entry's resource version (its `mod_revision` as decimal text). The decoded object must
/// carry that resource version (the codec *stamps* it), so that the reflector and every store see
/// the version of the write that produced the object, as with Kubernetes objects. The
/// [`EtcdListWatcher`](crate::EtcdListWatcher) checks this, and that the object's own key is the
/// key it is stored under; a value that fails either check is reported as malformed.
///
/// A codec must never panic: bad bytes are a [`CodecError`].
///
/// # Examples
/// A codec for plain UTF-8 values whose object is built from the key:
/// ```
/// use kcache_core::ResourceVersion;
/// use kcache_etcd::{Codec, CodecError};
///
/// struct Setting { name: String, value: String, rv: ResourceVersion }
///
/// struct TextCodec;
///
/// impl Codec<Setting> for TextCodec {
///     fn encode(&self, obj: &Setting) -> Result<Vec<u8>, CodecError> {
///         Ok(obj.value.clone().into_bytes())
///     }
///     fn decode(&self, key: &str, value: &[u8], rv: ResourceVersion) -> Result<Setting, CodecError> {
///         let value = std::str::from_utf8(value).map_err(CodecError::new)?;
///         Ok(Setting { name: key.to_owned(), value: value.to_owned(), rv })
///     }
/// }
///
/// let s = TextCodec.decode("log-level", b"debug", ResourceVersion::from("7"))?;
/// assert_eq!((s.name.as_str(), s.value.as_str(), s.rv.as_str()), ("log-level", "debug", "7"));
/// # Ok::<(), CodecError>(())
/// ```
pub trait Codec<T>: Send + Sync + 'static {
    /// The bytes to store for `obj`. Its resource version need not be stored: `decode` is given
    /// the authoritative one.
    ///
    /// # Errors
    /// A [`CodecError`] when `obj` cannot be serialized.
    fn encode(&self, obj: &T) -> Result<Vec<u8>, CodecError>;

    /// The object stored under `key` (below the prefix) as `value`, stamped with
    /// `resource_version`.
    ///
    /// # Errors
    /// A [`CodecError`] when `value` is not a valid encoding.
    fn decode(
        &self,
        key: &str,
        value: &[u8],
        resource_version: ResourceVersion,
    ) -> Result<T, CodecError>;
}

/// The default codec: `serde_json`, with the resource version stamped after decoding through
/// [`SetResourceVersion`] (kcache-core's, re-exported by this crate).
///
/// # Examples
/// ```
/// use kcache_core::ResourceVersion;
/// use kcache_etcd::{Codec, JsonCodec, SetResourceVersion};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Job {
///     name: String,
///     #[serde(skip)]
///     rv: ResourceVersion,
/// }
///
/// impl SetResourceVersion for Job {
///     fn set_resource_version(&mut self, rv: ResourceVersion) { self.rv = rv; }
/// }
///
/// let bytes = JsonCodec.encode(&Job { name: "nightly".into(), rv: "3".into() })?;
/// assert_eq!(bytes, br#"{"name":"nightly"}"#);
/// let job: Job = JsonCodec.decode("nightly", &bytes, ResourceVersion::from("12"))?;
/// assert_eq!((job.name.as_str(), job.rv.as_str()), ("nightly", "12"));
/// # Ok::<(), kcache_etcd::CodecError>(())
/// ```
///
/// Mark the resource-version field `#[serde(skip)]` (with a `Default`): it is not stored, since
/// etcd's `mod_revision` is the version. Storing it does no harm (decoding overwrites it), but it
/// would be stale in etcd.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonCodec;

impl<T> Codec<T> for JsonCodec
where
    T: Serialize + DeserializeOwned + SetResourceVersion + 'static,
{
    fn encode(&self, obj: &T) -> Result<Vec<u8>, CodecError> {
        serde_json::to_vec(obj).map_err(CodecError::new)
    }

    fn decode(
        &self,
        _key: &str,
        value: &[u8],
        resource_version: ResourceVersion,
    ) -> Result<T, CodecError> {
        let mut obj: T = serde_json::from_slice(value).map_err(CodecError::new)?;
        obj.set_resource_version(resource_version);
        Ok(obj)
    }
}

/// A value that a [`Codec`] could not encode or decode (or a decoded object that breaks the
/// codec's contract: wrong key, missing resource version).
pub struct CodecError {
    inner: Box<dyn std::error::Error + Send + Sync + 'static>,
}

impl CodecError {
    /// Wraps the underlying error (a `serde_json::Error`, a `Utf8Error`, …).
    pub fn new(err: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        Self { inner: err.into() }
    }

    /// A codec error with only a message.
    pub fn msg(msg: impl fmt::Display) -> Self {
        Self::new(msg.to_string())
    }

    /// The underlying error.
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.inner
    }
}

impl fmt::Debug for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CodecError").field(&self.inner).finish()
    }
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

impl std::error::Error for CodecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner.source()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Thing {
        name: String,
        n: u32,
        #[serde(skip)]
        rv: ResourceVersion,
    }

    impl SetResourceVersion for Thing {
        fn set_resource_version(&mut self, rv: ResourceVersion) {
            self.rv = rv;
        }
    }

    #[test]
    fn json_codec_round_trips_and_stamps_the_version() {
        let t = Thing {
            name: "a".into(),
            n: 3,
            rv: ResourceVersion::from("99"),
        };
        let bytes = JsonCodec.encode(&t).unwrap();
        assert_eq!(bytes, br#"{"name":"a","n":3}"#);
        let back: Thing = JsonCodec.decode("a", &bytes, "12".into()).unwrap();
        assert_eq!(back.rv.as_str(), "12");
        assert_eq!((back.name.as_str(), back.n), ("a", 3));
    }

    #[test]
    fn json_codec_reports_bad_bytes_as_an_error() {
        let err = <JsonCodec as Codec<Thing>>::decode(&JsonCodec, "a", b"{not json", "1".into())
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("key must be a string")));
    }
}
