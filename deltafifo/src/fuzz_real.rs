//! Fuzzing and model-testing support for [`RealFifo`] (not part of the stable API).
//!
//! [`run`] drives a real `RealFifo` with a list of [`RealOp`]s against a naive model (a `Vec` of
//! entries with the queue's rules written out plainly), and compares them after every op:
//! length, staged objects, `has_synced`, `is_closed`, every popped batch entry by entry with its
//! initial-list flag, and where `write_or_apply` applies. Pops may run writes and a second pop
//! while their batch is processed (the lock is released then). It panics on the first
//! divergence: this module is the one place allowed to.

use crate::{Batch, DeltaFifoError, Entry, RealFifo, Written};
use kcache_core::{Object, ResourceVersion};
use std::collections::VecDeque;
use std::sync::Arc;

/// A write a pop may run while its batch is processed.
#[derive(Debug, Clone, PartialEq, Eq, arbitrary::Arbitrary)]
pub enum RealWrite {
    /// `add` (key `0` is an object without a name: a key error; value 13 fails the transformer).
    Add(u8, u8),
    /// `update`.
    Update(u8, u8),
    /// `delete`.
    Delete(u8, u8),
    /// `write_or_apply` (an add when the flag is set).
    WriteOrApply(u8, u8, bool),
    /// `replace` with these `(key, val)` objects.
    Replace(Vec<(u8, u8)>),
    /// `resync`.
    Resync,
}

/// One step of a fuzz or model test.
#[derive(Debug, Clone, PartialEq, Eq, arbitrary::Arbitrary)]
pub enum RealOp {
    /// A write.
    Write(RealWrite),
    /// `begin_list`.
    BeginList,
    /// `list_page` with these objects.
    ListPage(Vec<(u8, u8)>),
    /// `finish_list`.
    FinishList,
    /// `abandon_list`.
    AbandonList,
    /// `try_pop_batch(max)`, running `during` (and a second pop, which must get nothing) while
    /// the batch is processed.
    Pop {
        /// The batch size asked for.
        max: u8,
        /// Writes made while the batch is processed.
        during: Vec<RealWrite>,
    },
    /// `close`.
    Close,
    /// `list_delete` of this key.
    ListDelete(u8),
}

#[derive(Debug, PartialEq)]
struct Pod {
    name: String,
    val: u8,
}

impl Object for Pod {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        u64::from(self.val).into()
    }
}

fn name(key: u8) -> String {
    if key == 0 {
        String::new()
    } else {
        format!("k{}", key % 8)
    }
}

fn pod(key: u8, val: u8) -> Arc<Pod> {
    Arc::new(Pod {
        name: name(key),
        val,
    })
}

/// Whether the queue refuses this object (no key, or the transformer fails on it).
fn refused(key: u8, val: u8) -> bool {
    key == 0 || val == 13
}

/// An entry as the model writes it: `(type or "ReplacedAll"/"SyncAll", objects as (name, val))`.
type Seen = (String, Vec<(String, u8)>);

fn seen(entry: &Entry<Pod>) -> Seen {
    match entry {
        Entry::Delta {
            key,
            delta_type,
            object,
        } => {
            assert_eq!(key.as_str(), object.name, "an entry's key is its object's");
            (
                delta_type.to_string(),
                vec![(object.name.clone(), object.val)],
            )
        }
        Entry::ReplacedAll(r) => {
            let objs = r
                .objects
                .iter()
                .map(|(k, o)| {
                    assert_eq!(k.as_str(), o.name, "a listed key is its object's");
                    (o.name.clone(), o.val)
                })
                .collect();
            ("ReplacedAll".into(), objs)
        }
        Entry::SyncAll => ("SyncAll".into(), Vec::new()),
    }
}

#[derive(Default)]
struct Model {
    queue: VecDeque<Seen>,
    populated: bool,
    initial: usize,
    processing: bool,
    closed: bool,
    /// Staged entries, `None` for a deleted key.
    staged: Option<Vec<(String, Option<u8>)>>,
}

impl Model {
    fn synced(&self) -> bool {
        self.populated && self.initial == 0
    }

    /// The accepted objects of a list.
    fn listed(objects: &[(u8, u8)]) -> Vec<(String, Option<u8>)> {
        objects
            .iter()
            .filter(|&&(k, v)| !refused(k, v))
            .map(|&(k, v)| (name(k), Some(v)))
            .collect()
    }

    /// Queues a list, each key once: its last entry, at that one's place, unless it deletes.
    fn queue_list(&mut self, entries: Vec<(String, Option<u8>)>) {
        let objects = entries
            .iter()
            .enumerate()
            .filter(|&(i, (k, _))| entries[i + 1..].iter().all(|(later, _)| later != k))
            .filter_map(|(_, (k, v))| v.map(|v| (k.clone(), v)))
            .collect();
        self.queue.push_back(("ReplacedAll".into(), objects));
        if !self.populated {
            self.populated = true;
            self.initial = self.queue.len();
        }
    }

