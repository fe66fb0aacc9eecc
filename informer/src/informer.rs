//! `SharedIndexInformer`: construction, settings, handlers and reads.

use crate::buffer::Buffer;
use crate::error::InformerError;
use crate::event::{Event, Notification};
use crate::handler::ResourceEventHandler;
use crate::listener::{spawn_delivery, Listener};
use crate::metrics::InformerMetrics;
use crate::options::{InformerOptions, ReflectorTuning};
use crate::processor::Processor;
use crate::reader::CacheReader;
use crate::registration::{HandlerOptions, HandlerRegistration, HasSynced};
use crate::shared::{DirectSignal, Lifecycle, Shared};
use crate::stop::StopHandle;
use crate::stream::EventStream;
use crate::sync::Mutex;
use futures::future::BoxFuture;
use kcache_core::{Meta, ObjectAccessor, ResourceVersion};
use kcache_deltafifo::{BoxError, DeltaFifoError};
use kcache_indexer::{Indexer, Indexers};
use kcache_reflector::{ListWatcher, ReflectorError};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// A transform applied to every object entering the cache (see
/// [`SharedIndexInformer::set_transform`]).
pub(crate) type Transform<T> = Arc<dyn Fn(Arc<T>) -> Result<Arc<T>, BoxError> + Send + Sync>;

/// A watch-error handler (see [`SharedIndexInformer::set_watch_error_handler`]).
pub type WatchErrorHandler<E> = Arc<dyn Fn(&ReflectorError<E, DeltaFifoError>) + Send + Sync>;

/// What can only be set before `run`; taken by `run`.
pub(crate) struct Setup<T, E> {
    pub(crate) transform: Option<Transform<T>>,
    pub(crate) watch_error_handler: Option<WatchErrorHandler<E>>,
    pub(crate) reflector: ReflectorTuning,
    #[cfg(feature = "snapshot")]
    pub(crate) restore: Option<crate::restore::Restore<T>>,
}

/// One list+watch of a source, cached in an indexer and fanned out to any number of handlers:
/// client-go's `SharedIndexInformer`.
///
/// Inside: a [`Reflector`](kcache_reflector::Reflector) lists and watches `L` into a
/// [`RealFifo`](kcache_deltafifo::RealFifo) (events in order, a relist as one entry); a pop loop
/// applies batches of entries to the [`Indexer`] and hands the resulting notifications to every
/// handler's own buffer; each handler has its own delivery thread.
/// See the crate documentation for the rules and an example.
///
/// `T` is the object type, `L` the source, `M` the key accessor (default: the
/// [`Object`](kcache_core::Object) trait).
#[doc(alias = "SharedInformer")]
#[doc(alias = "informer")]
pub struct SharedIndexInformer<T, L, M = ObjectAccessor>
where
    L: ListWatcher<T>,
{
    pub(crate) shared: Arc<Shared<T, M>>,
    pub(crate) lw: Arc<L>,
    pub(crate) setup: Mutex<Option<Setup<T, L::Error>>>,
    pub(crate) default_resync: Duration,
}

impl<T, L> SharedIndexInformer<T, L, ObjectAccessor>
where
    T: Send + Sync + 'static,
    L: ListWatcher<T>,
    ObjectAccessor: Meta<T>,
{
    /// An informer over `lw` with the default resync period `resync` (zero: none) and keys from
    /// the [`Object`](kcache_core::Object) trait (client-go's `NewSharedInformer`).
    pub fn new(lw: L, resync: Duration) -> Self {
        Self::with_options(lw, InformerOptions::new().resync_period(resync))
    }

    /// An informer over `lw` with `options` and keys from the [`Object`](kcache_core::Object)
    /// trait (client-go's `NewSharedIndexInformerWithOptions`).
    pub fn with_options(lw: L, options: InformerOptions<T>) -> Self {
        Self::with_accessor(lw, options)
    }
}

