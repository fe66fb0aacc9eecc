//! Replays every input committed under `fuzz/regressions/indexer_ops/` (crashers and
//! interesting inputs of the `indexer_ops` fuzz target), so a fixed bug stays fixed.

use arbitrary::{Arbitrary, Unstructured};
use kcache_indexer::fuzz::{run, Op};
use std::path::Path;

#[test]
fn every_committed_indexer_ops_input_replays_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/indexer_ops");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return; // no regressions committed yet
    };
    let mut replayed = 0;
    for entry in entries {
        let path = entry.unwrap().path();
        if !path.is_file() || path.extension().is_some_and(|e| e == "md") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        // libFuzzer hands the target the raw bytes; `fuzz_target!(|ops: Vec<Op>|)` decodes them
        // with `arbitrary_take_rest`, and so do we. Inputs that do not decode are skipped there too.
        if let Ok(ops) = Vec::<Op>::arbitrary_take_rest(Unstructured::new(&bytes)) {
            eprintln!("replaying {} ({} ops)", path.display(), ops.len());
            run(&ops);
            replayed += 1;
        }
    }
    eprintln!("replayed {replayed} inputs");
}
