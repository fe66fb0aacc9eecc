//! The source's current resource version, read without listing (what a warm-restarted informer
//! compares its cache with).

mod common;

use common::{item, ok, source};
use kcache_reflector::{FaultInjector, FaultPlan, ListWatcher};
use std::sync::Arc;

fn current(lw: &impl ListWatcher<common::Item>) -> Option<String> {
    futures::executor::block_on(lw.current_resource_version())
        .ok()
        .flatten()
        .map(|rv| rv.as_str().to_owned())
}

#[test]
fn the_current_version_is_the_head_and_moves_with_every_write_but_no_read() {
    let (s, _clock) = source();
    assert_eq!(current(&s).as_deref(), Some("1"));
    let a = ok(s.create(item("a", 1)));
    assert_eq!(current(&s), Some(a.rv.as_str().to_owned()));
    let _ = s.list_all();
    assert_eq!(current(&s), Some(a.rv.as_str().to_owned()));
    let b = ok(s.update(item("a", 2)));
    let c = ok(s.delete("ns/a"));
    assert!(b.rv != c.rv);
    assert_eq!(current(&s), Some(c.rv.as_str().to_owned()));
}

#[test]
fn wrappers_forward_the_current_version() {
    let (s, _clock) = source();
    ok(s.create(item("a", 1)));
    let head = Some(s.resource_version().as_str().to_owned());
    assert_eq!(current(&Arc::new(s.clone())), head);
    assert_eq!(
        current(&FaultInjector::new(s.clone(), FaultPlan::chaos(7))),
        head
    );
}
