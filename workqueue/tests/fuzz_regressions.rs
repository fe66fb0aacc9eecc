//! Replays every input the `workqueue_ops` fuzz target ever failed on (and the seeds kept beside
//! them), from `fuzz/regressions/workqueue_ops/`, through the same model checker.

use arbitrary::{Arbitrary, Unstructured};
use kcache_workqueue::fuzz::{run, Op};
use std::path::Path;

#[test]
fn every_recorded_workqueue_ops_input_passes_the_model_check() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/workqueue_ops");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no inputs in {}", dir.display());
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        // Decoded the way libfuzzer-sys decodes a `fuzz_target!(|ops: Vec<Op>| ..)` input.
        let ops = Vec::<Op>::arbitrary_take_rest(Unstructured::new(&bytes)).unwrap();
        eprintln!("{}: {} ops", file.display(), ops.len());
        run(&ops);
    }
}
