//! The ready items' FIFO: a lock-free MPMC queue, or a loom-modelable stand-in.
//!
//! Normally this is `crossbeam_queue::SegQueue`: producers and workers never take a lock on it
//! (its head and tail sit on separate cache lines). loom cannot look inside crossbeam's atomics, so
//! under `--cfg kcache_loom` it is a `Mutex<VecDeque>` with the same operations. The loom models
//! therefore check the hand-off protocol around the FIFO (the parking of workers, the state word,
//! the per-key slots), over a FIFO that is linearizable by construction; crossbeam's own loom and
//! miri tests cover the `SegQueue` itself.

#[cfg(not(kcache_loom))]
pub(crate) use crossbeam_queue::SegQueue as Fifo;

#[cfg(kcache_loom)]
pub(crate) use stand_in::Fifo;

#[cfg(kcache_loom)]
mod stand_in {
    use crate::sync::Mutex;
    use std::collections::VecDeque;

    /// `SegQueue`'s `push`, `pop`, `len` and `is_empty` over a loom mutex.
    #[derive(Debug, Default)]
    pub(crate) struct Fifo<T>(Mutex<VecDeque<T>>);

    impl<T> Fifo<T> {
        pub(crate) fn new() -> Self {
            Self(Mutex::new(VecDeque::new()))
        }

        pub(crate) fn push(&self, item: T) {
            self.0.lock().push_back(item);
        }

        pub(crate) fn pop(&self) -> Option<T> {
            self.0.lock().pop_front()
        }

        pub(crate) fn len(&self) -> usize {
            self.0.lock().len()
        }

        pub(crate) fn is_empty(&self) -> bool {
            self.0.lock().is_empty()
        }
    }
}
