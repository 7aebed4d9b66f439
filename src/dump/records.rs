//! The records behind stall reports and task dumps: what each pool worker
//! is polling, which tasks have waited, and on what. Each task carries its
//! own [`TaskRecord`] in its metadata; the rest of the dump reads them.
//!
//! It is kept off the fast path:
//!
//! - A worker notes the task it polls in its own [`Running`] record, a
//!   seqlock of plain stores on its own cache line: three when a poll
//!   starts, one when it ends.
//! - A task enters its worker's book only when a poll of it first returns
//!   `Pending`: most tasks finish in their first poll and never do. It
//!   leaves the book when its future is dropped, or its metadata (which
//!   async-task may free without dropping the future). A simulation's
//!   books also keep a waker of each task, to cancel what is left when
//!   the world ends.
//! - What a task waits on is noted only when one of viaduct's lock or
//!   handle futures returns `Pending` in it on a pool worker, in the
//!   task's own [`WaitList`] (its poller's, in its cache), and taken out
//!   when that future is ready or dropped. A sleep notes nothing: its
//!   timer entry names the waiting task, and dumps read the timers'
//!   wheels.
//! - A strand's [`LockBook`](super::lock::LockBook) notes which task holds
//!   it: one store when a section or guard starts, one when it ends.

use std::cell::UnsafeCell;
use std::panic::Location;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use std::task::Waker;

use crossbeam_utils::CachePadded;

use super::lock::{LockRef, LockSeen};
use crate::loom::{fence, lock_std, AtomicPtr, Ordering::*};
use crate::slab::Slab;
use crate::task_id::{TaskId, TaskKind};
use std::sync::atomic::AtomicU8;

/// A task's state as a dump shows it, in [`TaskRecord::state`].
pub(crate) const QUEUED: u8 = 0;
pub(crate) const RUNNING: u8 = 1;
pub(crate) const WAITING: u8 = 2;
/// Beside [`QUEUED`]: this wake-up came from the task itself while it was
/// being polled (a yield), so its executor should run others first.
pub(crate) const YIELDED: u8 = 4;
/// The bits of [`TaskRecord::state`] that say queued, running or waiting.
const STATE: u8 = 3;

/// What stall reports and dumps read of a task, kept in its metadata: its
/// name, its state, and the worker book it is in.
pub(crate) struct TaskRecord {
    /// The worker book the task is in, if it has waited on a pool worker,
    /// and its key there (`book_key`). Set by the poll that books the task,
    /// taken when its future is dropped (both hold the task's runnable, one
    /// at a time), or by the record's `Drop` (async-task may free a task
    /// without dropping its future), which leaves the book before anything
    /// else goes: a dump reads the record under the book's lock. Two
    /// fields, not one `Option<(Arc, u32)>`, so that the key shares a word
    /// with the bytes below.
    book: UnsafeCell<Option<Arc<CachePadded<WorkerBook>>>>,
    book_key: UnsafeCell<u32>,
    pub(crate) id: TaskId,
    /// Where the task was spawned (`#[track_caller]` on every spawn path).
    pub(crate) location: &'static Location<'static>,
    /// What runs in the task: user code, or a queue viaduct drains.
    pub(crate) kind: TaskKind,
    /// The task's lifecycle flags (aborted, done: see `task::info`), here
    /// to share the record's last word.
    pub(crate) flags: AtomicU8,
    /// The task's rare part (see `task::info`), null until something
    /// needs it: a hop, a fault, or a wait that dumps list. The task makes
    /// and frees it; the record reaches what dumps read of it, which comes
    /// first in it.
    pub(crate) rare: std::sync::atomic::AtomicPtr<RareRecord>,
    /// [`QUEUED`] (with [`YIELDED`] if the task woke itself), [`RUNNING`]
    /// or [`WAITING`]. Written only by whoever holds the task's runnable
    /// (the schedule function, the poll), with plain stores; a dump's
    /// reading may be stale, never torn.
    pub(crate) state: AtomicU8,
}

impl TaskRecord {
    pub(crate) fn new(id: TaskId, location: &'static Location<'static>, kind: TaskKind) -> Self {
        TaskRecord {
            book: UnsafeCell::new(None),
            book_key: UnsafeCell::new(0),
            id,
            location,
            kind,
            flags: AtomicU8::new(0),
            rare: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
            state: AtomicU8::new(QUEUED),
        }
    }
}

/// The task a pool worker is polling: written by the worker only, read by
/// the stall watcher and dumps.
///
/// A poll costs three stores when it starts and one when it ends, the
/// fewest that let a reader tell a task's id from another's location:
///
/// - `seq` is odd while a poll is open, and `task` and `location` then name
///   it: they were stored before `seq` turned odd (a release store).
/// - An outermost poll writes its fields while `seq` is even (no poll), then
///   turns it odd; it ends with one store that turns it even.
/// - A nested poll first turns `seq` even (no poll to read meanwhile),
///   writes its fields, and turns it odd; it ends by writing the outer
///   poll's fields back the same way.
/// - A release fence sits between the even store and the fields' stores.
///   A reader that read an odd `seq`, then a field from a later write,
///   then `seq` again after an acquire fence, sees the even store (or a
///   later one) and retries: a reading pairs one write's fields.
///
/// It has one writer: the pool worker, or the thread stepping the
/// simulation's virtual worker, whose record it is. The loom model below
/// checks it.
#[derive(Default)]
pub(crate) struct Running {
    /// Bumped at every poll's start and end (a nested poll's, twice).
    seq: crate::loom::AtomicU64,
    /// The task's id and kind (see [`tagged`]).
    task: crate::loom::AtomicU64,
    location: AtomicPtr<Location<'static>>,
}

