//! [`StopHandle`]: stops a running informer from anywhere (client-go's stop channel).

use std::fmt;
use std::sync::Arc;
use tokio::sync::watch;

/// Stops an informer's [`run`](crate::SharedIndexInformer::run) from anywhere: client-go's stop
/// channel as a handle. Get one with
/// [`SharedIndexInformer::stop_handle`](crate::SharedIndexInformer::stop_handle); clones share
/// one flag.
///
/// [`stop`](Self::stop) makes a running `run` return, as if its `stop` future had completed;
/// before `run` is called, it makes that `run` return at once. Either way the informer is then
/// stopped for good, as after any end of `run`. Stopping twice is harmless.
///
/// # Examples
/// ```
/// use kcache_core::{Object, ResourceVersion, SetResourceVersion};
/// use kcache_informer::SharedIndexInformer;
/// use kcache_memory::MemorySource;
/// use std::time::Duration;
/// # #[derive(Clone, Debug)] struct Pod { name: String, rv: ResourceVersion }
/// # impl Object for Pod {
/// #     fn namespace(&self) -> Option<&str> { None }
/// #     fn name(&self) -> &str { &self.name }
/// #     fn resource_version(&self) -> ResourceVersion { self.rv.clone() }
/// # }
/// # impl SetResourceVersion for Pod {
/// #     fn set_resource_version(&mut self, rv: ResourceVersion) { self.rv = rv; }
/// # }
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
/// let informer = SharedIndexInformer::new(MemorySource::<Pod>::new(), Duration::ZERO);
/// let stop = informer.stop_handle();
/// let run = informer.run(std::future::pending());
/// stop.stop();
/// run.await?;
/// assert!(informer.is_stopped());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct StopHandle {
    pub(crate) flag: Arc<watch::Sender<bool>>,
}

impl StopHandle {
    pub(crate) fn new() -> Self {
        Self {
            flag: Arc::new(watch::Sender::new(false)),
        }
    }

    /// Asks the informer to stop (idempotent).
    pub fn stop(&self) {
        self.flag.send_replace(true);
    }

    /// Whether [`stop`](Self::stop) was called.
    pub fn is_stop_requested(&self) -> bool {
        *self.flag.borrow()
    }

    /// Resolves once [`stop`](Self::stop) is called.
    pub(crate) fn requested(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.flag.subscribe();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    }
}

impl fmt::Debug for StopHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StopHandle")
            .field("stop_requested", &self.is_stop_requested())
            .finish()
    }
}
