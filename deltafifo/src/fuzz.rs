//! Fuzzing and model-testing support (not part of the stable API).
//!
//! [`run`] drives a real [`DeltaFifo`] with a list of [`Op`]s, including pops split into "take"
//! and "finish" halves so keys stay in flight across other operations, and a consumer that applies
//! popped deltas to the known objects the way an informer does. After every op it compares the
//! FIFO with a naive model (`model.rs`) and checks the FIFO's invariants: queue and items agree,
//! no key is queued twice, no two adjacent `Deleted` deltas, `has_synced` only after the initial
//! population was processed, one key never handed out twice at once, every object transformed
//! exactly once. It panics on the first divergence: this module is the one place allowed to.

mod model;

use crate::core::Next;
use crate::sync::Mutex;
use crate::{DeltaFifo, DeltaFifoOptions, DeltaType, Deltas, Written};
use kcache_core::{KnownObjects, Object, ObjectKey, ResourceVersion};
use model::{Model, ModelNext};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One step of a fuzz or model test.
#[derive(Debug, Clone, PartialEq, Eq, arbitrary::Arbitrary)]
pub enum Op {
    /// Only honoured as the first op; otherwise ignored. Default: all `true`.
    Config {
        /// Give the FIFO the consumer's known objects.
        known_objects: bool,
        /// Emit `Replaced` (else `Sync`) for listed objects.
        emit_replaced: bool,
        /// Install a transformer (it fails on objects with `val == 13`).
        transformer: bool,
    },
    /// `add` (key `0` is an object without a name: a key error).
    Add {
        /// Key selector.
        key: u8,
        /// Object payload.
        val: u8,
    },
    /// `update`.
    Update {
        /// Key selector.
        key: u8,
        /// Object payload.
        val: u8,
    },
    /// `delete`.
    Delete {
        /// Key selector.
        key: u8,
        /// Object payload.
        val: u8,
    },
    /// `replace` with these `(key, val)` objects.
    Replace(Vec<(u8, u8)>),
    /// `resync`.
    Resync,
    /// A whole pop: take, apply to the known objects, finish.
    Pop,
    /// Take the next key and keep it in flight.
    PopBegin,
    /// Finish an in-flight key (`index` modulo their number), applying its deltas if `apply`
    /// (else it is as if the process function failed).
    PopFinish {
        /// Which in-flight key.
        index: u8,
        /// Apply the deltas to the known objects.
        apply: bool,
    },
    /// Another writer sets a known object directly.
    KnownSet {
        /// Key selector.
        key: u8,
        /// Object payload.
        val: u8,
    },
    /// Another writer removes a known object directly.
    KnownRemove {
        /// Key selector.
        key: u8,
    },
    /// `close`.
    Close,
    /// `write_or_apply`: applied to the known objects directly when the FIFO is caught up,
    /// else queued as an add (`added`) or an update.
    WriteOrApply {
        /// Key selector.
        key: u8,
        /// Object payload.
        val: u8,
        /// An add (else an update).
        added: bool,
    },
    /// `begin_list`: a paged list attempt starts.
    BeginList,
    /// The next page of the paged list: `list_page_or_apply` (applied to the known objects
    /// when the FIFO is caught up) if `direct`, else `list_page`.
    ListPage {
        /// The page's `(key, val)` objects.
        objects: Vec<(u8, u8)>,
        /// Offer the page for a direct apply.
        direct: bool,
    },
    /// `finish_list`: the paged list is complete.
    FinishList,
    /// `abandon_list`: the paged list attempt failed.
    AbandonList,
}

/// The object type of the fuzz driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuzzObj {
    name: &'static str,
    val: u8,
    /// How many times the transformer ran on it.
    xf: u8,
}

impl Object for FuzzObj {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn name(&self) -> &str {
        self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        ResourceVersion::from(u64::from(self.val))
    }
}

const NAMES: [&str; 5] = ["", "k1", "k2", "k3", "k4"];
const POISON: u8 = 13;

fn obj(key: u8, val: u8, xf: u8) -> Arc<FuzzObj> {
    Arc::new(FuzzObj {
        name: NAMES[usize::from(key) % NAMES.len()],
        val,
        xf,
    })
}

