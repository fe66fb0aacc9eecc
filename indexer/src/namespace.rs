//! The namespace index: client-go's `NamespaceIndex` and `MetaNamespaceIndexFunc`.

use crate::error::BoxError;
use kcache_core::Meta;

/// The conventional name of the namespace index (client-go's `NamespaceIndex`).
#[doc(alias = "NamespaceIndex")]
pub const NAMESPACE_INDEX: &str = "namespace";

/// Indexes an object under its namespace, `""` for a cluster-scoped object (client-go's
/// `MetaNamespaceIndexFunc`). The namespace comes from the key accessor `M`.
///
/// # Errors
/// The accessor's [`KeyError`](kcache_core::KeyError), boxed.
///
/// # Examples
/// ```
/// use kcache_core::{Object, ObjectAccessor, ResourceVersion};
/// use kcache_indexer::{namespace_index_fn, Indexer, Indexers, NAMESPACE_INDEX};
/// use std::sync::Arc;
///
/// struct Pod { ns: String, name: String }
/// impl Object for Pod {
///     fn namespace(&self) -> Option<&str> { Some(&self.ns) }
///     fn name(&self) -> &str { &self.name }
///     fn resource_version(&self) -> ResourceVersion { ResourceVersion::default() }
/// }
///
/// let pods: Indexer<Pod> = Indexer::with_indexers(
///     Indexers::new().with(NAMESPACE_INDEX, namespace_index_fn::<Pod, ObjectAccessor>),
/// );
/// pods.add(Arc::new(Pod { ns: "prod".into(), name: "web".into() }))?;
/// assert_eq!(pods.index_keys(NAMESPACE_INDEX, "prod")?[0].as_str(), "prod/web");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "MetaNamespaceIndexFunc")]
pub fn namespace_index_fn<T, M: Meta<T>>(obj: &T) -> Result<Vec<String>, BoxError> {
    let key = M::key(obj)?;
    Ok(vec![key.namespace().unwrap_or("").to_owned()])
}
