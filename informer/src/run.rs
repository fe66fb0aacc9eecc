//! Running the informer: the reflector, the pop loop, the stop; and read-your-writes waits.

use crate::error::{InformerError, ResourceVersionError};
use crate::informer::{Setup, SharedIndexInformer};
use crate::listener::panic_message;
use crate::shared::Shared;
use crate::sink::Sink;
use futures::future::{select, Either};
use futures::FutureExt;
use kcache_core::{Meta, ResourceVersion};
use kcache_deltafifo::{Batch, DeltaFifoError, RealFifo};
use kcache_reflector::{ListWatcher, ReflectorBuilder, ReflectorError};
use std::cmp::Ordering;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

impl<T, L, M> SharedIndexInformer<T, L, M>
where
    T: Send + Sync + 'static,
    L: ListWatcher<T>,
    M: Meta<T>,
{
    /// Runs the informer until `stop` completes or its [`StopHandle`](crate::StopHandle) is
    /// used (client-go's `Run`; [`stop_handle`](Self::stop_handle)): lists and watches the
    /// source, applies every change to the cache, notifies the handlers. On return the informer
    /// is stopped for good: handlers' buffers are closed (undelivered notifications are dropped,
    /// as in client-go; calls in progress finish), no handler or index can be added.
    ///
    /// User code that panics while the informer runs is contained: a transform or index function
    /// that panics on an object refuses that object (a transform's panic reaches the watch-error
    /// handler as a store error; an index function's is logged, like its errors), and a
    /// panicking watch-error handler is logged. Whatever ends `run` (`stop`, an error, a panic
    /// from anywhere else, or the future being dropped) leaves the informer stopped: waiters
    /// are released (`wait_for_cache_sync` gives `false`, `wait_for_resource_version` an error),
    /// handlers and indexes are refused.
    ///
    /// The informer counts as started from the call, not from the first poll of the future:
    /// a second `run`, [`set_transform`](Self::set_transform) and
    /// [`set_watch_error_handler`](Self::set_watch_error_handler) are refused from then on.
    ///
    /// # Errors
    /// [`InformerError::AlreadyStarted`] if `run` was called before;
    /// [`InformerError::Config`] if the reflector settings of the
    /// [`InformerOptions`](crate::InformerOptions) make no sense (a negative, NaN or infinite
    /// backoff factor or jitter); [`InformerError::Panicked`] if a panic ended the run (say, in
    /// the source's `list` or `watch`).
    ///
    /// # Cancel safety
    /// Dropping the future stops the source and the pop loop, and the informer, for good.
    pub fn run<'a>(
        &'a self,
        stop: impl Future<Output = ()> + Send + 'a,
    ) -> impl Future<Output = Result<(), InformerError>> + 'a {
        // Claimed at the call, so "already started" does not wait for a poll.
        let claimed = self.claim();
        async move {
            let (check_period, setup, stopper) = claimed?;
            self.run_claimed(check_period, setup, stopper, stop).await
        }
    }

    /// Marks the informer started and takes what `run` needs; from here on, however the run
    /// ends (even by dropping its future unpolled), the informer ends stopped.
    fn claim(&self) -> Result<Claimed<T, L, M>, InformerError> {
        let check_period = {
            let mut dispatch = self.shared.processor.lock();
            if dispatch.started || dispatch.stopped {
                return Err(InformerError::AlreadyStarted);
            }
            dispatch.started = true;
            dispatch.check_period
        };
        let stopper = StopOnExit {
            shared: self.shared.clone(),
            fifo: None,
        };
        let setup = self
            .setup
            .lock()
            .take()
            .ok_or(InformerError::AlreadyStarted)?;
        Ok((check_period, setup, stopper))
    }

    async fn run_claimed(
        &self,
        check_period: Duration,
        setup: Setup<T, L::Error>,
        mut stopper: StopOnExit<T, M>,
        stop: impl Future<Output = ()> + Send,
    ) -> Result<(), InformerError> {
        let shared = self.shared.clone();
        let requested = shared.stop_requested.requested();
        let stop = async move {
            select(pin!(stop), pin!(requested)).await;
        };

        let fifo: Arc<RealFifo<T, M>> = Arc::new(match setup.transform {
            // A panicking transform refuses its object, as a failing one does.
            Some(transform) => RealFifo::with_transformer(move |obj| {
                catch_unwind(AssertUnwindSafe(|| transform(obj))).unwrap_or_else(|payload| {
                    Err(Box::new(TransformPanicked(panic_message(&*payload).to_owned())).into())
                })
            }),
            None => RealFifo::new(),
        });
        stopper.fifo = Some(fifo.clone());
        *shared.fifo.lock() = Some(fifo.clone());
        let sink = Sink {
            fifo: fifo.clone(),
            shared: shared.clone(),
        };

        let resync_shared = shared.clone();
        let name = shared.name.clone();
        let user_hook = setup.watch_error_handler;
        let tuning = setup.reflector;
        let mut builder = ReflectorBuilder::<T, _, _, M>::with_meta(self.lw.clone(), sink);
        if let Some(size) = tuning.page_size {
            builder = builder.page_size(size);
        }
        if let Some(min) = tuning.min_watch_timeout {
            builder = builder.min_watch_timeout(min);
        }
        if let Some(on) = tuning.streaming_initial_list {
            builder = builder.streaming_initial_list(on);
        }
        if let Some(backoff) = tuning.backoff {
            builder = builder.backoff(backoff);
        }
        if let Some(seed) = tuning.seed {
            builder = builder.seed(seed);
        }
        if let Some(pages) = tuning.max_list_pages {
            builder = builder.max_list_pages(pages);
        }
        if let Some(objects) = tuning.max_list_objects {
            builder = builder.max_list_objects(objects);
        }
        // A restore from a snapshot runs before the reflector (it decides where the reflector
        // starts); a stop meanwhile ends the run.
        #[cfg_attr(not(feature = "snapshot"), allow(unused_mut))]
        let mut stop = pin!(stop);
        #[cfg(feature = "snapshot")]
        if let Some(restore) = setup.restore {
            let restoring = pin!(crate::restore::restore(&shared, &*self.lw, &fifo, restore));
            match select(restoring, stop.as_mut()).await {
                Either::Left((Some(rv), _)) => builder = builder.resume_from(rv),
                Either::Left((None, _)) => {}
                Either::Right(((), _)) => return Ok(()),
            }
        }
        let reflector = builder
            .name(shared.name.to_string())
            .clock(shared.clock.clone())
            .resync_period(check_period)
            .should_resync(move || {
                let now = resync_shared.clock.now();
                resync_shared.processor.lock().should_resync(now)
            })
            .on_watch_error(move |error: &ReflectorError<L::Error, DeltaFifoError>| {
                tracing::warn!(informer = %name, error = %ErrorChain(error), "watch error");
                if let Some(hook) = &user_hook {
                    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| hook(error))) {
                        let panic = panic_message(&*payload);
                        tracing::error!(informer = %name, %panic, "watch-error handler panicked");
                    }
                }
            })
            .try_build()?;

        let span = tracing::info_span!("informer", informer = %shared.name);
        let body = async {
            tracing::debug!("informer starting");
            let source = pin!(reflector.run_until(stop));
            let pop = pin!(pop_loop(&fifo, &shared));
            if let Either::Right(((), source)) = select(source, pop).await {
                // The pop loop only ends when the FIFO closes; let the reflector finish.
                source.await;
            }
        }
        .instrument(span);
        let outcome = AssertUnwindSafe(body).catch_unwind().await;
        drop(stopper);
        tracing::debug!(informer = %shared.name, "informer stopped");
        outcome.map_err(|payload| {
            let message = panic_message(&*payload).to_owned();
            tracing::error!(informer = %shared.name, panic = %message, "the informer's run panicked; it is stopped");
            InformerError::Panicked(message)
        })
    }

    /// Resolves once the cache has applied every event up to resource version `rv`, for
    /// read-your-writes: after your own write returned `rv`, the cache (and every handler's
    /// buffer) holds it or something newer.
    ///
    /// Resource versions are opaque in general; this form orders them as decimal integers of any
    /// length ([`ResourceVersion::cmp_decimal`]: ASCII digits only, no sign, no spaces;
    /// kcache-memory, etcd and Kubernetes' current servers all qualify). For other sources use
    /// [`wait_for_resource_version_by`](Self::wait_for_resource_version_by).
    ///
    /// The cache's version advances each time the informer has applied everything the source
    /// delivered so far, which a source that falls quiet always allows. A version once reached
    /// stays reached: if the source's versions later go down (a source restored from a backup
    /// and relisted), waiting for a version the cache had already reached resolves at once.
    ///
    /// # Errors
    /// [`ResourceVersionError::NotNumeric`] if `rv` is not a decimal integer (say `"+3"`, `""`
    /// or `"abc"`);
    /// [`ResourceVersionError::Stopped`] if the informer stops first.
    pub async fn wait_for_resource_version(
        &self,
        rv: &ResourceVersion,
    ) -> Result<(), ResourceVersionError> {
        if !rv.is_decimal() {
            return Err(ResourceVersionError::NotNumeric(rv.clone()));
        }
        // A version once reached stays reached: the highest version the cache ever reached
        // counts too, should the source's versions later go down (a restored source relisted).
        let peak = &self.shared.peak_rv;
        let reached = |v: &ResourceVersion| {
            v.cmp_decimal(rv)
                .is_some_and(|order| order != Ordering::Less)
        };
        self.wait_for_resource_version_by(rv, |applied, _| {
            let peak_reached = peak.lock().as_ref().is_some_and(reached);
            if reached(applied) || peak_reached {
                Ordering::Equal
            } else {
                Ordering::Less
            }
        })
        .await
    }

    /// [`wait_for_resource_version`](Self::wait_for_resource_version) with the source's own
    /// ordering: `cmp(applied, rv)` must say how the cache's version compares with `rv`.
    ///
    /// # Errors
    /// [`ResourceVersionError::Stopped`] if the informer stops first.
    pub async fn wait_for_resource_version_by(
        &self,
        rv: &ResourceVersion,
        cmp: impl Fn(&ResourceVersion, &ResourceVersion) -> Ordering,
    ) -> Result<(), ResourceVersionError> {
        let mut applied = self.shared.applied_rv.subscribe();
        let mut lifecycle = self.shared.lifecycle.subscribe();
        loop {
            {
                let current = applied.borrow_and_update();
                if !current.is_empty() && cmp(&current, rv) != Ordering::Less {
                    return Ok(());
                }
            }
            if lifecycle.borrow_and_update().stopped {
                return Err(ResourceVersionError::Stopped);
            }
            let closed = {
                let a = pin!(applied.changed());
                let l = pin!(lifecycle.changed());
                match select(a, l).await {
                    Either::Left((r, _)) => r.is_err(),
                    Either::Right((r, _)) => r.is_err(),
                }
            };
            if closed {
                return Err(ResourceVersionError::Stopped);
            }
        }
    }
}

