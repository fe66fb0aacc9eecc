//! The errors of `DeltaFifo`'s operations.

use kcache_core::KeyError;

/// A boxed error, as returned by a transformer.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why an `add`, `update`, `delete` or `replace` was refused. The FIFO is left unchanged, except
/// after [`Refused`](Self::Refused).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeltaFifoError {
    /// The key accessor could not compute an object's key.
    #[error("cannot compute the object's key")]
    Key(#[from] KeyError),
    /// The transformer failed on an object.
    #[error("the transformer failed")]
    Transform(#[source] BoxError),
    /// [`replace_skipping_refused`](crate::DeltaFifo::replace_skipping_refused) took every
    /// listed object but these (their key or the transformer failed): unlike the other variants,
    /// the FIFO *did* change.
    #[error("the replace left out {} listed object(s) it could not take", .refused.len())]
    Refused {
        /// Why each left-out object was refused.
        refused: Vec<DeltaFifoError>,
    },
}

/// Why [`DeltaFifo::pop`](crate::DeltaFifo::pop) handed out nothing, or what the process function
/// returned as its error.
///
/// # Examples
/// ```
/// use kcache_deltafifo::{DeltaFifo, PopError};
/// # #[derive(Debug)] struct Pod;
/// # impl kcache_core::Object for Pod {
/// #     fn namespace(&self) -> Option<&str> { None }
/// #     fn name(&self) -> &str { "p" }
/// #     fn resource_version(&self) -> kcache_core::ResourceVersion { "1".into() }
/// # }
///
/// let fifo: DeltaFifo<Pod> = DeltaFifo::new();
/// fifo.close();
/// let r = fifo.pop(|_deltas, _initial| Ok::<(), std::io::Error>(()));
/// assert!(matches!(r, Err(PopError::Closed)));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum PopError<E> {
    /// The FIFO is closed and has nothing queued (client-go's `ErrFIFOClosed`).
    #[error("the DeltaFifo is closed")]
    Closed,
    /// The process function failed. The item was not requeued.
    #[error("the process function failed")]
    Process(#[source] E),
}

impl<E> PopError<E> {
    /// Whether this is [`PopError::Closed`].
    pub fn is_closed(&self) -> bool {
        matches!(self, Self::Closed)
    }
}

/// What popping a closed, empty [`RealFifo`](crate::RealFifo) gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the queue is closed")]
pub struct FifoClosed;
