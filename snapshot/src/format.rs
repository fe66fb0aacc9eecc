//! The snapshot file format: bytes in, bytes out, no file system.
//!
//! ```text
//! offset  size  field (integers little-endian)
//!      0     8  magic "KCSNAPSH"
//!      8     2  format version (1)
//!     10     2  flags (0; a reader refuses others)
//!     12     4  header length H (bytes 0..H, its checksum included)
//!     16     8  object count N
//!     24     8  creation time, milliseconds since the Unix epoch
//!     32     8  body length B
//!     40     4  body checksum (CRC-32C of the B body bytes)
//!     44     2  type name length T
//!     46     2  resource version length R
//!     48     T  type name (UTF-8)
//!   48+T     R  resource version (UTF-8)
//! 48+T+R     4  header checksum (CRC-32C of bytes 0..48+T+R); H = 52+T+R
//!      H     B  body: N times (u32 length L, L bytes of the codec's encoding)
//! ```
//! The file is exactly H + B bytes. Every length is checked against the bytes present before
//! anything is allocated, so a file cannot make a reader allocate more than its own size
//! justifies.

use crate::crc::{crc32c, Crc32c};
use crate::{LoadError, Part, SnapshotCodec, WriteError};
use kcache_core::ResourceVersion;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The magic bytes every snapshot starts with.
pub(crate) const MAGIC: [u8; 8] = *b"KCSNAPSH";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u16 = 1;
/// The fixed part of the header, before the type name.
const FIXED: usize = 48;
/// Bytes per object besides its encoding (its length).
const PER_OBJECT: usize = 4;

/// What a snapshot's header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotHeader {
    /// The format version.
    pub format_version: u16,
    /// The codec's type name.
    pub type_name: String,
    /// The resource version the objects are consistent at.
    pub resource_version: ResourceVersion,
    /// How many objects the body holds.
    pub object_count: u64,
    /// When the snapshot was taken (millisecond precision).
    pub created: SystemTime,
}

/// A loaded snapshot: its header and its objects, in the order they were written.
#[derive(Debug, Clone)]
pub struct Snapshot<T> {
    /// The header.
    pub header: SnapshotHeader,
    /// The objects.
    pub objects: Vec<T>,
}

/// What a loader accepts.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadPolicy {
    /// Snapshots older than this are refused ([`LoadError::TooOld`]); `None` accepts any age.
    pub max_age: Option<Duration>,
}

/// Encodes a whole snapshot file: `objects` (an exact count, as the header comes first) at
/// `resource_version`, taken at `created`.
pub fn encode<'a, T: 'a, C: SnapshotCodec<T> + ?Sized>(
    codec: &C,
    resource_version: &ResourceVersion,
    created: SystemTime,
    objects: impl ExactSizeIterator<Item = &'a T>,
) -> Result<Vec<u8>, WriteError> {
    let type_name = codec.type_name().as_bytes();
    let rv = resource_version.as_str().as_bytes();
    let t = u16::try_from(type_name.len()).map_err(|_| WriteError::TooLong("the type name"))?;
    let r = u16::try_from(rv.len()).map_err(|_| WriteError::TooLong("the resource version"))?;
    let header_len = FIXED + type_name.len() + rv.len() + 4;
    let count = objects.len() as u64;

    let mut out = vec![0u8; header_len];
    for (index, object) in objects.enumerate() {
        let at = out.len();
        out.extend_from_slice(&[0; PER_OBJECT]);
        codec
            .encode(object, &mut out)
            .map_err(|source| WriteError::Encode {
                index: index as u64,
                source,
            })?;
        let len = u32::try_from(out.len() - at - PER_OBJECT)
            .map_err(|_| WriteError::TooLong("an encoded object"))?;
        out[at..at + PER_OBJECT].copy_from_slice(&len.to_le_bytes());
    }
    let body_len = (out.len() - header_len) as u64;
    let body_crc = crc32c(&out[header_len..]);
    let millis = created
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));

    let h = &mut out[..header_len];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[10..12].copy_from_slice(&0u16.to_le_bytes());
    // header_len < 48 + 2 * 65,535 + 4 fits a u32.
    h[12..16].copy_from_slice(&(header_len as u32).to_le_bytes());
    h[16..24].copy_from_slice(&count.to_le_bytes());
    h[24..32].copy_from_slice(&millis.to_le_bytes());
    h[32..40].copy_from_slice(&body_len.to_le_bytes());
    h[40..44].copy_from_slice(&body_crc.to_le_bytes());
    h[44..46].copy_from_slice(&t.to_le_bytes());
    h[46..48].copy_from_slice(&r.to_le_bytes());
    h[FIXED..FIXED + type_name.len()].copy_from_slice(type_name);
    h[FIXED + type_name.len()..header_len - 4].copy_from_slice(rv);
    let header_crc = crc32c(&h[..header_len - 4]);
    h[header_len - 4..].copy_from_slice(&header_crc.to_le_bytes());
    Ok(out)
}

