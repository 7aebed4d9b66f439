//! A worker's run loop, and what runs on a worker's thread besides:
//! local scheduling, and `block_on` that helps (fork-join is in `join.rs`).

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_deque::{Steal, Worker};
use event_listener::Listener;

use super::idle::Woken;
use super::job::{Job, JobRef};
use super::{drop_or_run, Shared, WorkerStats};
use crate::context::Driver;
use crate::executor::Runnable;
use crate::signal::poll_to_end;
use crate::trace::trace_event;

/// How often (in jobs) a worker looks at the injector before its own queue,
/// so work from outside is never starved by local work. tokio's number.
const INJECTOR_INTERVAL: u32 = 61;

/// How many times in a row the LIFO slot may be preferred before its task
/// goes to the back of the queue, so two tasks waking each other cannot
/// starve the rest.
const LIFO_STREAK: u32 = 3;

/// How often a worker busy in `join` runs one of the pool's queued tasks,
/// so that timers, strand sections and tasks on the pool are not held up
/// until a long parallel computation ends.
const SHARE_EVERY: Duration = Duration::from_millis(1);

/// The most joins between two looks at the clock: reading it costs about
/// as much as a few joins, and fine-grained fork-join (fib) makes
/// millions of joins a second.
const MAX_JOINS_PER_LOOK: u32 = 4096;

/// How many times a worker out of work yields its thread and looks again
/// before it goes to sleep. A sleeping worker costs whoever brings it work
/// a futex wake-up, and the worker a context switch, on the path of that
/// work; a pool fed from another runtime's threads (a digest per request,
/// say) pays that on every request when it parks at once. Yielding, not
/// spinning, gives the core to any thread that has work (rayon yields the
/// same way).
const IDLE_ROUNDS: u32 = 64;

/// A worker's own queues, made before its thread starts so that the pool
/// can hold their stealers.
pub(crate) struct Queues {
    /// Tasks, FIFO: fairness among tasks.
    pub(crate) tasks: Worker<Job>,
    /// `join` halves, LIFO: depth-first, as fork-join wants.
    pub(crate) forks: Worker<JobRef>,
}

impl Queues {
    pub(crate) fn new() -> Queues {
        Queues {
            tasks: Worker::new_fifo(),
            forks: Worker::new_lifo(),
        }
    }
}

/// The state of the worker running on this thread.
pub(crate) struct WorkerCtx {
    pub(super) shared: Arc<Shared>,
    pub(super) index: usize,
    pub(super) queues: Queues,
    /// The task this worker woke last: it runs next (message passing).
    /// Not stealable.
    lifo: Cell<Option<Runnable>>,
    lifo_streak: Cell<u32>,
    tick: Cell<u32>,
    /// Sharing the worker with queued tasks while in `join`: joins left
    /// before the next look at the clock, joins between looks (adapted so
    /// that looks come about every `SHARE_EVERY`), and the last look.
    joins_left: Cell<u32>,
    joins_per_look: Cell<u32>,
    last_look: Cell<Instant>,
    /// Running a task for `share_with_tasks`: that task's joins do not
    /// share again, so tasks never pile up on the join's stack.
    sharing: Cell<bool>,
    rng: Cell<u32>,
    /// Where this worker's stack starts, roughly, and its size: for
    /// `check_stack`.
    stack_top: usize,
    stack_size: usize,
    /// Its records for stall reports and dumps.
    here: crate::dump::records::Here,
    /// Where this worker is in the pool's tokio reactor's driver.
    #[cfg(feature = "tokio")]
    driver: Cell<InDriver>,
    /// When this worker last gave the reactor a turn.
    #[cfg(feature = "tokio")]
    last_turn: Cell<Instant>,
}

