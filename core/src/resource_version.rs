//! `ResourceVersion`: an opaque version string from the source of truth.

use crate::inline_text::InlineText;
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// An opaque resource version, as a backend reports it (Kubernetes `metadata.resourceVersion`,
/// an etcd `mod_revision`, the in-memory source's counter).
///
/// Cheap to clone. The pipeline (reflector, queues, cache) treats versions as opaque, as
/// Kubernetes declares them: it stores them, compares them for equality (an object whose version
/// is unchanged is unchanged) and hands them back to the source to resume from; it never orders
/// them. The features that must know whether one version is newer than another (an informer's
/// read-your-writes wait, the controller's consistency store, a snapshot's consistency check)
/// order them through [`cmp_decimal`](Self::cmp_decimal) only, which answers only for decimal
/// integers (kcache-memory's, etcd's and Kubernetes' versions are). The empty version means
/// "not set" / "most recent", and `"0"` means "any version" in a list request, as in Kubernetes.
///
/// # Examples
/// ```
/// use kcache_core::ResourceVersion;
///
/// let rv = ResourceVersion::from("42");
/// assert_eq!(rv.as_str(), "42");
/// assert!(ResourceVersion::default().is_empty());
/// ```
#[derive(Clone, Default)]
pub struct ResourceVersion(Repr);

/// The longest version kept inline, in bytes: every `u64` (20 digits) fits, so Kubernetes',
/// etcd's and the memory source's versions never allocate.
const INLINE: usize = 22;

#[derive(Clone, Default)]
enum Repr {
    #[default]
    Empty,
    /// Non-empty.
    Inline(InlineText<INLINE>),
    Shared(Arc<str>),
}

impl ResourceVersion {
    /// A resource version from its text (kept inline, without an allocation, up to 22 bytes).
    pub fn new(rv: impl AsRef<str>) -> Self {
        let rv = rv.as_ref();
        if rv.is_empty() {
            return Self(Repr::Empty);
        }
        Self(match InlineText::new(rv) {
            Some(inline) => Repr::Inline(inline),
            None => Repr::Shared(Arc::from(rv)),
        })
    }

    /// The version as text (`""` when unset).
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Empty => "",
            Repr::Inline(inline) => inline.as_str(),
            Repr::Shared(s) => s,
        }
    }

    /// Whether the version is unset.
    pub fn is_empty(&self) -> bool {
        matches!(self.0, Repr::Empty)
    }

    /// Orders `self` and `other` as decimal integers of any length, when both are one: a
    /// non-empty run of ASCII digits (no sign, no spaces; leading zeros do not count). `None`
    /// when either is not (an empty version included): such versions have no order kcache knows.
    ///
    /// This is the only ordering kcache applies to versions (see the type's documentation).
    ///
    /// # Examples
    /// ```
    /// use kcache_core::ResourceVersion;
    /// use std::cmp::Ordering;
    ///
    /// let rv = ResourceVersion::from;
    /// assert_eq!(rv("9").cmp_decimal(&rv("10")), Some(Ordering::Less));
    /// assert_eq!(rv("007").cmp_decimal(&rv("7")), Some(Ordering::Equal));
    /// assert_eq!(rv("h3f").cmp_decimal(&rv("7")), None);
    /// assert_eq!(rv("+7").cmp_decimal(&rv("7")), None);
    /// ```
    pub fn cmp_decimal(&self, other: &Self) -> Option<Ordering> {
        let (a, b) = (
            decimal_digits(self.as_str())?,
            decimal_digits(other.as_str())?,
        );
        Some(a.len().cmp(&b.len()).then_with(|| a.cmp(b)))
    }

    /// Whether the version is a decimal integer, which [`cmp_decimal`](Self::cmp_decimal) can
    /// order.
    pub fn is_decimal(&self) -> bool {
        decimal_digits(self.as_str()).is_some()
    }
}

/// `s` without its leading zeros, if it is a non-empty run of ASCII digits.
fn decimal_digits(s: &str) -> Option<&str> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.trim_start_matches('0'))
}

