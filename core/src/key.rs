//! `ObjectKey`: the "namespace/name" key of a cached object.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

/// Why a key could not be built or split.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key (or its name part) is empty.
    #[error("object key has an empty name: {0:?}")]
    EmptyName(String),
    /// The key has more than one `/`, so it is neither "name" nor "namespace/name"
    /// (client-go's "unexpected key format").
    #[error("unexpected key format {0:?}: more than one '/'")]
    TooManySlashes(String),
    /// A namespace or name given separately contains a `/`.
    #[error("namespace or name {0:?} contains '/'")]
    SlashInPart(String),
    /// An object carries no name, so no key can be made for it.
    #[error("object has no name")]
    MissingName,
    /// A key function or accessor failed for another reason.
    #[error("cannot compute the object's key: {0}")]
    Other(String),
}

/// The key of a cached object: `"namespace/name"`, or `"name"` for cluster-scoped objects.
///
/// Cheap to clone (an `Arc<str>` inside) and immutable. It follows client-go's
/// `MetaNamespaceKeyFunc` / `SplitMetaNamespaceKey` rules: an empty namespace gives the bare name,
/// and a key splits into at most two parts.
///
/// # Examples
/// ```
/// use kcache_core::ObjectKey;
///
/// let key = ObjectKey::namespaced("default", "web-1")?;
/// assert_eq!(key.as_str(), "default/web-1");
/// assert_eq!(key.split(), (Some("default"), "web-1"));
///
/// let node = ObjectKey::new("node-a")?;
/// assert_eq!(node.split(), (None, "node-a"));
/// assert!(ObjectKey::new("a/b/c").is_err());
/// # Ok::<(), kcache_core::KeyError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(pub(crate) Arc<str>);

impl ObjectKey {
    /// Builds a key from its text, checking client-go's split rules: a non-empty name and at
    /// most one `/`.
    ///
    /// # Errors
    /// [`KeyError::EmptyName`] or [`KeyError::TooManySlashes`].
    pub fn new(key: impl Into<Arc<str>>) -> Result<Self, KeyError> {
        let key: Arc<str> = key.into();
        validate(&key)?;
        Ok(Self(key))
    }

    /// The key of a namespaced object, `"namespace/name"`; with an empty namespace, just `"name"`
    /// (client-go's `MetaNamespaceKeyFunc`).
    ///
    /// # Errors
    /// [`KeyError::EmptyName`] for an empty name, [`KeyError::SlashInPart`] if a part contains `/`.
    pub fn namespaced(namespace: &str, name: &str) -> Result<Self, KeyError> {
        check_parts(namespace, name)?;
        if namespace.is_empty() {
            return Ok(Self(Arc::from(name)));
        }
        Ok(Self(joined(namespace, name)))
    }

    /// Writes the key text [`namespaced`](Self::namespaced) would build into `out` (cleared
    /// first), with the same checks, without allocating a key: for hot paths that only look a
    /// key up (see [`Meta::write_key`](crate::Meta::write_key)).
    ///
    /// # Errors
    /// As [`ObjectKey::namespaced`]; `out` is then left empty.
    ///
    /// # Examples
    /// ```
    /// use kcache_core::ObjectKey;
    ///
    /// let mut out = String::new();
    /// ObjectKey::write_namespaced("default", "web-1", &mut out)?;
    /// assert_eq!(out, ObjectKey::namespaced("default", "web-1")?.as_str());
    /// ObjectKey::write_namespaced("", "node-a", &mut out)?;
    /// assert_eq!(out, "node-a");
    /// assert!(ObjectKey::write_namespaced("a/b", "c", &mut out).is_err() && out.is_empty());
    /// # Ok::<(), kcache_core::KeyError>(())
    /// ```
    pub fn write_namespaced(namespace: &str, name: &str, out: &mut String) -> Result<(), KeyError> {
        out.clear();
        check_parts(namespace, name)?;
        if !namespace.is_empty() {
            out.push_str(namespace);
            out.push('/');
        }
        out.push_str(name);
        Ok(())
    }

    /// The key of a cluster-scoped object: just its name.
    ///
    /// # Errors
    /// As [`ObjectKey::namespaced`] with an empty namespace.
    pub fn cluster(name: &str) -> Result<Self, KeyError> {
        Self::namespaced("", name)
    }

    /// Splits the key into namespace and name (client-go's `SplitMetaNamespaceKey`). The namespace
    /// is `None` for a cluster-scoped key (and for a key with an empty namespace part, `"/name"`).
    pub fn split(&self) -> (Option<&str>, &str) {
        match self.0.split_once('/') {
            Some(("", name)) => (None, name),
            Some((ns, name)) => (Some(ns), name),
            None => (None, &self.0),
        }
    }

