//! [`ReflectorHandle`]: stop a running reflector and read its last synced resource version.

use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::{Arc, Mutex};
use futures::task::AtomicWaker;
use kcache_core::ResourceVersion;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// State shared between a reflector's driver and its handles.
pub(crate) struct Shared {
    last_sync_rv: Mutex<ResourceVersion>,
    stopped: AtomicBool,
    waker: AtomicWaker,
}

impl Shared {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            last_sync_rv: Mutex::new(ResourceVersion::default()),
            stopped: AtomicBool::new(false),
            waker: AtomicWaker::new(),
        })
    }

    pub(crate) fn publish(&self, rv: &ResourceVersion) {
        let mut cur = self.last_sync_rv.lock();
        if *cur != *rv {
            *cur = rv.clone();
        }
    }
}

/// A cloneable handle on a [`crate::Reflector`]: stop it, read its last synced resource version.
///
/// # Examples
/// See the crate documentation.
#[derive(Clone)]
pub struct ReflectorHandle {
    pub(crate) shared: Arc<Shared>,
}

impl ReflectorHandle {
    /// Asks the reflector to stop: `run` returns promptly, dropping any request in flight and the
    /// open watch. Stopping before `run` makes `run` return at once. Idempotent.
    pub fn stop(&self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.shared.waker.wake();
    }

    /// Whether [`ReflectorHandle::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.shared.stopped.load(Ordering::SeqCst)
    }

    /// The resource version of the last list, event or bookmark applied to the store (client-go's
    /// `LastSyncResourceVersion`); empty before the first list. Not synchronized with the store's
    /// contents: read it as "at least this far".
    pub fn last_sync_resource_version(&self) -> ResourceVersion {
        self.shared.last_sync_rv.lock().clone()
    }
}

impl fmt::Debug for ReflectorHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReflectorHandle")
            .field("stopped", &self.is_stopped())
            .field(
                "last_sync_resource_version",
                &self.last_sync_resource_version(),
            )
            .finish()
    }
}

/// Completes once [`ReflectorHandle::stop`] was called.
pub(crate) struct Stopped<'a>(pub(crate) &'a Shared);

impl Future for Stopped<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.stopped.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        self.0.waker.register(cx.waker());
        if self.0.stopped.load(Ordering::SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