/// What a reader of a [`Running`] saw.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Seen {
    /// Changes whenever a poll starts or ends on the worker.
    pub(crate) seq: u64,
    pub(crate) task: Option<(TaskId, &'static Location<'static>, TaskKind)>,
}

/// Where a [`Running`] record keeps what runs in the task, above its id
/// (ids stay far below 2^62: a block of 1024 per thread at a time).
const KIND_SHIFT: u32 = 62;

/// The task word of a [`Running`] record for `info`.
fn tagged(id: TaskId, kind: TaskKind) -> u64 {
    id.as_u64() | (kind as u64) << KIND_SHIFT
}

fn untagged(word: u64) -> Option<(TaskId, TaskKind)> {
    let id = TaskId::from_u64(word & ((1 << KIND_SHIFT) - 1))?;
    let kind = match word >> KIND_SHIFT {
        0 => TaskKind::Spawned,
        1 => TaskKind::StrandRunner,
        _ => TaskKind::PriorityPump,
    };
    Some((id, kind))
}

impl Running {
    /// Notes a poll of `task` from `location`, and returns the poll it is
    /// nested in, if any, for [`close`](Self::close).
    #[inline]
    fn open(&self, task: u64, location: *mut Location<'static>) -> Option<Outer> {
        let mut seq = self.seq.load(Relaxed);
        let outer = (seq % 2 == 1).then(|| {
            let outer = Outer(self.task.load(Relaxed), self.location.load(Relaxed));
            seq = seq.wrapping_add(1);
            self.seq.store(seq, Relaxed);
            outer
        });
        self.publish(seq, task, location);
        outer
    }

    /// Ends the poll that `open` noted, and notes `outer` again if it was
    /// nested.
    #[inline]
    fn close(&self, outer: Option<Outer>) {
        let seq = self.seq.load(Relaxed).wrapping_add(1);
        self.seq.store(seq, Release);
        if let Some(Outer(task, location)) = outer {
            self.publish(seq, task, location);
        }
    }

    /// Writes the fields while `seq` (even) says that no poll is open, and
    /// opens theirs.
    #[inline]
    fn publish(&self, seq: u64, task: u64, location: *mut Location<'static>) {
        fence(Release);
        self.task.store(task, Relaxed);
        self.location.store(location, Relaxed);
        self.seq.store(seq.wrapping_add(1), Release);
    }

    /// A consistent reading: the open poll's task, or none.
    pub(crate) fn read(&self) -> Seen {
        loop {
            let seq = self.seq.load(Acquire);
            // Read whatever the parity: the loom model explores the race
            // only if the reader touches the fields in every reading.
            let (task, location) = (self.task.load(Relaxed), self.location.load(Relaxed));
            fence(Acquire);
            if seq % 2 == 0 {
                return Seen { seq, task: None };
            }
            if self.seq.load(Relaxed) == seq {
                let task = untagged(task).map(|(id, kind)| {
                    // SAFETY: every location stored is a `&'static
                    // Location` (see `enter_poll`), stored with its task
                    // id; this reading pairs one write's fields.
                    (id, unsafe { &*location }, kind)
                });
                return Seen { seq, task };
            }
            crate::loom::spin_loop();
        }
    }
}

