//! [`InProcessLock`]: a lock in memory, for tests, demos and candidates in one process.

use crate::lock::{Lock, LockError};
use crate::record::{LeaderElectionRecord, VersionedRecord};
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::Mutex;
use kcache_core::ResourceVersion;
use std::fmt;
use std::sync::Arc;

/// A lock whose record lives in memory, shared by every candidate created from it.
///
/// Each version is a counter, bumped by every write, so `update` is a real compare-and-swap.
/// [`set_available(false)`](Self::set_available) makes one candidate's operations fail as if it
/// were cut off from the store, to test what an elector does when it cannot renew.
///
/// # Examples
/// ```
/// use kcache_leaderelection::InProcessLock;
///
/// let a = InProcessLock::new("a");
/// let b = a.for_identity("b"); // the same record, another candidate
/// assert_eq!((a.identity_str(), b.identity_str()), ("a", "b"));
/// ```
#[derive(Clone)]
pub struct InProcessLock {
    cell: Arc<Cell>,
    identity: Arc<str>,
    /// This candidate's connection to the record (clones of the handle share it).
    available: Arc<AtomicBool>,
}

struct Cell {
    state: Mutex<State>,
}

struct State {
    record: Option<(LeaderElectionRecord, u64)>,
    next_version: u64,
    writes: u64,
}

/// The error of an [`InProcessLock`] made unavailable.
#[derive(Debug, thiserror::Error)]
#[error("the in-process lock is unavailable")]
pub struct Unavailable;

impl InProcessLock {
    /// A new, empty record and a candidate `identity` using it.
    pub fn new(identity: impl Into<String>) -> Self {
        Self {
            cell: Arc::new(Cell {
                state: Mutex::new(State {
                    record: None,
                    next_version: 1,
                    writes: 0,
                }),
            }),
            identity: Arc::from(identity.into()),
            available: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Another candidate, `identity`, on the same record.
    pub fn for_identity(&self, identity: impl Into<String>) -> Self {
        Self {
            cell: self.cell.clone(),
            identity: Arc::from(identity.into()),
            available: Arc::new(AtomicBool::new(true)),
        }
    }

    /// The candidate's identity (also [`Lock::identity`]).
    pub fn identity_str(&self) -> &str {
        &self.identity
    }

    /// Makes every operation of this candidate (this handle and its clones, not the handles of
    /// [`for_identity`](Self::for_identity)) fail with [`Unavailable`], as if it were cut off from
    /// the store; or work again.
    pub fn set_available(&self, available: bool) {
        self.available.store(available, Ordering::SeqCst);
    }

    fn check_available(&self) -> Result<(), LockError> {
        if self.available.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(LockError::backend(Unavailable))
        }
    }

    /// The record and its version as stored now.
    pub fn peek(&self) -> Option<VersionedRecord> {
        self.cell
            .state
            .lock()
            .record
            .as_ref()
            .map(|(record, v)| VersionedRecord {
                record: record.clone(),
                version: ResourceVersion::from(v.to_string()),
            })
    }

    /// How many writes (creates and updates) succeeded so far.
    pub fn writes(&self) -> u64 {
        self.cell.state.lock().writes
    }

    fn write(
        &self,
        expect: Option<&ResourceVersion>,
        record: &LeaderElectionRecord,
    ) -> Result<ResourceVersion, LockError> {
        self.check_available()?;
        let mut st = self.cell.state.lock();
        match (expect, &st.record) {
            (None, Some(_)) => return Err(LockError::AlreadyExists),
            (Some(_), None) => return Err(LockError::NotFound),
            (Some(want), Some((_, have))) if want.as_str() != have.to_string() => {
                return Err(LockError::Conflict)
            }
            _ => {}
        }
        let version = st.next_version;
        st.next_version += 1;
        st.writes += 1;
        st.record = Some((record.clone(), version));
        Ok(ResourceVersion::from(version.to_string()))
    }
}

impl Lock for InProcessLock {
    async fn get(&self) -> Result<Option<VersionedRecord>, LockError> {
        self.check_available()?;
        Ok(self.peek())
    }

    async fn create(&self, record: &LeaderElectionRecord) -> Result<ResourceVersion, LockError> {
        self.write(None, record)
    }

    async fn update(
        &self,
        version: &ResourceVersion,
        record: &LeaderElectionRecord,
    ) -> Result<ResourceVersion, LockError> {
        self.write(Some(version), record)
    }

    fn identity(&self) -> &str {
        &self.identity
    }

    fn describe(&self) -> String {
        "in-process lock".to_owned()
    }
}

impl fmt::Debug for InProcessLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InProcessLock")
            .field("identity", &self.identity)
            .field("record", &self.peek())
            .finish()
    }
}
