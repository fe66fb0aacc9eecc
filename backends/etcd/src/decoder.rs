//! Turning etcd key-values into checked objects.

use crate::keys::{revision_rv, Prefix};
use crate::{Codec, CodecError, MalformedValue};
use kcache_core::Meta;
use std::marker::PhantomData;
use std::sync::Arc;

/// The codec, the prefix and the key accessor: decodes a value and checks the result.
pub(crate) struct Decoder<T, C, M> {
    pub(crate) codec: Arc<C>,
    pub(crate) prefix: Prefix,
    _types: PhantomData<fn() -> (T, M)>,
}

impl<T, C, M> Clone for Decoder<T, C, M> {
    fn clone(&self) -> Self {
        Self {
            codec: self.codec.clone(),
            prefix: self.prefix.clone(),
            _types: PhantomData,
        }
    }
}

impl<T, C: Codec<T>, M: Meta<T>> Decoder<T, C, M> {
    pub(crate) fn new(codec: Arc<C>, prefix: Prefix) -> Self {
        Self {
            codec,
            prefix,
            _types: PhantomData,
        }
    }

    /// The object stored under the full key `key` as `value`, with resource version `rev`.
    ///
    /// # Errors
    /// A [`MalformedValue`] when the key below the prefix is not UTF-8, the codec fails, or the
    /// object's key or resource version (read through `M`) is not the stored one.
    pub(crate) fn decode(&self, key: &[u8], value: &[u8], rev: i64) -> Result<T, MalformedValue> {
        let rv = revision_rv(rev);
        let rel = self.prefix.relative(key);
        let fail = |source: CodecError| MalformedValue {
            key: rel.clone().into_owned(),
            resource_version: rv.clone(),
            source,
        };
        let rel_key = key
            .strip_prefix(self.prefix.start())
            .and_then(|k| std::str::from_utf8(k).ok())
            .ok_or_else(|| fail(CodecError::msg("the key below the prefix is not UTF-8")))?;
        let obj = self
            .codec
            .decode(rel_key, value, rv.clone())
            .map_err(fail)?;
        match M::key(&obj) {
            Ok(k) if k.as_str() == rel_key => {}
            Ok(k) => {
                return Err(fail(CodecError::msg(format_args!(
                    "the object's key is {:?}, but it is stored under {rel_key:?}",
                    k.as_str()
                ))))
            }
            Err(e) => return Err(fail(CodecError::new(e))),
        }
        let got = M::resource_version(&obj);
        if got != rv {
            return Err(fail(CodecError::msg(format_args!(
                "the codec stamped resource version {got:?} instead of {rv:?}"
            ))));
        }
        Ok(obj)
    }
}
