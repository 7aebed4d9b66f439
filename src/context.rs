//! This thread's context: everything viaduct keeps per thread, in one
//! thread-local (as tokio's `runtime/context.rs`).
//!
//! The context holds state only; the modules that own each part hold the
//! logic and read and write their part through [`with`]. So the context
//! names no module above it: what it points at (a task's metadata, a
//! worker's records, a section's frame) it holds by address, and only the
//! owner turns an address back into its type.
//!
//! Every address in it is set by a guard on the stack of whoever enters
//! it (a poll, a worker, a section, a `block_on`, a simulation) and
//! restored when that guard drops, in reverse order: a non-null address in
//! the context points at something alive on this thread's stack or kept
//! alive by that frame. The plain values (the next task ids, the timer
//! shard) are the thread's own, kept for its life.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;

/// What runs this thread when it is not a plain thread: a pool worker, or
/// a simulation while its `block_on` runs here. `block_on` hands its
/// future to it, to run while it waits. Set by the driver's own guard,
/// which outlives its time here.
pub(crate) trait Driver {
    /// Runs `fut` to its end on this thread, running the driver's work
    /// while it waits.
    fn block_on(&self, fut: Pin<&mut dyn Future<Output = ()>>);
    /// Runs `a` here and `b` as the driver's own work, until both are
    /// done, for a `ThreadPool::join` that is not on its pool's worker:
    /// `false` if the driver leaves that to the pool (a simulation runs
    /// both itself, so nothing escapes it). Neither panics: the caller
    /// catches.
    fn join(&self, a: &mut dyn FnMut(), b: &mut (dyn FnMut() + Send)) -> bool {
        let _ = (a, b);
        false
    }
    /// Runs the driver's work, past any limit it keeps, until `done()`
    /// holds or nothing can run: for ending tasks that borrow from a
    /// frame about to unwind (a simulated scope whose wait failed).
    fn finish(&self, done: &dyn Fn() -> bool) {
        let _ = done;
    }
}

/// A poll's cooperative budget (see `coop`).
#[derive(Clone, Copy)]
pub(crate) struct Budget {
    /// `None`: unconstrained.
    pub(crate) left: Option<u32>,
    /// Forced `Pending`s within this budget.
    pub(crate) forced: u32,
}

/// This thread's context.
pub(crate) struct Context {
    /// The viaduct task being polled (`task::current`): its metadata and
    /// the data pointer of the waker it was polled with (compared, never
    /// dereferenced).
    pub(crate) task: Cell<(*const (), *const ())>,
    /// The fault slot of the task whose executor's `schedule` runs here
    /// (`task::fault`).
    pub(crate) scheduling: Cell<*const ()>,
    /// Admissions asked for here go past a bounded executor's limit
    /// (`admission::past_limit`).
    pub(crate) past_limit: Cell<bool>,
    /// The budget of the poll under way (`coop`).
    pub(crate) budget: Cell<Budget>,
    /// A viaduct future answered `Pending` only because the budget was
    /// spent, since a simulation last looked (`coop::take_held_back`).
    pub(crate) held_back: Cell<bool>,
    /// What the next poll's budget starts from, if not the whole
    /// `coop::BUDGET` (`coop`).
    pub(crate) fresh_budget: Cell<Option<u32>>,
    /// The records of the pool worker or simulated worker that runs this
    /// thread (`dump::records::Here`).
    pub(crate) worker_records: Cell<*const ()>,
    /// The innermost strand section's frame (`section`).
    pub(crate) frame: Cell<*const ()>,
    /// How many `block_on` calls run on this thread (`section`).
    pub(crate) blocking: Cell<usize>,
    /// The driver running this thread, if any ([`with_driver`]).
    pub(crate) driver: Cell<Option<NonNull<dyn Driver>>>,
    /// The executor the global `spawn` uses here, if not the global pool
    /// (`spawn::ambient_executor`).
    pub(crate) executor: Cell<*const ()>,
    /// The timer the time functions use here, if not the global one
    /// (`Timer::ambient`).
    pub(crate) timer: Cell<*const ()>,
    /// The pool worker this thread is (`pool::worker`), for the pool's own
    /// scheduling.
    pub(crate) pool_worker: Cell<*const ()>,
    /// The simulation, and its virtual worker, polling a task here (`sim`).
    pub(crate) virtual_worker: Cell<(*const (), usize)>,
    /// The next task id of this thread's block of them, and the block's end
    /// (`TaskId::next`).
    pub(crate) ids: Cell<(u64, u64)>,
    /// This thread's pick of timer shard, `usize::MAX` until it needs one
    /// (`time`).
    pub(crate) timer_shard: Cell<usize>,
    /// The `ThreadPerTask` executor whose thread this is (`thread_per_task`).
    pub(crate) thread_owner: Cell<*const ()>,
    /// The runnables waiting to be dropped by the drop under way here
    /// (`dropping`).
    pub(crate) dropping: Cell<*const ()>,
}

