//! The list half of the machine: pages, the pager's full-list fallback, Expired/TooLarge retries.

use super::{cmd, store_error, Command, Machine, Out, Output, Phase, StoreCall};
use crate::error::{BadInput, ReflectorError, StoreOperation};
use crate::list_watcher::{BackendError, ErrorKind, ListOptions, ListPage};
use kcache_core::{Meta, ResourceVersion};
use std::sync::Arc;
use std::time::Instant;

/// A list in progress.
pub(super) struct ListState<T> {
    items: Vec<Arc<T>>,
    list_rv: ResourceVersion,
    /// The version this list asked for (the expired-continue fallback asks for it again).
    requested: ResourceVersion,
    /// The page size of every request of this list (client-go keeps one pager per list).
    limit: Option<u32>,
    mid_list: bool,
    /// A page came with a continue token.
    paginated: bool,
    retried_from_empty: bool,
    full_fallback: bool,
    /// Pages received so far (bounded by [`ListLimits`](super::ListLimits)).
    pages: u64,
    /// Objects received so far by this attempt (bounded the same way).
    objects: usize,
}

impl<T> ListState<T> {
    pub(super) fn new(requested: ResourceVersion, limit: Option<u32>) -> Self {
        Self {
            items: Vec::new(),
            list_rv: ResourceVersion::default(),
            requested,
            limit,
            mid_list: false,
            paginated: false,
            retried_from_empty: false,
            full_fallback: false,
            pages: 0,
            objects: 0,
        }
    }
}

impl<T, M: Meta<T>> Machine<T, M> {
    pub(super) fn on_listed<E: BackendError, SE>(
        &mut self,
        mut st: ListState<T>,
        res: Result<ListPage<T>, E>,
        now: Instant,
    ) -> Out<T, E, SE> {
        let page = match res {
            Ok(page) => page,
            Err(e) => {
                let kind = e.kind();
                let expired_or_large = matches!(
                    kind,
                    ErrorKind::Expired | ErrorKind::TooLargeResourceVersion
                );
                if st.mid_list && kind == ErrorKind::Expired && !st.full_fallback {
                    // The pager's FullListIfExpired: one unpaged list at the version the list
                    // asked for (not the most recent state: a relist at a known version must
                    // not go back to a quorum read because a continue token expired).
                    st.items = Vec::new();
                    st.objects = 0;
                    st.full_fallback = true;
                    st.mid_list = false;
                    let opts = ListOptions {
                        resource_version: st.requested.clone(),
                        ..ListOptions::default()
                    };
                    self.phase = Phase::Listing(st);
                    return Output {
                        report: Some(ReflectorError::List(e)),
                        command: Command::List(opts),
                    };
                }
                if expired_or_large && !st.mid_list && !st.retried_from_empty && !st.full_fallback {
                    self.rv_unavailable = true;
                    st.retried_from_empty = true;
                    st.requested = ResourceVersion::default();
                    let opts = ListOptions {
                        resource_version: ResourceVersion::default(),
                        limit: st.limit,
                        ..ListOptions::default()
                    };
                    self.phase = Phase::Listing(st);
                    return Output {
                        report: Some(ReflectorError::List(e)),
                        command: Command::List(opts),
                    };
                }
                if expired_or_large {
                    self.rv_unavailable = true;
                }
                return self.fail_cycle(ReflectorError::List(e), now);
            }
        };
        // A page without a resource version is accepted, as client-go does: a source without
        // versions (a plain REST or SQL source) lists with "" and is then watched from "".
        if let Some(err) = page.items.iter().find_map(|o| self.key_error(o)) {
            return self.fail_cycle(ReflectorError::BadInput(BadInput::ObjectKey(err)), now);
        }
        let first = !st.mid_list;
        if first {
            st.list_rv = page.resource_version;
        }
        st.objects += page.items.len();
        // A paged list hands this page to the store; any other gathers the pages.
        let items = if self.config.paged {
            page.items
        } else {
            if st.items.is_empty() {
                st.items = page.items;
            } else {
                st.items.extend(page.items);
            }
            Vec::new()
        };
        st.pages += 1;
        // An empty continue token is the last page (as in client-go, which tests for "").
        let next = page.continue_token.filter(|t| !t.is_empty());
        let limits = self.config.limits;
        if st.objects > limits.max_objects
            || (next.is_some() && !st.full_fallback && st.pages >= limits.max_pages)
        {
            let bad = BadInput::ListTooLong {
                pages: st.pages,
                objects: st.objects,
            };
            drop(st);
            return self.fail_cycle(ReflectorError::BadInput(bad), now);
        }
        if self.config.paged {
            // The page goes to the store now; the next is fetched once the store took it.
            self.phase = Phase::Paging { st, next };
            return cmd(Command::Store(StoreCall::ListPage { items, first }));
        }
        self.after_page(st, next)
    }

    /// A page of a paged list was handed to the store (and taken, see `PagedReplace::page_taken`).
    pub(super) fn on_page_taken<E, SE>(
        &mut self,
        st: ListState<T>,
        next: Option<String>,
        res: Result<(), SE>,
        now: Instant,
    ) -> Out<T, E, SE> {
        match res {
            Ok(()) => self.after_page(st, next),
            Err(e) => self.fail_cycle(store_error(StoreOperation::Replace, e), now),
        }
    }

    /// After a page: fetch the next one, or end the list (replace, or finish a paged list).
    fn after_page<E, SE>(&mut self, mut st: ListState<T>, next: Option<String>) -> Out<T, E, SE> {
        match next {
            Some(token) if !st.full_fallback => {
                st.mid_list = true;
                st.paginated = true;
                let opts = ListOptions {
                    limit: st.limit,
                    continue_token: Some(token),
                    ..ListOptions::default()
                };
                self.phase = Phase::Listing(st);
                cmd(Command::List(opts))
            }
            _ => {
                if st.paginated && st.requested.as_str() == "0" {
                    // client-go's paginatedResult: only an RV "0" list tells (a "" list is
                    // paged by etcd even when a watch cache exists).
                    self.paginated_result = true;
                }
                let rv = st.list_rv;
                self.phase = Phase::Replacing {
                    rv: rv.clone(),
                    from_stream: false,
                };
                let call = if self.config.paged {
                    StoreCall::FinishList(rv)
                } else {
                    StoreCall::Replace(st.items, rv)
                };
                cmd(Command::Store(call))
            }
        }
    }
}