/// The poll another one is nested in: its task word and location.
#[derive(Clone, Copy)]
struct Outer(u64, *mut Location<'static>);

/// A pool worker's records: the task it polls, and the tasks first seen
/// waiting on it.
#[derive(Default)]
pub(crate) struct WorkerBook {
    pub(crate) running: Running,
    tasks: Mutex<Slab<Entry>>,
    /// In a simulation's books, the address of its tracker header: a task
    /// it counts keeps a waker here too, for the end of the world.
    world: usize,
    /// The world has ended (written under the `tasks` lock): its tasks
    /// entering now are aborted instead.
    ended: std::sync::atomic::AtomicBool,
}

/// A task in a book, and in a simulation's, a waker of it and its aborted
/// flag.
struct Entry {
    task: TaskPtr,
    world: Option<(Waker, Flag)>,
}

/// A bit of a task's flags (its aborted bit), by address: its users say
/// what keeps the task alive while they set it.
#[derive(Clone, Copy)]
pub(crate) struct Flag {
    word: NonNull<AtomicU8>,
    bit: u8,
}

// SAFETY: used only as a `&AtomicU8`, which is `Send + Sync`, while the
// task is alive (see each use).
unsafe impl Send for Flag {}
// SAFETY: as above.
unsafe impl Sync for Flag {}

impl Flag {
    pub(crate) fn new(word: &AtomicU8, bit: u8) -> Flag {
        Flag {
            word: NonNull::from(word),
            bit,
        }
    }

    /// # Safety
    ///
    /// The task is alive.
    unsafe fn set(self) {
        // SAFETY: the caller's contract.
        unsafe { self.word.as_ref() }.fetch_or(self.bit, AcqRel);
    }
}

/// A booked task's metadata. Only read under its book's lock, which the
/// task takes to leave the book before its metadata is dropped (see
/// `TaskRecord::book`).
#[derive(Clone, Copy)]
struct TaskPtr(NonNull<TaskRecord>);

// SAFETY: a `TaskPtr` is only dereferenced under its book's lock, while
// the task is in the book, and so alive (see `TaskPtr`); what it reads
// there is atomics and fields fixed at creation (its book, its key and its
// rare part are read only as `TaskRecord`'s own methods allow).
unsafe impl Send for TaskPtr {}

/// A pool's records, one per worker.
///
/// Each book is shared on its own: a booked task keeps its worker's book
/// alive (it may outlive the pool), and counting it there rather than on
/// the pool's whole set keeps the workers off one another's cache lines.
pub(crate) struct Books(Box<[Arc<CachePadded<WorkerBook>>]>);

impl Books {
    /// The books of `workers` workers. A simulation's pass the address
    /// of its tracker header as `world` (0 otherwise): each task it
    /// counts keeps a waker in them, for [`abort_all`](Books::abort_all).
    pub(crate) fn new(workers: usize, world: usize) -> Arc<Books> {
        let book = || {
            Arc::new(CachePadded::new(WorkerBook {
                world,
                ..Default::default()
            }))
        };
        Arc::new(Books((0..workers).map(|_| book()).collect()))
    }

    /// The world has ended: marks every task in these books that kept a
    /// waker aborted, and hands the wakers
    /// back (each once, in task id order) to be woken outside the locks:
    /// each task's next poll drops its future, or its executor drops it, as
    /// `JoinHandle::abort` does. The world's tasks that wait from now on
    /// are aborted as they do (see [`left_pending`]).
    pub(crate) fn abort_all(&self) -> Vec<(TaskId, Waker)> {
        let mut all = Vec::new();
        for book in self.workers() {
            let mut tasks = lock_std(&book.tasks);
            book.ended.store(true, Relaxed);
            for entry in tasks.iter_mut() {
                if let Some((waker, aborted)) = entry.world.take() {
                    // SAFETY: the task is in the book, under its lock, and
                    // its waker is in hand: alive.
                    let record = unsafe { entry.task.0.as_ref() };
                    // SAFETY: as above.
                    unsafe { aborted.set() };
                    all.push((record.id, waker));
                }
            }
        }
        all.sort_unstable_by_key(|&(id, _)| id);
        all
    }

    pub(crate) fn workers(&self) -> impl Iterator<Item = &WorkerBook> {
        self.0.iter().map(|b| &***b)
    }
}

/// A task in a book: what a dump lists of it.
pub(crate) struct Booked {
    /// What it waits on, in the order the waits began.
    pub(crate) waits: Vec<NotedWait>,
    pub(crate) id: TaskId,
    pub(crate) location: &'static Location<'static>,
    pub(crate) kind: TaskKind,
    pub(crate) state: u8,
}

impl WorkerBook {
    /// Every task in this book.
    pub(crate) fn tasks(&self) -> Vec<Booked> {
        let tasks = lock_std(&self.tasks);
        tasks
            .iter()
            .map(|t| {
                // SAFETY: the task is in the book, under its lock: alive.
                let record = unsafe { t.task.0.as_ref() };
                Booked {
                    waits: record
                        .waits_if_any()
                        .map(WaitList::read)
                        .unwrap_or_default(),
                    id: record.id,
                    location: record.location,
                    kind: record.kind,
                    state: record.state.load(Relaxed) & STATE,
                }
            })
            .collect()
    }
}

impl TaskRecord {
    /// Leaves the book, if in one, before the record or what it points
    /// to goes. Until this has taken the book's lock a dump may still read
    /// the record there, which is why it is taken.
    pub(crate) fn leave_book_to_go(&mut self) {
        // SAFETY: `&mut self`: nobody holds the runnable any more, so
        // nobody else writes the book (see `book`).
        unsafe { self.leave_book() };
    }

    /// Leaves the book, if in one. Inlined: most tasks never waited, and
    /// every task ends here twice (its future, then its metadata).
    ///
    /// # Safety
    ///
    /// The caller holds the task's runnable, or drops the record (see
    /// `book`).
    #[inline]
    unsafe fn leave_book(&self) {
        // SAFETY: the caller's contract makes this the only access.
        if unsafe { (*self.book.get()).is_some() } {
            // SAFETY: as above.
            unsafe { self.leave_book_now() }
        }
    }

    /// # Safety
    ///
    /// As for [`leave_book`](Self::leave_book).
    #[cold]
    #[inline(never)]
    unsafe fn leave_book_now(&self) {
        // SAFETY: as above.
        if let Some(book) = unsafe { (*self.book.get()).take() } {
            // SAFETY: as above.
            let key = unsafe { *self.book_key.get() };
            let left = lock_std(&book.tasks).remove(key as usize);
            // Dropped unlocked: a waker's drop may run an executor's code.
            drop(left);
        }
    }
}

/// The worker running on this thread: its book.
pub(crate) struct Here {
    book: Arc<CachePadded<WorkerBook>>,
}

impl Here {
    pub(crate) fn new(books: &Books, index: usize) -> Here {
        Here {
            book: books.0[index].clone(),
        }
    }

    #[inline]
    fn running(&self) -> &Running {
        &self.book.running
    }
}

/// The records of the worker running this thread, in its context.
#[inline]
fn records_here() -> *const Here {
    crate::context::with(|c| c.worker_records.get()).cast()
}

/// Marks this thread as the worker `here` describes, until the returned
/// guard drops; `here` must outlive it (it lives in the worker's frame, or
/// in a simulation that polls one task as one of its virtual workers).
pub(crate) fn enter_worker(here: &Here) -> WorkerGuard {
    WorkerGuard(
        crate::context::with(|c| c.worker_records.replace((here as *const Here).cast())).cast(),
    )
}

/// Marks the thread as it was before when dropped (a simulation may run
/// inside a pool's task). `enter_worker` sets the context's worker records
/// to a `Here` that outlives this guard, on this thread only, and guards
/// drop in the reverse order: non-null worker records are live.
pub(crate) struct WorkerGuard(*const Here);

impl Drop for WorkerGuard {
    fn drop(&mut self) {
        crate::context::with(|c| c.worker_records.set(self.0.cast()));
    }
}

/// A task's poll in progress on a pool worker: undone when dropped.
pub(crate) struct Polling {
    here: NonNull<Here>,
    /// The poll this one is nested in, to note again when it ends.
    outer: Option<Outer>,
}

impl Polling {
    #[inline]
    fn here(&self) -> &Here {
        // SAFETY: the `Here` of the worker running this thread, which
        // outlives every poll the worker makes.
        unsafe { self.here.as_ref() }
    }
}

/// Notes that `record`'s task is being polled (on a pool worker, in its
/// records, `here`; everywhere, in its state).
///
/// # Safety
///
/// `here` is null or the context's worker records, read during this poll
/// (non-null ones are live: see `WorkerGuard`).
#[inline]
pub(crate) unsafe fn enter_poll(record: &TaskRecord, here: *const ()) -> Option<Polling> {
    record.state.store(RUNNING, Relaxed);
    // SAFETY: the caller's contract.
    unsafe { open_poll(here, tagged(record.id, record.kind), record.location) }
}

/// Notes, on a pool worker, that a strand's runner is running the queued
/// `with` section `id`, called at `location`: dumps list it as a running
/// task while the returned guard lives, nested in the runner's poll.
#[inline]
pub(crate) fn enter_section(id: TaskId, location: &'static Location<'static>) -> Option<Polling> {
    // SAFETY: the context's worker records, read now.
    unsafe {
        open_poll(
            records_here().cast(),
            tagged(id, TaskKind::Spawned),
            location,
        )
    }
}

/// Opens a poll of `task` from `location` in the worker records `here`,
/// if any.
///
/// # Safety
///
/// As for [`enter_poll`].
#[inline]
unsafe fn open_poll(
    here: *const (),
    task: u64,
    location: &'static Location<'static>,
) -> Option<Polling> {
    let here = NonNull::new(here.cast::<Here>().cast_mut())?;
    // SAFETY: non-null worker records are live (see `WorkerGuard`).
    let running = unsafe { here.as_ref() }.running();
    let location = location as *const Location<'static> as *mut Location<'static>;
    let outer = running.open(task, location);
    Some(Polling { here, outer })
}

impl Drop for Polling {
    #[inline]
    fn drop(&mut self) {
        self.here().running().close(self.outer);
    }
}

/// A task that enters a book after a poll: its own waker, its aborted
/// flag, and whether the simulation whose tracker header is at a given
/// address counts it.
pub(crate) struct Pending<'a, C> {
    pub(crate) waker: &'a Waker,
    pub(crate) aborted: Flag,
    pub(crate) counted_by: C,
}

