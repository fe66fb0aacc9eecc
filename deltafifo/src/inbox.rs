//! The FIFO's inbox: `add`, `update` and `delete` append to it under a lock of their own, so a
//! writer never waits for the main lock (held by poppers, replace, resync), and never touches the
//! keys' table, which stays in the popper's cache.
//!
//! Whoever takes the main lock applies the inbox first, in order ([`DeltaFifo::lock`]), so every
//! reader and every other operation sees the writes as if each had taken the main lock itself:
//! same order, same rules (a deletion's "never seen" test included, since a key's in-flight state
//! can only change under the main lock, after the inbox is applied).
//!
//! Waking: a popper about to block (or park its task) publishes the count of waiters in the inbox
//! and looks for writes in the same inbox critical section; a writer appends and reads that count
//! in one critical section too. So either the popper finds the write, or the writer sees the
//! waiter and wakes it (through the main lock, which the popper holds until its condvar wait).

use crate::fifo::State;
use crate::sync::MutexGuard;
use crate::DeltaFifo;
use kcache_core::{Meta, ObjectKey};
use std::sync::Arc;

/// A write waiting in the inbox.
#[derive(Debug)]
pub(crate) enum Op<T> {
    Add(ObjectKey, Arc<T>),
    Update(ObjectKey, Arc<T>),
    Delete(ObjectKey, Arc<T>),
}

/// The writes not yet applied, and how many poppers wait (blocked threads and parked tasks).
#[derive(Debug)]
pub(crate) struct Inbox<T> {
    pub(crate) ops: Vec<Op<T>>,
    pub(crate) waiters: usize,
}

impl<T> Default for Inbox<T> {
    fn default() -> Self {
        Self {
            ops: Vec::new(),
            waiters: 0,
        }
    }
}

impl<T, M: Meta<T>> DeltaFifo<T, M> {
    /// Appends a write; wakes the waiting poppers if there are any.
    pub(crate) fn push(&self, op: Op<T>) {
        let wake = {
            let mut inbox = crate::spin::lock(&self.inbox);
            inbox.ops.push(op);
            inbox.waiters > 0
        };
        self.writes.bump();
        if wake {
            let st = self.lock();
            self.notify(st);
        }
    }

    /// Takes the main lock and applies the inbox.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State<T>> {
        let mut st = crate::spin::lock(&self.state);
        self.apply_inbox(&mut st, None);
        st
    }

    /// Applies the inbox's writes, in order; with `waiters`, first publishes that count (in the
    /// same inbox critical section). Returns whether there were writes.
    pub(crate) fn apply_inbox(&self, st: &mut State<T>, waiters: Option<usize>) -> bool {
        {
            let mut inbox = crate::spin::lock(&self.inbox);
            if let Some(n) = waiters {
                inbox.waiters = n;
            }
            if inbox.ops.is_empty() {
                return false;
            }
            std::mem::swap(&mut inbox.ops, &mut st.spare);
        }
        let State { core, spare, .. } = st;
        for op in spare.drain(..) {
            match op {
                Op::Add(key, obj) => core.add(key, obj),
                Op::Update(key, obj) => core.update(key, obj),
                Op::Delete(key, obj) => {
                    core.delete(key, obj, self.known());
                }
            }
        }
        true
    }

    /// Publishes the current count of waiters (after one stopped waiting or a waker was removed).
    pub(crate) fn publish_waiters(&self, st: &State<T>) {
        crate::spin::lock(&self.inbox).waiters = st.waiters();
    }

    /// With the main lock held (`st`), blocks the thread until notified, unless writes arrived:
    /// then it applies them and returns at once. The caller looks at the FIFO again either way.
    pub(crate) fn block(&self, st: &mut MutexGuard<'_, State<T>>) {
        st.blocked += 1;
        let waiters = st.waiters();
        if !self.apply_inbox(st, Some(waiters)) {
            crate::sync::wait_timeout(&self.cond, st, None);
        }
        st.blocked -= 1;
        self.publish_waiters(st);
    }
}
