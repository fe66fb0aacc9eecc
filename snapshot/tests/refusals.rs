//! Loading refuses every snapshot it cannot trust with its own typed error, a metric and the
//! previous snapshot untouched; a good snapshot round-trips.

mod common;

use common::{pods, Pod, TempDir};
use kcache_core::{Clock, FakeClock, ResourceVersion};
use kcache_snapshot::format::{decode, encode, LoadPolicy};
use kcache_snapshot::{
    CodecError, LoadError, Part, PostcardCodec, RefusalReason, SnapshotCodec, SnapshotCounters,
    SnapshotFile, WriteError, FORMAT_VERSION,
};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn codec() -> PostcardCodec<Pod> {
    PostcardCodec::named("Pod/v1")
}

fn at() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn small_snapshot() -> Vec<u8> {
    encode(
        &codec(),
        &ResourceVersion::new("123"),
        at(),
        pods(3, 1).iter(),
    )
    .unwrap()
}

fn load(bytes: &[u8]) -> Result<Vec<Pod>, LoadError> {
    decode(bytes, &codec(), &LoadPolicy::default(), at()).map(|s| s.objects)
}

/// A file with its header checksum recomputed after `edit`, so a check past the checksum sees it.
fn with_header_edit(mut bytes: Vec<u8>, edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    edit(&mut bytes);
    let h = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let crc = crc32c(&bytes[..h - 4]);
    bytes[h - 4..h].copy_from_slice(&crc.to_le_bytes());
    bytes
}

// An independent CRC-32C (bitwise), so the tests do not trust the crate's table.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
        }
    }
    !c
}

#[test]
fn a_snapshot_round_trips_its_objects_version_count_and_time() {
    let bytes = small_snapshot();
    let s = decode(&bytes, &codec(), &LoadPolicy::default(), at()).unwrap();
    assert_eq!(s.objects, pods(3, 1));
    assert_eq!(s.header.resource_version.as_str(), "123");
    assert_eq!(s.header.object_count, 3);
    assert_eq!(s.header.type_name, "Pod/v1");
    assert_eq!(s.header.format_version, FORMAT_VERSION);
    assert_eq!(s.header.created, at());
}

#[test]
fn an_empty_snapshot_round_trips() {
    let bytes = encode(&codec(), &ResourceVersion::new("9"), at(), [].iter()).unwrap();
    assert_eq!(load(&bytes).unwrap(), Vec::<Pod>::new());
}

#[test]
fn the_header_checksum_is_crc32c_of_the_header_and_the_body_checksum_of_the_body() {
    let bytes = small_snapshot();
    let h = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let header_crc = u32::from_le_bytes(bytes[h - 4..h].try_into().unwrap());
    assert_eq!(header_crc, crc32c(&bytes[..h - 4]));
    let body_crc = u32::from_le_bytes(bytes[40..44].try_into().unwrap());
    assert_eq!(body_crc, crc32c(&bytes[h..]));
}

#[test]
fn every_truncation_of_a_small_snapshot_is_refused_as_truncated() {
    let bytes = small_snapshot();
    for len in 0..bytes.len() {
        match load(&bytes[..len]) {
            Err(LoadError::Truncated { needed, found }) => {
                assert_eq!(found, len as u64);
                assert!(needed > found, "at {len}: needed {needed}");
            }
            other => panic!("truncated at {len} of {}: {other:?}", bytes.len()),
        }
    }
    assert!(load(&bytes).is_ok());
}

#[test]
fn a_flipped_bit_anywhere_is_refused() {
    let bytes = small_snapshot();
    let h = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    for i in 0..bytes.len() {
        for bit in [0, 3, 7] {
            let mut bad = bytes.clone();
            bad[i] ^= 1 << bit;
            let e = load(&bad).expect_err("a changed byte must be refused");
            let expected_kind = match i {
                0..8 => matches!(e, LoadError::NotASnapshot),
                8..10 => matches!(e, LoadError::UnsupportedVersion { .. }),
                _ if i < h => matches!(
                    e,
                    LoadError::Checksum {
                        part: Part::Header,
                        ..
                    } | LoadError::Malformed(_)
                        | LoadError::Truncated { .. }
                ),
                _ => matches!(
                    e,
                    LoadError::Checksum {
                        part: Part::Body,
                        ..
                    }
                ),
            };
            assert!(expected_kind, "byte {i} bit {bit}: {e:?}");
        }
    }
}

