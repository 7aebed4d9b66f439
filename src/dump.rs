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

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::panic::Location;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::task_id::TaskId;
pub use crate::task_id::TaskKind;
use crate::watch::{self, Books, Holder, LockBook, LockKind, WaitRead};

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
    book: Arc<LockBook>,
    holder: Holder,
}

impl LockEntry {
    /// What it is: `Guarded<T>` with the value's type, `Strand`, or
    /// `KeyedStrands key`.
    pub fn name(&self) -> String {
        match self.book.kind {
            LockKind::Strand => "Strand".to_owned(),
            LockKind::Guarded(ty) => format!("Guarded<{ty}>"),
            LockKind::Keyed => "KeyedStrands key".to_owned(),
        }
    }

    /// Where it was created (for a key of `KeyedStrands`, where the key's
    /// first task was spawned).
    pub fn location(&self) -> &'static Location<'static> {
        self.book.location
    }

    /// The task holding it, if a task does.
    pub fn holder(&self) -> Option<TaskId> {
        match self.holder {
            Holder::Task(id) => Some(id),
            _ => None,
        }
    }

    /// `true` if something holds it: a task, or code that is not one (a
    /// posted closure, a thread outside any task).
    pub fn is_held(&self) -> bool {
        self.holder != Holder::Free
    }

    /// Two entries of the same value or strand.
    pub fn same_as(&self, other: &LockEntry) -> bool {
        Arc::ptr_eq(&self.book, &other.book)
    }
}

impl fmt::Debug for LockEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockEntry")
            .field("name", &self.name())
            .field("location", &format_args!("{}", self.location()))
            .field("holder", &self.holder)
            .finish()
    }
}