/// After a poll that returned `Pending`: the task is waiting (unless a
/// wake-up queues it again, which comes after this), and enters the book
/// of the worker that polled it if it is in none.
#[inline]
pub(crate) fn left_pending(
    record: &TaskRecord,
    polling: Option<&Polling>,
    pending: Pending<'_, impl FnOnce(usize) -> bool>,
) {
    record.state.store(WAITING, Relaxed);
    // SAFETY: whoever polls the task holds its runnable, as whoever drops
    // it does: one at a time.
    let booked = unsafe { (*record.book.get()).is_some() };
    // Checked here, inline: a task waits again and again, but enters a
    // book once.
    if let Some(polling) = polling.filter(|_| !booked) {
        enter_book(polling.here(), record, Some(pending));
    }
}

/// Lists `record`'s task, whose poll is under way on this thread and
/// blocks there (a `block_on`, a scope's wait), in this pool worker's
/// book if it is in none: a task that has not yet returned `Pending` is
/// listed only while a worker runs it, and helping the pool while blocked,
/// the worker runs others.
pub(crate) fn list_while_blocked(record: &TaskRecord) {
    // SAFETY: non-null worker records in the context are live (see
    // `WorkerGuard`).
    if let Some(here) = unsafe { records_here().as_ref() } {
        enter_book(here, record, None::<Pending<'_, fn(usize) -> bool>>);
    }
}

/// Enters `record`'s task, whose poll is under way on this thread, in
/// `here`'s book if it is in none. A simulation's book keeps a waker of
/// each task its world counts, to cancel it when the world ends, so it
/// takes a task only when it is `pending`, with the task's own waker.
#[inline(never)]
fn enter_book(
    here: &Here,
    record: &TaskRecord,
    pending: Option<Pending<'_, impl FnOnce(usize) -> bool>>,
) {
    // SAFETY: whoever polls the task holds its runnable, as whoever drops
    // it does: one at a time.
    let booked_in = unsafe { &mut *record.book.get() };
    let book = &here.book;
    if booked_in.is_some() || (book.world != 0 && pending.is_none()) {
        return;
    }
    let worlds = pending.and_then(|p| {
        (book.world != 0 && (p.counted_by)(book.world)).then_some((p.waker, p.aborted))
    });
    let mut tasks = lock_std(&book.tasks);
    if let Some((waker, aborted)) = worlds.filter(|_| book.ended.load(Relaxed)) {
        // First waits after its world ended (in a drop the end ran, or
        // the poll the last handle went in): aborted, as the rest were.
        drop(tasks);
        // SAFETY: the task is being polled here: alive.
        unsafe { aborted.set() };
        waker.wake_by_ref();
        return;
    }
    let key = tasks.insert(Entry {
        task: TaskPtr(NonNull::from(record)),
        world: worlds.map(|(waker, aborted)| (waker.clone(), aborted)),
    });
    let Ok(key) = u32::try_from(key) else {
        // Never left in the book unbooked: a dump would read it after it
        // is gone.
        tasks.remove(key);
        panic!("more than 2^32 tasks wait on one worker");
    };
    drop(tasks);
    // SAFETY: as above.
    unsafe { *record.book_key.get() = key };
    *booked_in = Some(book.clone());
}

/// The task's future is being dropped: it leaves its book.
#[inline]
pub(crate) fn task_ended(record: &TaskRecord) {
    // SAFETY: whoever drops the task's future holds its runnable.
    unsafe { record.leave_book() };
}

/// The task a noted wait waits for, as a dump reads it: `read` called
/// with `task` (a task's metadata or a queued section's completion,
/// erased), which is alive while the wait is in its list (the handle that
/// noted the wait takes it out before it lets go of the task).
#[derive(Clone, Copy)]
pub(crate) struct TaskRef {
    pub(crate) task: NonNull<()>,
    /// # Safety
    ///
    /// Called with `task` only, while the wait is in its list.
    pub(crate) read: unsafe fn(NonNull<()>) -> TaskSeen,
}

/// What [`TaskRef::read`] found.
pub(crate) struct TaskSeen {
    /// The strand the task is queued on, if it is a strand's.
    pub(crate) queued_on: Option<LockSeen>,
    /// The task running it, if that is another: a queued section runs in
    /// its strand's runner, where what it waits on is noted.
    pub(crate) run_by: Option<TaskId>,
    /// It is over: its future was dropped, or the section ran or was
    /// dropped (its handle will say so when polled).
    pub(crate) ended: bool,
}

// SAFETY: `task` is only passed to `read`, which uses it as a shared
// reference to a `Sync` value while it is alive.
unsafe impl Send for TaskRef {}
// SAFETY: as above.
unsafe impl Sync for TaskRef {}

/// The tasks of a scope that a dump may list, for the wait of the task
/// that opened it: each enters when its first poll returns `Pending` (one
/// that finishes in its first poll is never listed, and holds nothing),
/// and leaves when it ends.
#[derive(Default)]
pub(crate) struct ScopeBook(Mutex<Slab<TaskId>>);

impl ScopeBook {
    pub(crate) fn enter(&self, task: TaskId) -> usize {
        lock_std(&self.0).insert(task)
    }

    pub(crate) fn leave(&self, key: usize) {
        lock_std(&self.0).remove(key);
    }

    fn members(&self) -> Vec<TaskId> {
        lock_std(&self.0).iter().copied().collect()
    }
}

/// What a task waits on, as one of viaduct's futures notes it.
pub(crate) enum WaitOn {
    /// A `Guarded` lock or a strand. The wait holds the strand: a lock
    /// future that is forgotten leaves its wait noted, and the `Guarded`
    /// it borrowed may go.
    Lock(LockRef),
    /// Another task's handle (or a queued section's). `task` is read only
    /// while the wait is held in its list (under the list's lock, or being
    /// read in its first slot): the handle that noted the wait takes it
    /// out before it lets go of the task (every owner of a [`Noted`] does),
    /// so the task is alive.
    Task { id: TaskId, task: TaskRef },
    /// The tasks of a scope the waiting task opened.
    Scope(Arc<ScopeBook>),
}

/// A wait as a dump reads it.
#[derive(Clone)]
pub(crate) enum WaitRead {
    Lock(LockSeen),
    /// `ended`: the task's future has been dropped (its handle will say
    /// so when polled).
    Task {
        id: TaskId,
        queued_on: Option<LockSeen>,
        ended: bool,
    },
    /// The scope's listable tasks, when the wait was read.
    Scope(Vec<TaskId>),
}

/// One noted wait: `order` tells waits apart (each is noted with a new
/// one), and orders them within a task.
#[derive(Clone)]
pub(crate) struct NotedWait {
    pub(crate) order: u64,
    pub(crate) on: WaitRead,
}

/// The waits of one task, noted by viaduct's futures as they return
/// `Pending` in it: made at its first, kept in its rare part
/// ([`RareRecord`]), and shared with the futures that noted them (a future
/// may outlive the task it waited in). Only that task's poller adds to it,
/// so its lock is rarely contended; a dump reads it under its worker
/// book's lock, while the task is in the book.
///
/// A lock wait is noted and taken out at every contended `lock`, so the
/// first wait of a task, the usual one, goes into a slot of its own
/// without a lock: noting it costs plain stores, and taking it out one
/// compare-and-swap. Waits noted while the slot is full go into a vector
/// under a mutex.
///
/// # The first slot
///
/// `first` says who may touch `first_wait`:
///
/// - `0`: empty. Only the task's poller fills it (so one thread at a
///   time): it writes the wait, then stores `order << 1` (release).
/// - `order << 1`: full. Nobody writes the wait. A dump reads it after
///   turning `first` into `order << 1 | 1` (*reading*) by compare-and-swap
///   (acquire), and stores `order << 1` back (release) when done. The
///   future that noted it takes it out after turning `first` into
///   [`EMPTYING`] by compare-and-swap from full (acquire), waiting out a
///   reading, then stores `0` (release).
///
/// So a dump never reads a wait that was taken out: the future that took
/// it out has waited for the reading to end, and only then lets go of
/// what the wait names (a lock, a task), which a dump then no longer
/// reads. The loom model `first_wait_is_never_read_after_it_is_taken_out`
/// checks it.
pub(crate) struct WaitList {
    first: crate::loom::AtomicU64,
    first_wait: crate::loom::UnsafeCell<Option<(WaitKey, WaitOn)>>,
    /// The order the next wait is noted with: written by the task's
    /// poller only.
    next_order: crate::loom::AtomicU64,
    rest: crate::loom::Mutex<Vec<(u64, WaitKey, WaitOn)>>,
}

/// `first` while the future that noted the first wait takes it out.
const EMPTYING: u64 = 1;

impl Default for WaitList {
    fn default() -> Self {
        WaitList {
            first: crate::loom::AtomicU64::new(0),
            first_wait: crate::loom::UnsafeCell::new(None),
            next_order: crate::loom::AtomicU64::new(0),
            rest: crate::loom::Mutex::new(Vec::new()),
        }
    }
}

// SAFETY: `first_wait` is touched as `first` says (see the type's docs),
// handed over with a release/acquire pair; a `WaitOn` is `Send`.
unsafe impl Sync for WaitList {}
// SAFETY: as above: the list owns its `Send` waits.
unsafe impl Send for WaitList {}

/// Tells a noted wait apart from the others in its list: the address of
/// what it waits on (a lock's book, a task's metadata, a scope's book).
/// Two waits with one key wait on the same thing, so taking out either
/// leaves the list as taking out the other would.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct WaitKey(usize);

impl WaitKey {
    /// The key of `what`, which must be the thing itself (a `&LockBook`,
    /// a `&TaskInfo`), not a reference to a reference on the stack.
    pub(crate) fn of<T>(what: &T) -> WaitKey {
        WaitKey(what as *const T as usize)
    }
}

impl WaitList {
    /// Notes `wait`, to be taken out by `key`; `true` if it went into the
    /// first slot. Called by the task's poller only.
    fn enter(&self, key: WaitKey, wait: WaitOn) -> bool {
        let order = self.next_order.load(Relaxed) + 1;
        self.next_order.store(order, Relaxed);
        // Acquire: the last wait's taking out is over.
        if self.first.load(Acquire) == 0 {
            // SAFETY: empty, and only the poller (this thread) fills it.
            unsafe { self.first_wait.with_mut(|w| *w = Some((key, wait))) };
            self.first.store(order << 1, Release);
            return true;
        }
        crate::loom::lock(&self.rest).push((order, key, wait));
        false
    }

    /// Takes out the wait noted by `key`, which went into the first slot
    /// if `first`.
    fn leave(&self, key: WaitKey, first: bool) {
        if !first {
            let mut rest = crate::loom::lock(&self.rest);
            let left = rest
                .iter()
                .position(|(_, k, _)| *k == key)
                .map(|i| rest.swap_remove(i));
            drop(rest);
            drop(left); // after the lock: it may hold the last `Arc` of a book
            return;
        }
        let mut spins = 0u32;
        loop {
            let now = self.first.load(Relaxed);
            debug_assert!(now >> 1 != 0, "the first wait was taken out twice");
            // Full, not being read: ours to empty. Acquire: a reading
            // that ended is over before the wait goes.
            if now & 1 == 0
                && self
                    .first
                    .compare_exchange_weak(now, EMPTYING, Acquire, Relaxed)
                    .is_ok()
            {
                break;
            }
            spins += 1;
            backoff(spins);
        }
        // SAFETY: `EMPTYING`: the slot is this thread's alone.
        let left = unsafe { self.first_wait.with_mut(Option::take) };
        self.first.store(0, Release);
        drop(left);
    }

    /// The first wait as a dump reads it, if there is one.
    fn read_first(&self) -> Option<NotedWait> {
        let mut spins = 0u32;
        let full = loop {
            let now = self.first.load(Relaxed);
            if now >> 1 == 0 {
                return None; // empty, or being emptied
            }
            if now & 1 == 0
                && self
                    .first
                    .compare_exchange_weak(now, now | 1, Acquire, Relaxed)
                    .is_ok()
            {
                break now;
            }
            // Another dump is reading it.
            spins += 1;
            backoff(spins);
        };
        /// Ends the reading, also if it unwinds.
        struct Done<'a>(&'a crate::loom::AtomicU64, u64);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.store(self.1, Release);
            }
        }
        let _done = Done(&self.first, full);
        // SAFETY: reading: nobody writes the slot until `_done` ends it.
        unsafe {
            self.first_wait.with_mut(|w| {
                w.as_ref()
                    // Being read, with the wait in the slot.
                    .map(|(_, wait)| NotedWait::read(full >> 1, wait))
            })
        }
    }

    /// The waits noted now, in the order they began.
    fn read(&self) -> Vec<NotedWait> {
        let mut read: Vec<NotedWait> = crate::loom::lock(&self.rest)
            .iter()
            // SAFETY: under the list's lock, with the wait in it.
            .map(|(order, _, wait)| unsafe { NotedWait::read(*order, wait) })
            .collect();
        read.extend(self.read_first());
        read.sort_by_key(|w| w.order);
        read
    }
}

