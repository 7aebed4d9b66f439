//! Strands: serial executors over any executor, and what is built on them.
//!
//! - [`Strand`] runs what is submitted to it one at a time, in submission
//!   order, on the executor it decorates, and owns no thread (asio's strand,
//!   folly's `SerialExecutor`).
//! - [`Guarded<T>`] is data owned by a strand: the strand as an async mutex,
//!   with sections that run on the strand ([`Guarded::with`]) or in the
//!   caller's task ([`Guarded::lock`]).
//! - [`KeyedStrands<K>`] gives each key its own strand on demand (serial
//!   tags) and frees it when the key goes idle.
//!
//! # How a strand runs
//!
//! Submissions (task runnables, posted closures, queued `with` sections,
//! lock requests) go onto a
//! lock-free stack (see `queue.rs`) with one atomic operation. A strand
//! has one *runner*: a long-lived task on the inner
//! executor that takes the whole stack with one swap, reverses it into a
//! FIFO batch and runs it. It is made the first time something queued
//! needs it, so a strand that is only locked, or whose sections all run
//! on the spot, has none. When the stack is empty the runner marks the
//! strand idle and sleeps; the next submission wakes it, so an idle strand
//! runs a submission at once and no new task is made per batch. After
//! `BUDGET` (128) items in one poll the runner wakes itself and returns, which
//! puts it behind the other work of its executor: a flooded strand never
//! holds a thread for long.
//!
//! # Ground rules
//!
//! 1. A strand has at most one *owner*; the `OWNED` bit of the queue's head
//!    says whether it has one. Owners are: the runner, while it is scheduled
//!    or being polled; a lock request, from its grant (or from finding the
//!    strand idle) until its guard or its lock future drops; a `with`
//!    section run on the spot, by a task of the inner executor that found
//!    the strand idle; and a submitter, between the push that found the
//!    strand idle and its call that starts the runner.
//! 2. Only the owner takes batches, touches the batch being run and the
//!    counters, makes the runner (once, at its first start), and runs
//!    sections; so sections never overlap and run in the order they were
//!    taken.
//! 3. Ownership moves only by: a push or `try_acquire` that finds the strand
//!    idle (acquire); a take that finds the stack empty (release, the
//!    strand is idle), or, on a covered strand, the `uncover` that clears
//!    the cover and gives the strand up; waking the runner; granting a
//!    waiter. An owner that
//!    wakes the runner or grants a waiter touches nothing of the strand
//!    afterwards.
//! 4. The runner is woken only by an owner handing the strand over (or by
//!    itself, to yield), so whenever it is polled it owns the strand. It
//!    stops owning it by releasing it, or by granting a waiter (the strand
//!    is then *parked* until the guard drops).
//! 5. An owner other than the runner passes the strand on with `hand_on`:
//!    it grants the next waiters itself (a lock hand-off costs no trip
//!    through the executor), and wakes the runner at the first task.
//!
//! # Shutdown
//!
//! 1. A strand is never closed by its executor's closing: accepted work
//!    still runs, as on the executor itself. [`Executor::close`] on the
//!    strand refuses new tasks (as does a closed inner executor).
//! 2. If the inner executor throws the runner away (a pool shut down with
//!    `shutdown_now`, or one that terminated), the runner's drop, as owner,
//!    marks the strand *dead*: from then on it has no runner, and every
//!    owner that would start one drains the queue instead. Tasks and
//!    posted closures are dropped (their handles say `Cancelled`), and
//!    lock requests are still granted in their turn: a lock needs no
//!    executor, so a `Guarded` stays usable as a lock. New tasks are
//!    refused; the strand reports itself closed.
//! 3. Handles, the tasks whose home the strand is, and the runner from its
//!    start until it gives the strand up all hold the strand, so it lives
//!    while anything queued on it may still run (a posted closure holds
//!    nothing: the runner holds the strand for it). When the last
//!    reference goes, the runner is cancelled and its future dropped.
//!
//! # Examples
//!
//! A strand serialises sections submitted from many threads; its sections
//! never overlap, so a plain counter needs no lock of its own:
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//! use viaduct::{block_on, ExecutorExt, Strand, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(2).build().unwrap();
//! let strand = Strand::new(pool.clone());
//! let inside = Arc::new(AtomicUsize::new(0));
//! let most = Arc::new(AtomicUsize::new(0));
//! let handles: Vec<_> = (0..50)
//!     .map(|_| {
//!         let (inside, most) = (inside.clone(), most.clone());
//!         strand.run(move || {
//!             let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
//!             most.fetch_max(now, Ordering::SeqCst);
//!             inside.fetch_sub(1, Ordering::SeqCst);
//!         })
//!     })
//!     .collect();
//! for h in handles {
//!     block_on(h).unwrap();
//! }
//! assert_eq!(most.load(Ordering::SeqCst), 1); // never two at once
//! ```

