//! Model test: random operation lists (add, update, delete, replace, bookmark, add_indexers and
//! every query) run against the store and a `BTreeMap` model, checked after every step.
//!
//! The operations and the model are `kcache_indexer::fuzz`'s, the same the `indexer_ops` fuzz
//! target drives; here proptest generates the input bytes and decodes them with `arbitrary`.

use arbitrary::{Arbitrary, Unstructured};
use kcache_indexer::fuzz::{run, Obj, Op};
use proptest::prelude::*;

fn ops_from(bytes: &[u8]) -> Vec<Op> {
    Vec::<Op>::arbitrary_take_rest(Unstructured::new(bytes)).unwrap_or_default()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_operation_lists_agree_with_the_model(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        run(&ops_from(&bytes));
    }
}

fn obj(ns: u8, name: u8, labels: u8, rv: u8) -> Obj {
    Obj {
        ns,
        name,
        labels,
        rv,
    }
}

#[test]
fn a_scripted_run_covers_every_operation() {
    // Sanity check that the model exercises the interesting paths, whatever proptest draws.
    run(&[
        Op::Add(obj(1, 0, 0b0011, 1)),
        Op::ListByNamespace(1, 0),
        Op::ByNamespace(0),
        Op::AddIndexers(0b11_1111),
        Op::Add(obj(1, 1, 0x80, 2)),
        Op::Update(obj(2, 1, 0x13, 3)),
        Op::Index(1, obj(0, 0, 0b0110, 0)),
        Op::Index(3, obj(0, 0, 0x80, 0)),
        Op::Index(6, obj(0, 0, 0, 0)),
        Op::ByIndex(4, 10),
        Op::ByIndex(6, 0),
        Op::AddIndexers(0b10),
        Op::Delete(obj(1, 0, 0, 4)),
        Op::DeleteKey(obj(2, 1, 0, 0)),
        Op::Replace(vec![obj(0, 3, 1, 0), obj(0, 3, 0x80, 0)], 9),
        Op::Replace(
            vec![obj(0, 3, 0x80, 0), obj(0, 3, 1, 0), obj(2, 2, 4, 7)],
            10,
        ),
        Op::Bookmark(11),
        Op::ListByNamespace(2, 4),
        Op::ByNamespace(2),
    ]);
}

#[test]
#[should_panic(expected = "keys")]
fn the_model_check_catches_a_store_changed_behind_its_back() {
    kcache_indexer::fuzz::run_then_tamper(&[Op::Add(obj(1, 0, 0, 1))]);
}
