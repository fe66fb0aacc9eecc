//! Key layout under the prefix, revisions as resource versions, continue tokens.

use crate::EtcdError;
use kcache_core::ResourceVersion;

/// A key prefix that always ends with `/`, and the end of its key range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prefix {
    start: Vec<u8>,
    end: Vec<u8>,
}

impl Prefix {
    /// `prefix`, with a `/` appended when it does not end with one (so `"/registry/pods"` does not
    /// also cover `"/registry/podsecuritypolicies/..."`).
    pub(crate) fn new(prefix: &str) -> Self {
        let mut start = prefix.as_bytes().to_vec();
        if start.last() != Some(&b'/') {
            start.push(b'/');
        }
        let end = range_end(&start);
        Self { start, end }
    }

    /// The prefix text (with its trailing `/`).
    pub(crate) fn as_str(&self) -> &str {
        // Built from a &str plus '/', so always UTF-8.
        std::str::from_utf8(&self.start).unwrap_or("")
    }

    /// The first key of the range (the prefix itself).
    pub(crate) fn start(&self) -> &[u8] {
        &self.start
    }

    /// The exclusive end of the range.
    pub(crate) fn end(&self) -> &[u8] {
        &self.end
    }

    /// The full etcd key of the object key `key`.
    pub(crate) fn key(&self, key: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.start.len() + key.len());
        k.extend_from_slice(&self.start);
        k.extend_from_slice(key.as_bytes());
        k
    }

    /// The key below the prefix, lossily decoded if it is not UTF-8 (the caller checks it against
    /// the object's key, so a lossy key never matches silently).
    pub(crate) fn relative<'a>(&self, full: &'a [u8]) -> std::borrow::Cow<'a, str> {
        let rel = full.strip_prefix(self.start.as_slice()).unwrap_or(full);
        String::from_utf8_lossy(rel)
    }
}

/// The smallest key greater than every key starting with `prefix` (etcd's `GetPrefixRangeEnd`).
fn range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte was 0xff: the range extends to the end of the keyspace.
    vec![0]
}

/// A resource version as an etcd revision: `None` for `""` and `"0"` (the current revision).
///
/// # Errors
/// [`EtcdError::InvalidResourceVersion`] unless the version is a positive decimal `i64`.
pub(crate) fn parse_revision(rv: &ResourceVersion) -> Result<Option<i64>, EtcdError> {
    match rv.as_str() {
        "" | "0" => Ok(None),
        s => match s.parse::<i64>() {
            Ok(n) if n > 0 && s.bytes().all(|b| b.is_ascii_digit()) => Ok(Some(n)),
            _ => Err(EtcdError::InvalidResourceVersion(rv.clone())),
        },
    }
}

/// The resource version of an etcd revision.
pub(crate) fn revision_rv(rev: i64) -> ResourceVersion {
    ResourceVersion::from(rev.to_string())
}

/// A continue token: the revision of the list and the next full key, as `"<rev>:<hex key>"`.
pub(crate) fn encode_continue(rev: i64, next_key: &[u8]) -> String {
    let mut s = String::with_capacity(24 + 2 * next_key.len());
    s.push_str(&rev.to_string());
    s.push(':');
    for b in next_key {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    s
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The revision and next key of a continue token; the key must lie inside `prefix`'s range.
///
/// # Errors
/// [`EtcdError::InvalidContinueToken`] for anything [`encode_continue`] did not produce for this
/// prefix.
pub(crate) fn decode_continue(token: &str, prefix: &Prefix) -> Result<(i64, Vec<u8>), EtcdError> {
    let bad = || EtcdError::InvalidContinueToken(token.to_owned());
    let (rev, hex) = token.split_once(':').ok_or_else(bad)?;
    let rev = rev.parse::<i64>().ok().filter(|r| *r > 0).ok_or_else(bad)?;
    if hex.len() % 2 != 0 {
        return Err(bad());
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let key = hex
        .as_bytes()
        .chunks(2)
        .map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(bad)?;
    if key.as_slice() < prefix.start() || key.as_slice() >= prefix.end() {
        return Err(bad());
    }
    Ok((rev, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_gets_a_trailing_slash_and_a_tight_range() {
        let p = Prefix::new("/registry/pods");
        assert_eq!(p.as_str(), "/registry/pods/");
        assert_eq!(p.end(), b"/registry/pods0");
        assert_eq!(p.key("ns/web"), b"/registry/pods/ns/web");
        assert_eq!(p.relative(b"/registry/pods/ns/web"), "ns/web");
        assert_eq!(Prefix::new("a/").as_str(), "a/");
        assert_eq!(range_end(&[b'a', 0xff]), vec![b'b']);
        assert_eq!(range_end(&[0xff]), vec![0]);
    }

    #[test]
    fn revisions_are_positive_decimals() {
        assert_eq!(parse_revision(&"".into()).unwrap(), None);
        assert_eq!(parse_revision(&"0".into()).unwrap(), None);
        assert_eq!(parse_revision(&"42".into()).unwrap(), Some(42));
        for bad in ["-1", "+3", "abc", "1.5", "99999999999999999999"] {
            assert!(parse_revision(&bad.into()).is_err(), "{bad}");
        }
    }

    #[test]
    fn continue_tokens_round_trip_and_reject_foreign_ones() {
        let p = Prefix::new("/x");
        let t = encode_continue(17, b"/x/ns/a\0");
        assert_eq!(t, "17:2f782f6e732f6100");
        assert_eq!(
            decode_continue(&t, &p).unwrap(),
            (17, b"/x/ns/a\0".to_vec())
        );
        for bad in ["", "17", "x:00", "0:2f78", "17:2f7", "17:zz", "17:2f79"] {
            assert!(decode_continue(bad, &p).is_err(), "{bad}");
        }
    }
}