    /// What a write does; for `write_or_apply`, whether it is applied directly.
    fn write(&mut self, w: &RealWrite) -> Option<bool> {
        let (t, key, val, direct) = match *w {
            RealWrite::Add(k, v) => ("Added", k, v, false),
            RealWrite::Update(k, v) => ("Updated", k, v, false),
            RealWrite::Delete(k, v) => ("Deleted", k, v, false),
            RealWrite::WriteOrApply(k, v, added) => {
                (if added { "Added" } else { "Updated" }, k, v, true)
            }
            RealWrite::Replace(ref objects) => {
                self.queue_list(Self::listed(objects));
                return None;
            }
            RealWrite::Resync => {
                if !matches!(self.queue.back(), Some((t, _)) if t == "SyncAll") {
                    self.queue.push_back(("SyncAll".into(), Vec::new()));
                }
                return None;
            }
        };
        if refused(key, val) {
            return None;
        }
        if direct && self.queue.is_empty() && !self.processing && self.synced() && !self.closed {
            return Some(true);
        }
        self.populated = true;
        self.queue.push_back((t.into(), vec![(name(key), val)]));
        Some(false)
    }

    fn take(&mut self, max: usize) -> Option<(Vec<Seen>, usize)> {
        if self.processing || self.queue.is_empty() {
            return None;
        }
        let delta = |s: &Seen| !matches!(s.0.as_str(), "ReplacedAll" | "SyncAll");
        let n = if self.queue.front().is_some_and(delta) {
            self.queue
                .iter()
                .take(max.max(1))
                .take_while(|s| delta(s))
                .count()
        } else {
            1
        };
        let batch: Vec<_> = self.queue.drain(..n).collect();
        let initial = self.initial.min(batch.len());
        Some((batch, initial))
    }
}

struct Driver {
    fifo: RealFifo<Pod>,
    model: Model,
}

impl Driver {
    fn write(&mut self, w: &RealWrite) {
        let expected = self.model.write(w);
        let pods = |objects: &[(u8, u8)]| objects.iter().map(|&(k, v)| pod(k, v)).collect();
        let result = match *w {
            RealWrite::Add(k, v) => self.fifo.add(pod(k, v)).map(|()| None),
            RealWrite::Update(k, v) => self.fifo.update(pod(k, v)).map(|()| None),
            RealWrite::Delete(k, v) => self.fifo.delete(pod(k, v)).map(|()| None),
            RealWrite::WriteOrApply(k, v, added) => self
                .fifo
                .write_or_apply(pod(k, v), added, |key, obj| {
                    assert_eq!(key.as_str(), obj.name);
                    Ok(())
                })
                .map(Some),
            RealWrite::Replace(ref objects) => {
                self.fifo.replace(pods(objects), "1".into()).map(|()| None)
            }
            RealWrite::Resync => {
                self.fifo.resync();
                Ok(None)
            }
        };
        match (result, w) {
            (Ok(Some(written)), _) => {
                assert_eq!(Some(written == Written::Applied), expected, "{w:?}");
            }
            (Ok(None), RealWrite::Replace(objects)) => {
                assert!(objects.iter().all(|&(k, v)| !refused(k, v)), "{w:?}");
            }
            (Ok(None), RealWrite::Resync) => assert_eq!(expected, None, "{w:?}"),
            (Ok(None), _) => assert_eq!(expected, Some(false), "{w:?}"),
            (Err(DeltaFifoError::Refused { refused: r }), RealWrite::Replace(objects)) => {
                let n = objects.iter().filter(|&&(k, v)| refused(k, v)).count();
                assert_eq!(r.len(), n, "{w:?}");
            }
            (Err(e), _) => assert_eq!(expected, None, "{w:?}: {e}"),
        }
    }

    fn step(&mut self, op: &RealOp) {
        match op {
            RealOp::Write(w) => self.write(w),
            RealOp::BeginList => {
                self.fifo.begin_list();
                self.model.staged = Some(Vec::new());
            }
            RealOp::ListPage(objects) => {
                let pods = objects.iter().map(|&(k, v)| pod(k, v)).collect();
                let result = self.fifo.list_page(pods, |_, o| o);
                let n = objects.iter().filter(|&&(k, v)| refused(k, v)).count();
                match result {
                    Ok(()) => assert_eq!(n, 0),
                    Err(DeltaFifoError::Refused { refused }) => assert_eq!(refused.len(), n),
                    Err(e) => panic!("unexpected {e}"),
                }
                self.model
                    .staged
                    .get_or_insert_with(Vec::new)
                    .extend(Model::listed(objects));
            }
            RealOp::FinishList => {
                self.fifo.finish_list("2".into());
                let staged = self.model.staged.take().unwrap_or_default();
                self.model.queue_list(staged);
            }
            RealOp::AbandonList => {
                self.fifo.abandon_list();
                self.model.staged = None;
            }
            RealOp::ListDelete(k) => {
                let result = self.fifo.list_delete(&pod(*k, 0));
                assert_eq!(result.is_err(), *k == 0, "list_delete of key {k}");
                if *k != 0 {
                    self.model
                        .staged
                        .get_or_insert_with(Vec::new)
                        .push((name(*k), None));
                }
            }
            RealOp::Pop { max, during } => self.pop(usize::from(*max), during),
            RealOp::Close => {
                self.fifo.close();
                self.model.closed = true;
            }
        }
    }

