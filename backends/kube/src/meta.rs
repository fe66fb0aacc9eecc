//! [`KubeMeta`]: how the cache reads the key and resource version of any kube-rs resource.

use kcache_core::{KeyError, Meta, ObjectKey, ResourceVersion};
use kube::Resource;

/// The [`Meta`] accessor for every [`kube::Resource`]: typed objects (`ConfigMap`, your CRDs),
/// `DynamicObject`, and metadata-only `PartialObjectMeta<K>`.
///
/// The key is `"namespace/name"` ([`ObjectKey::namespaced`]), or `"name"` for cluster-scoped
/// objects, as client-go's `MetaNamespaceKeyFunc`; the resource version is `metadata.resourceVersion`
/// (empty when absent).
///
/// # Errors
/// An object without `metadata.name` (or with an empty one) gets [`KeyError::MissingName`]; a name
/// or namespace with a `/` gets the [`ObjectKey`] error. The reflector reports such objects through
/// its watch-error hook and relists; nothing panics.
///
/// # Examples
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_core::{KeyError, Meta};
/// use kcache_kube::KubeMeta;
/// use kube::api::ObjectMeta;
///
/// let cm = ConfigMap {
///     metadata: ObjectMeta {
///         namespace: Some("default".into()),
///         name: Some("settings".into()),
///         resource_version: Some("42".into()),
///         ..ObjectMeta::default()
///     },
///     ..ConfigMap::default()
/// };
/// assert_eq!(KubeMeta::key(&cm)?.as_str(), "default/settings");
/// assert_eq!(KubeMeta::resource_version(&cm).as_str(), "42");
///
/// let nameless = ConfigMap::default();
/// assert_eq!(KubeMeta::key(&nameless), Err(KeyError::MissingName));
/// # Ok::<(), KeyError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KubeMeta;

impl<K: Resource + ?Sized + 'static> Meta<K> for KubeMeta {
    fn key(obj: &K) -> Result<ObjectKey, KeyError> {
        let meta = obj.meta();
        let name = match meta.name.as_deref() {
            Some(name) if !name.is_empty() => name,
            _ => return Err(KeyError::MissingName),
        };
        ObjectKey::namespaced(meta.namespace.as_deref().unwrap_or(""), name)
    }

    fn resource_version(obj: &K) -> ResourceVersion {
        obj.meta()
            .resource_version
            .as_deref()
            .map(ResourceVersion::from)
            .unwrap_or_default()
    }

    fn write_key(obj: &K, out: &mut String) -> Result<(), KeyError> {
        let meta = obj.meta();
        match meta.name.as_deref() {
            Some(name) if !name.is_empty() => {
                ObjectKey::write_namespaced(meta.namespace.as_deref().unwrap_or(""), name, out)
            }
            _ => {
                out.clear();
                Err(KeyError::MissingName)
            }
        }
    }

    fn same_resource_version(a: &K, b: &K) -> bool {
        a.meta().resource_version.as_deref().unwrap_or("")
            == b.meta().resource_version.as_deref().unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube::api::{ApiResource, DynamicObject, ObjectMeta, PartialObjectMeta};
    use kube::core::GroupVersionKind;

    fn meta(ns: Option<&str>, name: Option<&str>, rv: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            namespace: ns.map(str::to_owned),
            name: name.map(str::to_owned),
            resource_version: rv.map(str::to_owned),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn write_key_writes_what_key_builds_or_fails_alike() {
        let mut out = String::from("stale");
        for (ns, name) in [
            (Some("prod"), Some("web")),
            (None, Some("node")),
            (Some("prod"), None),
            (Some("prod"), Some("")),
            (Some("a/b"), Some("web")),
        ] {
            let cm = ConfigMap {
                metadata: meta(ns, name, None),
                ..ConfigMap::default()
            };
            let written = KubeMeta::write_key(&cm, &mut out);
            match KubeMeta::key(&cm) {
                Ok(k) => {
                    assert_eq!(written, Ok(()));
                    assert_eq!(out, k.as_str());
                }
                Err(e) => {
                    assert_eq!(written, Err(e));
                    assert!(out.is_empty());
                }
            }
        }
    }

    #[test]
    fn same_resource_version_compares_the_metadata_field_absent_as_empty() {
        let cm = |rv: Option<&str>| ConfigMap {
            metadata: meta(Some("prod"), Some("web"), rv),
            ..ConfigMap::default()
        };
        assert!(KubeMeta::same_resource_version(
            &cm(Some("7")),
            &cm(Some("7"))
        ));
        assert!(!KubeMeta::same_resource_version(
            &cm(Some("7")),
            &cm(Some("8"))
        ));
        assert!(!KubeMeta::same_resource_version(&cm(Some("7")), &cm(None)));
        assert!(KubeMeta::same_resource_version(&cm(None), &cm(Some(""))));
    }

    #[test]
    fn namespaced_objects_are_keyed_namespace_slash_name() {
        let cm = ConfigMap {
            metadata: meta(Some("prod"), Some("web"), Some("7")),
            ..ConfigMap::default()
        };
        assert_eq!(
            KubeMeta::key(&cm).map(|k| k.to_string()),
            Ok("prod/web".to_owned())
        );
        assert_eq!(KubeMeta::resource_version(&cm).as_str(), "7");
    }

    #[test]
    fn cluster_scoped_objects_are_keyed_by_name_alone() {
        let ns = Namespace {
            metadata: meta(None, Some("prod"), None),
            ..Namespace::default()
        };
        assert_eq!(
            KubeMeta::key(&ns).map(|k| k.to_string()),
            Ok("prod".to_owned())
        );
        assert!(KubeMeta::resource_version(&ns).is_empty());
    }

    #[test]
    fn a_missing_or_empty_name_is_a_typed_key_error() {
        let none = ConfigMap::default();
        let empty = ConfigMap {
            metadata: meta(Some("prod"), Some(""), Some("1")),
            ..ConfigMap::default()
        };
        assert_eq!(KubeMeta::key(&none), Err(KeyError::MissingName));
        assert_eq!(KubeMeta::key(&empty), Err(KeyError::MissingName));
    }

    #[test]
    fn a_slash_in_the_name_is_a_typed_key_error_not_a_panic() {
        let cm = ConfigMap {
            metadata: meta(Some("prod"), Some("a/b"), None),
            ..ConfigMap::default()
        };
        assert!(KubeMeta::key(&cm).is_err());
    }

    #[test]
    fn dynamic_and_metadata_only_objects_use_the_same_accessor() {
        let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
        let mut dynamic = DynamicObject::new("w1", &ApiResource::from_gvk(&gvk)).within("lab");
        dynamic.metadata.resource_version = Some("9".into());
        assert_eq!(
            KubeMeta::key(&dynamic).map(|k| k.to_string()),
            Ok("lab/w1".to_owned())
        );
        assert_eq!(KubeMeta::resource_version(&dynamic).as_str(), "9");

        let partial: PartialObjectMeta<ConfigMap> = PartialObjectMeta {
            types: None,
            metadata: meta(Some("lab"), Some("cm"), Some("3")),
            _phantom: std::marker::PhantomData,
        };
        assert_eq!(
            KubeMeta::key(&partial).map(|k| k.to_string()),
            Ok("lab/cm".to_owned())
        );
        assert_eq!(KubeMeta::resource_version(&partial).as_str(), "3");
    }
}