impl Context {
    /// Starts a poll's budget: `full` units, or what
    /// `coop::with_fresh_budget` set for this one poll. Returns the budget
    /// it replaced, to restore when the poll ends.
    #[inline]
    pub(crate) fn enter_fresh_budget(&self, full: u32) -> Budget {
        let left = Some(self.fresh_budget.take().unwrap_or(full));
        self.budget.replace(Budget { left, forced: 0 })
    }

    const fn new() -> Context {
        Context {
            task: Cell::new((std::ptr::null(), std::ptr::null())),
            scheduling: Cell::new(std::ptr::null()),
            past_limit: Cell::new(false),
            budget: Cell::new(Budget {
                left: None,
                forced: 0,
            }),
            held_back: Cell::new(false),
            fresh_budget: Cell::new(None),
            worker_records: Cell::new(std::ptr::null()),
            frame: Cell::new(std::ptr::null()),
            blocking: Cell::new(0),
            driver: Cell::new(None),
            executor: Cell::new(std::ptr::null()),
            timer: Cell::new(std::ptr::null()),
            pool_worker: Cell::new(std::ptr::null()),
            virtual_worker: Cell::new((std::ptr::null(), 0)),
            ids: Cell::new((0, 0)),
            timer_shard: Cell::new(usize::MAX),
            thread_owner: Cell::new(std::ptr::null()),
            dropping: Cell::new(std::ptr::null()),
        }
    }
}

// Loom runs a model's threads on one OS thread: its own thread-locals keep
// them apart.
#[cfg(not(loom))]
std::thread_local! {
    static CONTEXT: Context = const { Context::new() };
}

#[cfg(loom)]
loom::thread_local! {
    static CONTEXT: Context = Context::new();
}

/// Runs `f` with this thread's context.
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(&Context) -> R) -> R {
    CONTEXT.with(f)
}

/// A task's poll begins: makes `task` (its metadata's address and its
/// waker's data pointer, see `task::current`) the current one and gives it
/// a fresh budget of `budget` units, or what `coop::with_fresh_budget`
/// set, in one access to the context; the guard restores both in one.
/// A poll nested in this one (under a `block_on`) enters and leaves
/// inside it.
#[inline]
pub(crate) fn enter_poll(task: (*const (), *const ()), budget: u32) -> PollGuard {
    with(|c| PollGuard {
        task: c.task.replace(task),
        budget: c.enter_fresh_budget(budget),
        worker_records: c.worker_records.get(),
    })
}

/// A task's poll under way on this thread (see [`enter_poll`]): what it
/// replaced, to restore, and the records of the worker it runs on.
pub(crate) struct PollGuard {
    task: (*const (), *const ()),
    budget: Budget,
    worker_records: *const (),
}

impl PollGuard {
    /// The records of the worker polling the task (`dump::records::Here`),
    /// null if none: read as the poll entered, so the poll notes itself
    /// there without a second access to the context.
    #[inline]
    pub(crate) fn worker_records(&self) -> *const () {
        self.worker_records
    }
}

impl Drop for PollGuard {
    #[inline]
    fn drop(&mut self) {
        with(|c| {
            c.task.set(self.task);
            c.budget.set(self.budget);
        });
    }
}

/// Runs `f` with the driver running this thread, if any.
pub(crate) fn with_driver<R>(f: impl FnOnce(Option<&dyn Driver>) -> R) -> R {
    let driver = with(|c| c.driver.get());
    // SAFETY: a driver is set by its own guard, which outlives its time
    // in the context and restores what was there before it drops.
    f(driver.map(|d| unsafe { d.as_ref() }))
}
