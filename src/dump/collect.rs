//! Collecting a dump: two readings of a pool's books, and which waits
//! held through both.

use std::collections::{BTreeMap, HashMap};
use std::panic::Location;
use std::time::Instant;

use super::lock::{Holder, LockSeen};
use super::records::{self, Books, WaitRead};
use super::{LockEntry, TaskDump, TaskEntry, TaskKind, TaskState, WaitsOn};
use crate::task_id::TaskId;

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
    waits: HashMap<TaskId, Vec<records::NotedWait>>,
    /// By the address of the lock's book: the sequence of its last write,
    /// and the holder it wrote, as one of this pass's readings saw it (any
    /// one will do: every reading of the first pass comes before every
    /// reading of the second).
    locks: HashMap<usize, (u64, Holder)>,
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
                    (None, records::RUNNING) => TaskState::Running { worker: None },
                    (None, records::WAITING) => TaskState::Waiting,
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
            let seen = match &wait.on {
                WaitRead::Lock(seen)
                | WaitRead::Task {
                    queued_on: Some(seen),
                    ..
                } => seen,
                _ => continue,
            };
            locks.entry(seen.addr).or_insert((seen.seq, seen.holder));
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

    fn lock(&self, lock: &LockSeen) -> Option<(u64, Holder)> {
        self.locks.get(&lock.addr).copied()
    }
}

impl TaskDump {
    /// Collects the dump of the pool named `pool`, whose workers are named
    /// by `worker_name`, from its books; `live` reads its count of
    /// accepted tasks not yet over, `timer_waits` the tasks waiting on
    /// sleeps with their deadlines; `now` is the time by the pool's clock.
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
        timer_waits: impl FnOnce() -> Vec<(TaskId, Instant)>,
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
        let same_holder = |lock: &LockSeen| {
            let reading = second.lock(lock);
            reading.is_some()
                && first.lock(lock) == reading
                && match reading {
                    Some((_, Holder::Task(holder))) => both(holder),
                    _ => true,
                }
        };
        let mut timers: HashMap<TaskId, Vec<Instant>> = HashMap::new();
        for (task, deadline) in timer_waits() {
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
                    let lock = |seen: &LockSeen| {
                        let (seq, holder) = second.lock(seen).expect("read in the pass");
                        LockEntry {
                            seen: LockSeen {
                                seq,
                                holder,
                                ..*seen
                            },
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
}
