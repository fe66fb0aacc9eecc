//! `ControllerError`: why a controller could not be built or started.

use kcache_informer::InformerError;

/// Why a [`Controller`](super::Controller) could not be built or started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControllerError {
    /// A controller needs at least one worker.
    #[error("a controller needs at least one worker")]
    NoWorkers,
    /// The event handler feeding the queue could not be registered on an informer (it has
    /// stopped, or its delivery thread could not start). No handler of the controller is left
    /// registered.
    #[error("cannot register the controller's event handler on informer {informer:?}")]
    Register {
        /// The informer's name.
        informer: String,
        /// Why.
        #[source]
        source: InformerError,
    },
    /// A worker thread could not start; nothing of the controller is left running.
    #[error("cannot start a controller thread")]
    Spawn(#[source] std::io::Error),
    /// [`run_async`](super::Controller::run_async) was called outside a tokio runtime.
    #[error("run_async needs a tokio runtime")]
    NoRuntime,
}