    fn pop(&mut self, max: usize, during: &[RealWrite]) {
        let expected = self.model.take(max);
        let closed_and_empty =
            self.model.closed && self.model.queue.is_empty() && expected.is_none();
        if expected.is_some() {
            self.model.processing = true;
        }
        let fifo = &self.fifo;
        let model = &mut self.model;
        let got = fifo.try_pop_batch(max, |batch: Batch<Pod>| {
            let entries: Vec<(Seen, bool)> = batch.iter().map(|(e, i)| (seen(e), i)).collect();
            assert!(
                !fifo.has_synced() || model.synced(),
                "synced while processing"
            );
            // Writes while processing: queued, never applied (checked against the model).
            for w in during {
                let expected = model.write(w);
                let result = match *w {
                    RealWrite::WriteOrApply(k, v, added) => fifo
                        .write_or_apply(pod(k, v), added, |_, _| Ok(()))
                        .ok()
                        .map(|w| w == Written::Applied),
                    RealWrite::Add(k, v) => fifo.add(pod(k, v)).ok().map(|()| false),
                    RealWrite::Update(k, v) => fifo.update(pod(k, v)).ok().map(|()| false),
                    RealWrite::Delete(k, v) => fifo.delete(pod(k, v)).ok().map(|()| false),
                    RealWrite::Replace(ref objects) => {
                        let pods = objects.iter().map(|&(k, v)| pod(k, v)).collect();
                        let _ = fifo.replace(pods, "3".into());
                        None
                    }
                    RealWrite::Resync => {
                        fifo.resync();
                        None
                    }
                };
                assert_eq!(result, expected, "write while processing: {w:?}");
            }
            let second = fifo.try_pop_batch(usize::MAX, |b| b.len());
            assert_eq!(
                second,
                Ok(None),
                "a second popper got entries while one processes"
            );
            entries
        });
        match (got, expected) {
            (Ok(Some(entries)), Some((batch, initial))) => {
                let want: Vec<(Seen, bool)> = batch
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| (s, i < initial))
                    .collect();
                assert_eq!(entries, want, "popped batch");
                self.model.processing = false;
                self.model.initial -= initial.min(self.model.initial);
            }
            (Ok(None), None) => assert!(!closed_and_empty, "closed and empty but not reported"),
            (Err(_), None) => assert!(closed_and_empty, "reported closed with entries left"),
            (got, want) => panic!("pop diverged: got {got:?}, model {want:?}"),
        }
    }

    fn check(&self, op: &RealOp) {
        let m = &self.model;
        assert_eq!(self.fifo.len(), m.queue.len(), "length after {op:?}");
        assert_eq!(
            self.fifo.has_synced(),
            m.synced(),
            "has_synced after {op:?}"
        );
        assert_eq!(self.fifo.is_closed(), m.closed, "closed after {op:?}");
        let staged = m.staged.as_ref().map_or(0, Vec::len);
        assert_eq!(self.fifo.staged_len(), staged, "staged after {op:?}");
        assert_eq!(self.fifo.is_idle(), m.queue.is_empty(), "idle after {op:?}");
    }
}

/// Runs `ops` against a fresh `RealFifo` (with a transformer failing on value 13) and the
/// model, panicking on the first divergence; then drains the queue.
pub fn run(ops: &[RealOp]) {
    let mut driver = Driver {
        fifo: RealFifo::with_transformer(
            |o: Arc<Pod>| {
                if o.val == 13 {
                    Err("poison")
                } else {
                    Ok(o)
                }
            },
        ),
        model: Model::default(),
    };
    for op in ops {
        driver.step(op);
        driver.check(op);
    }
    while !driver.model.queue.is_empty() {
        driver.pop(usize::MAX, &[]);
        driver.check(&RealOp::Pop {
            max: u8::MAX,
            during: Vec::new(),
        });
    }
    assert_eq!(
        driver.fifo.has_synced(),
        driver.model.populated,
        "drained but not synced"
    );
}

/// Decodes `data` as a list of [`RealOp`]s (as the `real_fifo_ops` fuzz target does) and runs
/// it.
pub fn run_bytes(data: &[u8]) {
    use arbitrary::Arbitrary;
    if let Ok(ops) = Vec::<RealOp>::arbitrary_take_rest(arbitrary::Unstructured::new(data)) {
        run(&ops);
    }
}
