//! The real clock.

use super::{Clock, ClockWaker, Sleep, Subscription};
use std::time::{Duration, Instant};

/// The real, monotonic clock (`std::time::Instant`).
///
/// Async sleeps use tokio's timer (feature `tokio`, on by default; they must run inside a tokio
/// runtime). Without that feature an async sleep parks a helper thread until the deadline.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

#[allow(clippy::disallowed_methods, reason = "core owns the real clock")]
impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_until(&self, deadline: Instant) {
        let now = Instant::now();
        if deadline > now {
            std::thread::sleep(deadline - now);
        }
    }

    #[cfg(feature = "tokio")]
    fn sleep_until_async(&self, deadline: Instant) -> Sleep {
        Box::pin(tokio::time::sleep_until(deadline.into()))
    }

    #[cfg(not(feature = "tokio"))]
    fn sleep_until_async(&self, deadline: Instant) -> Sleep {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let waker = std::sync::Arc::new(parking_lot::Mutex::new(None::<std::task::Waker>));
        let w2 = waker.clone();
        std::thread::spawn(move || {
            SystemClock.sleep_until(deadline);
            let _ = tx.send(());
            if let Some(w) = w2.lock().take() {
                w.wake();
            }
        });
        Box::pin(std::future::poll_fn(move |cx| {
            *waker.lock() = Some(cx.waker().clone());
            match rx.try_recv() {
                Err(std::sync::mpsc::TryRecvError::Empty) => std::task::Poll::Pending,
                _ => std::task::Poll::Ready(()),
            }
        }))
    }

    fn timeout_until(&self, deadline: Instant) -> Option<Duration> {
        Some(deadline.saturating_duration_since(Instant::now()))
    }

    fn subscribe(&self, _waker: ClockWaker) -> Subscription {
        Subscription::none()
    }
}
