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
use kcache_core::{KeyError, KeyText, Meta};
use std::cell::RefCell;
use std::sync::Arc;

/// A write waiting in the inbox. The key travels as text (inline when short): the FIFO builds an
/// `ObjectKey` only for a key it does not hold yet, on the thread that applies the inbox. (A key
/// allocated by the writer and freed by the popper made every write pay the allocator's slow,
/// cross-thread path.)
#[derive(Debug)]
pub(crate) enum Op<T> {
    Add(KeyText, Arc<T>),
    Update(KeyText, Arc<T>),
    Delete(KeyText, Arc<T>),
}

/// `obj`'s key as checked text, written through the accessor's
/// [`write_key`](Meta::write_key) into a per-thread buffer: no allocation for a short key.
pub(crate) fn key_text<T, M: Meta<T>>(obj: &T) -> Result<KeyText, KeyError> {
    thread_local! {
        static BUF: RefCell<String> = const { RefCell::new(String::new()) };
    }
    let build = |buf: &mut String| {
        M::write_key(obj, buf)?;
        KeyText::new(buf)
    };
    // The buffer is only borrowed inside the accessor's `write_key`; one that re-entered a FIFO
    // write would find it borrowed and use a fresh one.
    BUF.with(|buf| match buf.try_borrow_mut() {
        Ok(mut buf) => build(&mut buf),
        Err(_) => build(&mut String::new()),
    })
}

/// The writes not yet applied, and how many poppers wait (blocked threads and parked tasks).
#[derive(Debug)]
pub(crate) struct Inbox<T> {
    pub(crate) ops: Vec<Op<T>>,
    pub(crate) waiters: usize,
}

/// Writes an inbox buffer keeps room for however small the bursts are.
const INBOX_KEEP: usize = 1024;

/// After `applied` writes were drained from `buf`: releases the room of a past burst (the
/// inbox and its spare trade places, so each is checked when drained), once it is four times
/// what this batch needed. A steady stream keeps its capacity; a burst's memory goes back.
fn shrink_after_burst<T>(buf: &mut Vec<T>, applied: usize) {
    if buf.capacity() > INBOX_KEEP && applied < buf.capacity() / 4 {
        buf.shrink_to(INBOX_KEEP.max(applied));
    }
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
        let applied = spare.len();
        for op in spare.drain(..) {
            match op {
                Op::Add(key, obj) => core.add(key, obj),
                Op::Update(key, obj) => core.update(key, obj),
                Op::Delete(key, obj) => {
                    core.delete(key.into_key(), obj, self.known());
                }
            }
        }
        shrink_after_burst(spare, applied);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_buffer_shrinks_once_batches_are_small_again() {
        let mut buf: Vec<u64> = Vec::with_capacity(100_000);
        shrink_after_burst(&mut buf, 90_000);
        assert!(
            buf.capacity() >= 100_000,
            "a batch that used the room keeps it"
        );
        shrink_after_burst(&mut buf, 10);
        assert!(buf.capacity() >= INBOX_KEEP && buf.capacity() < 2 * INBOX_KEEP);
        let mut small: Vec<u64> = Vec::with_capacity(INBOX_KEEP);
        shrink_after_burst(&mut small, 0);
        assert_eq!(small.capacity(), INBOX_KEEP, "small buffers are left alone");
    }

    #[test]
    fn a_fifo_gives_back_the_inbox_room_of_a_burst() {
        struct Obj(String);
        impl kcache_core::Object for Obj {
            fn namespace(&self) -> Option<&str> {
                None
            }
            fn name(&self) -> &str {
                &self.0
            }
            fn resource_version(&self) -> kcache_core::ResourceVersion {
                kcache_core::ResourceVersion::default()
            }
        }
        let fifo: DeltaFifo<Obj> = DeltaFifo::new();
        let room = |fifo: &DeltaFifo<Obj>| {
            let st = fifo.lock();
            let inbox = fifo.inbox.lock().ops.capacity();
            inbox.max(st.spare.capacity())
        };
        for i in 0..20_000 {
            fifo.update(Arc::new(Obj(format!("o{}", i % 10)))).unwrap();
        }
        assert!(room(&fifo) >= 20_000, "the burst is in the inbox's buffer");
        // Two small batches: each buffer is drained once more.
        for _ in 0..2 {
            fifo.update(Arc::new(Obj("o1".into()))).unwrap();
            assert_eq!(fifo.len(), 10);
        }
        assert!(room(&fifo) < 2 * INBOX_KEEP, "room left: {}", room(&fifo));
    }
}