impl fmt::Display for LockEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} created at {}", self.name(), self.location())?;
        match self.holder {
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

/// A task as one pass of a dump found it.
struct Listed {
    location: &'static Location<'static>,
    kind: TaskKind,
    state: TaskState,
}

/// One reading of a pool's books, of the waits noted, and of the holders
/// of the locks those waits name. Its parts are read one after another
/// while the pool runs: a dump takes two and keeps, for its wait-for
/// graph, only what both saw (see [`TaskDump::deadlocks`]).
struct Pass {
    tasks: BTreeMap<TaskId, Listed>,
    waits: HashMap<TaskId, Vec<watch::NotedWait>>,
    /// By the address of the lock's book: the sequence of its last write,
    /// and the holder it wrote.
    locks: HashMap<*const LockBook, (u64, Holder)>,
}

impl Pass {
    fn take(books: &Books, worker_name: &impl Fn(usize) -> String) -> Pass {
        let mut running: HashMap<TaskId, (String, &'static Location<'static>, TaskKind)> =
            HashMap::new();
        for (i, book) in books.workers().enumerate() {
            if let Some((id, location, kind)) = book.running.read().task {
                running.insert(id, (worker_name(i), location, kind));
            }
        }
        let mut tasks = BTreeMap::new();
        let mut waits = HashMap::new();
        for book in books.workers() {
            for t in book.tasks() {
                if !t.waits.is_empty() {
                    waits.insert(t.id, t.waits);
                }
                let state = match (running.get(&t.id), t.state) {
                    (Some((worker, _, _)), _) => TaskState::Running {
                        worker: Some(worker.clone()),
                    },
                    (None, watch::RUNNING) => TaskState::Running { worker: None },
                    (None, watch::WAITING) => TaskState::Waiting,
                    _ => TaskState::Queued,
                };
                let (location, kind) = (t.location, t.kind);
                tasks.insert(
                    t.id,
                    Listed {
                        location,
                        kind,
                        state,
                    },
                );
            }
        }
        for (id, (worker, location, kind)) in running {
            tasks.entry(id).or_insert(Listed {
                location,
                kind,
                state: TaskState::Running {
                    worker: Some(worker),
                },
            });
        }
        let mut locks = HashMap::new();
        for wait in waits.values().flatten() {
            let book = match &wait.on {
                WaitRead::Lock(book)
                | WaitRead::Task {
                    queued_on: Some(book),
                    ..
                } => book,
                _ => continue,
            };
            locks
                .entry(Arc::as_ptr(book))
                .or_insert_with(|| book.reading());
        }
        Pass {
            tasks,
            waits,
            locks,
        }
    }

    fn listed(&self, id: TaskId) -> bool {
        self.tasks.contains_key(&id)
    }

    /// The wait `task` noted with `order`, if this pass saw it.
    fn wait(&self, task: TaskId, order: u64) -> Option<&WaitRead> {
        let waits = self.waits.get(&task)?;
        waits.iter().find(|w| w.order == order).map(|w| &w.on)
    }

    fn lock(&self, book: &Arc<LockBook>) -> Option<(u64, Holder)> {
        self.locks.get(&Arc::as_ptr(book)).copied()
    }
}

impl TaskDump {
    /// Collects the dump of the pool named `pool`, whose workers are named
    /// by `worker_name`, from its books; `live` reads its count of
    /// accepted tasks not yet over; `now` is the time by the pool's clock.
    ///
    /// It reads everything twice, and lists what the second reading saw.
    /// A wait is *steady* (an edge of the wait-for graph) only if both
    /// readings saw it: the same wait (its order), a lock's holder written
    /// by the same write (its sequence), and each task it leads to listed
    /// (alive) in both, or, for a section not started yet, not ended. Every
    /// part of the first reading comes before every part of the second,
    /// and none of these things comes back once it has gone, so each
    /// steady wait held from its first reading to its second: all of them
    /// at once, at any moment between the two readings.
    pub(crate) fn collect(
        pool: &str,
        worker_name: impl Fn(usize) -> String,
        books: &Books,
        live: impl FnOnce() -> u64,
        now: Instant,
    ) -> TaskDump {
        let first = Pass::take(books, &worker_name);
        let mut second = Pass::take(books, &worker_name);
        // After the books: a task stops being counted before it leaves its
        // book (its admission is released first), so one that the second
        // reading no longer lists is not counted as not started.
        let live = live();
        let mut waits = std::mem::take(&mut second.waits);
        let both = |id: TaskId| first.listed(id) && second.listed(id);
        let same_holder = |book: &Arc<LockBook>| {
            let reading = second.lock(book);
            reading.is_some()
                && first.lock(book) == reading
                && match reading {
                    Some((_, Holder::Task(holder))) => both(holder),
                    _ => true,
                }
        };
        let mut timers: HashMap<TaskId, Vec<Instant>> = HashMap::new();
        for (task, deadline) in crate::time::waiting_tasks() {
            timers.entry(task).or_default().push(deadline);
        }
        timers.values_mut().for_each(|t| t.sort());
        let tasks: Vec<TaskEntry> = second
            .tasks
            .iter()
            .map(|(&id, listed)| {
                let mut entry = TaskEntry {
                    id,
                    location: listed.location,
                    kind: listed.kind,
                    state: listed.state.clone(),
                    waits: Vec::new(),
                    steady: Vec::new(),
                };
                for wait in waits.remove(&id).unwrap_or_default() {
                    let before = first.wait(id, wait.order);
                    let lock = |book: &Arc<LockBook>| {
                        let (_, holder) = second.lock(book).expect("read in the pass");
                        LockEntry {
                            book: book.clone(),
                            holder,
                        }
                    };
                    let (on, steady) = match wait.on {
                        WaitRead::Lock(book) => {
                            let steady = same_holder(&book);
                            (WaitsOn::Lock(lock(&book)), steady)
                        }
                        WaitRead::Task {
                            id: section,
                            queued_on: Some(book),
                            ended,
                        } if !second.listed(section) => {
                            // Not started: it waits for the lock's holder.
                            let steady = !ended && !first.listed(section) && same_holder(&book);
                            let lock = lock(&book);
                            (
                                WaitsOn::Section {
                                    task: section,
                                    lock,
                                },
                                steady,
                            )
                        }
                        WaitRead::Task { id: task, .. } => (WaitsOn::Task(task), both(task)),
                        WaitRead::Scope(members) => {
                            // Only tasks of the scope seen alive both times.
                            let earlier = match before {
                                Some(WaitRead::Scope(earlier)) => &earlier[..],
                                _ => &[],
                            };
                            let tasks: Vec<TaskId> = members
                                .into_iter()
                                .filter(|m| earlier.contains(m) && both(*m))
                                .collect();
                            (WaitsOn::Scope { tasks }, true)
                        }
                    };
                    entry.waits.push(on);
                    entry.steady.push(before.is_some() && steady);
                }
                for deadline in timers.remove(&id).unwrap_or_default() {
                    entry.waits.push(WaitsOn::Timer {
                        deadline,
                        left: deadline.saturating_duration_since(now),
                    });
                    entry.steady.push(false);
                }
                entry
            })
            .collect();
        TaskDump {
            pool: pool.to_owned(),
            not_started: live.saturating_sub(tasks.len() as u64),
            tasks,
        }
    }

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

    /// The cycles of the wait-for graph: tasks that wait, through locks,
    /// handles and scopes, on each other, so none of them will ever go on.
    /// Each cycle is reported once, and only if every wait in it held at
    /// one moment (see the [module docs](crate::dump)): a dump of a busy
    /// pool reports no cycle that cannot exist.
    pub fn deadlocks(&self) -> Vec<Deadlock> {
        // Edges, of steady waits only (see `collect`): a task waits on a
        // task (a handle, the holder of a lock or of the lock a section is
        // queued on, each task of a scope).
        let index = |id: &TaskId| self.tasks.binary_search_by_key(id, TaskEntry::id).ok();
        let edges: Vec<Vec<(usize, &WaitsOn)>> = self
            .tasks
            .iter()
            .map(|t| {
                let mut edges = Vec::new();
                for (w, _) in t.waits.iter().zip(&t.steady).filter(|(_, &s)| s) {
                    let next = match w {
                        WaitsOn::Lock(lock) | WaitsOn::Section { lock, .. } => lock.holder(),
                        WaitsOn::Task(id) => Some(*id),
                        WaitsOn::Scope { tasks } => {
                            edges.extend(tasks.iter().filter_map(index).map(|i| (i, w)));
                            None
                        }
                        WaitsOn::Timer { .. } => None,
                    };
                    edges.extend(next.as_ref().and_then(index).map(|i| (i, w)));
                }
                edges
            })
            .collect();
        strongly_connected(&edges)
            .into_iter()
            .filter_map(|scc| {
                let cycle = cycle_within(&edges, &scc)?;
                Some(Deadlock {
                    steps: cycle
                        .into_iter()
                        .map(|(i, w)| DeadlockStep {
                            task: self.tasks[i].id,
                            location: self.tasks[i].location,
                            waits_on: w.clone(),
                        })
                        .collect(),
                })
            })
            .collect()
    }
}

/// Tarjan's strongly connected components, iteratively (a dump may hold
/// many thousands of tasks).
fn strongly_connected(edges: &[Vec<(usize, &WaitsOn)>]) -> Vec<Vec<usize>> {
    let n = edges.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut sccs = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, position in its edge list)
        let mut work = vec![(root, 0)];
        while let Some(&mut (v, ref mut pos)) = work.last_mut() {
            if *pos == 0 {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&(w, _)) = edges[v].get(*pos) {
                *pos += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut scc = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    scc.push(w);
                    if w == v {
                        break;
                    }
                }
                sccs.push(scc);
            }
        }
    }
    sccs
}