mod core;
mod cover;
mod guarded;
mod keyed;
mod node;
mod queue;
mod recycle;

pub(crate) use self::core::{Core, Whole};

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use crate::admission::Admission;
use std::ptr::NonNull;

use crate::dump::lock::{LockBook, LockKind};
use crate::embedded::Embeds;
use crate::error::RejectReason;
use crate::executor::{
    home_of, keeps_open, Exec, ExecHeader, Executor, Internal, Own, Runnable, ScheduleAt,
    StrandBook,
};
use crate::section;
use crate::spawn::impl_spawn;
use crate::task::{current_task_id, spawn_or_reject, JoinHandle};
pub use guarded::{Guard, Guarded, Lock, LockOwned, OwnedGuard};
pub use keyed::KeyedStrands;
use queue::Item;

/// Runs what is submitted to it one at a time, in submission order, on the
/// executor it decorates. It owns no thread.
///
/// A `Strand` is an [`Executor`]: spawn futures on it, run closures on it,
/// decorate it again. Submitting costs one atomic operation and allocates
/// nothing beyond the task itself (the strand's first queued work also
/// makes its runner task, once); under load, the strand runs whole
/// batches per atomic operation, so the cost of synchronisation per section
/// falls as the load grows. A section that panics is reported on its handle
/// and the strand goes on with the next one.
///
/// Cloning gives another handle to the same strand. A strand keeps its
/// executor open while a handle of it exists; its tasks alone do not (as
/// with a pool's own tasks).
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use viaduct::{block_on, ExecutorExt, Strand, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(2).build().unwrap();
/// let strand = Strand::new(pool);
/// let log = Arc::new(Mutex::new(Vec::new()));
/// for i in 0..100 {
///     let log = log.clone();
///     strand.post(move || log.lock().unwrap().push(i));
/// }
/// // Sections run in submission order, so this one runs last.
/// block_on(strand.run(|| ())).unwrap();
/// assert_eq!(*log.lock().unwrap(), (0..100).collect::<Vec<_>>());
/// ```
#[derive(Clone)]
pub struct Strand {
    shared: Handle<()>,
}

/// Counters of a strand, for tuning and benchmarks.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, Inline, Strand};
///
/// let strand = Strand::new(Inline);
/// block_on(strand.run(|| ())).unwrap();
/// let m = strand.metrics();
/// assert_eq!((m.queued, m.batches, m.inline), (1, 1, 0));
/// assert_eq!(m.mean_batch(), 1.0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StrandMetrics {
    /// Items taken off the queue: sections run, lock requests granted.
    pub queued: u64,
    /// Batches taken off the queue: one atomic swap each.
    pub batches: u64,
    /// Sections that found the strand free and ran without queueing: a
    /// [`Guarded::with`] run on the spot, a [`Guarded::lock`] granted at
    /// once.
    pub inline: u64,
}

