//! `InlineText<N>`: a short string stored in place, the inline form of [`KeyText`] and
//! [`ResourceVersion`](crate::ResourceVersion).
//!
//! [`KeyText`]: crate::KeyText

/// Up to `N` bytes (at most 255) of text stored in place: no allocation, and a copy touches no
/// shared reference count.
#[derive(Clone, Copy)]
pub(crate) struct InlineText<const N: usize> {
    /// The first `len` bytes of `bytes`: a whole `str`, copied byte for byte.
    len: u8,
    bytes: [u8; N],
}

impl<const N: usize> InlineText<N> {
    /// `text`, if it fits.
    #[inline]
    pub(crate) fn new(text: &str) -> Option<Self> {
        let len = u8::try_from(text.len()).ok().filter(|_| text.len() <= N)?;
        let mut bytes = [0; N];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        Some(Self { len, bytes })
    }

    /// The text.
    #[inline]
    pub(crate) fn as_str(&self) -> &str {
        // A byte-for-byte copy of a whole `str`: always UTF-8 (the fallback is never taken).
        self.bytes
            .get(..usize::from(self.len))
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_up_to_the_capacity_fit_and_round_trip() {
        for text in ["", "a", "1234", "é", "12345678", "1234567é"] {
            let t = InlineText::<9>::new(text).unwrap();
            assert_eq!(t.as_str(), text);
        }
        assert!(InlineText::<9>::new("1234567890").is_none());
        assert!(InlineText::<9>::new("12345678é").is_none(), "10 bytes");
        assert!(
            InlineText::<300>::new(&"x".repeat(256)).is_none(),
            "longer than a u8 says"
        );
        assert_eq!(
            InlineText::<300>::new(&"x".repeat(255))
                .unwrap()
                .as_str()
                .len(),
            255
        );
    }
}
