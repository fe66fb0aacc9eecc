//! How objects become bytes: the [`SnapshotCodec`] trait and the default [`PostcardCodec`].

use crate::CodecError;

/// Encodes and decodes the objects of one type for snapshots.
///
/// [`type_name`](SnapshotCodec::type_name) is written in every snapshot's header and compared
/// on load: a snapshot whose name differs is refused ([`LoadError::WrongType`](crate::LoadError)).
/// Compact binary formats are not self-describing, so change the name whenever the type's
/// encoded form changes (a field added, removed or retyped): an old snapshot is then refused and
/// the informer relists, instead of decoding old bytes as the new layout.
///
/// # Examples
/// A hand-written codec for a type without serde:
/// ```
/// use kcache_snapshot::{CodecError, SnapshotCodec};
///
/// struct Counter { name: String, value: u64 }
/// struct CounterCodec;
/// impl SnapshotCodec<Counter> for CounterCodec {
///     fn type_name(&self) -> &str { "example.com/Counter/v1" }
///     fn encode(&self, c: &Counter, out: &mut Vec<u8>) -> Result<(), CodecError> {
///         out.extend_from_slice(&c.value.to_le_bytes());
///         out.extend_from_slice(c.name.as_bytes());
///         Ok(())
///     }
///     fn decode(&self, bytes: &[u8]) -> Result<Counter, CodecError> {
///         let (value, name) = bytes.split_at_checked(8).ok_or_else(|| CodecError::new("short"))?;
///         let value = u64::from_le_bytes(value.try_into().map_err(CodecError::new)?);
///         let name = std::str::from_utf8(name).map_err(CodecError::new)?.to_owned();
///         Ok(Counter { name, value })
///     }
/// }
/// let mut bytes = Vec::new();
/// CounterCodec.encode(&Counter { name: "hits".into(), value: 7 }, &mut bytes)?;
/// assert_eq!(CounterCodec.decode(&bytes)?.value, 7);
/// # Ok::<(), CodecError>(())
/// ```
pub trait SnapshotCodec<T>: Send + Sync {
    /// The name of the type (and of its encoded form's version), checked on load.
    fn type_name(&self) -> &str;

    /// Appends the encoding of `object` to `out`. After an error the writer discards `out`.
    fn encode(&self, object: &T, out: &mut Vec<u8>) -> Result<(), CodecError>;

    /// Decodes one object from exactly `bytes` (what one `encode` appended). Must not panic on
    /// any input, and should allocate no more than `bytes` justifies.
    fn decode(&self, bytes: &[u8]) -> Result<T, CodecError>;
}

#[cfg(feature = "postcard")]
pub use self::postcard_codec::PostcardCodec;

#[cfg(feature = "postcard")]
mod postcard_codec {
    use super::SnapshotCodec;
    use crate::CodecError;
    use std::fmt;
    use std::marker::PhantomData;

    /// The default codec: the type's serde implementation, in
    /// [postcard](https://docs.rs/postcard)'s compact binary format (varint integers, no field
    /// names), whose wire format is documented and stable since its 1.0.
    ///
    /// # Examples
    /// ```
    /// use kcache_snapshot::{PostcardCodec, SnapshotCodec};
    ///
    /// #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    /// struct Pod { name: String, node: Option<String> }
    ///
    /// // Name the schema: bump "v1" when Pod's fields change.
    /// let codec = PostcardCodec::<Pod>::named("Pod/v1");
    /// let pod = Pod { name: "web-0".into(), node: Some("n1".into()) };
    /// let mut bytes = Vec::new();
    /// codec.encode(&pod, &mut bytes)?;
    /// assert_eq!(codec.decode(&bytes)?, pod);
    /// # Ok::<(), kcache_snapshot::CodecError>(())
    /// ```
    pub struct PostcardCodec<T> {
        name: String,
        _type: PhantomData<fn() -> T>,
    }

    impl<T> PostcardCodec<T> {
        /// A codec whose type name is Rust's [`std::any::type_name`] of `T`. That name changes
        /// when the type moves or is renamed, not when its fields change: prefer
        /// [`named`](Self::named) with a version you bump.
        pub fn new() -> Self {
            Self::named(std::any::type_name::<T>())
        }

        /// A codec with the given type name.
        pub fn named(name: impl Into<String>) -> Self {
            Self {
                name: name.into(),
                _type: PhantomData,
            }
        }
    }

    impl<T> Default for PostcardCodec<T> {
        fn default() -> Self {
            Self::new()
        }
    }

    impl<T> Clone for PostcardCodec<T> {
        fn clone(&self) -> Self {
            Self::named(self.name.clone())
        }
    }

    impl<T> fmt::Debug for PostcardCodec<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("PostcardCodec")
                .field("name", &self.name)
                .finish()
        }
    }

    impl<T> SnapshotCodec<T> for PostcardCodec<T>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        fn type_name(&self) -> &str {
            &self.name
        }

        fn encode(&self, object: &T, out: &mut Vec<u8>) -> Result<(), CodecError> {
            let taken = std::mem::take(out);
            *out = postcard::to_extend(object, taken).map_err(CodecError::new)?;
            Ok(())
        }

        fn decode(&self, bytes: &[u8]) -> Result<T, CodecError> {
            let (object, rest) = postcard::take_from_bytes(bytes).map_err(CodecError::new)?;
            if rest.is_empty() {
                Ok(object)
            } else {
                Err(CodecError::new("trailing bytes after the object"))
            }
        }
    }
}
