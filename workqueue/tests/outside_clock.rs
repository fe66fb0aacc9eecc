//! A `Clock` implemented outside kcache-core (a simulator's clock, as a user would write one) is
//! a first-class citizen: it builds its own `Subscription`, and the delaying queue's timer runs
//! on it (woken through the subscription, unregistered when the queue goes away).

use kcache_core::{Clock, ClockWaker, Sleep, Subscription};
use kcache_workqueue::{DelayingQueue, QueueConfig};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

/// A bound on waits for the queue's timer thread (a bound, not a sleep).
const WAIT: Duration = Duration::from_secs(20);

#[derive(Default)]
struct State {
    offset: Duration,
    next_id: u64,
    wakers: Vec<(u64, ClockWaker)>,
}

/// Simulated time: starts at a fixed instant, moves only on `advance`, which calls every waker.
#[derive(Clone)]
struct SimClock {
    base: Instant,
    state: Arc<(Mutex<State>, Condvar)>,
    /// Told each time a subscription is dropped.
    cancelled: Arc<Mutex<Option<mpsc::Sender<u64>>>>,
}

impl std::fmt::Debug for SimClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimClock").finish_non_exhaustive()
    }
}

impl SimClock {
    fn new(base: Instant) -> Self {
        Self {
            base,
            state: Arc::default(),
            cancelled: Arc::default(),
        }
    }

    fn advance(&self, d: Duration) {
        let wakers: Vec<ClockWaker> = {
            let mut st = self.state.0.lock().unwrap();
            st.offset += d;
            st.wakers.iter().map(|(_, w)| w.clone()).collect()
        };
        self.state.1.notify_all();
        for w in wakers {
            w();
        }
    }

    fn subscribers(&self) -> usize {
        self.state.0.lock().unwrap().wakers.len()
    }
}

impl Clock for SimClock {
    fn now(&self) -> Instant {
        self.base + self.state.0.lock().unwrap().offset
    }

    fn sleep_until(&self, deadline: Instant) {
        let mut st = self.state.0.lock().unwrap();
        while self.base + st.offset < deadline {
            st = self.state.1.wait(st).unwrap();
        }
    }

    fn sleep_until_async(&self, deadline: Instant) -> Sleep {
        Box::pin(SimSleep {
            clock: self.clone(),
            deadline,
            subscription: None,
        })
    }

    fn timeout_until(&self, _deadline: Instant) -> Option<Duration> {
        None
    }

    fn subscribe(&self, waker: ClockWaker) -> Subscription {
        let id = {
            let mut st = self.state.0.lock().unwrap();
            st.next_id += 1;
            let id = st.next_id;
            st.wakers.push((id, waker));
            id
        };
        let state = self.state.clone();
        let cancelled = self.cancelled.clone();
        Subscription::new(move || {
            state.0.lock().unwrap().wakers.retain(|(i, _)| *i != id);
            if let Some(tx) = cancelled.lock().unwrap().as_ref() {
                let _ = tx.send(id);
            }
        })
    }
}

/// The future of `SimClock::sleep_until_async`: woken through a clock subscription it holds
/// while pending.
struct SimSleep {
    clock: SimClock,
    deadline: Instant,
    subscription: Option<Subscription>,
}

impl std::future::Future for SimSleep {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<()> {
        if self.clock.now() >= self.deadline {
            self.subscription = None;
            return Poll::Ready(());
        }
        let waker = cx.waker().clone();
        let sub = self.clock.subscribe(Arc::new(move || waker.wake_by_ref()));
        self.subscription = Some(sub);
        if self.clock.now() >= self.deadline {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

#[test]
fn a_clock_from_outside_core_drives_the_delaying_queue_through_its_subscription() {
    let base = kcache_core::SystemClock.now();
    let clock = SimClock::new(base);
    let (tx, cancelled) = mpsc::channel();
    *clock.cancelled.lock().unwrap() = Some(tx);
    let q: DelayingQueue<&'static str> =
        DelayingQueue::with_config(QueueConfig::new().clock(Arc::new(clock.clone())));
    assert!(q.add_after("a", Duration::from_secs(5)));
    assert_eq!(q.waiting_len(), 1);

    let (got_tx, got) = mpsc::channel();
    let worker = {
        let q = q.clone();
        std::thread::spawn(move || {
            let _ = got_tx.send(q.get());
        })
    };
    clock.advance(Duration::from_secs(4));
    assert_eq!(q.len(), 0, "not due yet");
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        got.recv_timeout(WAIT),
        Ok(Some("a")),
        "fired on the simulated time"
    );
    worker.join().unwrap();
    assert!(clock.subscribers() >= 1, "the timer thread subscribed");

    q.shut_down();
    drop(q);
    assert!(
        cancelled.recv_timeout(WAIT).is_ok(),
        "the timer unsubscribed"
    );
    assert_eq!(clock.subscribers(), 0);
}

#[test]
fn an_outside_clock_s_async_sleep_completes_when_its_time_comes() {
    let clock = SimClock::new(kcache_core::SystemClock.now());
    let mut sleep = clock.sleep_async(Duration::from_secs(3));
    let waker = futures_noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(sleep.as_mut().poll(&mut cx).is_pending());
    clock.advance(Duration::from_secs(3));
    assert!(sleep.as_mut().poll(&mut cx).is_ready());
}

fn futures_noop_waker() -> std::task::Waker {
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    std::task::Waker::from(Arc::new(Noop))
}
