//! Lists: resource-version rules, paging at a consistent snapshot, continue tokens.

mod common;

use common::{item, list, ok, rv, source, source_with, Item, Source};
use kcache_memory::{MemoryConfig, MemoryError};
use kcache_reflector::{BackendError, ErrorKind, ListOptions, ListPage, ResourceVersionMatch};
use std::collections::BTreeMap;

fn at(version: &str, matching: Option<ResourceVersionMatch>) -> ListOptions {
    ListOptions {
        resource_version: rv(version),
        resource_version_match: matching,
        ..Default::default()
    }
}

fn names_values(page: &ListPage<Item>) -> Vec<(String, u32)> {
    page.items
        .iter()
        .map(|o| (o.name.clone(), o.value))
        .collect()
}

type Items = Vec<(String, u32)>;

/// Fetches every page of one list, running `between` before each follow-up page.
fn all_pages(
    s: &Source,
    first: ListOptions,
    mut between: impl FnMut(usize),
) -> Result<(Items, Vec<String>), MemoryError> {
    let mut opts = first;
    let (mut items, mut versions) = (Vec::new(), Vec::new());
    for page_no in 0.. {
        let page = list(s, opts.clone())?;
        items.extend(names_values(&page));
        versions.push(page.resource_version.to_string());
        match page.continue_token {
            Some(token) => {
                between(page_no);
                opts.continue_token = Some(token);
            }
            None => break,
        }
    }
    Ok((items, versions))
}

fn populated(n: u32) -> Source {
    let (s, _) = source();
    for i in 0..n {
        ok(s.create(item(&format!("k{i:03}"), i)));
    }
    s
}

#[test]
fn empty_and_zero_versions_list_the_current_state() {
    let s = populated(3);
    for version in ["", "0"] {
        let page = ok(list(&s, at(version, None)));
        assert_eq!(page.items.len(), 3);
        assert_eq!(page.resource_version, rv("4"));
        assert_eq!(page.continue_token, None);
    }
}

#[test]
fn not_older_than_serves_the_current_state() {
    let s = populated(3);
    ok(s.update(item("k000", 100)));
    for matching in [None, Some(ResourceVersionMatch::NotOlderThan)] {
        let page = ok(list(&s, at("2", matching)));
        assert_eq!(page.resource_version, rv("5"));
        assert_eq!(names_values(&page)[0], ("k000".to_owned(), 100));
    }
}

#[test]
fn a_version_newer_than_the_source_is_too_large_for_every_match() {
    let s = populated(1);
    for matching in [
        None,
        Some(ResourceVersionMatch::NotOlderThan),
        Some(ResourceVersionMatch::Exact),
    ] {
        let err = list(&s, at("3", matching)).err();
        assert!(
            matches!(err, Some(MemoryError::TooLargeResourceVersion { .. })),
            "{matching:?}"
        );
        assert_eq!(
            err.map(|e| e.kind()),
            Some(ErrorKind::TooLargeResourceVersion)
        );
    }
}

#[test]
fn exact_serves_the_state_at_that_version_from_history() {
    let s = populated(2); // rv 2: k000, rv 3: k001
    ok(s.update(item("k000", 50))); // 4
    ok(s.delete("ns/k001")); // 5
    ok(s.create(item("k002", 2))); // 6
    let exact = |v: &str| names_values(&ok(list(&s, at(v, Some(ResourceVersionMatch::Exact)))));
    assert_eq!(exact("1"), vec![]);
    assert_eq!(exact("2"), vec![("k000".into(), 0)]);
    assert_eq!(exact("3"), vec![("k000".into(), 0), ("k001".into(), 1)]);
    assert_eq!(exact("4"), vec![("k000".into(), 50), ("k001".into(), 1)]);
    assert_eq!(exact("5"), vec![("k000".into(), 50)]);
    assert_eq!(exact("6"), vec![("k000".into(), 50), ("k002".into(), 2)]);
    let page = ok(list(&s, at("3", Some(ResourceVersionMatch::Exact))));
    assert_eq!(page.resource_version, rv("3"));
    // The versions carried by the objects are those of the state at 3.
    let versions: Vec<_> = page.items.iter().map(|o| o.rv.to_string()).collect();
    assert_eq!(versions, ["2", "3"]);
}

#[test]
fn exact_before_the_history_window_is_expired() {
    let (s, _) = source_with(MemoryConfig::new().with_history_window(2));
    for i in 0..4 {
        ok(s.create(item(&format!("k{i}"), i))); // rv 2..=5, window keeps 4 and 5
    }
    assert_eq!(s.oldest_resource_version(), rv("3"));
    assert_eq!(
        ok(list(&s, at("3", Some(ResourceVersionMatch::Exact))))
            .items
            .len(),
        2
    );
    let err = list(&s, at("2", Some(ResourceVersionMatch::Exact))).err();
    assert_eq!(
        err,
        Some(MemoryError::Expired {
            requested: rv("2"),
            oldest: rv("3")
        })
    );
    assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::Expired));
    // Not-older-than is still served from the current state.
    assert_eq!(ok(list(&s, at("2", None))).resource_version, rv("5"));
}

#[test]
fn pages_follow_key_order_and_the_last_page_has_no_token() {
    let s = populated(6);
    let opts = ListOptions {
        limit: Some(3),
        ..Default::default()
    };
    let first = ok(list(&s, opts.clone()));
    assert_eq!(names_values(&first).len(), 3);
    assert!(first.continue_token.is_some());
    let (items, versions) = ok(all_pages(&s, opts, |_| {}));
    let expected: Vec<_> = (0..6).map(|i| (format!("k{i:03}"), i)).collect();
    assert_eq!(items, expected);
    assert_eq!(versions, ["7", "7"]);
}