impl NotedWait {
    /// How a dump reads `wait`, noted with `order`.
    ///
    /// # Safety
    ///
    /// The wait is in its list and held there while this runs: under the
    /// list's lock, or being read in the first slot. So the future that
    /// noted it has not taken it out, and what it names is alive.
    unsafe fn read(order: u64, wait: &WaitOn) -> NotedWait {
        NotedWait {
            order,
            on: match wait {
                WaitOn::Lock(book) => WaitRead::Lock(book.seen()),
                WaitOn::Task { id, task } => {
                    // SAFETY: the caller's contract (see `WaitOn::Task`).
                    let seen = unsafe { (task.read)(task.task) };
                    WaitRead::Task {
                        id: seen.run_by.unwrap_or(*id),
                        queued_on: seen.queued_on,
                        ended: seen.ended,
                    }
                }
                WaitOn::Scope(book) => WaitRead::Scope(book.members()),
            },
        }
    }
}

/// Spins a little, then yields the thread now and then: for waits on a
/// holder that is quick unless it was preempted.
fn backoff(spins: u32) {
    if spins % 64 == 0 && !cfg!(loom) {
        std::thread::yield_now();
    } else {
        crate::loom::spin_loop();
    }
}

/// What dumps read of a task's rare part: what the task waits on. First
/// in the rare part, so that the record's one pointer reaches both.
#[derive(Default)]
pub(crate) struct RareRecord {
    /// Null until one of viaduct's futures notes a wait in the task, then
    /// an `Arc<WaitList>` (from `Arc::into_raw`). Set only by the task's
    /// poller; read by dumps.
    waits: std::sync::atomic::AtomicPtr<WaitList>,
}

