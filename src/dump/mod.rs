//! Task dumps: every live task of a pool, what it is doing, what it waits
//! on, and the cycles of tasks that wait on each other.
//!
//! [`ThreadPool::dump`](crate::ThreadPool::dump) takes a [`TaskDump`]; its
//! `Display` is a table a person can read, and
//! [`deadlocks`](TaskDump::deadlocks) finds the cycles of its wait-for
//! graph: a task waits on a `Guarded` lock or strand held by a task that
//! waits on...
//!
//! # What a dump of a running pool guarantees
//!
//! The pool runs on while a dump is taken, so the dump reads its records
//! one after another, not at one instant. It reads all of them twice, and
//! lists what the second reading found:
//!
//! - Every task listed was alive (polled, not yet ended) when it was read;
//!   what it waits on was noted when the second reading got to it. A task
//!   that moved on meanwhile may show a wait that just ended, or miss one
//!   that just began. A lock's holder is as the second reading found it.
//! - [`deadlocks`](TaskDump::deadlocks) uses only the waits that both
//!   readings saw unchanged: the same wait (not an earlier one ended and
//!   a new one begun), each lock held by the same task through the same
//!   acquisition (not released and taken again), each task it leads to
//!   alive at both. None of these comes back once gone, so each such wait
//!   held all the time from its first reading to its second; all first
//!   readings come before all second ones, so every wait of a reported
//!   cycle held at one moment.
//!
//! What a wait and a holder are, for a dump: a wait is noted by one of
//! viaduct's futures (a lock, a handle, a scope's wait) when it returns
//! `Pending` inside a task, and lasts until that future is ready or
//! dropped; a lock's holder is the task that took it. So a reported cycle
//! is a real deadlock unless user code steps outside those terms: a
//! future kept pending but no longer polled (the loser of a `select!`,
//! kept for later) still counts as a wait, and a guard moved into another
//! task is still shown under the task that took it.
//!
//! Not found: a deadlock forming while the dump is taken (the next dump
//! finds it), and one through a wait viaduct does not see (a std lock, a
//! channel, a task that was polled before and is now queued on a strand
//! behind the task holding it).
//!
//! # Examples
//!
//! Two tasks that lock two values in opposite orders:
//!
//! ```
//! use std::time::Duration;
//! use viaduct::{ExecutorExt, Guarded, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(2).build().unwrap();
//! let (a, b) = (Guarded::new(pool.clone(), 0), Guarded::new(pool.clone(), 0));
//! let (a2, b2) = (a.clone(), b.clone());
//! let first = pool.spawn(async move {
//!     let _a = a.lock().await;
//!     viaduct::time::sleep(Duration::from_millis(50)).await;
//!     let _b = b.lock().await; // never granted
//! });
//! let second = pool.spawn(async move {
//!     let _b = b2.lock().await;
//!     viaduct::time::sleep(Duration::from_millis(50)).await;
//!     let _a = a2.lock().await; // never granted
//! });
//! let dump = loop {
//!     std::thread::sleep(Duration::from_millis(20));
//!     let dump = pool.dump();
//!     if !dump.deadlocks().is_empty() {
//!         break dump;
//!     }
//! };
//! let cycle = &dump.deadlocks()[0];
//! let mut ids: Vec<_> = cycle.steps().iter().map(|s| s.task()).collect();
//! ids.sort();
//! let mut expected = vec![first.id().unwrap(), second.id().unwrap()];
//! expected.sort();
//! assert_eq!(ids, expected);
//! println!("{dump}"); // the table, then the cycle
//! first.abort();
//! second.abort();
//! ```

use std::fmt;
use std::panic::Location;
use std::time::{Duration, Instant};

mod collect;
mod graph;
pub(crate) mod lock;
pub(crate) mod records;

use crate::task_id::TaskId;
pub use crate::task_id::TaskKind;
use lock::{Holder, LockKind, LockSeen};

/// Every live task of a pool, as [`ThreadPool::dump`](crate::ThreadPool::dump)
/// found them.
///
/// A task is listed once it has been polled: while it runs, and after its
/// first poll that did not finish it. Tasks accepted but never started yet
/// are only counted ([`not_started`](TaskDump::not_started)); they hold
/// nothing and wait on nothing.
#[derive(Clone, Debug)]
pub struct TaskDump {
    pool: String,
    tasks: Vec<TaskEntry>,
    not_started: u64,
}

