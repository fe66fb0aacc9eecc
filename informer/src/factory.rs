//! [`InformerFactory`]: one shared informer per (source name, type), started and stopped together.

use crate::error::InformerError;
use crate::health::CacheSyncCheck;
use crate::informer::SharedIndexInformer;
use crate::registration::HasSynced;
use crate::sync::Mutex;
use futures::future::BoxFuture;
use kcache_core::Meta;
use kcache_reflector::ListWatcher;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Why an [`InformerFactory`] operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FactoryError {
    /// The factory was shut down: it hands out and starts no more informers.
    #[error("the informer factory was shut down")]
    ShutDown,
    /// Starting informers needs a tokio runtime: call from inside one, or build the factory with
    /// [`InformerFactory::with_runtime`].
    #[error("starting informers needs a tokio runtime")]
    NoRuntime,
    /// This informer stopped before its cache synced (the factory was shut down meanwhile, or
    /// it had already been run and stopped by someone else).
    #[error("informer {name:?} stopped before its cache synced")]
    NotSynced {
        /// The informer's name in the factory.
        name: String,
    },
}

/// What the factory needs from an informer, whatever its types.
trait Managed: Send + Sync {
    fn run(
        self: Arc<Self>,
        stop: BoxFuture<'static, ()>,
    ) -> BoxFuture<'static, Result<(), InformerError>>;
    fn wait_synced(&self) -> BoxFuture<'_, bool>;
    fn has_synced(&self) -> bool;
}

/// A factory's informer seen as a [`HasSynced`] (for [`CacheSyncCheck`]).
struct Synced(Arc<dyn Managed>);

impl HasSynced for Synced {
    fn has_synced(&self) -> bool {
        self.0.has_synced()
    }
    fn wait_synced(&self) -> BoxFuture<'_, bool> {
        self.0.wait_synced()
    }
}

impl<T, L, M> Managed for SharedIndexInformer<T, L, M>
where
    T: Send + Sync + 'static,
    L: ListWatcher<T>,
    M: Meta<T>,
{
    fn run(
        self: Arc<Self>,
        stop: BoxFuture<'static, ()>,
    ) -> BoxFuture<'static, Result<(), InformerError>> {
        Box::pin(async move { SharedIndexInformer::run(&self, stop).await })
    }
    fn wait_synced(&self) -> BoxFuture<'_, bool> {
        Box::pin(self.wait_for_cache_sync())
    }
    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }
}

struct Entry {
    name: String,
    type_name: &'static str,
    informer: Arc<dyn Any + Send + Sync>,
    managed: Arc<dyn Managed>,
    task: Option<JoinHandle<Result<(), InformerError>>>,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    index: HashMap<(String, TypeId), usize>,
    shut_down: bool,
}

