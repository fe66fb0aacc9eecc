//! Replays every input under `fuzz/regressions/deltafifo_ops/` (crashers found by
//! `cargo +nightly fuzz run deltafifo_ops`, committed once fixed) through the fuzz checker, so a
//! fixed bug stays fixed. Passes trivially when the folder is empty or absent.

use std::path::Path;

#[test]
fn every_committed_deltafifo_fuzz_input_passes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/deltafifo_ops");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
    paths.sort();
    let inputs = paths.into_iter().filter(|p| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        p.is_file() && !name.starts_with('.') && !name.ends_with(".md")
    });
    for path in inputs {
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        eprintln!("replaying {}", path.display());
        kcache_deltafifo::fuzz::run_bytes(&data);
    }
}

#[test]
fn run_bytes_accepts_any_input() {
    // Arbitrary bytes either decode to an op list the checker accepts, or decode to nothing.
    for seed in 0u8..64 {
        let data: Vec<u8> = (0..256u32)
            .map(|i| (i as u8).wrapping_mul(seed).wrapping_add(seed))
            .collect();
        kcache_deltafifo::fuzz::run_bytes(&data);
    }
}