/// What [`SharedIndexInformer::claim`] takes for the run: the resync check period, the setup,
/// and the guard that leaves the informer stopped however the run ends.
type Claimed<T, L, M> = (
    Duration,
    Setup<T, <L as ListWatcher<T>>::Error>,
    StopOnExit<T, M>,
);

/// Pops batches of entries and applies each batch under one dispatch lock until the queue
/// closes.
async fn pop_loop<T, M>(fifo: &RealFifo<T, M>, shared: &Shared<T, M>)
where
    T: Send + Sync + 'static,
    M: Meta<T>,
{
    let process = |batch: Batch<T>| {
        let start = shared.metrics.latency.as_ref().map(|_| shared.clock.now());
        let mut dispatch = shared.processor.lock();
        for (entry, is_in_initial_list) in batch {
            // An index function (or key accessor) that panics refuses the change, as one that
            // fails does: the cache is left as it was (indexes run before any write), the
            // informer goes on.
            let applied = catch_unwind(AssertUnwindSafe(|| {
                shared.apply_entry(&mut dispatch, entry, is_in_initial_list)
            }));
            match applied {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::error!(
                    informer = %shared.name,
                    error = %ErrorChain(&error),
                    "cannot apply a change to the cache; the informer goes on"
                ),
                Err(payload) => tracing::error!(
                    informer = %shared.name,
                    panic = %panic_message(&*payload),
                    "applying a change to the cache panicked (an index function?); the change is refused, the informer goes on"
                ),
            }
        }
        drop(dispatch);
        if let (Some(h), Some(start)) = (&shared.metrics.latency, start) {
            let took = shared.clock.now().saturating_duration_since(start);
            h.observe(took.as_secs_f64());
        }
    };
    loop {
        let popped = fifo.pop_batch_async(shared.batch_size, &process);
        // Either a batch was popped, or the sink applied writes directly (the queue was caught
        // up). Dropping the pop future unfinished takes nothing from the queue.
        let result = match select(popped, pin!(shared.direct.raised())).await {
            Either::Left((result, _)) => result.map(drop),
            Either::Right(((), _)) => Ok(()),
        };
        shared.direct.lower();
        // The batch's (or the direct writes') notifications go to the handlers' buffers
        // together.
        shared.processor.lock().flush();
        if result.is_err() {
            return;
        }
        // Read what was received before looking at the queue: every event up to it reached the
        // queue first, so an idle queue has applied them all.
        let received = shared.last_received();
        let progress = fifo.progress();
        if progress.idle {
            shared.publish_applied(received);
        }
        if progress.synced {
            shared.set_synced();
        }
    }
}

/// Stops the informer when dropped: whatever ends `run` (a return, an error, a panic, the future
/// being dropped) closes the FIFO and releases every waiter.
struct StopOnExit<T, M: Meta<T>> {
    shared: Arc<Shared<T, M>>,
    fifo: Option<Arc<RealFifo<T, M>>>,
}

impl<T, M: Meta<T>> Drop for StopOnExit<T, M> {
    fn drop(&mut self) {
        if let Some(fifo) = &self.fifo {
            fifo.close();
        }
        self.shared.stop();
    }
}

/// What a transform that panicked on an object reports (the object is refused).
#[derive(Debug, thiserror::Error)]
#[error("the transform panicked: {0}")]
struct TransformPanicked(String);

/// Displays an error with its sources.
struct ErrorChain<'a>(&'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}
