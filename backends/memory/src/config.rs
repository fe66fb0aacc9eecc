//! [`MemoryConfig`]: the knobs of a [`MemorySource`](crate::MemorySource).

use kcache_core::{Clock, SystemClock};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Settings of a [`MemorySource`](crate::MemorySource), built with chained setters.
///
/// | setting | default | meaning |
/// |---|---|---|
/// | [`history_window`](Self::with_history_window) | 1000 events | how many past changes are kept for watches from an old version and exact lists |
/// | [`page_size_limit`](Self::with_page_size_limit) | none | the largest page a list returns, whatever the request asks |
/// | [`bookmark_interval`](Self::with_bookmark_interval) | 60 s | how often a quiet watch with bookmarks allowed gets one |
/// | [`watcher_buffer`](Self::with_watcher_buffer) | 1024 events | how many undelivered live events one watcher may hold before it is evicted |
/// | [`clock`](Self::with_clock) | [`SystemClock`] | the time source of bookmarks and watch timeouts |
///
/// # Examples
/// ```
/// use kcache_core::FakeClock;
/// use kcache_memory::MemoryConfig;
/// use std::time::Duration;
///
/// let config = MemoryConfig::new()
///     .with_history_window(100)
///     .with_page_size_limit(Some(50))
///     .with_bookmark_interval(Duration::from_secs(5))
///     .with_watcher_buffer(64)
///     .with_clock(FakeClock::new());
/// assert_eq!(config.history_window(), 100);
/// ```
#[derive(Clone)]
pub struct MemoryConfig {
    pub(crate) history_window: usize,
    pub(crate) page_size_limit: Option<usize>,
    pub(crate) bookmark_interval: Duration,
    pub(crate) watcher_buffer: usize,
    pub(crate) clock: Arc<dyn Clock>,
}

impl MemoryConfig {
    /// The default settings (see the table above).
    pub fn new() -> Self {
        Self {
            history_window: 1000,
            page_size_limit: None,
            bookmark_interval: Duration::from_secs(60),
            watcher_buffer: 1024,
            clock: Arc::new(SystemClock),
        }
    }

    /// Keeps the last `events` changes. A watch from a version before the window, or an exact list
    /// at such a version, gets [`MemoryError::Expired`](crate::MemoryError::Expired) (like a
    /// compacted etcd). Zero keeps nothing: only the current version can be watched from.
    ///
    /// # Memory
    /// The window holds the old states of the objects it covers, so it costs up to `events`
    /// objects on top of the current ones.
    pub fn with_history_window(mut self, events: usize) -> Self {
        self.history_window = events;
        self
    }

    /// Caps every list page at `limit` objects (`None`: no cap). A request without a limit, or
    /// with a larger one, then gets pages with continue tokens, as from a server that enforces a
    /// page size. `Some(0)` is taken as `None`.
    pub fn with_page_size_limit(mut self, limit: Option<usize>) -> Self {
        self.page_size_limit = limit.filter(|&n| n > 0);
        self
    }

    /// Sends a bookmark on a watch that allows them after every `interval` of the clock's time.
    /// Zero disables periodic bookmarks (the end-of-initial-events bookmark is still sent).
    pub fn with_bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// Lets each watcher hold up to `events` live events it has not taken yet; one more evicts it
    /// (its stream ends with [`MemoryError::Evicted`](crate::MemoryError::Evicted)), so a slow
    /// watcher never blocks writers nor grows without bound. At least 1.
    pub fn with_watcher_buffer(mut self, events: usize) -> Self {
        self.watcher_buffer = events.max(1);
        self
    }

    /// The clock for bookmark intervals and watch timeouts. With [`SystemClock`], watch streams
    /// that use either must be polled inside a tokio runtime; with a
    /// [`FakeClock`](kcache_core::FakeClock), `advance` drives them.
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The history window, in events.
    pub fn history_window(&self) -> usize {
        self.history_window
    }

    /// The page size cap, if any.
    pub fn page_size_limit(&self) -> Option<usize> {
        self.page_size_limit
    }

    /// The bookmark interval.
    pub fn bookmark_interval(&self) -> Duration {
        self.bookmark_interval
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The watcher buffer capacity, in events.
    pub fn watcher_buffer(&self) -> usize {
        self.watcher_buffer
    }
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MemoryConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryConfig")
            .field("history_window", &self.history_window)
            .field("page_size_limit", &self.page_size_limit)
            .field("bookmark_interval", &self.bookmark_interval)
            .field("watcher_buffer", &self.watcher_buffer)
            .field("clock", &self.clock)
            .finish()
    }
}
