//! Model test: random operation lists (writes, direct writes, relists whole or page by page with
//! known objects, resyncs, whole and split pops, closes) drive a real `DeltaFifo` against a naive `BTreeMap`/`Vec` model, compared
//! after every step. The checker is the same `fuzz::run` the `deltafifo_ops` fuzz target calls.

use kcache_deltafifo::fuzz::{run, Op};
use proptest::prelude::*;

fn kv() -> impl Strategy<Value = (u8, u8)> {
    // Mostly valid keys (1..=4), sometimes the nameless key 0; values 10..16 include the
    // transformer's poison value 13.
    (prop_oneof![1 => Just(0u8), 9 => 1u8..5], 10u8..16)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => kv().prop_map(|(key, val)| Op::Add { key, val }),
        3 => kv().prop_map(|(key, val)| Op::Update { key, val }),
        3 => kv().prop_map(|(key, val)| Op::Delete { key, val }),
        3 => proptest::collection::vec(kv(), 0..5).prop_map(Op::Replace),
        2 => Just(Op::Resync),
        4 => Just(Op::Pop),
        2 => Just(Op::PopBegin),
        2 => (any::<u8>(), any::<bool>()).prop_map(|(index, apply)| Op::PopFinish { index, apply }),
        1 => kv().prop_map(|(key, val)| Op::KnownSet { key, val }),
        1 => (0u8..5).prop_map(|key| Op::KnownRemove { key }),
        1 => Just(Op::Close),
        2 => (kv(), any::<bool>()).prop_map(|((key, val), added)| Op::WriteOrApply { key, val, added }),
        1 => Just(Op::BeginList),
        3 => (proptest::collection::vec(kv(), 0..4), any::<bool>())
            .prop_map(|(objects, direct)| Op::ListPage { objects, direct }),
        1 => Just(Op::FinishList),
        1 => Just(Op::AbandonList),
    ]
}

fn config() -> impl Strategy<Value = Op> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(k, e, t)| Op::Config {
        known_objects: k,
        emit_replaced: e,
        transformer: t,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn fifo_matches_the_model_after_every_step(
        cfg in config(),
        ops in proptest::collection::vec(op(), 0..60),
    ) {
        let mut all = vec![cfg];
        all.extend(ops);
        run(&all);
    }

    #[test]
    fn fifo_matches_the_model_with_default_config(ops in proptest::collection::vec(op(), 0..60)) {
        run(&ops);
    }
}
