//! Straightforward ports of client-go's `util/workqueue` design: what a first Rust version would be.
//!
//! - [`NaiveQueue`]: a `parking_lot` `Mutex` around a `VecDeque` plus `dirty` and `processing`
//!   `HashSet`s (std hasher), one `Condvar` signalled on every add, exactly client-go's `Typed`.
//! - [`NaiveDelayingQueue`]: client-go's `delayingType`: `add_after` sends into a bounded channel
//!   (capacity 1000) read by a waiting-loop thread that keeps a heap plus a map of known entries.
//! - [`NaiveLimiter`]: client-go's `ItemExponentialFailureRateLimiter`: a std `Mutex` around a
//!   std `HashMap` of failure counts.
//! - [`NaivePriorityQueue`]: a `Mutex` around a `BTreeMap` by (priority, add order) with client-go's
//!   dirty/processing rules and a `Condvar`; no guard against starvation.
//! - [`NaiveStore`]: client-go's `threadSafeMap`: a `parking_lot` `RwLock` around a std
//!   `HashMap<String, Arc<T>>` plus hand-maintained index maps from value to a `HashSet` of keys.

mod delaying;
mod limiter;
mod priority;
mod queue;
mod store;

pub use delaying::NaiveDelayingQueue;
pub use limiter::NaiveLimiter;
pub use priority::NaivePriorityQueue;
pub use queue::NaiveQueue;
pub use store::{NaiveIndexFn, NaiveStore};