impl StrandMetrics {
    /// Queued items per batch; 0 if no batch was taken yet.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::strand::StrandMetrics;
    /// use viaduct::{ManualExecutor, Strand};
    ///
    /// assert_eq!(StrandMetrics::default().mean_batch(), 0.0);
    /// let manual = ManualExecutor::new();
    /// let strand = Strand::new(manual.clone());
    /// for _ in 0..4 {
    ///     strand.post(|| ());
    /// }
    /// manual.run_until_idle(); // one run of the strand takes all four at once
    /// let m = strand.metrics();
    /// assert_eq!((m.queued, m.batches), (4, 1));
    /// assert_eq!(m.mean_batch(), 4.0);
    /// ```
    pub fn mean_batch(&self) -> f64 {
        if self.batches == 0 {
            0.0
        } else {
            self.queued as f64 / self.batches as f64
        }
    }
}

impl Strand {
    /// A strand over `executor`.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ManualExecutor, Strand};
    ///
    /// let manual = ManualExecutor::new();
    /// let strand = Strand::new(manual.clone());
    /// let h = strand.run(|| 7);
    /// manual.run_until_idle(); // the strand runs on the manual executor
    /// assert_eq!(block_on(h).unwrap(), 7);
    /// ```
    #[track_caller]
    pub fn new<E: Executor + Clone>(executor: E) -> Strand {
        Strand {
            shared: Handle::new(&executor, (), std::panic::Location::caller()),
        }
    }

    /// Submits `f` to run on the strand later, never inside this call
    /// (asio's `post`). Fire-and-forget, and cheaper than spawning: `f` is
    /// queued as it is, with no task around it and no allocation of its
    /// own (it goes in a slot of a 4 KiB chunk that the posting thread
    /// carves, one allocation per chunk; a closure over 256 bytes is
    /// boxed; the strand's first queued work also makes its runner task,
    /// once). Posts are admitted by the executor as a group: from a post's
    /// push until none is left in line (the strand goes idle, or grants a
    /// lock with no post behind it), a pool counts one live task for them
    /// (so closing and joining the pool waits for them; a bounded pool counts
    /// it but never makes `post` wait, see
    /// [`max_pending`](crate::pool::Builder::max_pending)), and a post keeps
    /// the strand alive until it has run, as a task of the strand does, so
    /// dropping every handle of the strand loses nothing. On a closed
    /// strand `f` is dropped;
    /// [`try_execute`](crate::ExecutorExt::try_execute) hands it back
    /// instead. A panic of `f` is caught and goes where a
    /// detached task's panic goes (a pool's
    /// [`on_unobserved_panic`](crate::pool::Builder::on_unobserved_panic)
    /// hook); the strand goes on.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// use viaduct::{ManualExecutor, Strand};
    ///
    /// let manual = ManualExecutor::new();
    /// let strand = Strand::new(manual.clone());
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let r = ran.clone();
    /// strand.post(move || r.store(true, Ordering::SeqCst));
    /// assert!(!ran.load(Ordering::SeqCst));
    /// manual.run_until_idle();
    /// assert!(ran.load(Ordering::SeqCst));
    /// ```
    pub fn post<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.shared.post(f)
    }

    /// Runs `f` right here if the caller is already running inside this
    /// strand (then nothing else of the strand can be running); otherwise
    /// submits it like [`post`](Strand::post) (asio's `dispatch`).
    ///
    /// A panic of `f` run inline unwinds into the caller, which is the
    /// section that called `dispatch`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use viaduct::{block_on, ExecutorExt, Strand, ThreadPool};
    ///
    /// let strand = Strand::new(ThreadPool::builder().threads(2).build().unwrap());
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let (s, l) = (strand.clone(), log.clone());
    /// let h = strand.run(move || {
    ///     let l2 = l.clone();
    ///     s.dispatch(move || l2.lock().unwrap().push("inline"));
    ///     l.lock().unwrap().push("after dispatch");
    /// });
    /// block_on(h).unwrap();
    /// assert_eq!(*log.lock().unwrap(), ["inline", "after dispatch"]);
    /// ```
    pub fn dispatch<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        if self.running_in_this_thread() {
            f();
        } else {
            self.post(f);
        }
    }

    /// `true` if the caller is running inside this strand: in a section of
    /// it, on this thread (also through a strand decorating this one).
    /// Another task that a section's `block_on` runs meanwhile is not inside
    /// the strand.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, Strand, ThreadPool};
    ///
    /// let strand = Strand::new(ThreadPool::builder().threads(1).build().unwrap());
    /// assert!(!strand.running_in_this_thread());
    /// let s = strand.clone();
    /// assert!(block_on(strand.run(move || s.running_in_this_thread())).unwrap());
    /// ```
    pub fn running_in_this_thread(&self) -> bool {
        section::inside(self.shared.core.id(), current_task_id())
    }

    /// The strand's counters so far.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ManualExecutor, Strand};
    ///
    /// let manual = ManualExecutor::new();
    /// let strand = Strand::new(manual.clone());
    /// strand.post(|| ());
    /// strand.post(|| ());
    /// manual.run_until_idle();
    /// let m = strand.metrics();
    /// assert_eq!((m.queued, m.batches), (2, 1));
    /// ```
    pub fn metrics(&self) -> StrandMetrics {
        self.shared.core.metrics()
    }
}