/// Reads only the header of `bytes`, checking everything about the file but the body's
/// checksum and objects: magic, version, lengths, header checksum, type, age, total length.
pub fn decode_header(
    bytes: &[u8],
    type_name: &str,
    policy: &LoadPolicy,
    now: SystemTime,
) -> Result<SnapshotHeader, LoadError> {
    let found = bytes.len() as u64;
    let truncated = |needed: usize| LoadError::Truncated {
        needed: needed as u64,
        found,
    };
    let magic_len = bytes.len().min(MAGIC.len());
    if bytes[..magic_len] != MAGIC[..magic_len] {
        return Err(LoadError::NotASnapshot);
    }
    let version = u16::from_le_bytes(field(bytes, 8).ok_or_else(|| truncated(10))?);
    if version != FORMAT_VERSION {
        return Err(LoadError::UnsupportedVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if bytes.len() < FIXED {
        return Err(truncated(FIXED));
    }
    let flags = u16::from_le_bytes(field(bytes, 10).ok_or_else(|| truncated(12))?);
    let header_len = u32::from_le_bytes(field(bytes, 12).ok_or_else(|| truncated(16))?) as usize;
    let count = u64::from_le_bytes(field(bytes, 16).ok_or_else(|| truncated(24))?);
    let millis = u64::from_le_bytes(field(bytes, 24).ok_or_else(|| truncated(32))?);
    let body_len = u64::from_le_bytes(field(bytes, 32).ok_or_else(|| truncated(40))?);
    let t = usize::from(u16::from_le_bytes(
        field(bytes, 44).ok_or_else(|| truncated(46))?,
    ));
    let r = usize::from(u16::from_le_bytes(
        field(bytes, 46).ok_or_else(|| truncated(48))?,
    ));
    if header_len != FIXED + t + r + 4 {
        return Err(LoadError::Malformed(
            "header length disagrees with its fields",
        ));
    }
    if bytes.len() < header_len {
        return Err(truncated(header_len));
    }
    let stored =
        u32::from_le_bytes(field(bytes, header_len - 4).ok_or_else(|| truncated(header_len))?);
    let computed = crc32c(&bytes[..header_len - 4]);
    if stored != computed {
        return Err(LoadError::Checksum {
            part: Part::Header,
            stored,
            computed,
        });
    }
    if flags != 0 {
        return Err(LoadError::Malformed("unknown flags"));
    }
    let name = std::str::from_utf8(&bytes[FIXED..FIXED + t])
        .map_err(|_| LoadError::Malformed("type name is not UTF-8"))?;
    let rv = std::str::from_utf8(&bytes[FIXED + t..FIXED + t + r])
        .map_err(|_| LoadError::Malformed("resource version is not UTF-8"))?;
    if name != type_name {
        return Err(LoadError::WrongType {
            expected: type_name.to_owned(),
            found: name.to_owned(),
        });
    }
    let created = UNIX_EPOCH
        .checked_add(Duration::from_millis(millis))
        .ok_or(LoadError::Malformed("creation time out of range"))?;
    if let Some(max_age) = policy.max_age {
        // A snapshot from the future (clock steps) counts as new.
        let age = now.duration_since(created).unwrap_or(Duration::ZERO);
        if age > max_age {
            return Err(LoadError::TooOld { age, max_age });
        }
    }
    let total = (header_len as u64).checked_add(body_len);
    match total {
        Some(total) if found < total => {
            return Err(LoadError::Truncated {
                needed: total,
                found,
            })
        }
        Some(total) if found > total => {
            return Err(LoadError::Malformed("bytes after the body"));
        }
        Some(_) => {}
        None => return Err(LoadError::Malformed("body length out of range")),
    }
    if count > body_len / PER_OBJECT as u64 {
        return Err(LoadError::Malformed("more objects than the body can hold"));
    }
    Ok(SnapshotHeader {
        format_version: version,
        type_name: name.to_owned(),
        resource_version: ResourceVersion::new(rv),
        object_count: count,
        created,
    })
}

/// Decodes a whole snapshot file (see [`decode_header`] for the header's checks), then checks
/// the body's checksum and decodes every object.
pub fn decode<T, C: SnapshotCodec<T> + ?Sized>(
    bytes: &[u8],
    codec: &C,
    policy: &LoadPolicy,
    now: SystemTime,
) -> Result<Snapshot<T>, LoadError> {
    decode_map(bytes, codec, policy, now, |obj| obj)
}

/// [`decode`], handing each object to `f` as it is decoded and keeping what `f` returns (say,
/// the object in an `Arc`: no second vector of the objects themselves is ever held).
pub fn decode_map<T, U, C: SnapshotCodec<T> + ?Sized>(
    bytes: &[u8],
    codec: &C,
    policy: &LoadPolicy,
    now: SystemTime,
    mut f: impl FnMut(T) -> U,
) -> Result<Snapshot<U>, LoadError> {
    let header = decode_header(bytes, codec.type_name(), policy, now)?;
    let header_len = u32::from_le_bytes(field(bytes, 12).ok_or(LoadError::NotASnapshot)?) as usize;
    let body = &bytes[header_len..];
    let stored = u32::from_le_bytes(field(bytes, 40).ok_or(LoadError::NotASnapshot)?);
    let mut crc = Crc32c::new();
    crc.update(body);
    let computed = crc.finish();
    if stored != computed {
        return Err(LoadError::Checksum {
            part: Part::Body,
            stored,
            computed,
        });
    }
    // decode_header checked count <= body.len() / 4, so this is bounded by the input's size.
    let capacity = usize::try_from(header.object_count).unwrap_or(usize::MAX);
    let mut objects = Vec::with_capacity(capacity.min(body.len() / PER_OBJECT));
    let mut rest = body;
    for index in 0..header.object_count {
        let len = field::<4>(rest, 0).ok_or(LoadError::Malformed("object length past the body"))?;
        let len = u32::from_le_bytes(len) as usize;
        let encoded = rest
            .get(PER_OBJECT..PER_OBJECT + len)
            .ok_or(LoadError::Malformed("object past the body"))?;
        let object = codec
            .decode(encoded)
            .map_err(|source| LoadError::Decode { index, source })?;
        objects.push(f(object));
        rest = &rest[PER_OBJECT + len..];
    }
    if !rest.is_empty() {
        return Err(LoadError::Malformed("bytes after the last object"));
    }
    Ok(Snapshot { header, objects })
}

/// `N` bytes of `bytes` at `at`, if present.
fn field<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}