/// One task of a [`TaskDump`].
#[derive(Clone, Debug)]
pub struct TaskEntry {
    id: TaskId,
    location: &'static Location<'static>,
    kind: TaskKind,
    state: TaskState,
    waits: Vec<WaitsOn>,
    /// For each of `waits`, whether it is an edge of the wait-for graph
    /// (see `TaskDump::collect`).
    steady: Vec<bool>,
}

/// What a task is doing.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskState {
    /// In a queue, to be polled.
    Queued,
    /// Being polled, on the named worker thread (`None`: a poll that
    /// another poll on its thread has interrupted, or one off the pool's
    /// workers).
    Running {
        /// The worker thread's name.
        worker: Option<String>,
    },
    /// Waiting to be woken.
    Waiting,
}

/// What a waiting task waits on, when that is one of viaduct's primitives.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum WaitsOn {
    /// A [`Guarded`](crate::Guarded) lock (or a strand).
    Lock(LockEntry),
    /// The handle of another task.
    Task(TaskId),
    /// The handle of a section queued on a `Guarded` value or strand (a
    /// [`with`](crate::Guarded::with)), which runs once the holder lets go.
    Section {
        /// The section's task.
        task: TaskId,
        /// The value or strand it is queued on.
        lock: LockEntry,
    },
    /// The tasks of a scope this task opened
    /// ([`ThreadPool::scope`](crate::ThreadPool::scope)), which it waits
    /// for to end: those the dump found polled and not yet ended.
    Scope {
        /// The scope's tasks.
        tasks: Vec<TaskId>,
    },
    /// A timer.
    Timer {
        /// When it fires.
        deadline: Instant,
        /// How long it had to go when the dump was taken, by the dumped
        /// pool's clock (a simulation's is virtual).
        left: Duration,
    },
}

/// A `Guarded` value or strand, as a dump saw it.
#[derive(Clone)]
pub struct LockEntry {
    /// As the dump's second reading saw it.
    seen: LockSeen,
}

impl LockEntry {
    /// What it is: `Guarded<T>` with the value's type, `Strand`, or
    /// `KeyedStrands key`.
    pub fn name(&self) -> String {
        match self.seen.kind {
            LockKind::Strand => "Strand".to_owned(),
            LockKind::Guarded(ty) => format!("Guarded<{ty}>"),
            LockKind::Keyed => "KeyedStrands key".to_owned(),
        }
    }

    /// Where it was created (for a key of `KeyedStrands`, where the key's
    /// first task was spawned).
    pub fn location(&self) -> &'static Location<'static> {
        self.seen.location
    }

    /// The task holding it, if a task does.
    pub fn holder(&self) -> Option<TaskId> {
        match self.seen.holder {
            Holder::Task(id) => Some(id),
            _ => None,
        }
    }

    /// `true` if something holds it: a task, or code that is not one (a
    /// posted closure, a thread outside any task).
    pub fn is_held(&self) -> bool {
        self.seen.holder != Holder::Free
    }

    /// Two entries of the same value or strand.
    pub fn same_as(&self, other: &LockEntry) -> bool {
        self.seen.addr == other.seen.addr
    }
}

impl fmt::Debug for LockEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockEntry")
            .field("name", &self.name())
            .field("location", &format_args!("{}", self.location()))
            .field("holder", &self.seen.holder)
            .finish()
    }
}

impl fmt::Display for LockEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} created at {}", self.name(), self.location())?;
        match self.seen.holder {
            Holder::Free => f.write_str(", free"),
            Holder::Task(id) => write!(f, ", held by task {id}"),
            Holder::NotATask => f.write_str(", held outside any task"),
        }
    }
}