impl Executor for Strand {
    fn schedule(&self, runnable: Runnable) {
        self.shared
            .core
            .submit(Whole::of(&self.shared), Item::Task(runnable))
    }
    fn close(&self) {
        self.shared.core.close()
    }
    fn is_closed(&self) -> bool {
        self.shared.core.is_closed()
    }
    fn own(&self, _: Internal) -> Option<&dyn Own> {
        Some(self)
    }
}

impl Own for Strand {
    fn admission(&self, wait: bool) -> Result<Admission, RejectReason> {
        self.shared.core.admission(wait)
    }

    fn home(&self) -> Option<Exec> {
        Some(self.shared.exec())
    }

    fn keeps_open(&self) -> bool {
        self.shared.core.book.holds_open()
    }
}

impl_spawn!(Strand);

impl fmt::Debug for Strand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Strand")
            .field("inner", &self.shared.core.inner)
            .field("closed", &self.is_closed())
            .field("metrics", &self.metrics())
            .finish()
    }
}

/// A strand and the data it guards (`()` for a plain [`Strand`]). The tasks
/// of a strand have this as their executor, so they keep the data alive.
/// `repr(C)`, the core first: the core's hot fields sit next to the
/// `Arc`'s counts, and the core's address (its header's) is the strand's
/// (`Core::id`).
#[repr(C)]
pub(crate) struct Shared<D> {
    pub(crate) core: Core,
    pub(crate) data: D,
}

/// A user's handle of a strand (a `Strand`'s, a `Guarded`'s): one word.
/// It keeps the strand's executor open if the handle the strand was made
/// over did, by the executor's own count of its handles (see
/// `Core::hold_open`), rather than by holding a handle of it.
pub(crate) struct Handle<D>(Arc<Shared<D>>);

impl<D: Data> Handle<D> {
    /// A new strand guarding `data`, over `executor`, made at `location`.
    pub(crate) fn new<E: Executor + Clone>(
        executor: &E,
        data: D,
        location: &'static std::panic::Location<'static>,
    ) -> Self {
        let shared = Shared::new(home_of(executor), data, location, keeps_open(executor));
        shared.core.hold_open();
        Handle(shared)
    }
}

impl<D> Handle<D> {
    /// The strand as an executor: what its tasks and sections' handles
    /// hold, which keeps the strand alive, not its executor open.
    pub(crate) fn exec(&self) -> Exec
    where
        D: Data,
    {
        Exec::of(self.0.clone())
    }
}

impl<D> Clone for Handle<D> {
    fn clone(&self) -> Self {
        self.0.core.hold_open();
        Handle(self.0.clone())
    }
}

impl<D> Drop for Handle<D> {
    fn drop(&mut self) {
        self.0.core.let_go();
    }
}

impl<D> std::ops::Deref for Handle<D> {
    type Target = Arc<Shared<D>>;

    fn deref(&self) -> &Arc<Shared<D>> {
        &self.0
    }
}

/// What a strand guards, as dumps name it.
pub(crate) trait Data: Send + Sync + 'static {
    fn kind() -> LockKind;
}

impl Data for () {
    fn kind() -> LockKind {
        LockKind::Strand
    }
}

