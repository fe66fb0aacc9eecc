//! A popper with nothing to take spins briefly, lock released, before it blocks.
//!
//! When the reflector writes faster than the popper's spin lasts (a watch stream under load), the
//! popper finds the next key without ever sleeping, so writers see no blocked popper and skip the
//! futex wake, the most expensive part of a write. An idle FIFO costs one short spin per pop.
//!
//! Built for loom (`--cfg kcache_loom`) there is no spinning: loom explores interleavings, not
//! time, and the blocking path is what its models check.

/// Locks `m`, spinning up to about 1,500 spin-loop hints for it first (testing before trying,
/// so spinners do not fight over the lock's cache line) instead of parking at once: the FIFO's
/// critical sections are short, and a writer and a popper that park on each other pay a futex
/// sleep and wake per hand-off. Under loom, a plain lock.
pub(crate) fn lock<S>(m: &crate::sync::Mutex<S>) -> crate::sync::MutexGuard<'_, S> {
    #[cfg(not(kcache_loom))]
    {
        if let Some(g) = m.try_lock() {
            return g;
        }
        for round in 0..ROUNDS {
            for _ in 0..(1u32 << round.min(5)) {
                std::hint::spin_loop();
            }
            if !m.is_locked() {
                if let Some(g) = m.try_lock() {
                    return g;
                }
            }
        }
    }
    m.lock()
}

/// Counts writes so a spinning popper can see one without taking the lock.
#[derive(Debug, Default)]
pub(crate) struct WriteSignal {
    #[cfg(not(kcache_loom))]
    writes: std::sync::atomic::AtomicU64,
}

/// Spin rounds before blocking; round `i` issues `min(2^i, 32)` spin-loop hints (about 1,500
/// hints in all: some microseconds).
#[cfg(not(kcache_loom))]
const ROUNDS: u32 = 52;

/// Rounds of 32 spin-loop hints a batch popper waits for more writes after the first.
#[cfg(not(kcache_loom))]
const COALESCE_ROUNDS: u32 = 16;

impl WriteSignal {
    /// Records a write (called with the FIFO's lock held).
    pub(crate) fn bump(&self) {
        #[cfg(not(kcache_loom))]
        self.writes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The write count, read with the FIFO's lock held before releasing it to spin.
    pub(crate) fn seen(&self) -> u64 {
        #[cfg(not(kcache_loom))]
        return self.writes.load(std::sync::atomic::Ordering::Relaxed);
        #[cfg(kcache_loom)]
        0
    }

    /// Spins until a write after `seen` or until the spin budget runs out; whether a write came.
    /// Without spinning (loom) it returns `false` at once.
    pub(crate) fn spin_for_write(&self, seen: u64) -> bool {
        #[cfg(not(kcache_loom))]
        for round in 0..ROUNDS {
            for _ in 0..(1u32 << round.min(5)) {
                std::hint::spin_loop();
            }
            if self.writes.load(std::sync::atomic::Ordering::Relaxed) != seen {
                return true;
            }
        }
        let _ = seen;
        false
    }

    /// After [`spin_for_write`](Self::spin_for_write) saw a write: spins a little longer (about
    /// 500 spin-loop hints at most) until `enough` writes came after `seen`, so a batch popper
    /// takes several keys under one lock instead of one key per lock hand-off.
    pub(crate) fn spin_for_writes(&self, seen: u64, enough: u64) {
        #[cfg(not(kcache_loom))]
        for _ in 0..COALESCE_ROUNDS {
            if self
                .writes
                .load(std::sync::atomic::Ordering::Relaxed)
                .wrapping_sub(seen)
                >= enough
            {
                return;
            }
            for _ in 0..32 {
                std::hint::spin_loop();
            }
        }
        let _ = (seen, enough);
    }

    /// Whether this build spins at all.
    pub(crate) const fn spins() -> bool {
        cfg!(not(kcache_loom))
    }
}

#[cfg(all(test, not(kcache_loom)))]
mod tests {
    use super::WriteSignal;

    #[test]
    fn a_write_ends_the_spin_and_no_write_exhausts_it() {
        let s = WriteSignal::default();
        let seen = s.seen();
        assert!(!s.spin_for_write(seen));
        s.bump();
        assert!(s.spin_for_write(seen));
        assert!(!s.spin_for_write(s.seen()));
    }
}