/// Shares one informer per (source name, informer type) among every controller that asks, and
/// starts, waits for and stops them together: client-go's `SharedInformerFactory`.
///
/// [`informer_for`](Self::informer_for) returns the informer registered under a name you choose
/// for the source (a backend plus a resource: `"memory/pods"`) and the informer's full type;
/// only the first call builds it. [`start`](Self::start) runs every informer not yet started, on
/// tokio.
///
/// # The client-go trap (kubernetes#92777), and what this factory does instead
/// In client-go, an informer obtained after `Start` is not running until `Start` is called again,
/// and `WaitForCacheSync` silently skips it (or waits forever on it). Here
/// [`wait_for_cache_sync`](Self::wait_for_cache_sync) starts every informer not yet started
/// itself before it waits, so whatever was obtained before the call is covered; an informer
/// that stops before it syncs is named in [`FactoryError::NotSynced`]. [`start`](Self::start)
/// still exists for starting without waiting.
///
/// # Examples
/// ```
/// use kcache_core::{Object, ResourceVersion};
/// use kcache_informer::{InformerFactory, SharedIndexInformer};
/// use kcache_memory::{MemorySource, SetResourceVersion};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// #[derive(Clone, Debug)]
/// struct Pod { name: String, rv: ResourceVersion }
/// impl Object for Pod {
///     fn namespace(&self) -> Option<&str> { Some("default") }
///     fn name(&self) -> &str { &self.name }
///     fn resource_version(&self) -> ResourceVersion { self.rv.clone() }
/// }
/// impl SetResourceVersion for Pod {
///     fn set_resource_version(&mut self, rv: ResourceVersion) { self.rv = rv; }
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = tokio::runtime::Runtime::new()?;
/// runtime.block_on(async {
///     let source = MemorySource::<Pod>::new();
///     source.create(Pod { name: "web".into(), rv: ResourceVersion::default() })?;
///     let factory = InformerFactory::new();
///     let new = || SharedIndexInformer::new(source.clone(), Duration::ZERO);
///     let a = factory.informer_for("memory/pods", new)?;
///     let b = factory.informer_for("memory/pods", new)?; // the same informer
///     assert!(Arc::ptr_eq(&a, &b));
///
///     factory.wait_for_cache_sync().await?; // starts it, then waits
///     assert_eq!(a.indexer().len(), 1);
///     factory.shutdown().await;
///     Ok(())
/// })
/// # }
/// ```
#[doc(alias = "SharedInformerFactory")]
pub struct InformerFactory {
    state: Mutex<State>,
    runtime: Option<tokio::runtime::Handle>,
    stop: watch::Sender<bool>,
}

impl InformerFactory {
    /// A factory that starts informers on the tokio runtime it is called from.
    pub fn new() -> Self {
        Self {
            state: Mutex::new(State::default()),
            runtime: None,
            stop: watch::Sender::new(false),
        }
    }

    /// A factory that starts informers on `runtime` (so `start` can be called from anywhere).
    pub fn with_runtime(runtime: tokio::runtime::Handle) -> Self {
        Self {
            runtime: Some(runtime),
            ..Self::new()
        }
    }

    /// The informer registered under `name` with this exact type, built by `new` on the first
    /// call (client-go's `InformerFor`). Two calls with the same name and type return the same
    /// informer; the same name with another object, source or accessor type is another informer.
    ///
    /// An informer obtained after [`start`](Self::start) is not running until the next `start`
    /// or [`wait_for_cache_sync`](Self::wait_for_cache_sync).
    ///
    /// # Errors
    /// [`FactoryError::ShutDown`] once the factory was shut down.
    #[doc(alias = "InformerFor")]
    pub fn informer_for<T, L, M>(
        &self,
        name: &str,
        new: impl FnOnce() -> SharedIndexInformer<T, L, M>,
    ) -> Result<Arc<SharedIndexInformer<T, L, M>>, FactoryError>
    where
        T: Send + Sync + 'static,
        L: ListWatcher<T>,
        M: Meta<T>,
    {
        let mut state = self.state.lock();
        if state.shut_down {
            return Err(FactoryError::ShutDown);
        }
        let id = (
            name.to_owned(),
            TypeId::of::<SharedIndexInformer<T, L, M>>(),
        );
        if let Some(&i) = state.index.get(&id) {
            if let Ok(informer) = state.entries[i]
                .informer
                .clone()
                .downcast::<SharedIndexInformer<T, L, M>>()
            {
                return Ok(informer);
            }
        }
        let informer = Arc::new(new());
        let entry = Entry {
            name: name.to_owned(),
            type_name: std::any::type_name::<T>(),
            informer: informer.clone(),
            managed: informer.clone(),
            task: None,
        };
        let i = state.entries.len();
        state.entries.push(entry);
        state.index.insert(id, i);
        Ok(informer)
    }