fn key_of(key: u8) -> Option<ObjectKey> {
    ObjectKey::new(NAMES[usize::from(key) % NAMES.len()]).ok()
}

/// The consumer's store: what the FIFO sees as known objects.
#[derive(Debug, Default)]
struct Known(Mutex<BTreeMap<ObjectKey, Arc<FuzzObj>>>);

impl KnownObjects<FuzzObj> for Known {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0.lock().keys().cloned().collect()
    }
    fn get_by_key(&self, key: &ObjectKey) -> Option<Arc<FuzzObj>> {
        self.0.lock().get(key).cloned()
    }
}

impl Known {
    /// Applies deltas the way an informer does (`processDeltas`).
    fn apply(&self, key: &ObjectKey, deltas: &[crate::Delta<FuzzObj>]) {
        let mut map = self.0.lock();
        for d in deltas {
            match (d.delta_type, d.object.object()) {
                (DeltaType::Deleted, _) => {
                    map.remove(key);
                }
                (_, Some(o)) => {
                    map.insert(key.clone(), o.clone());
                }
                (_, None) => panic!("a non-delete delta without an object for {key:?}"),
            }
        }
    }
}

struct Driver {
    fifo: DeltaFifo<FuzzObj>,
    model: Model,
    known: Arc<Known>,
    use_known: bool,
    transformer: bool,
    in_flight: Vec<ObjectKey>,
}

impl Driver {
    fn new(known_objects: bool, emit_replaced: bool, transformer: bool) -> Self {
        let known = Arc::new(Known::default());
        let mut options = DeltaFifoOptions::new().emit_delta_type_replaced(emit_replaced);
        if known_objects {
            options = options.known_objects(known.clone());
        }
        if transformer {
            options = options.transformer(|o: Arc<FuzzObj>| {
                if o.val == POISON {
                    return Err("poisoned object");
                }
                Ok(Arc::new(FuzzObj {
                    xf: o.xf + 1,
                    ..(*o).clone()
                }))
            });
        }
        let fifo = DeltaFifo::with_options(options);
        let model = Model::new(emit_replaced);
        Self {
            fifo,
            model,
            known,
            use_known: known_objects,
            transformer,
            in_flight: Vec::new(),
        }
    }

    fn xf(&self) -> u8 {
        u8::from(self.transformer)
    }

    /// Whether the FIFO must refuse this object (bad key or poisoned for the transformer).
    fn refused(&self, key: u8, val: u8) -> bool {
        key_of(key).is_none() || (self.transformer && val == POISON)
    }

    fn known_snapshot(&self) -> Option<BTreeMap<ObjectKey, Arc<FuzzObj>>> {
        self.use_known.then(|| self.known.0.lock().clone())
    }

    fn write(&mut self, ty: DeltaType, key: u8, val: u8) {
        let o = obj(key, val, 0);
        let result = match ty {
            DeltaType::Added => self.fifo.add(o),
            DeltaType::Updated => self.fifo.update(o),
            _ => self.fifo.delete(o),
        };
        assert_eq!(
            result.is_err(),
            self.refused(key, val),
            "{ty} of ({key}, {val})"
        );
        let Some(k) = key_of(key).filter(|_| result.is_ok()) else {
            return;
        };
        let o = obj(key, val, self.xf());
        if ty == DeltaType::Deleted {
            let known = self.known_snapshot();
            self.model.delete(k, o, known.as_ref());
        } else {
            self.model.add(k, o, ty);
        }
    }

    fn replace(&mut self, list: &[(u8, u8)]) {
        let objects = list.iter().map(|&(k, v)| obj(k, v, 0)).collect();
        let result = self.fifo.replace(objects, ResourceVersion::from("1"));
        let refused = list.iter().any(|&(k, v)| self.refused(k, v));
        assert_eq!(result.is_err(), refused, "replace of {list:?}");
        if refused {
            return;
        }
        let listed = list
            .iter()
            .filter_map(|&(k, v)| Some((key_of(k)?, obj(k, v, self.xf()))));
        let known = self.known_snapshot();
        self.model.replace(listed.collect(), known.as_ref());
    }