#[test]
fn paging_is_consistent_under_writes_between_pages() {
    let s = populated(10);
    let before: Vec<_> = (0..10).map(|i| (format!("k{i:03}"), i)).collect();
    let writer = s.clone();
    let opts = ListOptions {
        limit: Some(3),
        ..Default::default()
    };
    let (items, versions) = ok(all_pages(&s, opts, |page_no| {
        // Touch keys already served, keys still to come, and add keys in between.
        ok(writer.update(item("k001", 900 + page_no as u32)));
        ok(writer.update(item(&format!("k{:03}", 9 - page_no), 800)));
        let _ = writer.delete(&format!("ns/k{:03}", 5 + page_no));
        ok(writer.create(item(&format!("k{:03}a", page_no * 3 + 1), 700)));
    }));
    assert_eq!(
        items, before,
        "pages show the state at the first page's version"
    );
    assert!(versions.iter().all(|v| v == "11"), "{versions:?}");
    assert!(s.resource_version() != rv("11"));
}

#[test]
fn paging_is_consistent_while_another_thread_writes() {
    let s = populated(200);
    let writer = s.clone();
    let handle = std::thread::spawn(move || {
        for round in 0..500u32 {
            let name = format!("k{:03}", round % 200);
            ok(writer.update(item(&name, 10_000 + round)));
            let _ = writer.create(item(&format!("new{round}"), round));
        }
    });
    let opts = ListOptions {
        limit: Some(7),
        ..Default::default()
    };
    let (items, versions) = ok(all_pages(&s, opts, |_| {}));
    ok(handle.join().map_err(|_| "writer panicked"));
    let snapshot_rv = versions[0].clone();
    assert!(versions.iter().all(|v| *v == snapshot_rv));
    // Compare with an exact list at that version taken in one page.
    let whole = ok(list(
        &s,
        at(&snapshot_rv, Some(ResourceVersionMatch::Exact)),
    ));
    assert_eq!(items, names_values(&whole));
}

#[test]
fn page_size_limit_caps_pages_even_without_a_limit() {
    let (s, _) = source_with(MemoryConfig::new().with_page_size_limit(Some(2)));
    for i in 0..5 {
        ok(s.create(item(&format!("k{i}"), i)));
    }
    let page = ok(list(&s, ListOptions::default()));
    assert_eq!(page.items.len(), 2);
    let page = ok(list(
        &s,
        ListOptions {
            limit: Some(1),
            ..Default::default()
        },
    ));
    assert_eq!(page.items.len(), 1);
    let (items, _) = ok(all_pages(&s, ListOptions::default(), |_| {}));
    assert_eq!(items.len(), 5);
}

#[test]
fn a_continue_token_older_than_the_window_is_expired() {
    let (s, _) = source_with(MemoryConfig::new().with_history_window(3));
    for i in 0..4 {
        ok(s.create(item(&format!("k{i}"), i)));
    }
    let first = ok(list(
        &s,
        ListOptions {
            limit: Some(2),
            ..Default::default()
        },
    ));
    let token = first.continue_token.clone();
    // The list was at 5; three more writes still keep 5 servable, the fourth does not.
    for i in 0..3 {
        ok(s.update(item(&format!("k{i}"), 100)));
    }
    let still = list(
        &s,
        ListOptions {
            continue_token: token.clone(),
            ..Default::default()
        },
    );
    assert_eq!(ok(still).items.len(), 2);
    ok(s.update(item("k3", 100)));
    let err = list(
        &s,
        ListOptions {
            continue_token: token,
            ..Default::default()
        },
    )
    .err();
    assert!(matches!(err, Some(MemoryError::Expired { .. })), "{err:?}");
}

#[test]
fn malformed_versions_and_tokens_are_typed_errors() {
    let s = populated(1);
    assert_eq!(
        list(&s, at("abc", None)).err(),
        Some(MemoryError::InvalidResourceVersion(rv("abc")))
    );
    let bad = ListOptions {
        continue_token: Some("nonsense".into()),
        ..Default::default()
    };
    let err = list(&s, bad).err();
    assert_eq!(
        err,
        Some(MemoryError::InvalidContinueToken("nonsense".into()))
    );
    assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::Other));
}

#[test]
fn a_limit_of_zero_means_no_limit() {
    let s = populated(4);
    let page = ok(list(
        &s,
        ListOptions {
            limit: Some(0),
            ..Default::default()
        },
    ));
    assert_eq!((page.items.len(), page.continue_token), (4, None));
}

#[test]
fn exact_lists_match_a_replayed_model_at_every_version() {
    let s = populated(0);
    let mut model: BTreeMap<String, u32> = BTreeMap::new();
    let mut states = vec![(1u64, model.clone())];
    for step in 0..30u32 {
        let name = format!("k{}", step % 4);
        let key = format!("ns/{name}");
        if step % 5 == 4 {
            if s.delete(&key).is_ok() {
                model.remove(&name);
            }
        } else if s.create(item(&name, step)).is_ok() || s.update(item(&name, step)).is_ok() {
            model.insert(name, step);
        }
        let version: u64 = ok(s.resource_version().as_str().parse());
        states.push((version, model.clone()));
    }
    for (version, expected) in states {
        let page = ok(list(
            &s,
            at(&version.to_string(), Some(ResourceVersionMatch::Exact)),
        ));
        let got: BTreeMap<_, _> = names_values(&page).into_iter().collect();
        assert_eq!(got, expected, "at {version}");
    }
}