    /// The namespace part, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.split().0
    }

    /// The name part.
    pub fn name(&self) -> &str {
        self.split().1
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The checks of [`ObjectKey::namespaced`]: a non-empty name, no `/` in either part.
fn check_parts(namespace: &str, name: &str) -> Result<(), KeyError> {
    if name.is_empty() {
        return Err(KeyError::EmptyName(format!("{namespace}/")));
    }
    for part in [namespace, name] {
        // A byte scan: `/` is ASCII, so it never occurs inside a multi-byte char, and keys are
        // short enough that a plain loop beats the generic substring search.
        if part.bytes().any(|b| b == b'/') {
            return Err(KeyError::SlashInPart(part.to_owned()));
        }
    }
    Ok(())
}

/// Keys up to this length are joined on the stack, so building one costs a single allocation.
const STACK_KEY: usize = 128;

/// `"namespace/name"` as one shared string, allocated once (a `String` turned into an `Arc<str>`
/// would be allocated twice and copied).
fn joined(namespace: &str, name: &str) -> Arc<str> {
    let len = namespace.len() + 1 + name.len();
    if len <= STACK_KEY {
        let mut buf = [0u8; STACK_KEY];
        buf[..namespace.len()].copy_from_slice(namespace.as_bytes());
        buf[namespace.len()] = b'/';
        buf[namespace.len() + 1..len].copy_from_slice(name.as_bytes());
        // Two `str`s joined by an ASCII byte are UTF-8, so this never falls through.
        if let Ok(s) = std::str::from_utf8(&buf[..len]) {
            return Arc::from(s);
        }
    }
    let mut s = String::with_capacity(len);
    s.push_str(namespace);
    s.push('/');
    s.push_str(name);
    Arc::from(s)
}

/// Splits a key given as text, with client-go's rules (`SplitMetaNamespaceKey`).
///
/// # Errors
/// [`KeyError::TooManySlashes`] for more than one `/`; [`KeyError::EmptyName`] for an empty name.
pub fn split_key(key: &str) -> Result<(Option<&str>, &str), KeyError> {
    validate(key)?;
    Ok(match key.split_once('/') {
        Some(("", name)) => (None, name),
        Some((ns, name)) => (Some(ns), name),
        None => (None, key),
    })
}

pub(crate) fn validate(key: &str) -> Result<(), KeyError> {
    // One byte scan (see `check_parts`): the position of the only `/`, if any.
    let mut slash = None;
    for (i, b) in key.bytes().enumerate() {
        if b == b'/' {
            if slash.is_some() {
                return Err(KeyError::TooManySlashes(key.to_owned()));
            }
            slash = Some(i);
        }
    }
    let name_empty = match slash {
        Some(i) => i + 1 == key.len(),
        None => key.is_empty(),
    };
    if name_empty {
        return Err(KeyError::EmptyName(key.to_owned()));
    }
    Ok(())
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ObjectKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for ObjectKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for ObjectKey {
    type Error = KeyError;
    fn try_from(s: &str) -> Result<Self, KeyError> {
        Self::new(s)
    }
}

impl TryFrom<String> for ObjectKey {
    type Error = KeyError;
    fn try_from(s: String) -> Result<Self, KeyError> {
        Self::new(s)
    }
}

impl From<ObjectKey> for Arc<str> {
    fn from(k: ObjectKey) -> Self {
        k.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_follows_client_go_rules() {
        assert_eq!(split_key("name"), Ok((None, "name")));
        assert_eq!(split_key("ns/name"), Ok((Some("ns"), "name")));
        assert_eq!(split_key("/name"), Ok((None, "name")));
        assert_eq!(
            split_key("a/b/c"),
            Err(KeyError::TooManySlashes("a/b/c".into()))
        );
        assert_eq!(split_key(""), Err(KeyError::EmptyName(String::new())));
        assert_eq!(split_key("ns/"), Err(KeyError::EmptyName("ns/".into())));
    }

    #[test]
    fn namespaced_with_empty_namespace_is_the_bare_name() {
        let k = ObjectKey::namespaced("", "n").unwrap();
        assert_eq!(k.as_str(), "n");
        assert_eq!(k.namespace(), None);
        assert_eq!(k.name(), "n");
    }

    #[test]
    fn parts_with_slashes_are_rejected() {
        assert!(matches!(
            ObjectKey::namespaced("a/b", "c"),
            Err(KeyError::SlashInPart(_))
        ));
        assert!(matches!(
            ObjectKey::namespaced("a", "b/c"),
            Err(KeyError::SlashInPart(_))
        ));
        assert!(matches!(
            ObjectKey::namespaced("a", ""),
            Err(KeyError::EmptyName(_))
        ));
    }

    #[test]
    fn namespaced_joins_short_long_and_non_ascii_parts() {
        for (ns, name) in [
            ("ns", "n"),
            ("ä-ns", "名前"),
            (&*"n".repeat(63), &*"m".repeat(64)),
            (&*"n".repeat(64), &*"m".repeat(64)),
            (&*"n".repeat(300), "x"),
        ] {
            let k = ObjectKey::namespaced(ns, name).unwrap();
            assert_eq!(k.as_str(), format!("{ns}/{name}"));
            assert_eq!(k.split(), (Some(ns), name));
        }
    }

    /// The split rules as first written (`splitn`), to check the byte scan against.
    fn validate_by_splitn(key: &str) -> Result<(), KeyError> {
        let mut parts = key.splitn(3, '/');
        let first = parts.next().unwrap_or_default();
        let name = match (parts.next(), parts.next()) {
            (_, Some(_)) => return Err(KeyError::TooManySlashes(key.to_owned())),
            (Some(name), None) => name,
            (None, None) => first,
        };
        if name.is_empty() {
            return Err(KeyError::EmptyName(key.to_owned()));
        }
        Ok(())
    }

    #[test]
    fn validate_agrees_with_splitn_on_every_short_text() {
        let alphabet = ["a", "/", "é"];
        let mut texts = vec![String::new()];
        for _ in 0..5 {
            let longer: Vec<String> = texts
                .iter()
                .flat_map(|t| alphabet.iter().map(move |c| format!("{t}{c}")))
                .collect();
            texts.extend(longer);
        }
        texts.sort();
        texts.dedup();
        for t in &texts {
            assert_eq!(validate(t), validate_by_splitn(t), "{t:?}");
        }
        assert!(texts.len() > 300);
    }

    #[test]
    fn clones_share_one_allocation() {
        let a = ObjectKey::new("ns/x").unwrap();
        let b = a.clone();
        assert!(std::ptr::eq(a.as_str().as_ptr(), b.as_str().as_ptr()));
        let s: &str = b.borrow();
        assert_eq!(s, "ns/x");
    }
}
