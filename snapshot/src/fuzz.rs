//! The `snapshot_load` fuzz target's body (feature `fuzz`): arbitrary bytes read as a snapshot
//! must give a typed error or a valid load, never a panic.
//!
//! The target also bounds the loader's peak allocation by the input's size (see
//! `fuzz/fuzz_targets/snapshot_load.rs` and `tests/fuzz_regressions.rs`): [`load_raw`] decodes
//! with [`RawCodec`], which allocates exactly what each object's bytes hold, so its bound is
//! tight and measures this crate alone.

use crate::crc::crc32c;
use crate::format::{self, LoadPolicy, Snapshot};
use crate::{CodecError, LoadError, PostcardCodec, SnapshotCodec};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The object type the target decodes with the default codec: strings, a sequence of pairs,
/// bytes and integers, the shapes Kubernetes objects are made of.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FuzzObject {
    /// A name.
    pub name: String,
    /// Labels.
    pub labels: Vec<(String, String)>,
    /// A payload.
    pub data: Vec<u8>,
    /// A number.
    pub generation: u64,
}

/// A codec that keeps each object's bytes as they are.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawCodec;

impl SnapshotCodec<Vec<u8>> for RawCodec {
    fn type_name(&self) -> &str {
        TYPE_NAME
    }
    fn encode(&self, object: &Vec<u8>, out: &mut Vec<u8>) -> Result<(), CodecError> {
        out.extend_from_slice(object);
        Ok(())
    }
    fn decode(&self, bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
        Ok(bytes.to_vec())
    }
}

/// The type name both fuzz codecs use, so one corpus exercises both.
pub const TYPE_NAME: &str = "kcache.fuzz/v1";

/// The "now" of every fuzz load: 2026-01-01T00:00:00Z.
pub fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_767_225_600)
}

/// The policy of every fuzz load: at most 30 days old.
pub fn policy() -> LoadPolicy {
    LoadPolicy {
        max_age: Some(Duration::from_secs(30 * 86_400)),
    }
}

/// Loads `bytes` with [`RawCodec`]; a valid load is re-encoded and must give the same bytes.
pub fn load_raw(bytes: &[u8]) -> Result<Snapshot<Vec<u8>>, LoadError> {
    let snapshot = format::decode(bytes, &RawCodec, &policy(), now())?;
    assert_eq!(snapshot.objects.len() as u64, snapshot.header.object_count);
    let again = format::encode(
        &RawCodec,
        &snapshot.header.resource_version,
        snapshot.header.created,
        snapshot.objects.iter(),
    );
    assert_eq!(
        again.ok().as_deref(),
        Some(bytes),
        "a valid snapshot re-encodes to itself"
    );
    Ok(snapshot)
}

/// Loads `bytes` with the default codec on [`FuzzObject`]; a valid load is re-encoded and
/// decoded again to the same objects.
pub fn load_postcard(bytes: &[u8]) -> Result<Snapshot<FuzzObject>, LoadError> {
    let codec = PostcardCodec::<FuzzObject>::named(TYPE_NAME);
    let snapshot = format::decode(bytes, &codec, &policy(), now())?;
    assert_eq!(snapshot.objects.len() as u64, snapshot.header.object_count);
    let again = format::encode(
        &codec,
        &snapshot.header.resource_version,
        snapshot.header.created,
        snapshot.objects.iter(),
    )
    .map_err(|e| format!("{e}"));
    let reloaded = again
        .as_deref()
        .map_err(Clone::clone)
        .and_then(|b| format::decode(b, &codec, &policy(), now()).map_err(|e| format!("{e}")));
    assert_eq!(
        reloaded.map(|s| s.objects),
        Ok(snapshot.objects.clone()),
        "a valid snapshot round-trips"
    );
    Ok(snapshot)
}

/// `bytes` with both checksums recomputed where the header's lengths allow, so that the fuzzer
/// reaches the checks and the decoding behind them (a random input almost never has them right).
pub fn with_checksums_fixed(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let field = |at: usize| -> Option<usize> {
        let b: [u8; 4] = out.get(at..at + 4)?.try_into().ok()?;
        Some(u32::from_le_bytes(b) as usize)
    };
    let Some(header_len) = field(12) else {
        return out;
    };
    if header_len < 52 || header_len > out.len() {
        return out;
    }
    let body = crc32c(&out[header_len..]);
    out[40..44].copy_from_slice(&body.to_le_bytes());
    let header = crc32c(&out[..header_len - 4]);
    out[header_len - 4..header_len].copy_from_slice(&header.to_le_bytes());
    out
}

/// The peak allocation [`load_raw`] may reach for an input of `len` bytes: the objects' bytes
/// and their `Vec`s (at most one 24-byte `Vec` per 4 body bytes), the re-encoded copy, and a
/// little slack.
pub fn raw_allocation_bound(len: usize) -> u64 {
    (len as u64) * 10 + 4096
}

/// The peak allocation [`load_postcard`] may reach: serde preallocates a sequence from its
/// declared length up to 1 MiB (its "cautious" size hint), once per nesting level being decoded
/// (two in [`FuzzObject`]), besides what the input's size justifies.
pub fn postcard_allocation_bound(len: usize) -> u64 {
    (len as u64) * 32 + (3 << 20)
}