impl RareRecord {
    /// The task's wait list, if it has one.
    fn waits_if_any(&self) -> Option<&WaitList> {
        // SAFETY: a non-null pointer came from `Arc::into_raw` in `waits`,
        // and this holds that count until it drops.
        unsafe { self.waits.load(Acquire).as_ref() }
    }

    /// The task's wait list, made now if it had none: a new count of it.
    fn waits(&self) -> Arc<WaitList> {
        let mut list = self.waits.load(Acquire);
        if list.is_null() {
            // Only the task's poller gets here: nobody races this store.
            list = Arc::into_raw(Arc::new(WaitList::default())).cast_mut();
            self.waits.store(list, Release);
        }
        // SAFETY: `list` came from `Arc::into_raw` and this holds that
        // count: one more is taken for the caller.
        unsafe {
            Arc::increment_strong_count(list);
            Arc::from_raw(list)
        }
    }
}

impl Drop for RareRecord {
    fn drop(&mut self) {
        let list = *self.waits.get_mut();
        if !list.is_null() {
            // SAFETY: this part's count, from `Arc::into_raw`, given back
            // once.
            drop(unsafe { Arc::from_raw(list) });
        }
    }
}

impl TaskRecord {
    /// The task's wait list, if it has one.
    fn waits_if_any(&self) -> Option<&WaitList> {
        // SAFETY: a non-null pointer is the task's rare part, which the
        // task frees only after it has left its book (see `book`), and
        // whoever reads the record holds the task alive or reads it in
        // its book under the book's lock.
        unsafe { self.rare.load(Acquire).as_ref() }?.waits_if_any()
    }
}