/// Runs `f` with the worker running on this thread, if it is one.
#[inline]
pub(crate) fn with_worker<R>(f: impl FnOnce(Option<&WorkerCtx>) -> R) -> R {
    let ptr: *const WorkerCtx = crate::context::with(|c| c.pool_worker.get()).cast();
    // SAFETY: the context's pool worker is set by `run` to a `WorkerCtx` on
    // its own stack frame and reset to null before that frame ends, and it
    // is only read on this thread, so a non-null pointer is live.
    f(unsafe { ptr.as_ref() })
}

enum Found {
    Job(Job),
    /// The caller's condition holds.
    Until,
    /// The pool is done and this worker should exit.
    Exit,
}

/// A worker thread's body.
pub(crate) fn run(shared: Arc<Shared>, index: usize, queues: Queues, stack_size: usize) {
    let top = std::hint::black_box(0u8);
    let here = crate::dump::records::Here::new(&shared.books, index);
    let ctx = WorkerCtx {
        here,
        stack_top: &top as *const u8 as usize,
        stack_size,
        rng: Cell::new(0x9E37_79B9 ^ (index as u32).wrapping_mul(0x85EB_CA6B) | 1),
        shared,
        index,
        queues,
        lifo: Cell::new(None),
        lifo_streak: Cell::new(0),
        tick: Cell::new(0),
        joins_left: Cell::new(1),
        joins_per_look: Cell::new(1),
        last_look: Cell::new(Instant::now()),
        sharing: Cell::new(false),
        #[cfg(feature = "tokio")]
        driver: Cell::new(InDriver::Out),
        #[cfg(feature = "tokio")]
        last_turn: Cell::new(Instant::now()),
    };
    // A thread's first steal registers it with crossbeam's epoch, which
    // allocates about 2 KiB. Made here, from a queue of its own, it is not
    // made by whichever `join` first finds another worker's half to take.
    let _ = Worker::<u8>::new_fifo().stealer().steal();
    let driving = Driving::enter(&ctx);
    let watched = ctx.enter_records();
    ctx.hook(ctx.shared.on_start.as_deref());
    loop {
        if ctx.shared.stopping() {
            break;
        }
        if let Some(job) = ctx.next_local() {
            job.run();
            ctx.after_local_job();
            continue;
        }
        match ctx.find_or_park(&|| false, true) {
            Found::Job(job) => job.run(),
            Found::Exit => break,
            Found::Until => unreachable!("the outermost loop waits for nothing"),
        }
    }
    // Whatever is still local is cancelled (tasks) or run (join halves).
    // A task dropped here may let a step waiting in line behind it go,
    // into this worker's queues: they are emptied until they stay empty.
    while let Some(job) = ctx
        .lifo
        .take()
        .map(Job::Task)
        .or_else(|| ctx.queues.tasks.pop())
    {
        drop_or_run(job);
    }
    while let Some(fork) = ctx.queues.forks.pop() {
        Job::Fork(fork).run();
    }
    ctx.hook(ctx.shared.on_stop.as_deref());
    drop(watched);
    drop(driving);
    ctx.shared.worker_exited();
}

/// Where a worker is in its pool's tokio reactor's driver. Inside it
/// (either way), tokio tasks run on the worker, and none of them may wait
/// on it (see `wait_until`).
#[cfg(feature = "tokio")]
#[derive(Clone, Copy, PartialEq, Eq)]
enum InDriver {
    Out,
    /// Waiting in it: work scheduled here meanwhile (a socket's task,
    /// woken by the driver on this thread) must end the wait.
    Waiting,
    /// Giving it a turn between jobs.
    Turning,
}

impl WorkerCtx {
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Makes this worker's records the ones the tasks polled on this
    /// thread note themselves in, until the guard drops: a simulation
    /// polling its tasks here puts its own in place meanwhile.
    pub(crate) fn enter_records(&self) -> crate::dump::records::WorkerGuard {
        crate::dump::records::enter_worker(&self.here)
    }

