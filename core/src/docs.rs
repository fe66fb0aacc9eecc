//! Guides for readers coming from client-go. Each page is a Markdown file under `core/docs/` in
//! the repository, shown here as a module.

#[doc = include_str!("../docs/client-go-names.md")]
pub mod client_go_names {}

#[doc = include_str!("../docs/client-go-differences.md")]
pub mod client_go_differences {}
