//! The synchronization shim every kcache crate imports instead of `std::sync`.
//!
//! Normally these are `parking_lot`'s lock types and `std`'s atomics and `Arc`. Built with
//! `RUSTFLAGS="--cfg kcache_loom"`, they become [loom](https://docs.rs/loom)'s, so the model checker
//! explores every interleaving of our code. The API is `parking_lot`'s (no lock poisoning), whichever
//! backend is active. The cfg is prefixed (`kcache_loom`, not `loom`) so it does not leak into tokio
//! and other dependencies that have their own `cfg(loom)`.
//!
//! Loom cannot see time: a timed wait here is only a hint, and every waiter must also be woken by an
//! explicit notify.

#[cfg(not(kcache_loom))]
mod imp {
    pub use parking_lot::{Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
    pub use std::sync::atomic;
    pub use std::sync::Arc;
    pub use std::thread;

    /// Blocks on `cv` until notified or until `timeout` (if any) elapses.
    pub fn wait_timeout<T>(
        cv: &Condvar,
        guard: &mut MutexGuard<'_, T>,
        timeout: Option<std::time::Duration>,
    ) {
        match timeout {
            Some(d) => {
                cv.wait_for(guard, d);
            }
            None => cv.wait(guard),
        }
    }
}

#[cfg(kcache_loom)]
mod imp {
    pub use loom::sync::atomic;
    pub use loom::sync::{Arc, Condvar};
    pub use loom::thread;
    use std::ops::{Deref, DerefMut};

    /// A loom mutex with `parking_lot`'s API (no poisoning).
    #[derive(Debug, Default)]
    pub struct Mutex<T>(loom::sync::Mutex<T>);

    /// The guard of [`Mutex`].
    #[derive(Debug)]
    pub struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

    impl<T> Mutex<T> {
        /// Creates a mutex.
        pub fn new(v: T) -> Self {
            Self(loom::sync::Mutex::new(v))
        }
        /// Locks the mutex.
        pub fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(
                self.0
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            ))
        }
        /// Locks the mutex if no one holds it.
        pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            match self.0.try_lock() {
                Ok(g) => Some(MutexGuard(Some(g))),
                Err(std::sync::TryLockError::Poisoned(p)) => Some(MutexGuard(Some(p.into_inner()))),
                Err(std::sync::TryLockError::WouldBlock) => None,
            }
        }
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.0
                .as_deref()
                .unwrap_or_else(|| unreachable!("guard is only empty inside wait"))
        }
    }
    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.0
                .as_deref_mut()
                .unwrap_or_else(|| unreachable!("guard is only empty inside wait"))
        }
    }

    /// A loom read-write lock with `parking_lot`'s API.
    #[derive(Debug, Default)]
    pub struct RwLock<T>(loom::sync::RwLock<T>);
    /// Read guard of [`RwLock`].
    pub type RwLockReadGuard<'a, T> = loom::sync::RwLockReadGuard<'a, T>;
    /// Write guard of [`RwLock`].
    pub type RwLockWriteGuard<'a, T> = loom::sync::RwLockWriteGuard<'a, T>;
    impl<T> RwLock<T> {
        /// Creates a lock.
        pub fn new(v: T) -> Self {
            Self(loom::sync::RwLock::new(v))
        }
        /// Locks for reading.
        pub fn read(&self) -> RwLockReadGuard<'_, T> {
            self.0
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
        /// Locks for writing.
        pub fn write(&self) -> RwLockWriteGuard<'_, T> {
            self.0
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
    }

    /// Blocks on `cv` until notified (loom has no time: the timeout is ignored, so every waiter
    /// must be woken by an explicit notify).
    pub fn wait_timeout<T>(
        cv: &Condvar,
        guard: &mut MutexGuard<'_, T>,
        _timeout: Option<std::time::Duration>,
    ) {
        if let Some(g) = guard.0.take() {
            guard.0 = Some(
                cv.wait(g)
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
        }
    }
}

pub use imp::*;