impl<T, L, M> SharedIndexInformer<T, L, M>
where
    T: Send + Sync + 'static,
    L: ListWatcher<T>,
    M: Meta<T>,
{
    /// An informer over `lw` with `options`, reading keys and resource versions through the
    /// accessor `M` (name it: `SharedIndexInformer::<T, L, M>::with_accessor(lw, options)`).
    pub fn with_accessor(lw: L, options: InformerOptions<T>) -> Self {
        let name: Arc<str> = Arc::from(options.name.as_str());
        let shared = Shared {
            metrics: InformerMetrics::new(options.metrics, &name),
            name,
            indexer: Arc::new(Indexer::with_indexers(options.indexers)),
            processor: Arc::new(Processor::new(options.resync_period)),
            clock: options.clock,
            lifecycle: watch::Sender::new(Lifecycle::default()),
            received_rv: Mutex::new((0, ResourceVersion::default())),
            published_seq: Mutex::new(0),
            applied_rv: watch::Sender::new(ResourceVersion::default()),
            direct: DirectSignal::default(),
            fifo: Mutex::new(None),
            peak_rv: Mutex::new(None),
            stop_requested: StopHandle::new(),
            catch_up: Mutex::new(None),
            #[cfg(feature = "snapshot")]
            restore_outcome: Mutex::new(crate::restore::RestoreOutcome::NotAttempted),
            batch_size: options.batch_size,
        };
        Self {
            shared: Arc::new(shared),
            lw: Arc::new(lw),
            setup: Mutex::new(Some(Setup {
                transform: None,
                watch_error_handler: None,
                reflector: options.reflector,
                #[cfg(feature = "snapshot")]
                restore: options.restore,
            })),
            default_resync: options.resync_period,
        }
    }

    /// Registers `handler` with the informer's default resync period (client-go's
    /// `AddEventHandler`). See [`add_event_handler_with_options`](Self::add_event_handler_with_options).
    ///
    /// # Errors
    /// As [`add_event_handler_with_options`](Self::add_event_handler_with_options).
    pub fn add_event_handler(
        &self,
        handler: impl ResourceEventHandler<T>,
    ) -> Result<HandlerRegistration<T>, InformerError> {
        self.add_event_handler_with_options(handler, HandlerOptions::new())
    }

    /// Registers `handler` with its own resync period (client-go's
    /// `AddEventHandlerWithResyncPeriod`). client-go's rules: a positive period below 1 s is
    /// raised to 1 s; before the start, a period below the informer's resync check period lowers
    /// that check period (and every handler's effective period is recomputed); after the start it
    /// is raised to the check period instead; an informer built without resync ignores handlers'
    /// periods.
    ///
    /// # Errors
    /// As [`add_event_handler_with_options`](Self::add_event_handler_with_options).
    pub fn add_event_handler_with_resync(
        &self,
        handler: impl ResourceEventHandler<T>,
        period: Duration,
    ) -> Result<HandlerRegistration<T>, InformerError> {
        self.add_event_handler_with_options(handler, HandlerOptions::new().resync_period(period))
    }

    /// Registers `handler` with `options` (client-go's `AddEventHandlerWithOptions`) and starts
    /// its delivery thread. A handler added to a running informer first receives the whole cache
    /// as adds with `is_in_initial_list = true`, and its registration's `has_synced` waits for
    /// them.
    ///
    /// # Errors
    /// [`InformerError::Stopped`] once the informer has stopped; [`InformerError::Spawn`] if the
    /// delivery thread cannot start.
    #[doc(alias = "AddEventHandlerWithOptions")]
    pub fn add_event_handler_with_options(
        &self,
        handler: impl ResourceEventHandler<T>,
        options: HandlerOptions,
    ) -> Result<HandlerRegistration<T>, InformerError> {
        self.register(options, |listener| {
            spawn_delivery(listener, Box::new(handler), self.shared.clock.clone())
                .map_err(InformerError::Spawn)
        })
    }

    /// The informer's notifications as a [`Stream`](futures::Stream), with an ordered buffer
    /// and the default resync period; like a handler, a stream that joins a running informer
    /// first yields the cache's content.
    ///
    /// # Errors
    /// [`InformerError::Stopped`] once the informer has stopped.
    pub fn event_stream(&self) -> Result<EventStream<T>, InformerError> {
        self.event_stream_with(HandlerOptions::new())
    }

    /// [`event_stream`](Self::event_stream) with `options` (resync period, buffer mode, name).
    ///
    /// # Errors
    /// [`InformerError::Stopped`] once the informer has stopped.
    pub fn event_stream_with(
        &self,
        options: HandlerOptions,
    ) -> Result<EventStream<T>, InformerError> {
        self.register(options, |_| Ok(())).map(EventStream::new)
    }

    fn register(
        &self,
        options: HandlerOptions,
        start: impl FnOnce(Arc<Listener<T>>) -> Result<(), InformerError>,
    ) -> Result<HandlerRegistration<T>, InformerError> {
        let shared = &self.shared;
        let mut dispatch = shared.processor.lock();
        if dispatch.stopped {
            return Err(InformerError::Stopped);
        }
        let requested =
            dispatch.adjust_request(options.resync_period.unwrap_or(self.default_resync));
        let id = dispatch.next_id();
        let name: Arc<str> = match options.name {
            Some(n) => Arc::from(n),
            None => Arc::from(format!("{}-handler-{id}", shared.name)),
        };
        let gauge = shared.metrics.queued_items(&shared.name, &name);
        let listener = Arc::new(Listener::new(id, name, Buffer::new(options.mode), gauge));
        start(listener.clone())?;
        if dispatch.started {
            // The replay, under the dispatch lock: nothing is applied meanwhile, so every
            // object reaches the new handler exactly once.
            for obj in shared.indexer.list() {
                match M::key(&obj) {
                    Ok(key) => {
                        let event = Event::Added {
                            obj,
                            is_in_initial_list: true,
                        };
                        listener.push(Notification::new(key.into(), event));
                    }
                    Err(error) => {
                        tracing::warn!(informer = %shared.name, %error, "cached object without a key skipped in a replay")
                    }
                }
            }
        }
        dispatch.add(listener.clone(), requested, shared.clock.now());
        Ok(HandlerRegistration {
            listener,
            processor: shared.processor.clone(),
        })
    }

    /// Sets the transform applied to every object before it enters the cache (client-go's
    /// `SetTransform`). The FIFO applies it once per object received from the source (never to
    /// resyncs or tombstones); it should be idempotent all the same, as client-go asks.
    ///
    /// # Errors
    /// [`InformerError::AlreadyStarted`] after `run` was called.
    pub fn set_transform<F, E>(&self, transform: F) -> Result<(), InformerError>
    where
        F: Fn(Arc<T>) -> Result<Arc<T>, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        let mut setup = self.setup.lock();
        let setup = setup.as_mut().ok_or(InformerError::AlreadyStarted)?;
        setup.transform = Some(Arc::new(move |obj| transform(obj).map_err(Into::into)));
        Ok(())
    }

    /// Sets the handler of the reflector's errors (client-go's `SetWatchErrorHandler`). Errors
    /// are always logged with `tracing` as well; the reflector recovers from each by itself.
    ///
    /// # Errors
    /// [`InformerError::AlreadyStarted`] after `run` was called.
    pub fn set_watch_error_handler(
        &self,
        handler: impl Fn(&ReflectorError<L::Error, DeltaFifoError>) + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        let mut setup = self.setup.lock();
        let setup = setup.as_mut().ok_or(InformerError::AlreadyStarted)?;
        setup.watch_error_handler = Some(Arc::new(handler));
        Ok(())
    }

    /// Adds indexes to the cache, also while running (all or nothing).
    ///
    /// # Errors
    /// [`InformerError::Stopped`] once stopped; [`InformerError::Indexers`] on a name conflict
    /// or an index function failing on a cached object.
    pub fn add_indexers(&self, indexers: Indexers<T>) -> Result<(), InformerError> {
        if self.shared.processor.lock().stopped {
            return Err(InformerError::Stopped);
        }
        Ok(self.shared.indexer.add_indexers(indexers)?)
    }

    /// A read handle on the cache (client-go's `GetIndexer`/`GetStore` and listers).
    #[doc(alias = "GetIndexer")]
    #[doc(alias = "GetStore")]
    pub fn indexer(&self) -> CacheReader<T, M> {
        CacheReader {
            indexer: self.shared.indexer.clone(),
        }
    }

    /// Whether the first list has been fully applied to the cache. It does not mean handlers
    /// have seen it: use their registrations' `has_synced`.
    pub fn has_synced(&self) -> bool {
        self.shared.lifecycle.borrow().synced
    }

    /// Resolves to `true` once [`has_synced`](Self::has_synced), `false` if the informer stops
    /// first. No polling: it waits on a watch channel.
    #[doc(alias = "WaitForCacheSync")]
    pub async fn wait_for_cache_sync(&self) -> bool {
        let mut rx = self.shared.lifecycle.subscribe();
        let synced = match rx.wait_for(|l| l.synced || l.stopped).await {
            Ok(l) => l.synced,
            Err(_) => false,
        };
        synced
    }

    /// The resource version of the last list, event or bookmark the source delivered (client-go's
    /// `LastSyncResourceVersion`); empty before the first list.
    pub fn last_sync_resource_version(&self) -> ResourceVersion {
        self.shared.last_received().1
    }

    /// How many handlers (and event streams) are registered.
    pub fn handler_count(&self) -> usize {
        self.shared.processor.lock().len()
    }

    /// A handle that stops this informer's [`run`](Self::run) from anywhere (client-go's stop
    /// channel), also before `run` is called; see [`StopHandle`].
    pub fn stop_handle(&self) -> StopHandle {
        self.shared.stop_requested.clone()
    }

    /// Whether `run` has returned.
    pub fn is_stopped(&self) -> bool {
        self.shared.processor.lock().stopped
    }

    /// The informer's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// How the restore from a snapshot went (feature `snapshot`; see
    /// [`InformerOptions::restore_from`]): [`NotAttempted`](crate::snapshot::RestoreOutcome::NotAttempted)
    /// without one or before `run` reached it.
    #[cfg(feature = "snapshot")]
    pub fn restore_outcome(&self) -> crate::snapshot::RestoreOutcome {
        self.shared.restore_outcome.lock().clone()
    }
}

impl<T, L, M> HasSynced for SharedIndexInformer<T, L, M>
where
    T: Send + Sync + 'static,
    L: ListWatcher<T>,
    M: Meta<T>,
{
    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }
    fn wait_synced(&self) -> BoxFuture<'_, bool> {
        Box::pin(self.wait_for_cache_sync())
    }
}

/// Dropping the informer (run or not) ends its handlers' delivery threads: their buffers close
/// and their registrations report removed.
impl<T, L: ListWatcher<T>, M> Drop for SharedIndexInformer<T, L, M> {
    fn drop(&mut self) {
        self.shared.stop();
    }
}

impl<T, L: ListWatcher<T>, M> fmt::Debug for SharedIndexInformer<T, L, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = *self.shared.lifecycle.borrow();
        f.debug_struct("SharedIndexInformer")
            .field("name", &self.shared.name)
            .field("synced", &l.synced)
            .field("stopped", &l.stopped)
            .finish_non_exhaustive()
    }
}