    /// Runs every informer not yet started, on tokio, without waiting; returns how many it
    /// started (client-go's `Start`).
    ///
    /// # Errors
    /// [`FactoryError::ShutDown`] once shut down; [`FactoryError::NoRuntime`] outside a tokio
    /// runtime when the factory was built with [`new`](Self::new).
    pub fn start(&self) -> Result<usize, FactoryError> {
        let mut state = self.state.lock();
        if state.shut_down {
            return Err(FactoryError::ShutDown);
        }
        let runtime = match &self.runtime {
            Some(r) => r.clone(),
            None => tokio::runtime::Handle::try_current().map_err(|_| FactoryError::NoRuntime)?,
        };
        let mut started = 0;
        for entry in state.entries.iter_mut().filter(|e| e.task.is_none()) {
            let mut stop = self.stop.subscribe();
            let stop: BoxFuture<'static, ()> = Box::pin(async move {
                let _ = stop.wait_for(|s| *s).await;
            });
            tracing::debug!(informer = %entry.name, "factory starting informer");
            entry.task = Some(runtime.spawn(entry.managed.clone().run(stop)));
            started += 1;
        }
        Ok(started)
    }

    /// Starts every informer not yet started (see the type's docs for why), then waits, without
    /// polling, until every informer obtained so far has synced.
    ///
    /// # Errors
    /// As [`start`](Self::start); [`FactoryError::NotSynced`] naming the first informer that
    /// stopped before it synced.
    #[doc(alias = "WaitForCacheSync")]
    pub async fn wait_for_cache_sync(&self) -> Result<(), FactoryError> {
        self.start()?;
        let waits: Vec<(String, Arc<dyn Managed>)> = self
            .state
            .lock()
            .entries
            .iter()
            .map(|e| (e.name.clone(), e.managed.clone()))
            .collect();
        for (name, informer) in waits {
            if !informer.wait_synced().await {
                return Err(FactoryError::NotSynced { name });
            }
        }
        Ok(())
    }

    /// A readiness check of every informer obtained so far, each under its name in the factory:
    /// it passes once all of them have synced (see [`CacheSyncCheck`]). Informers obtained
    /// after this call are not in it; build the check once the program has asked for all it
    /// uses.
    pub fn sync_check(&self) -> CacheSyncCheck {
        let state = self.state.lock();
        state
            .entries
            .iter()
            .fold(CacheSyncCheck::new(), |check, e| {
                check.with(e.name.clone(), Arc::new(Synced(e.managed.clone())))
            })
    }

    /// Stops every informer and waits until each has returned (client-go's `Shutdown`); the
    /// factory then refuses to hand out or start informers. Idempotent.
    pub async fn shutdown(&self) {
        let tasks: Vec<(String, JoinHandle<Result<(), InformerError>>)> = {
            let mut state = self.state.lock();
            state.shut_down = true;
            state
                .entries
                .iter_mut()
                .filter_map(|e| e.task.take().map(|t| (e.name.clone(), t)))
                .collect()
        };
        self.stop.send_replace(true);
        for (name, task) in tasks {
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::warn!(informer = %name, %error, "informer did not run under the factory")
                }
                Err(error) => tracing::error!(informer = %name, %error, "informer task failed"),
            }
        }
    }

    /// How many informers the factory holds.
    pub fn len(&self) -> usize {
        self.state.lock().entries.len()
    }

    /// Whether the factory holds no informer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The names of the informers not started yet.
    pub fn not_started(&self) -> Vec<String> {
        let state = self.state.lock();
        state
            .entries
            .iter()
            .filter(|e| e.task.is_none())
            .map(|e| e.name.clone())
            .collect()
    }
}

impl Default for InformerFactory {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for InformerFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        let entries: Vec<(&str, &str, bool)> = state
            .entries
            .iter()
            .map(|e| (e.name.as_str(), e.type_name, e.task.is_some()))
            .collect();
        f.debug_struct("InformerFactory")
            .field("informers", &entries)
            .field("shut_down", &state.shut_down)
            .finish()
    }
}