impl fmt::Display for WaitsOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitsOn::Lock(lock) => write!(f, "lock of {lock}"),
            WaitsOn::Task(id) => write!(f, "task {id}"),
            WaitsOn::Section { task, lock } => write!(f, "section {task} queued on {lock}"),
            WaitsOn::Scope { tasks } => {
                f.write_str("its scope's tasks")?;
                for (i, task) in tasks.iter().enumerate() {
                    write!(f, "{}{task}", if i == 0 { " " } else { ", " })?;
                }
                Ok(())
            }
            WaitsOn::Timer { left, .. } => write!(f, "timer due in {} ms", left.as_millis()),
        }
    }
}

impl TaskEntry {
    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.id
    }

    /// Where it was spawned; for viaduct's own tasks, where the strand or
    /// executor they serve was created (see [`kind`](TaskEntry::kind)).
    pub fn location(&self) -> &'static Location<'static> {
        self.location
    }

    /// What runs in it.
    pub fn kind(&self) -> TaskKind {
        self.kind
    }

    /// What it is doing.
    pub fn state(&self) -> &TaskState {
        &self.state
    }

    /// What it waits on (empty if it waits on nothing of viaduct's, or
    /// does not wait): locks and handles in the order it began waiting on
    /// them, then timers, by deadline. Timers are read a moment after
    /// the rest: a task that moves from one wait to another meanwhile may
    /// show both or neither.
    pub fn waits_on(&self) -> &[WaitsOn] {
        &self.waits
    }
}

impl TaskDump {
    /// The listed tasks, by id.
    pub fn tasks(&self) -> &[TaskEntry] {
        &self.tasks
    }

    /// The listed task with this id.
    pub fn task(&self, id: TaskId) -> Option<&TaskEntry> {
        self.tasks
            .binary_search_by_key(&id, TaskEntry::id)
            .ok()
            .map(|i| &self.tasks[i])
    }

    /// Tasks (and sections) the pool accepted that have not started yet:
    /// counted, not listed.
    pub fn not_started(&self) -> u64 {
        self.not_started
    }
}

/// A cycle of tasks waiting on each other: each step's task waits on the
/// next step's, the last on the first's.
#[derive(Clone, Debug)]
pub struct Deadlock {
    steps: Vec<DeadlockStep>,
}

/// A task of a [`Deadlock`], and what it waits on.
#[derive(Clone, Debug)]
pub struct DeadlockStep {
    task: TaskId,
    location: &'static Location<'static>,
    waits_on: WaitsOn,
}

impl Deadlock {
    /// The tasks of the cycle, in wait order.
    pub fn steps(&self) -> &[DeadlockStep] {
        &self.steps
    }
}

impl DeadlockStep {
    /// The task.
    pub fn task(&self) -> TaskId {
        self.task
    }

    /// Where it was spawned.
    pub fn location(&self) -> &'static Location<'static> {
        self.location
    }

    /// What it waits on: held by, or being, the next step's task.
    pub fn waits_on(&self) -> &WaitsOn {
        &self.waits_on
    }
}

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "deadlock: {} task(s) wait on each other",
            self.steps.len()
        )?;
        for step in &self.steps {
            writeln!(
                f,
                "  task {} spawned at {} waits on {}",
                step.task, step.location, step.waits_on
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskState::Queued => f.write_str("queued"),
            TaskState::Running { worker: Some(w) } => write!(f, "running on {w}"),
            TaskState::Running { worker: None } => f.write_str("running"),
            TaskState::Waiting => f.write_str("waiting"),
        }
    }
}

impl fmt::Display for TaskDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "pool {:?}: {} task(s) listed, {} more not started",
            self.pool,
            self.tasks.len(),
            self.not_started
        )?;
        writeln!(
            f,
            "{:<8} {:<22} {:<36} waits on",
            "task", "state", "spawned at"
        )?;
        for t in &self.tasks {
            let mut waits: Vec<String> = t.waits.iter().map(ToString::to_string).collect();
            if t.kind != TaskKind::Spawned {
                waits.insert(
                    0,
                    format!("({}; the line is where its owner was created)", t.kind),
                );
            }
            let row = format!(
                "{:<8} {:<22} {:<36} {}",
                t.id.to_string(),
                t.state.to_string(),
                t.location.to_string(),
                waits.join("; ")
            );
            writeln!(f, "{}", row.trim_end())?;
        }
        for deadlock in self.deadlocks() {
            write!(f, "{deadlock}")?;
        }
        Ok(())
    }
}