impl PartialEq for ResourceVersion {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ResourceVersion {}

impl std::hash::Hash for ResourceVersion {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for ResourceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for ResourceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for ResourceVersion {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<Arc<str>> for ResourceVersion {
    fn from(s: Arc<str>) -> Self {
        if s.len() <= INLINE {
            Self::new(&*s)
        } else {
            Self(Repr::Shared(s))
        }
    }
}

impl From<String> for ResourceVersion {
    fn from(s: String) -> Self {
        Self::new(s)
    }
}

impl From<u64> for ResourceVersion {
    /// The decimal text of `n`, written inline (no allocation).
    fn from(n: u64) -> Self {
        let mut digits = [0u8; INLINE];
        let mut start = INLINE;
        let mut rest = n;
        loop {
            start -= 1;
            // `rest % 10` is a single decimal digit.
            digits[start] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        // ASCII digits, at most 20 of them: always text that fits inline.
        let text = std::str::from_utf8(&digits[start..]).unwrap_or_default();
        Self::new(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_text_is_the_unset_version() {
        assert_eq!(ResourceVersion::from(""), ResourceVersion::default());
        assert!(ResourceVersion::from("").is_empty());
        assert!(!ResourceVersion::from("0").is_empty());
        assert_eq!(ResourceVersion::from(7u64).as_str(), "7");
    }

    #[test]
    fn numbers_are_their_decimal_text() {
        for n in [0, 9, 10, 99, 100, 12_345, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(ResourceVersion::from(n).as_str(), n.to_string());
            assert_eq!(
                ResourceVersion::from(n),
                ResourceVersion::from(n.to_string())
            );
        }
    }

    #[test]
    fn inline_and_shared_texts_compare_and_hash_by_text() {
        use std::collections::hash_map::DefaultHasher;
        use std::hash::{Hash, Hasher};
        let hash = |rv: &ResourceVersion| {
            let mut h = DefaultHasher::new();
            rv.hash(&mut h);
            h.finish()
        };
        for text in [
            "1",
            "é",
            "1234567890123456789012",
            "12345678901234567890123",
            &"x".repeat(300),
        ] {
            let a = ResourceVersion::from(text);
            let b = ResourceVersion::from(Arc::<str>::from(text));
            let c = ResourceVersion(Repr::Shared(Arc::from(text)));
            assert_eq!(a.as_str(), text);
            assert_eq!(c.as_str(), text);
            assert_eq!(a, b);
            assert_eq!(a, c);
            assert_eq!(hash(&a), hash(&c));
            assert!(!a.is_empty());
        }
        assert_ne!(ResourceVersion::from("12"), ResourceVersion::from("1"));
        assert_eq!(
            ResourceVersion::from(Arc::<str>::from("")),
            ResourceVersion::default()
        );
    }

    #[test]
    fn decimal_versions_are_ordered_by_value_at_any_length_and_others_not_at_all() {
        let rv = ResourceVersion::from;
        let long = "1".repeat(40);
        for (a, b, want) in [
            ("1", "2", Some(Ordering::Less)),
            ("10", "9", Some(Ordering::Greater)),
            ("0", "000", Some(Ordering::Equal)),
            ("0042", "42", Some(Ordering::Equal)),
            (
                "18446744073709551616",
                "18446744073709551615",
                Some(Ordering::Greater),
            ),
            (
                long.as_str(),
                "99999999999999999999",
                Some(Ordering::Greater),
            ),
            ("", "1", None),
            ("1", "", None),
            ("+1", "1", None),
            (" 1", "1", None),
            ("1a", "1", None),
            ("h0001", "h0002", None),
            ("١", "1", None), // a non-ASCII digit
        ] {
            assert_eq!(rv(a).cmp_decimal(&rv(b)), want, "{a:?} vs {b:?}");
            assert_eq!(
                rv(b).cmp_decimal(&rv(a)),
                want.map(Ordering::reverse),
                "{b:?} vs {a:?}"
            );
            assert_eq!(rv(a).is_decimal() && rv(b).is_decimal(), want.is_some());
        }
    }

    #[test]
    fn stays_small() {
        assert_eq!(std::mem::size_of::<ResourceVersion>(), 24);
    }
}
