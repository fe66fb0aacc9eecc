//! `FloorDelayingQueue`: a heap, a condition variable and a timer thread.

use super::FloorQueue;
use crate::api::{DelayQueue, WorkQueue};
use kcache_core::{Clock, SystemClock};
use parking_lot::{Condvar, Mutex};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Delayed items in one heap; one timer thread sleeps on a condition variable until the earliest
/// deadline and moves due items into a [`FloorQueue`]. An add wakes the timer only when it becomes
/// the earliest deadline. No dedup: an item added twice is handed out twice.
///
/// # Examples
/// ```
/// use kcache_benches::api::{DelayQueue, WorkQueue};
/// use kcache_benches::floor::FloorDelayingQueue;
/// use std::time::Duration;
///
/// let q = FloorDelayingQueue::new(1);
/// q.add_after(1, Duration::from_millis(1));
/// assert_eq!(q.get(), Some(1));
/// q.shut_down();
/// assert_eq!(q.get(), None);
/// ```
///
/// # Panics
/// `new` panics if the timer thread cannot be started.
pub struct FloorDelayingQueue<T> {
    ready: FloorQueue<T>,
    timer: Arc<Timer<T>>,
}

struct Timer<T> {
    state: Mutex<TimerState<T>>,
    wake: Condvar,
}

struct TimerState<T> {
    heap: BinaryHeap<Reverse<Entry<T>>>,
    seq: u64,
    stopped: bool,
}

/// A heap entry ordered by deadline, then by insertion.
struct Entry<T> {
    at: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl<T: Send + 'static> FloorDelayingQueue<T> {
    /// A queue whose shutdown stops `workers` workers, and its timer thread.
    pub fn new(workers: usize) -> Self {
        let ready = FloorQueue::new(workers);
        let timer = Arc::new(Timer {
            state: Mutex::new(TimerState {
                heap: BinaryHeap::new(),
                seq: 0,
                stopped: false,
            }),
            wake: Condvar::new(),
        });
        let (r, t) = (ready.clone(), timer.clone());
        std::thread::Builder::new()
            .name("floor-timer".into())
            .spawn(move || run_timer(&r, &t))
            .expect("spawn the timer thread");
        Self { ready, timer }
    }
}

fn run_timer<T: Send + 'static>(ready: &FloorQueue<T>, timer: &Timer<T>) {
    let clock = SystemClock;
    let mut g = timer.state.lock();
    while !g.stopped {
        let now = clock.now();
        while g.heap.peek().is_some_and(|e| e.0.at <= now) {
            if let Some(Reverse(e)) = g.heap.pop() {
                ready.add(e.item);
            }
        }
        match g.heap.peek().map(|e| e.0.at) {
            Some(at) => {
                timer.wake.wait_until(&mut g, at);
            }
            None => timer.wake.wait(&mut g),
        }
    }
    drop(g);
    ready.shut_down();
}

impl<T> Clone for FloorDelayingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            ready: self.ready.clone(),
            timer: self.timer.clone(),
        }
    }
}

impl<T> fmt::Debug for FloorDelayingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FloorDelayingQueue").finish_non_exhaustive()
    }
}

impl<T: Send + 'static> WorkQueue<T> for FloorDelayingQueue<T> {
    fn add(&self, item: T) {
        self.ready.add(item);
    }
    fn get(&self) -> Option<T> {
        self.ready.get()
    }
    fn done(&self, _: &T) -> bool {
        true
    }
    /// Stops the timer, which then sends the end markers after the items it released.
    fn shut_down(&self) {
        self.timer.state.lock().stopped = true;
        self.timer.wake.notify_one();
    }
}

impl<T: Send + 'static> DelayQueue<T> for FloorDelayingQueue<T> {
    fn add_after(&self, item: T, delay: Duration) {
        if delay.is_zero() {
            self.ready.add(item);
            return;
        }
        let at = SystemClock.now() + delay;
        let mut g = self.timer.state.lock();
        g.seq += 1;
        let seq = g.seq;
        let earliest = g.heap.peek().is_none_or(|e| at < e.0.at);
        g.heap.push(Reverse(Entry { at, seq, item }));
        drop(g);
        if earliest {
            self.timer.wake.notify_one();
        }
    }
}