/// One cycle inside a strongly connected component, starting at its
/// smallest task; `None` for a single task that does not wait on itself.
fn cycle_within<'a>(
    edges: &[Vec<(usize, &'a WaitsOn)>],
    scc: &[usize],
) -> Option<Vec<(usize, &'a WaitsOn)>> {
    let start = *scc.iter().min()?;
    let members: std::collections::HashSet<usize> = scc.iter().copied().collect();
    let inside = |i: usize| members.contains(&i);
    // Breadth-first from `start` inside the component back to `start`: the
    // shortest cycle through it.
    let mut came_from: HashMap<usize, (usize, &'a WaitsOn)> = HashMap::new();
    let mut frontier = vec![start];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for &v in &frontier {
            for &(w, how) in &edges[v] {
                if !inside(w) {
                    continue;
                }
                if w == start {
                    let mut cycle = vec![(v, how)];
                    let mut at = v;
                    while at != start {
                        let (prev, how) = came_from[&at];
                        cycle.push((prev, how));
                        at = prev;
                    }
                    cycle.reverse();
                    return Some(cycle);
                }
                if let std::collections::hash_map::Entry::Vacant(e) = came_from.entry(w) {
                    e.insert((v, how));
                    next.push(w);
                }
            }
        }
        frontier = next;
    }
    None
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
