//! Listers: filtered reads of an [`Indexer`] (client-go's `ListAll` / `ListAllByNamespace`).

use crate::indexer::Indexer;
use crate::namespace::NAMESPACE_INDEX;
use crate::sync::Arc;
use kcache_core::Meta;

impl<T, M: Meta<T>> Indexer<T, M> {
    /// Every object for which `pred` is true, in no particular order (client-go's `ListAll`
    /// with a selector). The predicate runs outside the store's lock.
    ///
    /// # Examples
    /// ```
    /// # use kcache_core::{Object, ResourceVersion};
    /// # use kcache_indexer::Indexer;
    /// # use std::sync::Arc;
    /// # struct Pod { name: String, ready: bool }
    /// # impl Object for Pod {
    /// #     fn namespace(&self) -> Option<&str> { None }
    /// #     fn name(&self) -> &str { &self.name }
    /// #     fn resource_version(&self) -> ResourceVersion { ResourceVersion::default() }
    /// # }
    /// let pods: Indexer<Pod> = Indexer::new();
    /// pods.add(Arc::new(Pod { name: "a".into(), ready: true }))?;
    /// pods.add(Arc::new(Pod { name: "b".into(), ready: false }))?;
    /// assert_eq!(pods.list_all(|p| p.ready).len(), 1);
    /// # Ok::<(), kcache_indexer::StoreError>(())
    /// ```
    #[doc(alias = "ListAll")]
    pub fn list_all(&self, mut pred: impl FnMut(&T) -> bool) -> Vec<Arc<T>> {
        let mut all = self.list();
        all.retain(|obj| pred(obj));
        all
    }

    /// The objects of namespace `namespace` for which `pred` is true; `""` means every namespace
    /// (client-go's `ListAllByNamespace`). Uses the [`NAMESPACE_INDEX`] when installed, otherwise
    /// scans every object.
    #[doc(alias = "ListAllByNamespace")]
    pub fn list_by_namespace(
        &self,
        namespace: &str,
        mut pred: impl FnMut(&T) -> bool,
    ) -> Vec<Arc<T>> {
        if namespace.is_empty() {
            return self.list_all(pred);
        }
        let mut found = self.by_namespace(namespace);
        found.retain(|obj| pred(obj));
        found
    }

    /// The objects whose key's namespace is exactly `namespace` (`""`: the cluster-scoped
    /// objects). Uses the [`NAMESPACE_INDEX`] when installed, otherwise scans every object.
    pub fn by_namespace(&self, namespace: &str) -> Vec<Arc<T>> {
        match self.by_index(NAMESPACE_INDEX, namespace) {
            Ok(found) => found,
            Err(_) => {
                let state = self.thread_safe_store().read();
                state
                    .items
                    .iter()
                    .filter(|(_, s)| s.key.namespace() == namespace)
                    .map(|(_, s)| s.obj.clone())
                    .collect()
            }
        }
    }
}