impl<D: Data> Shared<D> {
    /// A strand over `inner`, made at `location`, whose handles hold
    /// `inner` open if `holds_open` (see `Core::hold_open`).
    pub(crate) fn new(
        inner: Exec,
        data: D,
        location: &'static std::panic::Location<'static>,
        holds_open: bool,
    ) -> Arc<Self> {
        Arc::new(Shared {
            core: Core::new(
                ExecHeader::scheduling_at::<Shared<D>>(),
                inner,
                LockBook::new(location, holds_open),
            ),
            data,
        })
    }

    /// Queues `f` to run as a section, admitted by the strand's executor
    /// as a task of it would be; dropped if the strand is closed.
    pub(crate) fn post<F>(self: &Arc<Self>, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        if let Ok(accepted) = self.core.accept_queued() {
            // Refused (no admission to be had): the closure is dropped.
            let _ = self
                .core
                .submit_covered(accepted, Whole::of(self), queue::call(f));
        }
    }

    /// Spawns `future` as a task of this strand, admitted by the strand's
    /// executor as any task of it would be.
    #[track_caller]
    pub(crate) fn spawn<F>(self: &Arc<Self>, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        spawn_or_reject(Exec::of(self.clone()), future, self.core.admit())
    }
}

// SAFETY: the core's first field holds `ExecHeader::scheduling_at::<Shared<D>>()`
// (see `new`), the core comes first (`repr(C)`), and a `Shared` lives in an
// `Arc`.
unsafe impl<D: Data> Embeds<ExecHeader> for Shared<D> {
    const OFFSET: usize = 0;
}

impl<D: Data> Executor for Shared<D> {
    fn schedule(&self, runnable: Runnable) {
        // Only through an `Exec` of the strand, which schedules with
        // `schedule_at`: what the runner needs is a pointer with the
        // strand's whole allocation, which `&self` is not.
        unreachable!("a strand's `Shared` is scheduled on through `ScheduleAt`, not {runnable:?}")
    }
    fn close(&self) {
        self.core.close()
    }
    fn is_closed(&self) -> bool {
        self.core.is_closed()
    }
    fn own(&self, _: Internal) -> Option<&dyn Own> {
        Some(self)
    }
}

impl<D: Data> ScheduleAt for Shared<D> {
    unsafe fn schedule_at(header: NonNull<ExecHeader>, runnable: Runnable) {
        // SAFETY: `header` comes from a live `Exec` of this strand (the
        // caller's contract), which keeps it alive meanwhile.
        let me = unsafe { Whole::at(header) };
        // SAFETY: as above.
        unsafe { me.core() }.submit(me, Item::Task(runnable))
    }
}

impl<D: Data> Own for Shared<D> {
    fn admission(&self, wait: bool) -> Result<Admission, RejectReason> {
        self.core.admission(wait)
    }

