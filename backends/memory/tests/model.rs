//! Model test: random create/update/delete sequences against a `BTreeMap` replayed per version.

mod common;

use common::{describe, drain, item, list, ok, source_with, watch, watch_from, Item, Source};
use kcache_memory::{MemoryConfig, MemoryError};
use kcache_reflector::{ListOptions, ResourceVersionMatch, WatchEvent, WatchOptions};
use proptest::prelude::*;
use std::collections::BTreeMap;

type Model = BTreeMap<String, u32>;

#[derive(Debug, Clone)]
enum Op {
    Create(u8, u32),
    Update(u8, u32),
    UpdateIf(u8, u32, u64),
    Delete(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..6u8, 0..1000u32).prop_map(|(k, v)| Op::Create(k, v)),
        (0..6u8, 0..1000u32).prop_map(|(k, v)| Op::Update(k, v)),
        (0..6u8, 0..1000u32, 0..40u64).prop_map(|(k, v, r)| Op::UpdateIf(k, v, r)),
        (0..6u8).prop_map(Op::Delete),
    ]
}

/// Applies `op` to the source and, when the model says it must succeed, to the model; checks
/// that the source agrees about success. Returns whether a write happened.
fn apply(s: &Source, model: &mut Model, versions: &mut BTreeMap<String, u64>, op: &Op) -> bool {
    let name = |k: &u8| format!("k{k}");
    match op {
        Op::Create(k, v) => {
            let r = s.create(item(&name(k), *v));
            let exists = model.contains_key(&name(k));
            assert_eq!(r.is_ok(), !exists, "{op:?}: {r:?}");
            if exists {
                assert!(matches!(r, Err(MemoryError::AlreadyExists { .. })));
                return false;
            }
            model.insert(name(k), *v);
        }
        Op::Update(k, v) => {
            let r = s.update(item(&name(k), *v));
            if !model.contains_key(&name(k)) {
                assert!(
                    matches!(r, Err(MemoryError::NotFound { .. })),
                    "{op:?}: {r:?}"
                );
                return false;
            }
            ok(r);
            model.insert(name(k), *v);
        }
        Op::UpdateIf(k, v, expected) => {
            let r = s.update_if(item(&name(k), *v), &(*expected).into());
            match versions.get(&name(k)) {
                None => {
                    assert!(
                        matches!(r, Err(MemoryError::NotFound { .. })),
                        "{op:?}: {r:?}"
                    );
                    return false;
                }
                Some(stored) if stored != expected => {
                    assert!(
                        matches!(r, Err(MemoryError::Conflict { .. })),
                        "{op:?}: {r:?}"
                    );
                    return false;
                }
                Some(_) => {
                    ok(r);
                    model.insert(name(k), *v);
                }
            }
        }
        Op::Delete(k) => {
            let r = s.delete(&format!("ns/{}", name(k)));
            if model.remove(&name(k)).is_none() {
                assert!(
                    matches!(r, Err(MemoryError::NotFound { .. })),
                    "{op:?}: {r:?}"
                );
                return false;
            }
            ok(r);
        }
    }
    let now: u64 = ok(s.resource_version().as_str().parse());
    match op {
        Op::Delete(k) => versions.remove(&name(k)),
        Op::Create(k, _) | Op::Update(k, _) | Op::UpdateIf(k, _, _) => {
            versions.insert(name(k), now)
        }
    };
    true
}

/// Every page of an exact list at `version`, checking that all report that version.
fn exact_list(s: &Source, version: u64, limit: u32) -> Result<Model, MemoryError> {
    let mut opts = ListOptions {
        resource_version: version.into(),
        resource_version_match: Some(ResourceVersionMatch::Exact),
        limit: Some(limit),
        continue_token: None,
    };
    let mut out = Model::new();
    loop {
        let page = list(s, opts.clone())?;
        assert_eq!(page.resource_version, version.into());
        assert!(page.items.len() <= limit as usize);
        for o in &page.items {
            assert!(
                out.insert(o.name.clone(), o.value).is_none(),
                "a key on two pages"
            );
        }
        match page.continue_token {
            Some(t) => opts.continue_token = Some(t),
            None => return Ok(out),
        }
    }
}

fn replay(mut state: Model, events: &[Result<WatchEvent<Item>, MemoryError>]) -> Model {
    for e in events {
        match e {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => {
                state.insert(o.name.clone(), o.value);
            }
            Ok(WatchEvent::Deleted(o)) => {
                state.remove(&o.name);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    state
}

proptest! {
    #[test]
    fn lists_at_every_version_in_the_window_equal_the_model_replayed_to_that_version(
        ops in proptest::collection::vec(op(), 0..60),
        window in 0usize..20,
        limit in 1u32..5,
    ) {
        let config = MemoryConfig::new().with_history_window(window).with_watcher_buffer(1000);
        let (s, _) = source_with(config);
        let mut everything = watch_from(&s, "1");
        let mut model = Model::new();
        let mut versions = BTreeMap::new();
        let mut states = BTreeMap::from([(1u64, model.clone())]);
        for op in &ops {
            let before: u64 = ok(s.resource_version().as_str().parse());
            let wrote = apply(&s, &mut model, &mut versions, op);
            let after: u64 = ok(s.resource_version().as_str().parse());
            prop_assert_eq!(after, if wrote { before + 1 } else { before });
            states.insert(after, model.clone());
        }
        let oldest: u64 = ok(s.oldest_resource_version().as_str().parse());
        let current: u64 = ok(s.resource_version().as_str().parse());
        prop_assert_eq!(oldest, current.saturating_sub(window as u64).max(1));
        for (&version, expected) in &states {
            if version >= oldest {
                prop_assert_eq!(&ok(exact_list(&s, version, limit)), expected, "at {}", version);
                let mut w = watch_from(&s, &version.to_string());
                prop_assert_eq!(&replay(expected.clone(), &drain(&mut w)), &model);
            } else {
                let expired = exact_list(&s, version, limit).err();
                let is_expired = matches!(expired, Some(MemoryError::Expired { .. }));
                prop_assert!(is_expired, "exact list at {} before {}", version, oldest);
                let opts = WatchOptions { resource_version: version.into(), ..Default::default() };
                let is_expired = matches!(watch(&s, opts).err(), Some(MemoryError::Expired { .. }));
                prop_assert!(is_expired, "watch from {} before {}", version, oldest);
            }
        }
        // The watch opened before every write saw them all, in version order, without gaps.
        let events = drain(&mut everything);
        let seen: Vec<u64> = events.iter().map(|e| ok(describe(e).3.parse::<u64>())).collect();
        prop_assert_eq!(seen, (2..=current).collect::<Vec<_>>());
        prop_assert_eq!(replay(Model::new(), &events), model.clone());
        let listed: Model = s.list_all().iter().map(|o| (o.name.clone(), o.value)).collect();
        prop_assert_eq!(listed, model);
    }
}
