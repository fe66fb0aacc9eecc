//! Object types that do not implement `Object` (types of other crates) read through an accessor:
//! `Reflector::builder(..).meta::<M>()` is as short as the `Object` route, at any point of the
//! builder chain.

mod common;

use common::eventually;
use kcache_core::{FakeClock, KeyError, Meta, MetaMut, ObjectKey, ResourceVersion};
use kcache_indexer::Indexer;
use kcache_memory::{MemoryConfig, MemorySource};
use kcache_reflector::Reflector;
use std::collections::BTreeMap;
use std::sync::Arc;

type Labels = BTreeMap<String, String>;

struct LabelsMeta;

impl Meta<Labels> for LabelsMeta {
    fn key(obj: &Labels) -> Result<ObjectKey, KeyError> {
        ObjectKey::cluster(obj.get("name").ok_or(KeyError::MissingName)?)
    }
    fn resource_version(obj: &Labels) -> ResourceVersion {
        obj.get("rv")
            .map(|rv| ResourceVersion::from(rv.as_str()))
            .unwrap_or_default()
    }
}

impl MetaMut<Labels> for LabelsMeta {
    fn set_resource_version(obj: &mut Labels, rv: ResourceVersion) {
        obj.insert("rv".into(), rv.as_str().to_owned());
    }
}

fn labels(name: &str) -> Labels {
    Labels::from([("name".to_owned(), name.to_owned())])
}

#[tokio::test(flavor = "current_thread")]
async fn a_type_without_object_reflects_through_meta_chosen_anywhere_in_the_chain() {
    let clock = FakeClock::new();
    let source: MemorySource<Labels, LabelsMeta> =
        MemorySource::with_config(MemoryConfig::new().with_clock(clock.clone()));
    source.create(labels("web")).unwrap();
    let cache: Indexer<Labels, LabelsMeta> = Indexer::new();
    // Options before and after the accessor: neither needs `Labels: Object`.
    let reflector = Reflector::builder(source.clone(), cache.clone())
        .name("labels")
        .clock(Arc::new(clock.clone()))
        .meta::<LabelsMeta>()
        .seed(3)
        .build();
    let handle = reflector.handle();
    let task = tokio::spawn(reflector.run());
    eventually("listed", || cache.get_by_key("web").is_some()).await;
    source.create(labels("db")).unwrap();
    eventually("watched", || cache.get_by_key("db").is_some()).await;
    handle.stop();
    task.await.unwrap();
}
