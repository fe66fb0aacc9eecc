//! `DeltaFifoOptions`: known objects, `emit_delta_type_replaced`, transformer.

use crate::BoxError;
use kcache_core::KnownObjects;
use std::fmt;
use std::sync::Arc;

/// A transformer, as stored by the FIFO.
pub(crate) type Transformer<T> = Arc<dyn Fn(Arc<T>) -> Result<Arc<T>, BoxError> + Send + Sync>;

/// How to build a [`DeltaFifo`](crate::DeltaFifo) (client-go's `DeltaFIFOOptions`).
///
/// The key accessor is the FIFO's `M` type parameter, not an option.
///
/// # Examples
/// ```
/// use kcache_core::{KnownObjects, Object, ObjectKey, ResourceVersion};
/// use kcache_deltafifo::{DeltaFifo, DeltaFifoOptions};
/// use std::sync::Arc;
///
/// struct Pod { name: String }
/// impl Object for Pod {
///     fn namespace(&self) -> Option<&str> { None }
///     fn name(&self) -> &str { &self.name }
///     fn resource_version(&self) -> ResourceVersion { ResourceVersion::default() }
/// }
///
/// struct NothingKnown;
/// impl KnownObjects<Pod> for NothingKnown {
///     fn list_keys(&self) -> Vec<ObjectKey> { Vec::new() }
///     fn get_by_key(&self, _: &ObjectKey) -> Option<Arc<Pod>> { None }
/// }
///
/// let options = DeltaFifoOptions::new()
///     .known_objects(Arc::new(NothingKnown))
///     .emit_delta_type_replaced(true)
///     .transformer(|pod: Arc<Pod>| Ok::<_, std::convert::Infallible>(pod));
/// let fifo: DeltaFifo<Pod> = DeltaFifo::with_options(options);
/// assert!(!fifo.has_synced());
/// ```
pub struct DeltaFifoOptions<T> {
    pub(crate) known_objects: Option<Arc<dyn KnownObjects<T>>>,
    pub(crate) emit_delta_type_replaced: bool,
    pub(crate) transformer: Option<Transformer<T>>,
}

impl<T> Default for DeltaFifoOptions<T> {
    fn default() -> Self {
        Self {
            known_objects: None,
            emit_delta_type_replaced: false,
            transformer: None,
        }
    }
}

impl<T> fmt::Debug for DeltaFifoOptions<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeltaFifoOptions")
            .field("known_objects", &self.known_objects.is_some())
            .field("emit_delta_type_replaced", &self.emit_delta_type_replaced)
            .field("transformer", &self.transformer.is_some())
            .finish()
    }
}

impl<T> DeltaFifoOptions<T> {
    /// No known objects, `Sync` for relisted objects, no transformer.
    pub fn new() -> Self {
        Self::default()
    }

    /// The objects the consumer already knows (normally the informer's indexer). With them,
    /// `replace` emits tombstones for known keys missing from the list, `resync` has something to
    /// resync, and a `delete` of a key that is only known is not dropped. Without them, deletions
    /// missed during a relist are detected only for keys still queued.
    ///
    /// The FIFO calls them while holding its lock: they must not call back into the FIFO.
    pub fn known_objects(mut self, known: Arc<dyn KnownObjects<T>>) -> Self {
        self.known_objects = Some(known);
        self
    }

    /// Emit [`DeltaType::Replaced`](crate::DeltaType::Replaced) for listed objects in `replace`
    /// (default `false`: emit [`DeltaType::Sync`](crate::DeltaType::Sync), client-go's backward
    /// compatible default; informers set it).
    pub fn emit_delta_type_replaced(mut self, emit: bool) -> Self {
        self.emit_delta_type_replaced = emit;
        self
    }

    /// A function applied to every object entering the FIFO through `add`, `update`, `delete`
    /// and `replace` (whether the listed object comes out as `Replaced` or `Sync`), before it is
    /// queued. Never applied to tombstones or to `resync`'s `Sync` deltas: those objects were
    /// transformed when they first entered. It runs outside the FIFO's lock, so it may run for a
    /// `delete` that is then dropped as a deletion of a never-seen key.
    ///
    /// A failure refuses the whole operation with
    /// [`DeltaFifoError::Transform`](crate::DeltaFifoError::Transform).
    pub fn transformer<F, E>(mut self, f: F) -> Self
    where
        F: Fn(Arc<T>) -> Result<Arc<T>, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        self.transformer = Some(Arc::new(move |obj| f(obj).map_err(Into::into)));
        self
    }
}
