//! `HandlerRegistration`, `HandlerOptions` and the `HasSynced` trait.

use crate::buffer::BufferMode;
use crate::error::WaitError;
use crate::listener::Listener;
use crate::processor::Processor;
use futures::future::BoxFuture;
use std::fmt;
use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

/// Something that can tell whether it has synced, and wait for it without polling: an
/// informer, a handler registration. A controller waits for several with
/// [`wait_for_cache_sync`](crate::wait_for_cache_sync).
pub trait HasSynced: Send + Sync {
    /// Whether it has synced.
    fn has_synced(&self) -> bool;

    /// Resolves to `true` once synced, or `false` if it stopped first.
    fn wait_synced(&self) -> BoxFuture<'_, bool>;
}

/// Waits until every one of `items` has synced; `false` as soon as one stopped first (client-go's
/// `WaitForCacheSync`, without its 100 ms polling).
///
/// # Examples
/// ```
/// # use kcache_informer::{wait_for_cache_sync, HasSynced};
/// # use futures::future::BoxFuture;
/// struct Ready;
/// impl HasSynced for Ready {
///     fn has_synced(&self) -> bool { true }
///     fn wait_synced(&self) -> BoxFuture<'_, bool> { Box::pin(async { true }) }
/// }
/// assert!(futures::executor::block_on(wait_for_cache_sync(&[&Ready, &Ready])));
/// ```
#[doc(alias = "WaitForCacheSync")]
pub async fn wait_for_cache_sync(items: &[&dyn HasSynced]) -> bool {
    for item in items {
        if !item.wait_synced().await {
            return false;
        }
    }
    true
}

/// How to register a handler: its resync period, buffer mode and name.
///
/// # Examples
/// ```
/// use kcache_informer::{BufferMode, HandlerOptions};
/// use std::time::Duration;
///
/// let options = HandlerOptions::new()
///     .resync_period(Duration::from_secs(30))
///     .buffer_mode(BufferMode::Coalescing)
///     .name("enqueue-owners");
/// assert_eq!(options.mode(), BufferMode::Coalescing);
/// ```
#[derive(Debug, Clone, Default)]
pub struct HandlerOptions {
    pub(crate) resync_period: Option<Duration>,
    pub(crate) mode: BufferMode,
    pub(crate) name: Option<String>,
}

impl HandlerOptions {
    /// The informer's default resync period, an ordered buffer, a generated name.
    pub fn new() -> Self {
        Self::default()
    }

    /// The handler's resync period (zero: none). Positive periods below 1 s are raised to 1 s;
    /// see [`SharedIndexInformer::add_event_handler_with_resync`](crate::SharedIndexInformer::add_event_handler_with_resync)
    /// for the other rules.
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = Some(period);
        self
    }

    /// The buffer mode (default [`BufferMode::Ordered`]).
    #[must_use]
    pub fn buffer_mode(mut self, mode: BufferMode) -> Self {
        self.mode = mode;
        self
    }

    /// The buffer mode chosen.
    pub fn mode(&self) -> BufferMode {
        self.mode
    }

    /// A name for logs, metrics labels and the delivery thread.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// A registered handler (client-go's `ResourceEventHandlerRegistration`): its own sync state,
/// its backlog, and its removal.
///
/// Dropping the registration does not remove the handler; call [`remove`](Self::remove).
pub struct HandlerRegistration<T> {
    pub(crate) listener: Arc<Listener<T>>,
    pub(crate) processor: Arc<Processor<T>>,
}

impl<T> Clone for HandlerRegistration<T> {
    fn clone(&self) -> Self {
        Self {
            listener: self.listener.clone(),
            processor: self.processor.clone(),
        }
    }
}

impl<T> fmt::Debug for HandlerRegistration<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerRegistration")
            .field("name", &self.listener.name)
            .field("pending", &self.pending())
            .field("has_synced", &self.has_synced())
            .finish()
    }
}

impl<T> HandlerRegistration<T> {
    /// The handler's name.
    pub fn name(&self) -> &str {
        &self.listener.name
    }

    /// True once the informer has synced **and** this handler has received every notification
    /// of its initial population (the first list, or the replay it got when it joined late).
    /// client-go's registration reports this too, but its informer-level `HasSynced` does not.
    pub fn has_synced(&self) -> bool {
        self.listener.buffer.has_synced()
    }

    /// Resolves to `true` once [`has_synced`](Self::has_synced), `false` if the handler was
    /// removed or the informer stopped first.
    pub async fn synced(&self) -> bool {
        poll_fn(|cx| self.listener.buffer.poll_synced(cx)).await
    }

    /// The handler's effective resync period (zero: none), after client-go's rules; `None` once
    /// removed.
    pub fn resync_period(&self) -> Option<Duration> {
        self.processor.lock().period_of(self.listener.id)
    }

    /// Notifications waiting in the handler's buffer (not counting one being delivered).
    pub fn pending(&self) -> usize {
        self.listener.buffer.pending()
    }

    /// Removes the handler (client-go's `RemoveEventHandler`): it receives nothing more, and
    /// its undelivered notifications are dropped; a call in progress finishes. Returns whether it
    /// was still registered. Idempotent.
    pub fn remove(&self) -> bool {
        let removed = self.processor.lock().remove(self.listener.id).is_some();
        self.listener.buffer.close();
        removed
    }

    /// Whether the handler was removed (or the informer stopped).
    pub fn is_removed(&self) -> bool {
        self.listener.buffer.is_closed()
    }

    /// Resolves once the handler's delivery has ended (after [`remove`](Self::remove) or the
    /// informer's stop): its last call has returned.
    pub async fn stopped(&self) {
        poll_fn(|cx| self.listener.buffer.poll_consumer_done(cx)).await
    }

    /// Removes the handler and blocks until its call in progress, if any, has returned
    /// (client-go's `ShutDownEventHandler`).
    ///
    /// # Errors
    /// [`WaitError::FromHandler`] when called from the handler itself (it would wait for
    /// itself); the handler is still removed.
    ///
    /// # Blocking
    /// Blocks the calling thread; from async code use [`remove`](Self::remove) then
    /// [`stopped`](Self::stopped).
    #[doc(alias = "ShutDownEventHandler")]
    pub fn remove_and_wait(&self) -> Result<(), WaitError> {
        self.remove();
        if self.listener.is_delivery_thread() {
            return Err(WaitError::FromHandler);
        }
        self.listener.buffer.wait_consumer_done();
        Ok(())
    }
}

impl<T: Send + Sync> HasSynced for HandlerRegistration<T> {
    fn has_synced(&self) -> bool {
        HandlerRegistration::has_synced(self)
    }
    fn wait_synced(&self) -> BoxFuture<'_, bool> {
        Box::pin(self.synced())
    }
}
