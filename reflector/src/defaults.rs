//! The reflector's default options, in one place: the builder starts from them and the state
//! machine falls back on them, and neither has to read the other's file.

use std::time::Duration;

/// The page size of lists when none is set (client-go's pager); see
/// [`ReflectorBuilder::page_size`](crate::ReflectorBuilder::page_size) for when lists are not
/// paged.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// The default minimum watch timeout (client-go: 5 minutes; each watch asks for a random timeout
/// between this and twice this).
pub const DEFAULT_MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(300);

/// The default bound on the pages of one list: at 500 objects a page, 50 million objects, far
/// above any real collection. A list that goes on longer is abandoned and reported
/// ([`BadInput::ListTooLong`](crate::BadInput::ListTooLong)).
pub const DEFAULT_MAX_LIST_PAGES: u64 = 100_000;

/// The default bound on the objects of one list (or streaming list): 10 million, far above any
/// real collection (Kubernetes' tested limit is 150,000 pods in a whole cluster).
pub const DEFAULT_MAX_LIST_OBJECTS: usize = 10_000_000;