    /// `write_or_apply`: the model predicts whether it is applied directly (caught up: nothing
    /// queued or in flight, synced, not closed); an applied object goes to the known objects as a
    /// popped add or update would.
    fn write_or_apply(&mut self, key: u8, val: u8, added: bool) {
        let direct = self.model.idle() && self.model.has_synced();
        let known = Arc::clone(&self.known);
        let k = key_of(key);
        let applied_key = k.clone();
        let result = self
            .fifo
            .write_or_apply(obj(key, val, 0), added, move |_, o| {
                if let Some(k) = applied_key {
                    known.0.lock().insert(k, o);
                }
                Ok(())
            });
        assert_eq!(
            result.is_err(),
            self.refused(key, val),
            "write_or_apply of ({key}, {val})"
        );
        let (Ok(written), Some(k)) = (result, k) else {
            return;
        };
        let expected = if direct {
            Written::Applied
        } else {
            Written::Queued
        };
        assert_eq!(written, expected, "write_or_apply of ({key}, {val})");
        if written == Written::Queued {
            let ty = if added {
                DeltaType::Added
            } else {
                DeltaType::Updated
            };
            self.model.add(k, obj(key, val, self.xf()), ty);
        }
    }

    /// A page of a paged list, queued or (if `direct` and the FIFO is caught up) applied to the
    /// known objects as popped `Replaced`/`Sync` deltas would be. Refused objects are left out;
    /// the rest is taken.
    fn list_page(&mut self, list: &[(u8, u8)], direct: bool) {
        let objects = list.iter().map(|&(k, v)| obj(k, v, 0)).collect();
        let refused = list.iter().any(|&(k, v)| self.refused(k, v));
        let page: Vec<(ObjectKey, Arc<FuzzObj>)> = list
            .iter()
            .filter(|&&(k, v)| !self.refused(k, v))
            .filter_map(|&(k, v)| Some((key_of(k)?, obj(k, v, self.xf()))))
            .collect();
        let applies = direct && self.model.idle();
        let initial = !self.model.populated;
        let result = if direct {
            let known = Arc::clone(&self.known);
            self.fifo
                .list_page_or_apply(objects, move |page, is_initial| {
                    assert_eq!(
                        is_initial, initial,
                        "a directly applied page's initial flag"
                    );
                    let mut map = known.0.lock();
                    for (k, o) in page {
                        map.insert(k, o);
                    }
                    Ok(())
                })
        } else {
            self.fifo.list_page(objects).map(|()| Written::Queued)
        };
        assert_eq!(result.is_err(), refused, "list page of {list:?}");
        if let Ok(written) = result {
            assert_eq!(
                written == Written::Applied,
                applies,
                "list page of {list:?}"
            );
        }
        if applies {
            self.model.list_applied(page.into_iter().map(|(k, _)| k));
        } else {
            self.model.list_page(page);
        }
    }

    /// Takes the next key from both; returns it if one was handed out.
    fn begin(&mut self) -> Option<(ObjectKey, Deltas<FuzzObj>)> {
        let got = match self.fifo.begin() {
            Next::Ready(t) => ModelNext::Ready(t.key, t.deltas.into_vec(), t.is_in_initial_list),
            Next::Wait => ModelNext::Wait,
            Next::Closed => ModelNext::Closed,
        };
        assert_eq!(got, self.model.next(), "pop diverged from the model");
        let ModelNext::Ready(key, deltas, _) = got else {
            return None;
        };
        assert!(
            !self.in_flight.contains(&key),
            "{key:?} handed to two poppers at once"
        );
        assert!(!deltas.is_empty(), "{key:?} handed out with no deltas");
        for d in &deltas {
            if let Some(o) = d.object.object() {
                assert_eq!(
                    o.xf,
                    self.xf(),
                    "object transformed a wrong number of times: {d:?}"
                );
            }
        }
        self.in_flight.push(key.clone());
        Some((key, Deltas::from(deltas)))
    }

    fn finish(&mut self, key: &ObjectKey, deltas: Option<&Deltas<FuzzObj>>) {
        if let Some(d) = deltas {
            self.known.apply(key, d);
        }
        self.in_flight.retain(|k| k != key);
        self.fifo.finish(key);
        self.model.finish(key);
    }

