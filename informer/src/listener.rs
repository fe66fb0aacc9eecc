//! `Listener`: one registered handler, its buffer and its delivery thread.

use crate::buffer::Buffer;
use crate::event::Notification;
use crate::handler::{deliver, ResourceEventHandler};
use crate::metrics::GaugeMetric;
use crate::sync::Mutex;
use kcache_core::Clock;
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Duration;

/// A handler call slower than this, with more than [`SLOW_PENDING`] notifications waiting,
/// is reported (client-go 1.36's slow-handler trace).
pub(crate) const SLOW_CALL: Duration = Duration::from_millis(100);
/// See [`SLOW_CALL`].
pub(crate) const SLOW_PENDING: usize = 1024;

/// One registered handler (or event stream) as the dispatcher sees it.
pub(crate) struct Listener<T> {
    pub(crate) id: u64,
    pub(crate) name: Arc<str>,
    pub(crate) buffer: Buffer<T>,
    gauge: Option<Arc<dyn GaugeMetric>>,
    delivery_thread: Mutex<Option<ThreadId>>,
}

impl<T> Listener<T> {
    pub(crate) fn new(
        id: u64,
        name: Arc<str>,
        buffer: Buffer<T>,
        gauge: Option<Arc<dyn GaugeMetric>>,
    ) -> Self {
        Self {
            id,
            name,
            buffer,
            gauge,
            delivery_thread: Mutex::new(None),
        }
    }

    /// Queues a notification (never blocks on the handler).
    pub(crate) fn push(&self, n: Notification<T>) {
        if self.buffer.push(n) {
            self.update_gauge();
        }
    }

    /// Queues a batch of notifications in order, emptying `batch` (never blocks on the handler).
    pub(crate) fn push_batch(&self, batch: &mut Vec<Notification<T>>) {
        if self.buffer.push_batch(batch) {
            self.update_gauge();
        }
    }

    pub(crate) fn update_gauge(&self) {
        if let Some(g) = &self.gauge {
            #[allow(clippy::cast_precision_loss, reason = "a gauge")]
            g.set(self.buffer.pending() as f64);
        }
    }

    /// Whether the calling thread is this listener's delivery thread.
    pub(crate) fn is_delivery_thread(&self) -> bool {
        *self.delivery_thread.lock() == Some(std::thread::current().id())
    }
}

/// Starts the delivery thread of `listener`, calling `handler` for each notification.
pub(crate) fn spawn_delivery<T: Send + Sync + 'static>(
    listener: Arc<Listener<T>>,
    handler: Box<dyn ResourceEventHandler<T>>,
    clock: Arc<dyn Clock>,
) -> std::io::Result<()> {
    let thread_name = format!("kcache-handler-{}", listener.name);
    let l = listener.clone();
    let handle = std::thread::Builder::new()
        .name(thread_name)
        .spawn(move || {
            *l.delivery_thread.lock() = Some(std::thread::current().id());
            let _span = tracing::info_span!("informer_handler", handler = %l.name).entered();
            run_delivery(&l, &*handler, &*clock);
        })?;
    drop(handle);
    Ok(())
}

fn run_delivery<T: 'static>(
    l: &Listener<T>,
    handler: &dyn ResourceEventHandler<T>,
    clock: &dyn Clock,
) {
    let mut next = l.buffer.pop_blocking();
    // A call is timed from when its notification was taken: the end of the previous call when
    // the next one was already queued, so one clock read per call in a busy stream.
    let mut start = clock.now();
    while let Some(n) = next {
        l.update_gauge();
        let outcome = catch_unwind(AssertUnwindSafe(|| deliver(handler, &n.event)));
        if let Err(payload) = outcome {
            tracing::error!(
                handler = %l.name,
                key = %n.key,
                panic = panic_message(&*payload),
                "event handler panicked; the notification counts as delivered and the handler goes on"
            );
        }
        let end = clock.now();
        let took = end.saturating_duration_since(start);
        if took > SLOW_CALL {
            let pending = l.buffer.pending();
            if pending > SLOW_PENDING {
                tracing::warn!(
                    handler = %l.name,
                    key = %n.key,
                    took_ms = took.as_millis() as u64,
                    pending,
                    "slow event handler: notifications are piling up in its buffer"
                );
            }
        }
        let waited;
        (next, waited) = l.buffer.complete_and_pop(n.initial);
        start = if waited { clock.now() } else { end };
    }
    l.buffer.finish_consumer();
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "<non-string panic payload>"
    }
}
