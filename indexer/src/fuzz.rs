//! Fuzzing support: random operation lists driven against an [`Indexer`] and a simple model.
//!
//! Shared by the cargo-fuzz target `indexer_ops` (in `fuzz/`), the proptest model test and the
//! replay of committed crashers (`tests/fuzz_regressions.rs`). [`run`] panics on the first
//! divergence between the store and the model, and checks after every step that items and
//! indexes agree. Not part of the stable API.

mod model;

use crate::indexer::Indexer;
use crate::sync::Arc;
use kcache_core::{Object, ResourceVersion};
use model::Model;

/// A compact description of a test object: namespace (`""`, `ns1`, `ns2`), name (`n0`..`n5`,
/// the last two long), a label bit set and a resource version (`0` = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, arbitrary::Arbitrary)]
pub struct Obj {
    /// Namespace selector (modulo 3).
    pub ns: u8,
    /// Name selector (modulo 6).
    pub name: u8,
    /// Label bits; bit 7 makes the `fallible` index fail.
    pub labels: u8,
    /// Resource version; `0` means none.
    pub rv: u8,
}

/// One operation on the store.
#[derive(Debug, Clone, PartialEq, Eq, arbitrary::Arbitrary)]
pub enum Op {
    /// `Indexer::add`.
    Add(Obj),
    /// `Indexer::update`.
    Update(Obj),
    /// `Indexer::delete` with this object (its labels may differ from the stored one's).
    Delete(Obj),
    /// `ThreadSafeStore::delete` by key.
    DeleteKey(Obj),
    /// `Indexer::replace` with these objects and list version (bits 0-6); with bit 7 set,
    /// `Indexer::replace_skipping_refused` instead.
    Replace(Vec<Obj>, u8),
    /// `Indexer::bookmark`.
    Bookmark(u8),
    /// `Indexer::add_indexers` with the indexes whose bits are set (see [`INDEXES`]).
    AddIndexers(u8),
    /// `Indexer::index` on an index (an out-of-range one is unknown) with a probe object.
    Index(u8, Obj),
    /// `Indexer::by_index` and `index_keys` on an index and a value from a fixed list.
    ByIndex(u8, u8),
    /// `Indexer::list_by_namespace` with a label-mask predicate.
    ListByNamespace(u8, u8),
    /// `Indexer::by_namespace`.
    ByNamespace(u8),
}

/// The index functions the operations can install, by bit.
pub const INDEXES: [&str; 6] = ["namespace", "labels", "parity", "fallible", "dup", "all"];

const NAMESPACES: [&str; 4] = ["", "ns1", "ns2", "ns9"];
/// Object names: short ones, one that makes a namespaced key exactly as long as the store keeps
/// inline (22 bytes), and a non-ASCII one that makes every key longer than that.
const NAMES: [&str; 6] = [
    "n0",
    "n1",
    "n2",
    "n3",
    "n4-at-the-boundary",
    "n5-ünïcødé-lönger-than-inline",
];
const PROBE_VALUES: [&str; 14] = [
    "", "ns1", "ns2", "l0", "l1", "l2", "l3", "0", "1", "2", "x", "all", "even", "zzz",
];

/// The object type the fuzzed store holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuzzObject {
    /// Namespace (`""` for cluster-scoped).
    pub ns: &'static str,
    /// Name.
    pub name: String,
    /// Label bits.
    pub labels: u8,
    /// Resource version (`0` = none).
    pub rv: u8,
}

impl Obj {
    fn build(self) -> FuzzObject {
        FuzzObject {
            ns: NAMESPACES[usize::from(self.ns % 3)],
            name: NAMES[usize::from(self.name % 6)].to_owned(),
            labels: self.labels,
            rv: self.rv,
        }
    }
}

impl FuzzObject {
    fn key(&self) -> String {
        if self.ns.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.ns, self.name)
        }
    }
}

impl Object for FuzzObject {
    fn namespace(&self) -> Option<&str> {
        Some(self.ns).filter(|ns| !ns.is_empty())
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        rv(self.rv)
    }
}

fn rv(n: u8) -> ResourceVersion {
    if n == 0 {
        ResourceVersion::default()
    } else {
        ResourceVersion::from(u64::from(n))
    }
}

/// The values of index `INDEXES[id]` for `o`, or `None` when its function fails.
fn index_values(id: usize, o: &FuzzObject) -> Option<Vec<String>> {
    match id {
        0 => Some(vec![o.ns.to_owned()]),
        1 => Some(
            (0..4)
                .filter(|b| o.labels & (1 << b) != 0)
                .map(|b| format!("l{b}"))
                .collect(),
        ),
        2 => Some(vec![if o.name.ends_with(['0', '2', '4']) {
            "even"
        } else {
            "odd"
        }
        .into()]),
        3 if o.labels & 0x80 != 0 => None,
        3 => Some(vec![(o.labels % 3).to_string()]),
        4 if o.labels & 0x10 != 0 => Some(vec!["x".into(), "x".into()]),
        4 => Some(Vec::new()),
        _ => Some(vec!["all".into()]),
    }
}

/// Runs `ops` against a fresh [`Indexer`] and a model, panicking on any divergence.
pub fn run(ops: &[Op]) {
    let store: Indexer<FuzzObject> = Indexer::new();
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        model.step(&store, op, step);
        model.check(&store, step);
    }
}

/// Runs `ops`, then adds an object behind the model's back and checks again: panics when the
/// check works. A test of the checker itself.
pub fn run_then_tamper(ops: &[Op]) {
    let store: Indexer<FuzzObject> = Indexer::new();
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        model.step(&store, op, step);
        model.check(&store, step);
    }
    let intruder = FuzzObject {
        ns: "",
        name: "intruder".into(),
        labels: 0,
        rv: 0,
    };
    if store.add(shared(&intruder)).is_ok() {
        model.check(&store, ops.len());
    }
}

/// Shares one object between the store and the model's check of it.
fn shared(o: &FuzzObject) -> Arc<FuzzObject> {
    Arc::new(o.clone())
}
