//! `SlotKey`: a stored object's key, kept compactly in its slot.
//!
//! An [`ObjectKey`] costs a stored object 16 bytes of fat pointer plus a separate allocation of
//! 16 bytes of reference counts and the text. Most Kubernetes keys are short, so a slot keeps the
//! text itself: keys of up to [`INLINE`] bytes live inside the slot (no allocation at all), longer
//! ones in a boxed `str` (just the text). Either way the key takes 24 bytes of the slot.
//!
//! The price: the store hands out an [`ObjectKey`] (`list_keys`, `index_keys`, errors) by building
//! a new one from the text, an allocation per key, instead of bumping a reference count.

use kcache_core::ObjectKey;
use std::cmp::Ordering;
use std::fmt;

/// The longest key kept inside the slot, in bytes.
pub(crate) const INLINE: usize = 22;

/// A key's text, inline when short (see the module doc).
#[derive(Clone)]
pub(crate) enum SlotKey {
    /// The first `len` bytes of `bytes`: a whole `str`, copied byte for byte.
    Inline { len: u8, bytes: [u8; INLINE] },
    /// A key longer than [`INLINE`] bytes.
    Boxed(Box<str>),
}

impl SlotKey {
    /// The empty key, held by a free slot.
    pub(crate) const EMPTY: SlotKey = SlotKey::Inline {
        len: 0,
        bytes: [0; INLINE],
    };

    /// A copy of `key`'s text.
    pub(crate) fn new(key: &str) -> Self {
        match u8::try_from(key.len()) {
            Ok(len) if key.len() <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..key.len()].copy_from_slice(key.as_bytes());
                SlotKey::Inline { len, bytes }
            }
            _ => SlotKey::Boxed(key.into()),
        }
    }

    /// The key's bytes (UTF-8): what lookups, hashes and orderings use, without re-checking the
    /// text.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            SlotKey::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or(&[]),
            SlotKey::Boxed(s) => s.as_bytes(),
        }
    }

    /// The key as text.
    ///
    /// An inline key is a byte-for-byte copy of a whole `str`, so it is always valid UTF-8; the
    /// (never taken) fallback of a failed check is the empty string rather than a panic.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            SlotKey::Inline { .. } => std::str::from_utf8(self.as_bytes()).unwrap_or_default(),
            SlotKey::Boxed(s) => s,
        }
    }

    /// The key's namespace part, `""` for a cluster-scoped key (as
    /// `ObjectKey::namespace().unwrap_or("")`).
    pub(crate) fn namespace(&self) -> &str {
        key_namespace(self.as_str())
    }

    /// A new [`ObjectKey`] with this text (an allocation). `None` never happens in practice: the
    /// text was an [`ObjectKey`]'s, so it passes the key checks again.
    pub(crate) fn to_key(&self) -> Option<ObjectKey> {
        ObjectKey::new(self.as_str()).ok()
    }
}

/// The namespace part of a key's text, `""` for a cluster-scoped key (client-go's split rules).
pub(crate) fn key_namespace(key: &str) -> &str {
    key.split_once('/').map_or("", |(ns, _)| ns)
}

impl PartialEq for SlotKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for SlotKey {}

impl PartialOrd for SlotKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Byte order, which for UTF-8 is the order of the texts (and of [`ObjectKey`]s).
impl Ord for SlotKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl fmt::Debug for SlotKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for SlotKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_slot_key_takes_24_bytes_and_leaves_a_niche() {
        assert_eq!(std::mem::size_of::<SlotKey>(), 24);
        assert_eq!(std::mem::size_of::<Option<(SlotKey, Arc<u8>)>>(), 32);
    }

    #[test]
    fn keys_round_trip_on_both_sides_of_the_inline_boundary() {
        for n in [0, 1, INLINE - 1, INLINE, INLINE + 1, 64, 300] {
            let text: String = "k".repeat(n);
            let key = SlotKey::new(&text);
            assert_eq!(key.as_str(), text);
            assert_eq!(key.as_bytes(), text.as_bytes());
            assert_eq!(matches!(key, SlotKey::Inline { .. }), n <= INLINE, "{n}");
        }
    }

    #[test]
    fn non_ascii_keys_round_trip_even_when_a_char_straddles_the_boundary() {
        // Multi-byte chars (2, 3 and 4 bytes) ending keys of every length around the boundary.
        for c in ["é", "日", "🦀"] {
            for prefix in INLINE - 5..=INLINE + 1 {
                let text = format!("ns/{}{c}", "n".repeat(prefix - 3));
                let key = SlotKey::new(&text);
                assert_eq!(key.as_str(), text);
                assert_eq!(matches!(key, SlotKey::Inline { .. }), text.len() <= INLINE);
                assert_eq!(key.namespace(), "ns");
                assert_eq!(
                    key.to_key().map(|k| k.as_str().to_owned()),
                    Some(text.clone())
                );
            }
        }
        assert_eq!(SlotKey::new("名前空間/名前").namespace(), "名前空間");
    }

    #[test]
    fn order_and_namespace_match_object_key() {
        let texts = ["b", "a/z", "a/ä", "ab/c", &"x".repeat(40), "a/b"];
        let mut slots: Vec<SlotKey> = texts.iter().map(|t| SlotKey::new(t)).collect();
        let mut keys: Vec<ObjectKey> = texts.iter().map(|t| ObjectKey::new(*t).unwrap()).collect();
        slots.sort();
        keys.sort();
        assert!(slots
            .iter()
            .map(SlotKey::as_str)
            .eq(keys.iter().map(ObjectKey::as_str)));
        for (s, k) in slots.iter().zip(&keys) {
            assert_eq!(s.namespace(), k.namespace().unwrap_or(""));
        }
        assert_eq!(SlotKey::new("/n").namespace(), "");
    }
}
