//! Time as an input: the [`Clock`] trait, the real [`SystemClock`] and the test [`FakeClock`].

mod fake;
mod system;

pub use fake::FakeClock;
pub use system::SystemClock;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// A future returned by [`Clock::sleep_until_async`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A callback a clock runs whenever its time jumps (see [`Clock::subscribe`]).
pub type ClockWaker = Arc<dyn Fn() + Send + Sync + 'static>;

/// The source of time for every kcache component.
///
/// Nothing outside `kcache-core` reads the system clock or sleeps directly (clippy enforces it):
/// it asks a `Clock`. Production code uses [`SystemClock`]; tests use [`FakeClock`] and move time
/// with [`FakeClock::advance`], so no test sleeps.
///
/// # Waiting on your own condition variable
/// A component that waits for "a deadline or a notification" (the delaying queue's timer) blocks on
/// its own condition variable with the timeout [`Clock::timeout_until`] gives, after registering a
/// waker with [`Clock::subscribe`]. A real clock returns the real remaining time and never calls
/// the waker; a fake clock returns `None` ("wait for a notify") and calls the waker on every
/// `advance`. The waker must take the waiter's mutex before it notifies, so that a jump between the
/// waiter's check of `now` and its wait is never lost.
///
/// # Examples
/// ```
/// use kcache_core::{Clock, FakeClock};
/// use std::time::Duration;
///
/// let clock = FakeClock::new();
/// let start = clock.now();
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(clock.now() - start, Duration::from_secs(5));
/// ```
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current instant.
    fn now(&self) -> Instant;

    /// Blocks the calling thread until `deadline`.
    fn sleep_until(&self, deadline: Instant);

    /// A future that completes at `deadline`.
    fn sleep_until_async(&self, deadline: Instant) -> Sleep;

    /// How long a thread waiting for `deadline` on its own condition variable should block before
    /// it looks at the time again: the remaining real time for a real clock, `None` (block until
    /// notified) for a clock that notifies its subscribers when time moves.
    fn timeout_until(&self, deadline: Instant) -> Option<Duration>;

    /// Registers `waker`, called after every jump of this clock's time. Real clocks never call it.
    /// The registration lasts until the returned [`Subscription`] is dropped.
    fn subscribe(&self, waker: ClockWaker) -> Subscription;

    /// Blocks the calling thread for `d`.
    fn sleep(&self, d: Duration) {
        self.sleep_until(self.now().checked_add(d).unwrap_or_else(far_future));
    }

    /// A future that completes after `d`.
    fn sleep_async(&self, d: Duration) -> Sleep {
        self.sleep_until_async(self.now().checked_add(d).unwrap_or_else(far_future))
    }

    /// The current wall-clock time, for timestamps other processes read (a leader election
    /// record's renew time, say). Never use it to measure durations: use [`Clock::now`]. The
    /// default reads the system's wall clock; [`FakeClock`] moves it with its own time.
    fn system_time(&self) -> SystemTime {
        #[allow(clippy::disallowed_methods, reason = "core owns the real clock")]
        SystemTime::now()
    }
}

/// An instant so far ahead that nothing waits for it in practice (about 30 years from now), for
/// deadlines whose arithmetic would overflow `Instant`.
pub fn far_future() -> Instant {
    // Instant has no MAX; 30 years ahead of the process start is "never" for every use here.
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    #[allow(clippy::disallowed_methods, reason = "core owns the real clock")]
    let base = *BASE.get_or_init(Instant::now);
    base + Duration::from_secs(30 * 365 * 24 * 3600)
}

/// `now + d`, saturating at [`far_future`] instead of overflowing.
pub fn saturating_add(now: Instant, d: Duration) -> Instant {
    match now.checked_add(d) {
        Some(t) if t < far_future() => t,
        _ => far_future().max(now),
    }
}

/// The registration returned by [`Clock::subscribe`]; dropping it unregisters the waker.
///
/// A clock implemented outside this crate (a simulator, tokio's paused time) builds one with
/// [`Subscription::new`], giving the code that unregisters the waker; a clock that never calls
/// its wakers returns [`Subscription::none`].
///
/// # Examples
/// A clock's waker list, where a subscription removes its own entry when dropped:
/// ```
/// use kcache_core::{ClockWaker, Subscription};
/// use std::sync::{Arc, Mutex};
///
/// let wakers: Arc<Mutex<Vec<(u64, ClockWaker)>>> = Arc::default();
/// let subscribe = |id: u64, waker: ClockWaker| {
///     wakers.lock().unwrap().push((id, waker));
///     let list = wakers.clone();
///     Subscription::new(move || list.lock().unwrap().retain(|(i, _)| *i != id))
/// };
/// let sub = subscribe(1, Arc::new(|| {}));
/// assert_eq!(wakers.lock().unwrap().len(), 1);
/// drop(sub);
/// assert!(wakers.lock().unwrap().is_empty());
/// ```
pub struct Subscription {
    cancel: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl Subscription {
    /// A subscription that holds nothing (for clocks that never call their wakers).
    pub fn none() -> Self {
        Self { cancel: None }
    }

    /// A subscription that runs `cancel` once, when it is dropped (to unregister the waker).
    pub fn new(cancel: impl FnOnce() + Send + Sync + 'static) -> Self {
        Self {
            cancel: Some(Box::new(cancel)),
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(cancel) = self.cancel.take() {
            cancel();
        }
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("active", &self.cancel.is_some())
            .finish()
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Instant {
        (**self).now()
    }
    fn sleep_until(&self, deadline: Instant) {
        (**self).sleep_until(deadline)
    }
    fn sleep_until_async(&self, deadline: Instant) -> Sleep {
        (**self).sleep_until_async(deadline)
    }
    fn timeout_until(&self, deadline: Instant) -> Option<Duration> {
        (**self).timeout_until(deadline)
    }
    fn subscribe(&self, waker: ClockWaker) -> Subscription {
        (**self).subscribe(waker)
    }
    fn system_time(&self) -> SystemTime {
        (**self).system_time()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturating_add_never_overflows() {
        let now = SystemClock.now();
        let t = saturating_add(now, Duration::MAX);
        assert!(t > now);
        assert_eq!(saturating_add(now, Duration::ZERO), now);
    }
}
