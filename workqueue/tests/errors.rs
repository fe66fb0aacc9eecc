//! Every public error type can travel in `Box<dyn Error + Send + Sync>` and across threads.

use kcache_workqueue::NotProcessing;
use std::error::Error;

fn assert_error<E: Error + Send + Sync + 'static>(e: E) -> Box<dyn Error + Send + Sync + 'static> {
    Box::new(e)
}

#[test]
fn not_processing_is_a_send_sync_static_error_with_a_message() {
    let boxed = assert_error(NotProcessing);
    assert_eq!(
        boxed.to_string(),
        "done called for an item that is not being processed"
    );
    assert!(boxed.source().is_none());
    assert_eq!(boxed.downcast_ref::<NotProcessing>(), Some(&NotProcessing));
}
