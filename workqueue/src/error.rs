//! The queue's error types.

use std::fmt;

/// `done` was called for an item that is not being processed (never handed out by `get`, or
/// already done).
///
/// client-go accepts such a call and, if the item is queued, pushes it a second time (a duplicate
/// queue entry). kcache rejects it and changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NotProcessing;

impl fmt::Display for NotProcessing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("done called for an item that is not being processed")
    }
}

impl std::error::Error for NotProcessing {}
