//! A clock that only moves when told to.

use super::{Clock, ClockWaker, Sleep, Subscription};
use crate::sync::{wait_timeout, Arc, Condvar, Mutex};
use std::fmt;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant, SystemTime};

/// A manually driven clock for tests: time stands still until [`FakeClock::advance`].
///
/// Clones share one time. `advance` wakes every sleeper, blocking ([`Clock::sleep_until`]) or async
/// ([`Clock::sleep_until_async`]), and calls every waker registered with [`Clock::subscribe`], so a
/// component waiting on its own condition variable re-checks its deadlines. Under
/// `--cfg kcache_loom` it is built on loom's primitives, so it can take part in loom models.
///
/// # Examples
/// ```
/// use kcache_core::{Clock, FakeClock};
/// use std::time::Duration;
///
/// let clock = FakeClock::new();
/// let deadline = clock.now() + Duration::from_millis(10);
/// let sleeper = {
///     let clock = clock.clone();
///     std::thread::spawn(move || clock.sleep_until(deadline))
/// };
/// clock.advance(Duration::from_millis(10));
/// sleeper.join().unwrap();
/// ```
#[derive(Clone)]
pub struct FakeClock {
    inner: Arc<Inner>,
}

struct Inner {
    /// The wall-clock time at `start` (see [`Clock::system_time`]).
    start_wall: SystemTime,
    start: Instant,
    state: Mutex<State>,
    cv: Condvar,
}

struct State {
    now: Instant,
    next_id: u64,
    subscribers: Vec<(u64, ClockWaker)>,
    wakers: Vec<Waker>,
}

impl FakeClock {
    /// A fake clock that starts at the current real instant.
    pub fn new() -> Self {
        #[allow(clippy::disallowed_methods, reason = "core owns the real clock")]
        let start = Instant::now();
        Self::starting_at(start)
    }

    /// A fake clock that starts at `start`. Its wall-clock time ([`Clock::system_time`]) starts at
    /// the real wall-clock time and moves with the fake time.
    pub fn starting_at(start: Instant) -> Self {
        #[allow(clippy::disallowed_methods, reason = "core owns the real clock")]
        let start_wall = SystemTime::now();
        Self {
            inner: Arc::new(Inner {
                start_wall,
                start,
                state: Mutex::new(State {
                    now: start,
                    next_id: 0,
                    subscribers: Vec::new(),
                    wakers: Vec::new(),
                }),
                cv: Condvar::new(),
            }),
        }
    }

    /// Moves time forward by `d` (saturating far in the future) and wakes every sleeper.
    pub fn advance(&self, d: Duration) {
        let now = self.inner.state.lock().now;
        self.set(super::saturating_add(now, d));
    }

    /// Moves time forward to `t` and wakes every sleeper. Time never goes back: an earlier `t`
    /// leaves the clock where it is (sleepers are still woken, harmlessly).
    pub fn set(&self, t: Instant) {
        let (subscribers, wakers) = {
            let mut st = self.inner.state.lock();
            if t > st.now {
                st.now = t;
            }
            let subs: Vec<ClockWaker> = st.subscribers.iter().map(|(_, w)| w.clone()).collect();
            (subs, std::mem::take(&mut st.wakers))
        };
        self.inner.cv.notify_all();
        for s in subscribers {
            s();
        }
        for w in wakers {
            w.wake();
        }
    }

    /// How many wakers are registered through [`Clock::subscribe`] (for tests that check a
    /// component unregisters on drop).
    pub fn subscriber_count(&self) -> usize {
        self.inner.state.lock().subscribers.len()
    }
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for FakeClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeClock")
            .field("now", &self.inner.state.lock().now)
            .finish()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.inner.state.lock().now
    }

    fn sleep_until(&self, deadline: Instant) {
        let mut st = self.inner.state.lock();
        while st.now < deadline {
            wait_timeout(&self.inner.cv, &mut st, None);
        }
    }

    fn sleep_until_async(&self, deadline: Instant) -> Sleep {
        let inner = self.inner.clone();
        Box::pin(std::future::poll_fn(move |cx| {
            let mut st = inner.state.lock();
            if st.now >= deadline {
                Poll::Ready(())
            } else {
                if !st.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    st.wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
        }))
    }

    fn timeout_until(&self, _deadline: Instant) -> Option<Duration> {
        None
    }

    fn system_time(&self) -> SystemTime {
        let elapsed = self.now().saturating_duration_since(self.inner.start);
        self.inner
            .start_wall
            .checked_add(elapsed)
            .unwrap_or(self.inner.start_wall)
    }

    fn subscribe(&self, waker: ClockWaker) -> Subscription {
        let id = {
            let mut st = self.inner.state.lock();
            let id = st.next_id;
            st.next_id += 1;
            st.subscribers.push((id, waker));
            id
        };
        let inner = self.inner.clone();
        Subscription::new(move || {
            inner.state.lock().subscribers.retain(|(i, _)| *i != id);
        })
    }
}

#[cfg(all(test, not(kcache_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn clones_share_time() {
        let a = FakeClock::new();
        let b = a.clone();
        let t0 = a.now();
        b.advance(Duration::from_secs(3));
        assert_eq!(a.now() - t0, Duration::from_secs(3));
    }

    #[test]
    fn time_never_goes_back() {
        let c = FakeClock::new();
        let t0 = c.now();
        c.advance(Duration::from_secs(1));
        c.set(t0);
        assert_eq!(c.now() - t0, Duration::from_secs(1));
    }

    #[test]
    fn wall_time_moves_with_fake_time() {
        let c = FakeClock::new();
        let w0 = c.system_time();
        c.advance(Duration::from_secs(7));
        assert_eq!(
            c.system_time().duration_since(w0).ok(),
            Some(Duration::from_secs(7))
        );
    }

    #[test]
    fn advance_by_duration_max_saturates() {
        let c = FakeClock::new();
        let t0 = c.now();
        c.advance(Duration::MAX);
        assert!(c.now() > t0);
        c.advance(Duration::MAX);
    }

    #[test]
    fn advance_wakes_blocking_sleepers() {
        let c = FakeClock::new();
        let deadline = c.now() + Duration::from_secs(10);
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || c.sleep_until(deadline))
            })
            .collect();
        c.advance(Duration::from_secs(10));
        for h in handles {
            h.join().unwrap();
        }
    }

    #[test]
    fn advance_wakes_async_sleepers() {
        let c = FakeClock::new();
        let mut sleep = c.sleep_async(Duration::from_millis(5));
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        c.advance(Duration::from_millis(4));
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        c.advance(Duration::from_millis(1));
        assert!(sleep.as_mut().poll(&mut cx).is_ready());
    }

    #[tokio::test]
    async fn async_sleep_completes_under_a_runtime() {
        let c = FakeClock::new();
        let c2 = c.clone();
        let task = tokio::spawn(async move { c2.sleep_async(Duration::from_secs(60)).await });
        tokio::task::yield_now().await;
        c.advance(Duration::from_secs(60));
        task.await.unwrap();
    }

    #[test]
    fn subscribers_are_called_until_dropped() {
        let c = FakeClock::new();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        let sub = c.subscribe(Arc::new(move || {
            h.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(c.subscriber_count(), 1);
        c.advance(Duration::from_millis(1));
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        drop(sub);
        assert_eq!(c.subscriber_count(), 0);
        c.advance(Duration::from_millis(1));
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        assert_eq!(c.timeout_until(c.now()), None);
    }
}