impl Drop for TaskRecord {
    fn drop(&mut self) {
        self.leave_book_to_go();
    }
}

/// A wait noted in its task's [`WaitList`], kept by the future that waits,
/// which takes it out by its key when it is done, and before it goes: one
/// word, which every `JoinHandle` and lock request carries. The word is a
/// count of the list (from `Arc::into_raw`) with [`IN_FIRST`] set if the
/// wait went into the list's first slot, or 0.
#[derive(Default)]
pub(crate) struct Noted(usize);

/// In [`Noted`]'s word: the wait is in its list's first slot. A list is
/// aligned to 8, so its address leaves the bit free.
const IN_FIRST: usize = 1;

impl Noted {
    /// The list the wait is noted in, if any.
    fn list(&self) -> Option<&WaitList> {
        // SAFETY: a nonzero word holds a count of the list (see the type).
        (self.0 != 0).then(|| unsafe { &*((self.0 & !IN_FIRST) as *const WaitList) })
    }

    /// Takes the noted wait's list out: the count, and whether the wait is
    /// in its first slot.
    fn take(&mut self) -> Option<(Arc<WaitList>, bool)> {
        let word = std::mem::take(&mut self.0);
        (word != 0).then(|| {
            // SAFETY: a nonzero word holds a count of the list, from
            // `Arc::into_raw`, given back once (the word is now 0).
            let list = unsafe { Arc::from_raw((word & !IN_FIRST) as *const WaitList) };
            (list, word & IN_FIRST != 0)
        })
    }

