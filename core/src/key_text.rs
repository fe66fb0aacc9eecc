//! `KeyText`: a checked key's text, inline when short, for hot paths that may never need an
//! [`ObjectKey`].

use crate::inline_text::InlineText;
use crate::key::validate;
use crate::{KeyError, ObjectKey};
use std::fmt;
use std::sync::Arc;

/// The longest key text kept inline, in bytes (most Kubernetes keys are shorter).
const INLINE: usize = 38;

/// The text of a key that passed [`ObjectKey::new`]'s checks, kept inline (no allocation) when
/// at most 38 bytes long, shared as an [`ObjectKey`] otherwise.
///
/// A writer that only has to find a key somewhere (a `DeltaFifo` write whose key is usually
/// queued already) carries a `KeyText` and builds the [`ObjectKey`] only when it has to store a
/// new one: that allocation then happens where the key lives, not on the writer's thread.
///
/// # Examples
/// ```
/// use kcache_core::{KeyText, ObjectKey};
///
/// let text = KeyText::new("default/web-1")?;
/// assert_eq!(text.as_str(), "default/web-1");
/// assert_eq!(text.to_key(), ObjectKey::new("default/web-1")?);
/// assert!(KeyText::new("a/b/c").is_err());
/// # Ok::<(), kcache_core::KeyError>(())
/// ```
#[derive(Clone)]
pub struct KeyText(Repr);

#[derive(Clone)]
enum Repr {
    Inline(InlineText<INLINE>),
    Shared(ObjectKey),
}

impl KeyText {
    /// Checks `text` as [`ObjectKey::new`] does and keeps it (inline when short).
    ///
    /// # Errors
    /// As [`ObjectKey::new`].
    pub fn new(text: &str) -> Result<Self, KeyError> {
        validate(text)?;
        Ok(Self(match InlineText::new(text) {
            Some(inline) => Repr::Inline(inline),
            None => Repr::Shared(ObjectKey(Arc::from(text))),
        }))
    }

    /// `key`'s text, copied inline when short (no allocation, no reference count to share
    /// between threads), else sharing `key`'s allocation. The text is not checked again.
    pub fn copied(key: &ObjectKey) -> Self {
        Self(match InlineText::new(key.as_str()) {
            Some(inline) => Repr::Inline(inline),
            None => Repr::Shared(key.clone()),
        })
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline(inline) => inline.as_str(),
            Repr::Shared(key) => key.as_str(),
        }
    }

    /// The key (an allocation for an inline text, a reference count otherwise).
    pub fn to_key(&self) -> ObjectKey {
        match &self.0 {
            Repr::Inline(_) => ObjectKey(Arc::from(self.as_str())),
            Repr::Shared(key) => key.clone(),
        }
    }

    /// The key, without a new allocation for a long text.
    pub fn into_key(self) -> ObjectKey {
        match self.0 {
            Repr::Shared(key) => key,
            Repr::Inline(_) => self.to_key(),
        }
    }
}

impl From<ObjectKey> for KeyText {
    fn from(key: ObjectKey) -> Self {
        Self(Repr::Shared(key))
    }
}

impl PartialEq for KeyText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for KeyText {}

impl std::hash::Hash for KeyText {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for KeyText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for KeyText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_of_every_length_round_trip_and_bad_ones_are_refused() {
        let long = format!("{}/{}", "n".repeat(20), "é".repeat(20));
        for text in [
            "a",
            "ns/name",
            &"x".repeat(INLINE),
            &"x".repeat(INLINE + 1),
            // A multi-byte char ending at, and one straddling, the inline limit.
            &format!("{}é", "x".repeat(INLINE - 2)),
            &format!("{}é", "x".repeat(INLINE - 1)),
            &long,
        ] {
            let t = KeyText::new(text).unwrap();
            assert_eq!(t.as_str(), text);
            assert_eq!(t.to_key().as_str(), text);
            assert_eq!(t.clone().into_key(), ObjectKey::new(text).unwrap());
            assert_eq!(t, KeyText::from(ObjectKey::new(text).unwrap()));
            assert_eq!(t, KeyText::copied(&ObjectKey::new(text).unwrap()));
            assert_eq!(KeyText::copied(&t.to_key()).as_str(), text);
        }
        for bad in ["", "ns/", "a/b/c"] {
            assert_eq!(
                KeyText::new(bad).map(|t| t.to_string()),
                ObjectKey::new(bad).map(|k| k.to_string())
            );
        }
    }

    #[test]
    fn stays_small() {
        assert_eq!(std::mem::size_of::<KeyText>(), 40);
    }

    #[test]
    fn a_long_text_is_shared_not_copied() {
        let t = KeyText::new(&"y".repeat(100)).unwrap();
        let (a, b) = (t.to_key(), t.into_key());
        assert!(std::ptr::eq(a.as_str().as_ptr(), b.as_str().as_ptr()));
    }
}