    fn step(&mut self, op: &Op, held: &mut Vec<(ObjectKey, Deltas<FuzzObj>)>) {
        match op {
            Op::Config { .. } => {}
            Op::Add { key, val } => self.write(DeltaType::Added, *key, *val),
            Op::Update { key, val } => self.write(DeltaType::Updated, *key, *val),
            Op::Delete { key, val } => self.write(DeltaType::Deleted, *key, *val),
            Op::Replace(list) => self.replace(list),
            Op::Resync => {
                self.fifo.resync();
                let known = self.known_snapshot();
                self.model.resync(known.as_ref());
            }
            Op::Pop => {
                if let Some((key, deltas)) = self.begin() {
                    self.finish(&key, Some(&deltas));
                }
            }
            Op::PopBegin => held.extend(self.begin()),
            Op::PopFinish { index, apply } => {
                if !held.is_empty() {
                    let (key, deltas) = held.remove(usize::from(*index) % held.len());
                    self.finish(&key, apply.then_some(&deltas));
                }
            }
            Op::KnownSet { key, val } => {
                if let Some(k) = key_of(*key) {
                    self.known.0.lock().insert(k, obj(*key, *val, self.xf()));
                }
            }
            Op::KnownRemove { key } => {
                if let Some(k) = key_of(*key) {
                    self.known.0.lock().remove(&k);
                }
            }
            Op::Close => {
                self.fifo.close();
                self.model.closed = true;
            }
            Op::WriteOrApply { key, val, added } => self.write_or_apply(*key, *val, *added),
            Op::BeginList => {
                self.fifo.begin_list();
                self.model.list_begin();
            }
            Op::ListPage { objects, direct } => self.list_page(objects, *direct),
            Op::FinishList => {
                self.fifo.finish_list(ResourceVersion::from("1"));
                let known = self.known_snapshot();
                self.model.list_finish(known.as_ref());
            }
            Op::AbandonList => {
                self.fifo.abandon_list();
                self.model.list_abandon();
            }
        }
    }

    fn check(&self, op: &Op) {
        let st = self.fifo.lock();
        if let Err(e) = st.core.check_invariants() {
            panic!("invariant broken after {op:?}: {e}");
        }
        assert_eq!(
            st.core.snapshot(),
            self.model.queue,
            "queue diverged after {op:?}"
        );
        assert_eq!(
            st.core.has_synced(),
            self.model.has_synced(),
            "has_synced after {op:?}"
        );
        assert_eq!(
            st.core.is_closed(),
            self.model.closed,
            "closed after {op:?}"
        );
        for (_, deltas) in &self.model.queue {
            for d in deltas {
                if let Some(o) = d.object.object() {
                    assert_eq!(o.xf, self.xf(), "queued object transformed wrongly: {d:?}");
                }
            }
        }
    }
}

/// Runs `ops` against a fresh FIFO and the model, panicking on the first divergence or broken
/// invariant.
pub fn run(ops: &[Op]) {
    let (known, emit, xf) = match ops.first() {
        Some(Op::Config {
            known_objects,
            emit_replaced,
            transformer,
        }) => (*known_objects, *emit_replaced, *transformer),
        _ => (true, true, true),
    };
    let mut driver = Driver::new(known, emit, xf);
    let mut held = Vec::new();
    for op in ops {
        driver.step(op, &mut held);
        driver.check(op);
    }
    // Drain: finish what is held, then pop everything; the FIFO must end empty and synced
    // whenever it was populated.
    for (key, deltas) in std::mem::take(&mut held) {
        driver.finish(&key, Some(&deltas));
        driver.check(&Op::PopFinish {
            index: 0,
            apply: true,
        });
    }
    while let Some((key, deltas)) = driver.begin() {
        driver.finish(&key, Some(&deltas));
        driver.check(&Op::Pop);
    }
    assert!(driver.fifo.is_empty(), "FIFO not drained");
    assert_eq!(
        driver.fifo.has_synced(),
        driver.model.populated,
        "drained but not synced"
    );
}

/// Decodes `data` as a list of [`Op`]s (as the `deltafifo_ops` fuzz target does) and runs it.
pub fn run_bytes(data: &[u8]) {
    use arbitrary::Arbitrary;
    if let Ok(ops) = Vec::<Op>::arbitrary_take_rest(arbitrary::Unstructured::new(data)) {
        run(&ops);
    }
}