    fn hook(&self, hook: Option<&(dyn Fn() + Send + Sync)>) {
        if let Some(hook) = hook {
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(hook)) {
                crate::admission::Tracker::unobserved_panic(&*self.shared, p);
            }
        }
    }

    fn schedule_local(&self, runnable: Runnable) {
        if runnable.metadata().woken_while_running() {
            // A yield: behind everything else here. No wake-up needed; this
            // worker is awake and will get to it.
            self.queues.tasks.push(Job::Task(runnable));
            return;
        }
        if let Some(prev) = self.lifo.replace(Some(runnable)) {
            self.queues.tasks.push(Job::Task(prev));
            self.shared.idle.notify_one();
        }
        #[cfg(feature = "tokio")]
        if self.driver.get() == InDriver::Waiting {
            self.shared.idle.unpark(self.index);
        }
    }

    /// The next job from this worker's own queues (and, every
    /// `INJECTOR_INTERVAL` ticks, from the injector first).
    fn next_local(&self) -> Option<Job> {
        let tick = self.tick.get().wrapping_add(1);
        self.tick.set(tick);
        if tick % INJECTOR_INTERVAL == 0 {
            if let Some(job) = self.steal_injector() {
                return Some(job);
            }
        }
        if let Some(fork) = self.queues.forks.pop() {
            return Some(Job::Fork(fork));
        }
        if let Some(task) = self.lifo.take() {
            let streak = self.lifo_streak.get();
            if streak < LIFO_STREAK {
                self.lifo_streak.set(streak + 1);
                return Some(Job::Task(task));
            }
            self.queues.tasks.push(Job::Task(task));
        }
        self.lifo_streak.set(0);
        // The injector is read before the pop: it is mostly empty, and
        // then the pop's result goes straight to the caller. Looking at a
        // job the pop just wrote costs a stalled load (its fields were
        // stored one word at a time, and are read back as one wide copy):
        // that alone made a yield a third slower.
        if self.shared.injector.is_empty() {
            return self.queues.tasks.pop();
        }
        let task = self.queues.tasks.pop()?;
        if let Job::Task(r) = &task {
            // A task that yielded (its budget spent, or `yield_now`) waits
            // behind work from outside too, not only behind this worker's
            // own: otherwise it could run again and again before the
            // injector's turn comes round.
            if r.metadata().woken_while_running() {
                if let Some(job) = self.steal_injector() {
                    self.queues.tasks.push(task);
                    return Some(job);
                }
            }
        }
        Some(task)
    }

    /// Called at every `join` on this worker: every `SHARE_EVERY` or so,
    /// runs one task waiting in this worker's queues or the injector, so
    /// that a long fork-join computation, which would otherwise run only
    /// its own halves (they come first), shares the worker. Counting joins
    /// keeps the clock off the fast path; the count adapts to how long a
    /// join takes, from one clock read per join (halves of milliseconds)
    /// to one per `MAX_JOINS_PER_LOOK` (fib).
    #[inline]
    pub(super) fn share_with_tasks(&self) {
        let left = self.joins_left.get().wrapping_sub(1);
        self.joins_left.set(left);
        if left == 0 {
            self.look_at_clock();
        }
    }

    #[cold]
    #[inline(never)]
    fn look_at_clock(&self) {
        let now = Instant::now();
        let since = now
            .saturating_duration_since(self.last_look.get())
            .as_nanos();
        // Joins come in bursts (a descent down the tree, then leaves), so
        // the count shrinks at once when the look came late but only
        // doubles when it came early: a burst must not push the next look
        // hundreds of milliseconds away.
        let old = self.joins_per_look.get();
        let fitted = u128::from(old) * SHARE_EVERY.as_nanos() / since.max(1);
        let per_look =
            fitted.clamp(1, u128::from(old.saturating_mul(2).min(MAX_JOINS_PER_LOOK))) as u32;
        self.joins_per_look.set(per_look);
        self.joins_left.set(per_look);
        if since < SHARE_EVERY.as_nanos() / 2 {
            return; // too soon: the count was too small, and is larger now
        }
        self.last_look.set(now);
        // One shared task at a time, and only with half the stack free: it
        // runs on top of the join.
        if self.sharing.get() || self.stack_used(0) > self.stack_size / 2 {
            return;
        }
        let task = match self.lifo.take() {
            Some(r) => Some(Job::Task(r)),
            None => self.queues.tasks.pop().or_else(|| self.steal_injector()),
        };
        if let Some(job) = task {
            self.sharing.set(true);
            job.run(); // catches the panics of what it runs
            self.sharing.set(false);
        }
    }

    fn steal_injector(&self) -> Option<Job> {
        loop {
            match self.shared.injector.steal_batch_and_pop(&self.queues.tasks) {
                Steal::Success(job) => return Some(job),
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }

    /// Looks for work outside this worker's own queues: the injector, then
    /// the other workers (their `join` halves first, then a batch of tasks),
    /// starting at a random one.
    fn steal(&self) -> Option<Job> {
        let stats = &self.shared.stats[self.index];
        let n = self.shared.stealers.len();
        loop {
            let mut retry = false;
            match self.shared.injector.steal_batch_and_pop(&self.queues.tasks) {
                Steal::Success(job) => return Some(job),
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
            let start = self.next_random() as usize % n;
            // Only the queues that seem to hold work: a steal attempt pins
            // crossbeam's epoch (a fence), a look at the ends does not, and
            // an idle worker looks at every queue.
            let victims = (start..n).chain(0..start).filter(|&i| {
                i != self.index
                    && !(self.shared.fork_stealers[i].is_empty()
                        && self.shared.stealers[i].is_empty())
            });
            for i in victims {
                match self.shared.fork_stealers[i].steal() {
                    Steal::Success(fork) => {
                        WorkerStats::bump(&stats.stolen);
                        trace_event!(worker = self.index, victim = i, "steal join half");
                        return Some(Job::Fork(fork));
                    }
                    Steal::Retry => retry = true,
                    Steal::Empty => {}
                }
                match self.shared.stealers[i].steal_batch_and_pop(&self.queues.tasks) {
                    Steal::Success(job) => {
                        WorkerStats::bump(&stats.stolen);
                        trace_event!(worker = self.index, victim = i, "steal tasks");
                        return Some(job);
                    }
                    Steal::Retry => retry = true,
                    Steal::Empty => {}
                }
            }
            if !retry {
                return None;
            }
        }
    }

    fn next_random(&self) -> u32 {
        // xorshift32: cheap, and good enough to spread steal attempts.
        let mut x = self.rng.get();
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng.set(x);
        x
    }

    /// Searches for work and, finding none, sleeps until there may be some,
    /// until `until()` holds, or (in the outermost loop only) until the pool
    /// is done. See `idle.rs` for the protocol.
    fn find_or_park(&self, until: &dyn Fn() -> bool, outermost: bool) -> Found {
        let idle = &self.shared.idle;
        let stats = &self.shared.stats[self.index];
        let mut searching = false;
        let mut rounds = 0;
        let work_in_sight = || self.shared.has_visible_work();
        loop {
            if !searching {
                idle.start_searching();
                searching = true;
            }
            if let Some(job) = self.steal() {
                idle.stop_searching(work_in_sight);
                return Found::Job(job);
            }
            let exit = || outermost && self.shared.should_exit();
            if until() || exit() {
                idle.stop_searching(work_in_sight);
                return if until() { Found::Until } else { Found::Exit };
            }
            if rounds < IDLE_ROUNDS && idle.may_spin() {
                // Still counted as searching, so work pushed meanwhile
                // wakes nobody: this worker finds it.
                rounds += 1;
                thread::yield_now();
                continue;
            }
            idle.announce_sleep(self.index);
            if work_in_sight() || until() || exit() {
                searching = idle.cancel_sleep(self.index) == Woken::ByNotify;
                continue;
            }
            WorkerStats::bump(&stats.parked);
            trace_event!(worker = self.index, "park");
            let in_reactor = self.park();
            rounds = 0;
            searching = idle.cancel_sleep(self.index) == Woken::ByNotify;
            if in_reactor {
                // The driver may have woken tasks into this worker's own
                // queues, which `steal` does not look at.
                if let Some(job) = self.next_local() {
                    if searching {
                        idle.stop_searching(work_in_sight);
                    }
                    // Leaving the driver for a job that may be long: a
                    // sleeping worker takes it over, so sockets and timers
                    // are not left until this job ends (tokio's workers
                    // hand it on the same way).
                    idle.notify_one();
                    return Found::Job(job);
                }
            }
        }
    }

    /// Sleeps until unparked: in the pool's tokio reactor, if it has one
    /// and no other worker is in it (`true`: then tasks the reactor woke
    /// may be in this worker's own queues).
    fn park(&self) -> bool {
        #[cfg(feature = "tokio")]
        if let Some(reactor) = self.shared.reactor() {
            self.driver.set(InDriver::Waiting);
            let waited = self.shared.idle.park_in(self.index, reactor);
            self.driver.set(InDriver::Out);
            return waited;
        }
        self.shared.idle.park(self.index);
        false
    }

    /// After a job from this worker's own queues: every so often, a turn
    /// of the pool's tokio reactor, so sockets and timers are served while
    /// every worker is busy. Looked at every `TURN_EVERY` jobs, taken at
    /// most every `TURN_PERIOD`: a turn costs a driver's look at its
    /// sockets and timers, too much after every few tiny jobs.
    #[inline]
    fn after_local_job(&self) {
        #[cfg(feature = "tokio")]
        if let Some(reactor) = self.shared.reactor() {
            if self.tick.get() % super::reactor::TURN_EVERY == 0 {
                let now = Instant::now();
                if now.duration_since(self.last_turn.get()) >= super::reactor::TURN_PERIOD {
                    self.last_turn.set(now);
                    self.driver.set(InDriver::Turning);
                    reactor.turn();
                    self.driver.set(InDriver::Out);
                }
            }
        }
    }

    /// Runs jobs until `cond()` holds, sleeping when there are none. Whoever
    /// makes `cond()` true must `unpark` this worker.
    pub(super) fn wait_until(&self, cond: &dyn Fn() -> bool) {
        #[cfg(feature = "tokio")]
        if self.driver.get() != InDriver::Out {
            panic!(
                "a tokio task that the pool's own tokio reactor runs waited on its worker (a \
                 viaduct block_on, a join whose other half was taken, a spawn on a full bounded \
                 pool): that worker drives the reactor, so nothing else could meanwhile. `.await` \
                 instead, or make the work a viaduct task (pool.spawn) rather than a tokio::spawn"
            );
        }
        while !cond() {
            if let Some(job) = self.next_local() {
                job.run();
                self.after_local_job();
                continue;
            }
            match self.find_or_park(cond, false) {
                Found::Job(job) => job.run(),
                Found::Until => return,
                Found::Exit => unreachable!("only the outermost loop exits"),
            }
        }
    }

    /// Bytes of this worker's stack in use, roughly, plus `margin`.
    fn stack_used(&self, margin: usize) -> usize {
        let here = std::hint::black_box(0u8);
        self.stack_top.abs_diff(&here as *const u8 as usize) + margin
    }

    /// Panics, rather than overflow the stack, when a `block_on` (which
    /// runs other tasks on this stack) starts with three quarters of the
    /// worker's stack in use; or would, `margin` bytes further down.
    pub(crate) fn check_stack(&self, margin: usize) {
        let used = self.stack_used(margin);
        if used > self.stack_size / 4 * 3 {
            panic!(
                "viaduct::block_on nested too deep on {}: each block_on on a pool worker runs \
                 other tasks on the same stack, and {used} of its {} bytes are in use. Await \
                 instead of blocking inside tasks, or give the pool a larger stack_size",
                thread::current().name().unwrap_or("a pool worker"),
                self.stack_size
            );
        }
    }
}

#[inline]
pub(super) fn on_this_pool<'a>(w: Option<&'a WorkerCtx>, shared: &Shared) -> Option<&'a WorkerCtx> {
    w.filter(|w| std::ptr::eq(&*w.shared, shared))
}

