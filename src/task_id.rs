//! Task ids: a number per task, unique in the process, that names it in
//! stall reports, dumps and traces (an address would be reused by later
//! tasks).

use std::fmt;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A task's id: unique among all tasks of the process, never reused.
///
/// Shown as `#17` in stall reports and task dumps.
/// Ids are handed out in blocks per thread, so they say nothing about the
/// order in which tasks were spawned.
///
/// # Examples
///
/// ```
/// use viaduct::{ExecutorExt, ManualExecutor};
///
/// let ex = ManualExecutor::new();
/// let a = ex.run(|| ());
/// let b = ex.run(|| ());
/// assert_ne!(a.id(), b.id());
/// assert!(a.id().unwrap().to_string().starts_with('#'));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(NonZeroU64);

/// Ids a thread takes from the shared counter at a time: one contended
/// atomic add per block, not per spawn.
const BLOCK: u64 = 1024;

impl TaskId {
    /// A fresh id.
    pub(crate) fn next() -> TaskId {
        static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);
        let id = crate::context::with(|c| {
            let b = &c.ids;
            let (mut next, mut end) = b.get();
            if next == end {
                next = NEXT_BLOCK.fetch_add(BLOCK, Relaxed);
                end = next + BLOCK;
            }
            b.set((next + 1, end));
            next
        });
        TaskId(NonZeroU64::new(id).expect("ids start at 1 and a u64 does not wrap"))
    }

    /// The id numbered `n`, if `n` can be one.
    pub(crate) fn from_u64(n: u64) -> Option<TaskId> {
        NonZeroU64::new(n).map(TaskId)
    }

    /// The id as a number.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, Inline};
    ///
    /// let h = Inline.run(|| ());
    /// assert!(h.id().unwrap().as_u64() > 0);
    /// ```
    pub fn as_u64(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({})", self.0)
    }
}

/// What runs in a task: a future spawned by user code, or one of the
/// queues viaduct drains in a task of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskKind {
    /// A future or closure spawned by user code, at its location.
    Spawned = 0,
    /// The runner of a strand, a `Guarded` value or a key of
    /// `KeyedStrands`: it runs their sections and posts one at a time. Its
    /// location is where the strand was created.
    StrandRunner = 1,
    /// A pump of a `PriorityExecutor`, which runs its queued work highest
    /// first. Its location is where the executor was created.
    PriorityPump = 2,
}

impl fmt::Display for TaskKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TaskKind::Spawned => "task",
            TaskKind::StrandRunner => "strand runner",
            TaskKind::PriorityPump => "priority pump",
        })
    }
}