#[test]
fn another_format_version_is_refused_before_anything_else() {
    let mut bytes = small_snapshot();
    bytes[8..10].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    assert!(matches!(
        load(&bytes),
        Err(LoadError::UnsupportedVersion { found, supported }) if found == FORMAT_VERSION + 1 && supported == FORMAT_VERSION
    ));
}

#[test]
fn a_file_that_is_not_a_snapshot_is_refused() {
    assert!(matches!(
        load(b"{\"kind\":\"Pod\"}"),
        Err(LoadError::NotASnapshot)
    ));
    assert!(matches!(load(b"X"), Err(LoadError::NotASnapshot)));
}

#[test]
fn a_bad_body_checksum_is_refused() {
    let mut bytes = small_snapshot();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    assert!(matches!(
        load(&bytes),
        Err(LoadError::Checksum {
            part: Part::Body,
            ..
        })
    ));
}

#[test]
fn a_snapshot_of_another_type_is_refused() {
    let bytes = small_snapshot();
    let other = PostcardCodec::<Pod>::named("Pod/v2");
    match decode(&bytes, &other, &LoadPolicy::default(), at()) {
        Err(LoadError::WrongType { expected, found }) => {
            assert_eq!((expected.as_str(), found.as_str()), ("Pod/v2", "Pod/v1"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_snapshot_older_than_the_maximum_age_is_refused_and_one_just_within_it_is_not() {
    let bytes = small_snapshot();
    let policy = LoadPolicy {
        max_age: Some(Duration::from_secs(60)),
    };
    let within = decode(&bytes, &codec(), &policy, at() + Duration::from_secs(60));
    assert!(within.is_ok());
    let past = decode(
        &bytes,
        &codec(),
        &policy,
        at() + Duration::from_millis(60_001),
    );
    assert!(
        matches!(past, Err(LoadError::TooOld { age, .. }) if age == Duration::from_millis(60_001))
    );
    // A snapshot from the future (the clock stepped back) counts as new.
    assert!(decode(&bytes, &codec(), &policy, at() - Duration::from_secs(3600)).is_ok());
}

#[test]
fn extra_bytes_after_the_body_are_refused() {
    let mut bytes = small_snapshot();
    bytes.push(0);
    assert!(matches!(load(&bytes), Err(LoadError::Malformed(_))));
}

#[test]
fn a_count_the_body_cannot_hold_is_refused_before_allocating() {
    let bytes = with_header_edit(small_snapshot(), |b| {
        b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    });
    assert!(matches!(load(&bytes), Err(LoadError::Malformed(_))));
}

#[test]
fn an_object_the_codec_refuses_is_a_decode_error_with_its_index() {
    struct Picky;
    impl SnapshotCodec<Pod> for Picky {
        fn type_name(&self) -> &str {
            "Pod/v1"
        }
        fn encode(&self, p: &Pod, out: &mut Vec<u8>) -> Result<(), CodecError> {
            codec().encode(p, out)
        }
        fn decode(&self, bytes: &[u8]) -> Result<Pod, CodecError> {
            let p = codec().decode(bytes)?;
            if p.name == "pod-1" {
                return Err(CodecError::new("pod-1 is not welcome"));
            }
            Ok(p)
        }
    }
    let bytes = small_snapshot();
    let e = decode(&bytes, &Picky, &LoadPolicy::default(), at()).unwrap_err();
    assert!(matches!(e, LoadError::Decode { index: 1, .. }), "{e:?}");
}

#[test]
fn a_file_load_refusal_is_counted_by_reason_and_a_missing_file_is_missing() {
    let dir = TempDir::new("refusals");
    let clock = Arc::new(FakeClock::new());
    let counters = Arc::new(SnapshotCounters::default());
    let file = SnapshotFile::new(dir.0.join("pods.snap"), codec())
        .clock(clock.clone())
        .max_age(Duration::from_secs(10))
        .metrics(counters.clone());
    assert!(matches!(file.load(), Err(LoadError::Missing)));
    assert_eq!(counters.refusals(RefusalReason::Missing), 1);

    let stats = file
        .write(&ResourceVersion::new("5"), pods(4, 2).iter())
        .unwrap();
    assert_eq!(stats.objects, 4);
    assert_eq!(stats.bytes, std::fs::metadata(file.path()).unwrap().len());
    assert_eq!(counters.writes(), 1);
    assert_eq!(counters.last_write_bytes(), stats.bytes);
    assert_eq!(file.load().unwrap().objects, pods(4, 2));
    assert_eq!(counters.loads(), 1);
    assert_eq!(file.load_header().unwrap().object_count, 4);

    clock.advance(Duration::from_secs(11));
    assert!(matches!(file.load(), Err(LoadError::TooOld { .. })));
    assert!(matches!(file.load_header(), Err(LoadError::TooOld { .. })));
    assert_eq!(counters.refusals(RefusalReason::TooOld), 2);

    let mut bytes = std::fs::read(file.path()).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(file.path(), &bytes).unwrap();
    clock.advance(Duration::ZERO);
    let fresh = SnapshotFile::new(file.path(), codec()).metrics(counters.clone());
    assert!(matches!(fresh.load(), Err(LoadError::Checksum { .. })));
    assert_eq!(counters.refusals(RefusalReason::Checksum), 1);
    let _ = clock.now();
}

#[test]
fn a_failed_write_leaves_the_previous_snapshot_intact_and_no_temporary_file() {
    struct FailsOn(&'static str);
    impl SnapshotCodec<Pod> for FailsOn {
        fn type_name(&self) -> &str {
            "Pod/v1"
        }
        fn encode(&self, p: &Pod, out: &mut Vec<u8>) -> Result<(), CodecError> {
            if p.name == self.0 {
                return Err(CodecError::new("cannot encode"));
            }
            codec().encode(p, out)
        }
        fn decode(&self, bytes: &[u8]) -> Result<Pod, CodecError> {
            codec().decode(bytes)
        }
    }
    let dir = TempDir::new("failed-write");
    let path = dir.0.join("pods.snap");
    let good = SnapshotFile::new(&path, FailsOn("none"));
    good.write(&ResourceVersion::new("1"), pods(3, 1).iter())
        .unwrap();
    let before = std::fs::read(&path).unwrap();

    let counters = Arc::new(SnapshotCounters::default());
    let bad = SnapshotFile::new(&path, FailsOn("pod-2")).metrics(counters.clone());
    let e = bad
        .write(&ResourceVersion::new("2"), pods(5, 2).iter())
        .unwrap_err();
    assert!(matches!(e, WriteError::Encode { index: 2, .. }), "{e:?}");
    assert_eq!(counters.write_failures(), 1);
    assert_eq!(std::fs::read(&path).unwrap(), before);

    // A write whose rename fails (the target is a directory) removes its temporary file.
    let dir_path = dir.0.join("a-directory");
    std::fs::create_dir(&dir_path).unwrap();
    std::fs::write(dir_path.join("keep"), b"x").unwrap();
    let e = SnapshotFile::new(&dir_path, codec())
        .write(&ResourceVersion::new("3"), pods(1, 3).iter())
        .unwrap_err();
    assert!(matches!(e, WriteError::Io { step: "rename", .. }), "{e:?}");
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let mut left = left;
    left.sort();
    assert_eq!(left, ["a-directory", "pods.snap"]);
}

#[test]
fn a_resource_version_too_long_for_the_header_is_refused_when_writing() {
    let rv = ResourceVersion::new("9".repeat(70_000));
    assert!(matches!(
        encode(&codec(), &rv, at(), pods(1, 1).iter()),
        Err(WriteError::TooLong(_))
    ));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_objects_round_trip_and_any_prefix_is_refused(
            names in proptest::collection::vec("[a-z0-9-]{0,12}", 0..20),
            rv in "[0-9]{1,20}",
            cut in any::<proptest::sample::Index>(),
        ) {
            let objects: Vec<Pod> = names.iter().enumerate().map(|(i, n)| Pod {
                name: n.clone(), node: None, generation: i as u64,
            }).collect();
            let bytes = encode(&codec(), &ResourceVersion::new(&rv), at(), objects.iter()).unwrap();
            let s = decode(&bytes, &codec(), &LoadPolicy::default(), at()).unwrap();
            prop_assert_eq!(s.objects, objects);
            prop_assert_eq!(s.header.resource_version.as_str(), rv.as_str());
            let len = cut.index(bytes.len());
            let truncated = load(&bytes[..len]);
            prop_assert!(matches!(truncated, Err(LoadError::Truncated { .. })), "{:?}", truncated);
        }
    }
}
