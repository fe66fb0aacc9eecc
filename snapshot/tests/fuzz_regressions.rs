//! Replays every input committed under `fuzz/regressions/snapshot_load/` as the `snapshot_load`
//! fuzz target does (no panic, peak allocation within the input's bound), plus valid snapshots
//! and mangled copies of them, so the bounds are checked on every `cargo test`.

use kcache_core::ResourceVersion;
use kcache_snapshot::format::encode;
use kcache_snapshot::fuzz::{
    load_postcard, load_raw, now, postcard_allocation_bound, raw_allocation_bound,
    with_checksums_fixed, FuzzObject, RawCodec, TYPE_NAME,
};
use kcache_snapshot::PostcardCodec;
use std::path::Path;

/// What the target does: both loads of the input, and of the input with its checksums fixed.
fn replay(data: &[u8]) -> (bool, bool) {
    let ok = replay_one(data);
    replay_one(&with_checksums_fixed(data));
    ok
}

fn replay_one(data: &[u8]) -> (bool, bool) {
    let mut ok = (false, false);
    let raw = allocation_counter::measure(|| ok.0 = load_raw(data).is_ok());
    assert!(
        raw.bytes_max <= raw_allocation_bound(data.len()),
        "raw load of {} bytes peaked at {}",
        data.len(),
        raw.bytes_max
    );
    let pc = allocation_counter::measure(|| ok.1 = load_postcard(data).is_ok());
    assert!(
        pc.bytes_max <= postcard_allocation_bound(data.len()),
        "postcard load of {} bytes peaked at {}",
        data.len(),
        pc.bytes_max
    );
    ok
}

fn valid_snapshots() -> Vec<Vec<u8>> {
    let objects: Vec<FuzzObject> = (0..5u64)
        .map(|i| FuzzObject {
            name: format!("obj-{i}"),
            labels: vec![("app".into(), "web".into())],
            data: vec![i as u8; i as usize],
            generation: i,
        })
        .collect();
    let rv = ResourceVersion::new("4242");
    let codec = PostcardCodec::named(TYPE_NAME);
    let raw: Vec<Vec<u8>> = vec![vec![1, 2, 3], vec![], vec![0xff; 40]];
    vec![
        encode(&codec, &rv, now(), objects.iter()).unwrap(),
        encode(&RawCodec, &rv, now(), raw.iter()).unwrap(),
    ]
}

#[test]
fn every_committed_snapshot_load_input_replays_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/snapshot_load");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return; // no regressions committed yet
    };
    let mut replayed = 0;
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_file() && path.extension().is_none_or(|e| e != "md") {
            replay(&std::fs::read(&path).unwrap());
            replayed += 1;
        }
    }
    eprintln!("replayed {replayed} inputs");
}

#[test]
fn valid_snapshots_load_and_every_mangled_copy_stays_within_the_bounds() {
    let [postcard, raw] = <[Vec<u8>; 2]>::try_from(valid_snapshots()).unwrap();
    assert_eq!(replay(&postcard), (true, true)); // the raw codec takes any bytes
    assert_eq!(replay(&raw), (true, false));
    for bytes in [postcard, raw] {
        for i in 0..bytes.len() {
            for v in [0x00, 0xff, 0x7f, 0x80] {
                let mut bad = bytes.clone();
                bad[i] = v;
                replay(&bad);
            }
            replay(&bytes[..i]);
        }
    }
}