pub(crate) fn schedule(shared: &Shared, runnable: Runnable) {
    with_worker(|w| match on_this_pool(w, shared) {
        Some(w) => w.schedule_local(runnable),
        None => shared.inject(Job::Task(runnable)),
    })
}

pub(crate) fn try_run_one(shared: &Shared) -> bool {
    let job = with_worker(|w| match on_this_pool(w, shared) {
        Some(w) => w.next_local().or_else(|| w.steal()),
        None => steal_one(shared),
    });
    job.map(Job::run).is_some()
}

/// One job for a thread that is not a worker of this pool.
fn steal_one(shared: &Shared) -> Option<Job> {
    loop {
        let mut retry = false;
        match shared.injector.steal() {
            Steal::Success(job) => return Some(job),
            Steal::Retry => retry = true,
            Steal::Empty => {}
        }
        for (forks, tasks) in shared.fork_stealers.iter().zip(shared.stealers.iter()) {
            match forks.steal() {
                Steal::Success(fork) => return Some(Job::Fork(fork)),
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
            match tasks.steal() {
                Steal::Success(job) => return Some(job),
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
        }
        if !retry {
            return None;
        }
    }
}

/// Waits until a bounded pool has room (or is closed). On one of its own
/// workers it runs jobs meanwhile, so the tasks holding the slots can finish.
pub(crate) fn wait_for_room(shared: &Shared) {
    let max = shared.max_pending.expect("only a bounded pool is full");
    let ready = || shared.live() < max || crate::executor::Executor::is_closed(shared);
    with_worker(|w| match on_this_pool(w, shared) {
        Some(w) => {
            room_waiters(shared).push(w.index);
            w.wait_until(&ready);
            room_waiters(shared).retain(|&i| i != w.index);
        }
        None => loop {
            let listener = shared.room.listen();
            if ready() {
                return;
            }
            listener.wait();
        },
    })
}

fn room_waiters(shared: &Shared) -> std::sync::MutexGuard<'_, Vec<usize>> {
    crate::loom::lock_std(&shared.room_waiters)
}

/// A bounded pool freed a slot: wake its workers waiting for room.
pub(crate) fn wake_room_waiters(shared: &Shared) {
    for &i in room_waiters(shared).iter() {
        shared.idle.unpark(i);
    }
}

/// Makes a worker its thread's pool worker and driver until dropped, also
/// if the worker's loop unwinds: nothing may find the context pointing at
/// a frame that is gone.
struct Driving;

impl Driving {
    fn enter(ctx: &WorkerCtx) -> Driving {
        let driver: &dyn Driver = ctx;
        crate::context::with(|c| {
            c.pool_worker.set((ctx as *const WorkerCtx).cast());
            c.driver.set(Some(NonNull::from(driver)));
        });
        Driving
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        crate::context::with(|c| {
            c.pool_worker.set(std::ptr::null());
            c.driver.set(None);
        });
    }
}

impl Driver for WorkerCtx {
    /// `block_on` on a worker: it runs the pool's tasks while `fut` waits
    /// (boost's `reschedule_until`), noting them in this worker's records
    /// (a simulation on this thread may have had its own there).
    fn block_on(&self, fut: Pin<&mut dyn Future<Output = ()>>) {
        self.check_stack(0);
        let _records = self.enter_records();
        let (shared, index) = (self.shared.clone(), self.index);
        poll_to_end(
            fut,
            move || shared.idle.unpark(index),
            |woken| {
                if !crate::inline::run_one_queued() {
                    self.wait_until(&|| woken() || crate::inline::has_queued());
                }
            },
        )
    }
}
