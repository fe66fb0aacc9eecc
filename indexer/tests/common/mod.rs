//! Shared by several test files: a minimal pod-like object.
#![allow(dead_code)]

use kcache_core::{Object, ResourceVersion};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Pod {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) resource_version: String,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) annotations: BTreeMap<String, String>,
}

impl Object for Pod {
    fn namespace(&self) -> Option<&str> {
        Some(self.namespace.as_str()).filter(|ns| !ns.is_empty())
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        ResourceVersion::from(self.resource_version.as_str())
    }
}

pub(crate) fn pod(namespace: &str, name: &str) -> Pod {
    Pod {
        namespace: namespace.into(),
        name: name.into(),
        ..Pod::default()
    }
}

impl Pod {
    pub(crate) fn rv(mut self, rv: &str) -> Self {
        self.resource_version = rv.into();
        self
    }
    pub(crate) fn label(mut self, k: &str, v: &str) -> Self {
        self.labels.insert(k.into(), v.into());
        self
    }
    pub(crate) fn annotation(mut self, k: &str, v: &str) -> Self {
        self.annotations.insert(k.into(), v.into());
        self
    }
    pub(crate) fn arc(self) -> Arc<Pod> {
        Arc::new(self)
    }
}
