//! `ResourceVersion`: an opaque version string from the source of truth.

use std::fmt;
use std::sync::Arc;

/// An opaque resource version, as a backend reports it (Kubernetes `metadata.resourceVersion`,
/// an etcd `mod_revision`, the in-memory source's counter).
///
/// Cheap to clone. Generic code never orders resource versions (Kubernetes declares them opaque);
/// a backend that knows more may parse its own. The empty version means "not set" / "most recent",
/// and `"0"` means "any version" in a list request, as in Kubernetes.
///
/// # Examples
/// ```
/// use kcache_core::ResourceVersion;
///
/// let rv = ResourceVersion::from("42");
/// assert_eq!(rv.as_str(), "42");
/// assert!(ResourceVersion::default().is_empty());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct ResourceVersion(Option<Arc<str>>);

impl ResourceVersion {
    /// A resource version from its text.
    pub fn new(rv: impl Into<Arc<str>>) -> Self {
        let rv: Arc<str> = rv.into();
        if rv.is_empty() {
            Self(None)
        } else {
            Self(Some(rv))
        }
    }

    /// The version as text (`""` when unset).
    pub fn as_str(&self) -> &str {
        self.0.as_deref().unwrap_or("")
    }

    /// Whether the version is unset.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
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

impl From<String> for ResourceVersion {
    fn from(s: String) -> Self {
        Self::new(s)
    }
}

impl From<u64> for ResourceVersion {
    fn from(n: u64) -> Self {
        Self::new(n.to_string())
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
}