    fn lock_book(&self) -> Option<StrandBook<'_>> {
        Some(StrandBook(&self.core.book, D::kind()))
    }

    fn hold_open(&self) {
        self.core.hold_open()
    }

    fn let_go(&self) {
        self.core.let_go()
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom::{Arc as LoomArc, AtomicUsize, Condvar, Mutex};
    use crate::spawn::ExecutorExt;
    use loom::thread;
    use std::collections::VecDeque;
    use std::sync::atomic::Ordering::SeqCst;
    use std::task::{Context, Poll, Waker};

    /// A one-thread executor for the models: a queue, a condvar, a worker.
    #[derive(Clone)]
    struct Worker(LoomArc<(Mutex<(VecDeque<Runnable>, bool)>, Condvar)>);

    impl Executor for Worker {
        fn schedule(&self, runnable: Runnable) {
            let mut q = crate::loom::lock(&self.0 .0);
            if q.1 {
                // Stopped, like a terminated pool: what comes now is
                // dropped (the strand's last run of its runner, at the end).
                drop(q);
                drop(runnable);
                return;
            }
            q.0.push_back(runnable);
            drop(q);
            self.0 .1.notify_one();
        }
    }

    impl Worker {
        fn new() -> Self {
            Worker(LoomArc::new((
                Mutex::new((VecDeque::new(), false)),
                Condvar::new(),
            )))
        }

        /// Runs what it is given until told to stop.
        fn work(&self) {
            loop {
                let next = {
                    let mut q = crate::loom::lock(&self.0 .0);
                    loop {
                        if let Some(r) = q.0.pop_front() {
                            break Some(r);
                        }
                        if q.1 {
                            break None;
                        }
                        q = self.0 .1.wait(q).unwrap();
                    }
                };
                match next {
                    Some(r) => drop(r.run()),
                    None => return,
                }
            }
        }

        fn stop(&self) {
            crate::loom::lock(&self.0 .0).1 = true;
            self.0 .1.notify_all();
        }
    }

    /// Waits for `fut` by running nothing: the worker thread does the work.
    fn wait<F: Future>(fut: F) -> F::Output {
        struct Unpark(thread::Thread);
        impl std::task::Wake for Unpark {
            fn wake(self: std::sync::Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(std::sync::Arc::new(Unpark(thread::current())));
        let mut fut = std::pin::pin!(fut);
        loop {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
                return v;
            }
            thread::park();
        }
    }

    /// The real runner on a worker thread, two submitters, a task that
    /// wakes itself while running (a re-submission), and a budget of 2 (so
    /// the runner yields too): every section runs once, alone, and each
    /// submitter's in order.
    #[test]
    fn submit_vs_drain_vs_resubmit() {
        loom::model(|| {
            let worker = Worker::new();
            let strand = Strand::new(worker.clone());
            let running = {
                let w = worker.clone();
                thread::spawn(move || w.work())
            };
            let in_section = LoomArc::new(AtomicUsize::new(0));
            let log = LoomArc::new(Mutex::new(Vec::new()));
            let section = |name: &'static str| {
                let (in_section, log) = (in_section.clone(), log.clone());
                move || {
                    assert_eq!(in_section.swap(1, SeqCst), 0, "two sections at once");
                    crate::loom::lock(&log).push(name);
                    in_section.store(0, SeqCst);
                }
            };
            let other = {
                let (strand, b1, b2) = (strand.clone(), section("b1"), section("b2"));
                thread::spawn(move || {
                    strand.post(b1);
                    strand.post(b2);
                })
            };
            let (a1, a2) = (section("a1"), section("a2"));
            let yielder = strand.spawn(async move {
                a1();
                let mut yielded = false;
                std::future::poll_fn(|cx| {
                    if yielded {
                        return Poll::Ready(());
                    }
                    yielded = true;
                    cx.waker().wake_by_ref();
                    Poll::Pending
                })
                .await;
                a2();
            });
            other.join().unwrap();
            let last = strand.run(section("b3"));
            wait(yielder).unwrap();
            wait(last).unwrap();
            worker.stop();
            running.join().unwrap();
            let log = crate::loom::lock(&log).clone();
            assert_eq!(log.len(), 5, "{log:?}");
            let pos = |n| log.iter().position(|&x| x == n).unwrap();
            assert!(pos("a1") < pos("a2") && pos("b1") < pos("b2") && pos("b2") < pos("b3"));
        });
    }

    /// The executor stops (dropping the runner if it comes later) while a
    /// section is queued and another thread asks for the lock: the lock is
    /// granted either way, and the section ran iff its handle says so.
    #[test]
    fn a_dead_strand_still_grants_its_lock() {
        loom::model(|| {
            let worker = Worker::new();
            let running = {
                let w = worker.clone();
                thread::spawn(move || w.work())
            };
            let g = Guarded::new(worker.clone(), 0usize);
            let section = g.with(|n| *n += 1);
            let locker = {
                let g = g.clone();
                thread::spawn(move || *wait(g.lock()) += 10)
            };
            worker.stop();
            locker.join().unwrap();
            running.join().unwrap();
            let ran = wait(section).is_ok();
            let value = *wait(g.lock());
            assert_eq!(value, if ran { 11 } else { 10 });
        });
    }
}
