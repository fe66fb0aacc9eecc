//! client-go's `SharedIndexInformer` for Rust (TUTORIAL PENDING).

mod apply;
mod buffer;
mod error;
mod event;
mod filtering;
mod handler;
mod informer;
mod listener;
mod metrics;
mod options;
mod processor;
mod reader;
mod registration;
mod resync;
mod run;
mod shared;
mod sink;
mod stream;
mod sync;

#[cfg(kcache_loom)]
#[doc(hidden)]
pub mod loom_support;

pub use buffer::BufferMode;
pub use error::{InformerError, ResourceVersionError, WaitError};
pub use event::{DeletedObject, Event};
pub use filtering::FilteringHandler;
pub use handler::{HandlerFuncs, ResourceEventHandler};
pub use informer::{SharedIndexInformer, WatchErrorHandler};
pub use metrics::{GaugeMetric, HistogramMetric, InformerMetricsProvider};
pub use options::InformerOptions;
pub use reader::CacheReader;
pub use registration::{wait_for_cache_sync, HandlerOptions, HandlerRegistration, HasSynced};
pub use stream::EventStream;
