//! Queue configuration: name, metrics provider and clock.

use crate::metrics::MetricsProvider;
use kcache_core::{Clock, SystemClock};
use std::fmt;
use std::sync::Arc;

/// How a queue is built (client-go's `TypedQueueConfig`).
///
/// Metrics are recorded only when the queue has both a [`name`](QueueConfig::name) (the `name`
/// label) and a [`metrics_provider`](QueueConfig::metrics_provider); otherwise the queue does no
/// metrics work and reads no clock on its hot path.
///
/// # Examples
/// ```
/// use kcache_core::FakeClock;
/// use kcache_workqueue::{NoopMetricsProvider, Queue, QueueConfig};
/// use std::sync::Arc;
///
/// let config = QueueConfig::new()
///     .name("pods")
///     .metrics_provider(Arc::new(NoopMetricsProvider))
///     .clock(Arc::new(FakeClock::new()));
/// let queue: Queue<String> = Queue::with_config(config);
/// assert!(queue.add("default/web".to_string()));
/// ```
#[derive(Clone)]
pub struct QueueConfig {
    pub(crate) name: Option<String>,
    pub(crate) metrics_provider: Option<Arc<dyn MetricsProvider>>,
    pub(crate) clock: Arc<dyn Clock>,
}

impl QueueConfig {
    /// No name, no metrics, the system clock.
    pub fn new() -> Self {
        Self {
            name: None,
            metrics_provider: None,
            clock: Arc::new(SystemClock),
        }
    }

    /// Names the queue (the metrics' `name` label).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Records metrics through `provider` (only for a named queue).
    pub fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.metrics_provider = Some(provider);
        self
    }

    /// Uses `clock` for delays and metrics (a `FakeClock` in tests).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for QueueConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueConfig")
            .field("name", &self.name)
            .field("metrics", &self.metrics_provider.is_some())
            .field("clock", &self.clock)
            .finish()
    }
}
