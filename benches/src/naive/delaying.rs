//! `NaiveDelayingQueue`: client-go's `delayingType`.

use super::NaiveQueue;
use crate::api::{DelayQueue, WorkQueue};
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use kcache_core::{Clock, SystemClock};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// How many pending `add_after` calls the channel to the waiting loop buffers (client-go: 1000).
const WAITING_FOR_ADD_CAPACITY: usize = 1000;

/// A [`NaiveQueue`] plus client-go's waiting loop: `add_after` sends `(item, ready_at)` into a
/// bounded channel; one thread keeps a heap and a map of known entries (an entry added again keeps
/// the earlier deadline) and adds due items to the queue.
///
/// # Examples
/// ```
/// use kcache_benches::api::{DelayQueue, WorkQueue};
/// use kcache_benches::naive::NaiveDelayingQueue;
/// use std::time::Duration;
///
/// let q = NaiveDelayingQueue::new();
/// q.add_after(1, Duration::from_millis(1));
/// assert_eq!(q.get(), Some(1));
/// q.shut_down();
/// ```
///
/// # Panics
/// `new` panics if the waiting-loop thread cannot be started.
pub struct NaiveDelayingQueue<T> {
    queue: NaiveQueue<T>,
    tx: Sender<Option<(T, Instant)>>,
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> NaiveDelayingQueue<T> {
    /// An empty queue and its waiting-loop thread (which exits at shutdown).
    pub fn new() -> Self {
        let queue = NaiveQueue::new();
        let (tx, rx) = bounded(WAITING_FOR_ADD_CAPACITY);
        let q = queue.clone();
        std::thread::Builder::new()
            .name("naive-waiting-loop".into())
            .spawn(move || waiting_loop(&q, &rx))
            .expect("spawn the waiting loop thread");
        Self { queue, tx }
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> Default for NaiveDelayingQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The waiting loop's state: a heap of `(ready_at, id)`, the item of each live id, and each
/// known item's entry (client-go's `waitingEntryByData`).
struct Waiting<T> {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    entries: HashMap<u64, T>,
    known: HashMap<T, (Instant, u64)>,
    seq: u64,
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> Waiting<T> {
    /// client-go's `insert`: a known item keeps the earlier deadline.
    fn insert(&mut self, q: &NaiveQueue<T>, item: T, at: Instant, now: Instant) {
        if at <= now {
            q.add(item);
            return;
        }
        if let Some(&(old_at, old_id)) = self.known.get(&item) {
            if at >= old_at {
                return;
            }
            self.entries.remove(&old_id);
        }
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq)));
        self.entries.insert(self.seq, item.clone());
        self.known.insert(item, (at, self.seq));
    }

    /// Adds every due item to `q`; returns the next deadline.
    fn release(&mut self, q: &NaiveQueue<T>, now: Instant) -> Option<Instant> {
        while let Some(&Reverse((at, id))) = self.heap.peek() {
            if at > now {
                return Some(at);
            }
            self.heap.pop();
            // Stale heap entries (moved earlier since) have no entry any more.
            if let Some(item) = self.entries.remove(&id) {
                self.known.remove(&item);
                q.add(item);
            }
        }
        None
    }
}

/// client-go's `waitingLoop`.
fn waiting_loop<T>(q: &NaiveQueue<T>, rx: &Receiver<Option<(T, Instant)>>)
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    let clock = SystemClock;
    let mut w = Waiting {
        heap: BinaryHeap::new(),
        entries: HashMap::new(),
        known: HashMap::new(),
        seq: 0,
    };
    loop {
        let first = match w.release(q, clock.now()) {
            Some(at) => rx.recv_deadline(at),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match first {
            Ok(Some((item, at))) => w.insert(q, item, at, clock.now()),
            Ok(None) | Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => continue,
        }
        while let Ok(msg) = rx.try_recv() {
            match msg {
                Some((item, at)) => w.insert(q, item, at, clock.now()),
                None => return,
            }
        }
    }
}

impl<T> Clone for NaiveDelayingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            tx: self.tx.clone(),
        }
    }
}

impl<T> fmt::Debug for NaiveDelayingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NaiveDelayingQueue").finish_non_exhaustive()
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<T> for NaiveDelayingQueue<T> {
    fn add(&self, item: T) {
        self.queue.add(item);
    }
    fn get(&self) -> Option<T> {
        self.queue.get()
    }
    fn done(&self, item: &T) -> bool {
        self.queue.done(item)
    }
    fn shut_down(&self) {
        self.queue.shut_down();
        // Stops the waiting loop; it may already be gone.
        let _ = self.tx.send(None);
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> DelayQueue<T> for NaiveDelayingQueue<T> {
    fn add_after(&self, item: T, delay: Duration) {
        if self.queue.is_shutting_down() {
            return;
        }
        if delay.is_zero() {
            self.queue.add(item);
            return;
        }
        let at = SystemClock.now() + delay;
        // The loop only exits after shutdown; a send to it then is dropped, as in client-go.
        let _ = self.tx.send(Some((item, at)));
    }
}
