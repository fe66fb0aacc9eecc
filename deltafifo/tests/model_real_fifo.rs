//! Model test of `RealFifo`: random operation lists (writes, direct writes, whole and paged
//! lists (with deletes and repeated keys), abandoned lists, resyncs, pops that write and pop again while their batch is
//! processed, close) drive a real `RealFifo` against a naive model, compared after every step.
//! The checker is the same `fuzz_real::run` the `real_fifo_ops` fuzz target calls.

use kcache_deltafifo::fuzz_real::{run, RealOp, RealWrite};
use proptest::prelude::*;

fn kv() -> impl Strategy<Value = (u8, u8)> {
    // Mostly valid keys, sometimes the nameless key 0; values include the poison value 13.
    (prop_oneof![1 => Just(0u8), 9 => 1u8..5], 10u8..16)
}

fn write() -> impl Strategy<Value = RealWrite> {
    prop_oneof![
        4 => kv().prop_map(|(k, v)| RealWrite::Add(k, v)),
        3 => kv().prop_map(|(k, v)| RealWrite::Update(k, v)),
        3 => kv().prop_map(|(k, v)| RealWrite::Delete(k, v)),
        3 => (kv(), any::<bool>()).prop_map(|((k, v), a)| RealWrite::WriteOrApply(k, v, a)),
        2 => proptest::collection::vec(kv(), 0..5).prop_map(RealWrite::Replace),
        2 => Just(RealWrite::Resync),
    ]
}

fn op() -> impl Strategy<Value = RealOp> {
    prop_oneof![
        8 => write().prop_map(RealOp::Write),
        1 => Just(RealOp::BeginList),
        2 => proptest::collection::vec(kv(), 0..4).prop_map(RealOp::ListPage),
        1 => Just(RealOp::FinishList),
        1 => Just(RealOp::AbandonList),
        5 => (0u8..5, proptest::collection::vec(write(), 0..3))
            .prop_map(|(max, during)| RealOp::Pop { max, during }),
        1 => Just(RealOp::Close),
        1 => kv().prop_map(|(k, _)| RealOp::ListDelete(k)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn real_fifo_matches_the_model_after_every_step(ops in proptest::collection::vec(op(), 0..60)) {
        run(&ops);
    }
}

#[test]
fn every_committed_real_fifo_fuzz_input_passes() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/real_fifo_ops");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
    paths.sort();
    for path in paths.into_iter().filter(|p| p.is_file()) {
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        kcache_deltafifo::fuzz_real::run_bytes(&data);
    }
}