    /// Notes that `task` (the record of the task being polled on this
    /// thread, if any, with its rare part, made on demand) waits on what
    /// `what` says, by `key`: once per task, so that a future handed to
    /// another task, or to a thread outside the pools, is listed as the
    /// wait of whoever polls it now, not of the task that polled it first.
    #[inline]
    pub(crate) fn waiting<'a>(
        &mut self,
        task: Option<(&'a TaskRecord, impl FnOnce() -> &'a RareRecord)>,
        key: WaitKey,
        what: impl FnOnce() -> WaitOn,
    ) {
        if let Some(noted_in) = self.list() {
            if task
                .as_ref()
                .and_then(|(record, _)| record.waits_if_any())
                .is_some_and(|w| std::ptr::eq(w, noted_in))
            {
                return;
            }
            self.done(key);
        }
        let Some((_, rare)) = task else {
            return;
        };
        if records_here().is_null() {
            return; // not a pool's or a simulation's worker: no dump lists the task
        }
        let list = rare().waits();
        let first = list.enter(key, what());
        self.0 = Arc::into_raw(list) as usize | if first { IN_FIRST } else { 0 };
    }

    /// The wait noted by `key` is over.
    #[inline]
    pub(crate) fn done(&mut self, key: WaitKey) {
        if let Some((list, first)) = self.take() {
            list.leave(key, first);
        }
    }
}

impl Drop for Noted {
    fn drop(&mut self) {
        // Its owner's `Drop` takes the wait out: a wait left in the list
        // would name a wait that no longer is, and a dump could report a
        // cycle that is not there.
        debug_assert!(self.0 == 0, "a noted wait outlived its future");
        drop(self.take());
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::dump::lock::{Holder, LockBook, LockKind};
    use crate::loom::Arc;
    use loom::thread;

    #[track_caller]
    fn here() -> &'static Location<'static> {
        Location::caller()
    }

    /// A reader racing a worker's polls (a poll, a poll nested in it, both
    /// ending) sees each task with its own location or no task, never a
    /// mix of two writes; a task exactly when the sequence is odd; and a
    /// sequence that only grows and changes with the task.
    #[test]
    fn running_readings_are_never_torn() {
        let (first, nested) = (here(), here());
        let as_ptr = |l: &'static Location<'static>| l as *const _ as *mut Location<'static>;
        loom::model(move || {
            let running = Arc::new(Running::default());
            let worker = {
                let running = running.clone();
                thread::spawn(move || {
                    let outermost = running.open(1, as_ptr(first));
                    assert!(outermost.is_none());
                    let outer = running.open(2, as_ptr(nested));
                    running.close(outer);
                    running.close(outermost);
                })
            };
            let consistent = |seen: Seen| match seen.task {
                None => true,
                Some((id, at, _)) => {
                    (id.as_u64() == 1 && std::ptr::eq(at, first))
                        || (id.as_u64() == 2 && std::ptr::eq(at, nested))
                }
            };
            let a = running.read();
            let b = running.read();
            assert!(consistent(a) && consistent(b), "{a:?} {b:?}");
            assert_eq!(a.task.is_some(), a.seq % 2 == 1, "{a:?}");
            assert_eq!(b.task.is_some(), b.seq % 2 == 1, "{b:?}");
            assert!(b.seq >= a.seq);
            if a.seq == b.seq {
                assert_eq!(a.task, b.task);
            }
            worker.join().unwrap();
            let last = running.read();
            assert_eq!(last, Seen { seq: 6, task: None });
        });
    }

    /// A dump reads a task's waits while the future that noted the first
    /// one takes it out and then lets go of the lock it named (here: marks
    /// its book held by "nobody could", which a reading after the taking
    /// out would see), and the task's poller notes two more waits, one of
    /// them in the emptied first slot. The dump reads each wait whole or
    /// not at all, never after it was taken out, and never a slot being
    /// written.
    #[test]
    fn first_wait_is_never_read_after_it_is_taken_out() {
        let location = here();
        loom::model(move || {
            let list = Arc::new(WaitList::default());
            let gone = std::sync::Arc::new(LockBook::new(location, false));
            let other = std::sync::Arc::new(LockBook::new(location, true));
            let lock_ref = |book: &std::sync::Arc<LockBook>| {
                LockRef::new(book.clone(), |b| b, || LockKind::Strand)
            };
            assert!(list.enter(WaitKey::of(&*gone), WaitOn::Lock(lock_ref(&gone))));
            let dump = {
                let list = list.clone();
                let gone = std::sync::Arc::as_ptr(&gone) as usize;
                thread::spawn(move || {
                    for wait in list.read() {
                        if let WaitRead::Lock(seen) = wait.on {
                            // The first wait on it, noted before it went.
                            if seen.addr == gone && wait.order == 1 {
                                assert_eq!(
                                    seen.holder,
                                    Holder::Free,
                                    "read after it was taken out"
                                );
                            }
                        }
                    }
                })
            };
            list.leave(WaitKey::of(&*gone), true);
            assert!(gone.taken(None).is_ok());
            let first = list.enter(WaitKey::of(&*other), WaitOn::Lock(lock_ref(&other)));
            let second = list.enter(WaitKey::of(&*gone), WaitOn::Lock(lock_ref(&gone)));
            assert!(first && !second, "the emptied slot takes the next wait");
            list.leave(WaitKey::of(&*other), first);
            list.leave(WaitKey::of(&*gone), second);
            dump.join().unwrap();
            assert!(list.read().is_empty());
        });
    }
}
