//! The floors: the least any implementation of a workload's job must do, without the semantics
//! (no deduplication, no in-flight tracking) that make a work queue a work queue.
//!
//! - [`FloorQueue`]: a `crossbeam-channel` unbounded channel; shutdown sends one end marker per
//!   worker after the items.
//! - [`FloorDedupQueue`]: a [`FloorQueue`] behind a sharded set of the items queued: the least a
//!   deduplicating queue does (a set insert per add, a removal per hand-out), with no in-flight
//!   state. q1 runs it beside the plain floor, to show what deduplication alone costs.
//! - [`FloorDelayingQueue`]: a `BinaryHeap` of `(deadline, seq, item)` behind a `parking_lot`
//!   `Mutex`, one timer thread waiting on a `Condvar` until the earliest deadline (notified only
//!   when an add becomes the new earliest) and moving due items into a [`FloorQueue`]. No dedup.
//! - [`FloorLimiter`]: a `parking_lot` `Mutex` around one `HashMap<u64, u32>` with foldhash: the
//!   bookkeeping an exponential per-item limiter cannot avoid, with nothing else.

mod dedup;
mod delaying;
mod limiter;
mod queue;

pub use dedup::FloorDedupQueue;
pub use delaying::FloorDelayingQueue;
pub use limiter::FloorLimiter;
pub use queue::FloorQueue;
