//! Deterministic simulation: run the real runtime on one thread, with
//! every scheduling choice drawn from a seed, and replay a failing run
//! exactly.
//!
//! A [`Simulation`] is a pool of virtual workers (local queues, a LIFO
//! slot, stealing, a global queue) and a virtual clock, all run on the
//! calling thread. viaduct's own machinery runs on it unchanged: strands,
//! [`Guarded`](crate::Guarded), [`KeyedStrands`](crate::KeyedStrands),
//! [`PriorityExecutor`](crate::PriorityExecutor), continuations,
//! [`JoinSet`](crate::JoinSet), cancellation tokens,
//! [`ThreadPool::join`](crate::ThreadPool::join) and scopes. Which task
//! runs next, and where it is made to stop at an await point although
//! what it awaits is ready, come from the seed, by a [`Strategy`]: PCT
//! by default, which preempts at a few random await points per run, or
//! random choices that mirror the real pool's queues. So do the order of
//! timers due at the same instant and, with [jitter](Simulation::jitter),
//! how late each fires and how long each poll takes; nothing else does.
//! The same seed and program give the same run, and
//! [`Simulation::trace_hash`] proves it.
//!
//! [`check`] runs a program under many seeds, names the first that
//! fails, and shrinks its run to the few preemptions the failure needs,
//! printed as a string that [`Simulation::replay`] runs again.
//! [`Simulation::block_on`] does not hang on a wait: a run where nothing
//! can move ends in [`SimError::Deadlock`] with a [task dump](crate::dump)
//! and its wait-for cycles, and one that never settles ends at a step
//! limit. What it cannot stop is a single poll that never returns (a loop
//! with no `.await`, a blocking call): everything runs on the calling
//! thread. And a task that moved to an executor outside the simulation
//! (`hop_to` a real pool) is waited for there when its `block_on` ends
//! early, since what it borrows must outlive it.
//!
//! # Examples
//!
//! A lost update: the balance is read in one section and written in
//! another, so two withdrawals can both pass the check.
//!
//! ```
//! use viaduct::prelude::*;
//! use viaduct::sim::Simulation;
//! use viaduct::Guarded;
//!
//! async fn withdraw(account: Guarded<i64>, amount: i64) {
//!     let balance = account.with(|b| *b).await.unwrap();
//!     if balance >= amount {
//!         account.with(move |b| *b = balance - amount).await.unwrap(); // stale `balance`
//!     }
//! }
//!
//! let run = |seed| {
//!     let sim = Simulation::new(seed);
//!     let ex = sim.executor();
//!     let outcome = sim.block_on(async move {
//!         let account = Guarded::new(ex.clone(), 100i64);
//!         let a = ex.spawn(withdraw(account.clone(), 80));
//!         let b = ex.spawn(withdraw(account.clone(), 80));
//!         a.await.unwrap();
//!         b.await.unwrap();
//!         account.with(|b| *b).await.unwrap()
//!     });
//!     (outcome.unwrap(), sim.trace_hash())
//! };
//! // Some seed interleaves the two withdrawals: both pass the check.
//! let bad = (0..1000).find(|&seed| run(seed).0 == 20).expect("found by some seed");
//! assert_eq!(run(bad), run(bad)); // and replays exactly, trace included
//! ```
//!
//! # What escapes the simulation
//!
//! Only what viaduct schedules is simulated. These break determinism (a
//! seed may not replay) or hide work from it (a wait may look like a
//! deadlock):
//!
//! - real threads: `std::thread::spawn`, and a waker woken from another
//!   thread (its task goes to the global queue whenever that thread gets
//!   there);
//! - the real clock: `std::time::Instant::now` and `SystemTime` read real
//!   time; read [`Simulation::timer`]'s `now` instead. The global
//!   [`time`](crate::time) functions and [`TimedExt`](crate::TimedExt)
//!   use the simulated clock while [`Simulation::block_on`] runs; a
//!   [`sleep`](crate::time::sleep), [`timeout`](crate::time::timeout) or
//!   [`interval`](crate::time::interval) made outside binds to the clock
//!   that first polls it (those given an `Instant` stay on the clock it
//!   was read from);
//! - blocking calls: a `std::sync::Mutex` held across an `.await`, a
//!   channel's blocking `recv`, a sleep of the thread; they block the one
//!   thread the whole simulation runs on;
//! - work on a real executor: a [`ThreadPool`](crate::ThreadPool) made
//!   outside and spawned on, [`ThreadPool::global`](crate::ThreadPool::global)
//!   spawned on by name, a tokio runtime. [`spawn`](crate::spawn),
//!   [`run`](crate::run) and [`JoinSet::spawn`](crate::JoinSet::spawn)
//!   use the simulated pool while [`Simulation::block_on`] runs, and so
//!   do [`ThreadPool::join`](crate::ThreadPool::join) and scopes
//!   ([`ThreadPool::scope`](crate::ThreadPool::scope),
//!   [`scope`](crate::scope())) opened in a simulated task, on any pool.
//!   Building a pool inside a simulation is refused
//!   ([`BuildError::InsideSimulation`](crate::pool::BuildError::InsideSimulation)).
//!
//! [`block_on`](crate::block_on) inside a simulated task runs the
//! simulation while it waits, as it runs a pool's tasks on a worker.

mod check;
mod schedule;
mod shrink;
mod world;

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

pub use self::check::check;
pub use self::schedule::ReplayError;
use self::schedule::{Replay, Schedule};
use self::world::World;
use crate::admission::{Admission, Sink, Tracker, TrackerHeader};
use crate::context::Driver;
use crate::dump::records::{Books, Here};
use crate::dump::TaskDump;
use crate::embedded::Embeds;
use crate::error::{Panic, PanicPayload, RejectReason, TaskError};
use crate::executor::ExecHeader;
use crate::executor::{Exec, Executor, Internal, Own, Runnable};
use crate::spawn::ExecutorExt;
use crate::task::Metadata;
use crate::time::Timer;
use crate::JoinHandle;

/// How many task polls a run may take by default before it is stopped
/// with [`SimError::StepLimit`].
pub const DEFAULT_MAX_STEPS: u64 = 10_000_000;

/// How a [`Simulation`] picks the task it polls next. Both replay exactly
/// by seed.
///
/// # Examples
///
/// ```
/// use viaduct::sim::{Simulation, Strategy};
///
/// let sim = Simulation::new(3).strategy(Strategy::Pct { depth: 3 });
/// assert_eq!(sim.block_on(async { 7 }).unwrap(), 7);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Strategy {
    /// Every choice at random: which virtual worker runs, which of its
    /// tasks, whom it steals from, and now and then a yield injected into
    /// a poll. Finds bugs that need many small interleavings.
    Random,
    /// Probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010):
    /// each task gets a random priority, the highest-priority task that
    /// can run always runs, and at `depth - 1` random points the running
    /// task drops to the lowest priority. A bug that needs `depth - 1`
    /// preemptions at the right places is found with a probability that
    /// does not shrink with the number of other schedules. Every await
    /// point of viaduct's futures is a point where a task can be preempted.
    Pct {
        /// One more than the preemptions a run makes: 1 runs each task
        /// until it blocks, 3 finds most bugs (at least 1).
        depth: u32,
    },
}

/// A simulated world: virtual workers, a virtual clock and the generator
/// that makes every choice, all driven on the calling thread.
///
/// A cheap handle: clones share the world. When the last one is dropped,
/// the world ends: every task in it that has not finished is dropped,
/// queued or waiting on anything (its handle says
/// [`TaskError::Cancelled`]), every timer of its clock is cancelled, and
/// the clock stays where it is. The world's tasks are those spawned on
/// its executor or on executors over it (strands, `Guarded`,
/// [`PriorityExecutor`](crate::PriorityExecutor)). Others waiting on its
/// clock (an [`Inline`](crate::Inline) job, a task of a real pool) are
/// not: their timers are cancelled, so a detached one is dropped, and one
/// you hold a handle of waits until you abort it.
///
/// Inside the world's tasks, use [`executor`](Simulation::executor) and
/// [`timer`](Simulation::timer) rather than a clone of the handle: a
/// handle a waiting task keeps keeps the world from ending (until
/// [`check`], which ends each world it runs, or until the task is
/// dropped).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use viaduct::prelude::*;
/// use viaduct::sim::Simulation;
///
/// let sim = Simulation::new(7).workers(2);
/// let ex = sim.executor();
/// let sum = sim.block_on(async move {
///     let parts: Vec<_> = (1..=4u64).map(|i| ex.spawn(async move {
///         viaduct::time::sleep(Duration::from_secs(i)).await; // virtual seconds
///         i
///     })).collect();
///     let mut sum = 0;
///     for p in parts {
///         sum += p.await.unwrap();
///     }
///     sum
/// });
/// assert_eq!(sum.unwrap(), 10);
/// assert_eq!(sim.elapsed(), Duration::from_secs(4));
/// ```
pub struct Simulation {
    shared: Arc<Shared>,
}

/// The most jitter a simulation takes.
const MAX_JITTER: Duration = Duration::from_secs(3600);

/// What a world is made from.
#[derive(Clone, Debug)]
struct Config {
    seed: u64,
    workers: usize,
    strategy: Strategy,
    /// How many decisions PCT should expect a run to make (`check` learns
    /// it from the runs before).
    span: Option<u64>,
    /// The most a timer fires late, and a poll takes, in nanoseconds.
    jitter: u64,
    /// The schedule a replay follows, instead of the strategy.
    replay: Option<Schedule>,
}

/// The strategy `Simulation::new(seed)` and [`check`] use: PCT at depth
/// 3, which found each bug of `benches/sim_zoo.rs` in fewer seeds than
/// random scheduling, and than shuttle's PCT (BENCHMARKS.md).
const DEFAULT_STRATEGY: Strategy = Strategy::Pct { depth: 3 };

impl Config {
    /// What `Simulation::new(seed)` makes.
    fn new(seed: u64) -> Config {
        Config {
            seed,
            workers: 4,
            strategy: DEFAULT_STRATEGY,
            span: None,
            jitter: 0,
            replay: None,
        }
    }
}

/// The world behind every handle of a simulation, and its executor.
pub(crate) struct Shared {
    /// Where an admission's [`Sink`] finds this tracker's functions.
    tracker: TrackerHeader,
    /// What an `Exec` of this world points to.
    header: ExecHeader,
    me: Weak<Shared>,
    seed: u64,
    config: Config,
    world: Mutex<World>,
    timer: Timer,
    /// The virtual workers' records, for task dumps.
    books: Arc<Books>,
    heres: Box<[Here]>,
    /// Tasks accepted whose futures are not dropped yet.
    live: AtomicU64,
    /// Panics of tasks whose handles were dropped, first to last.
    panics: Mutex<Vec<PanicPayload>>,
    max_steps: AtomicU64,
    closed: AtomicBool,
    /// `Simulation` handles alive.
    handles: AtomicUsize,
}

/// Why [`Simulation::block_on`] did not give the future's output.
#[derive(Debug)]
#[non_exhaustive]
pub enum SimError {
    /// Nothing could run, no timer was pending, and the future had not
    /// finished: it never would. The dump lists every task and what it
    /// waits on; [`TaskDump::deadlocks`] gives the cycles, if the tasks
    /// wait on each other.
    Deadlock(TaskDump),
    /// The run polled tasks this many times without the future finishing:
    /// something keeps waking itself (a loop that yields forever, an
    /// interval nobody stops). Raise the limit with
    /// [`Simulation::max_steps`] if the program is just long.
    StepLimit {
        /// The limit that was reached.
        steps: u64,
    },
    /// The future panicked, or a task whose handle was dropped did (a
    /// panic delivered to a handle is the program's to handle). The first
    /// such panic ends the run.
    Panicked(Panic),
    /// The simulation's executor was closed, so the future was refused.
    Closed,
    /// A [replay](Simulation::replay) does not fit the program it runs:
    /// it names a task that is not waiting to run where it says, or some
    /// of its departures never came up. The program is not the one the
    /// replay was recorded from, or it changed where it matters.
    ReplayMismatch(String),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Deadlock(dump) => write!(
                f,
                "deadlock: no task can run, no timer is pending, and the future has not finished\n{dump}"
            ),
            SimError::StepLimit { steps } => write!(
                f,
                "step limit: {steps} task polls without the future finishing (something never stops waking; Simulation::max_steps raises the limit)"
            ),
            SimError::Panicked(p) => match p.message() {
                Some(m) => write!(f, "a simulated task panicked: {m}"),
                None => f.write_str("a simulated task panicked (not with a string)"),
            },
            SimError::Closed => f.write_str("the simulation's executor is closed"),
            SimError::ReplayMismatch(why) => write!(
                f,
                "the replay does not fit this program: {why} (it was recorded from another \
                 program, or this one changed where it matters)"
            ),
        }
    }
}

impl std::error::Error for SimError {}

/// The simulation and virtual worker polling a task on this thread, in
/// its context.
fn virtual_worker<R>(f: impl FnOnce(&Cell<(*const (), usize)>) -> R) -> R {
    crate::context::with(|c| f(&c.virtual_worker))
}

/// The most virtual workers: `pool::MAX_THREADS`, spelled out rather than
/// imported, so that the simulation, a driver at the top, names no pool
/// (`second_attack::a_simulation_with_too_many_workers_panics_naming_the_limit`
/// checks that they agree).
const MAX_WORKERS: usize = 1 << 17;

/// A simulation running on this thread, innermost, as its driver: its
/// executor and clock are the ambient ones, and `block_on` runs the
/// world while it waits. Dropped, it puts back what was there before.
struct Running {
    shared: Arc<Shared>,
    exec: Exec,
    /// The context's driver, executor and timer before this one entered.
    outer: Cell<Outer>,
}

/// Owns a [`Running`] on the heap, where the context points at it, by a
/// raw pointer: the context's pointers and this one are all derived from
/// the same `Box::into_raw`, so moving the guard moves no `Box` under them.
struct Active(NonNull<Running>);

#[derive(Clone, Copy)]
struct Outer {
    driver: Option<NonNull<dyn Driver>>,
    exec: *const Exec,
    timer: *const Timer,
    /// The pool worker this thread is: none to the simulated tasks, so a
    /// `join` or a spawn of theirs does not reach a real worker's queues.
    worker: *const (),
}

impl Active {
    fn enter(shared: &Arc<Shared>) -> Active {
        let running = NonNull::from(Box::leak(Box::new(Running {
            shared: shared.clone(),
            exec: Exec::of(shared.clone()),
            outer: Cell::new(Outer {
                driver: None,
                exec: std::ptr::null(),
                timer: std::ptr::null(),
                worker: std::ptr::null(),
            }),
        })));
        // SAFETY: just leaked, freed only by this guard's drop.
        let me = unsafe { running.as_ref() };
        let driver: &dyn Driver = me;
        let here = Outer {
            driver: Some(NonNull::from(driver)),
            exec: &me.exec,
            timer: &me.shared.timer,
            worker: std::ptr::null(),
        };
        // SAFETY: the guard keeps what `here` points at alive, and puts
        // back what it replaced when it drops.
        me.outer.set(unsafe { here.install() });
        Active(running)
    }
}

impl Outer {
    /// Makes these the context's driver, executor and timer; returns the
    /// ones before.
    ///
    /// # Safety
    ///
    /// What they point at stays alive until the ones returned are put back.
    unsafe fn install(self) -> Outer {
        // SAFETY: the caller's contract.
        unsafe {
            Outer {
                driver: crate::context::with(|c| c.driver.replace(self.driver)),
                exec: crate::spawn::replace_ambient_executor(self.exec),
                timer: Timer::replace_ambient(self.timer),
                worker: crate::context::with(|c| c.pool_worker.replace(self.worker)),
            }
        }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        // SAFETY: leaked by `enter` for this guard alone, still alive.
        let outer = unsafe { self.0.as_ref() }.outer.get();
        // SAFETY: putting back what `enter` replaced, which was alive
        // before this simulation ran here and is still. From here on the
        // context holds no pointer into the `Running`.
        unsafe { outer.install() };
        // SAFETY: leaked by `enter`; nothing points into it any more. Its
        // `Arc`s drop with the context put back: the last reference to a
        // world ends it, which runs drops that may look the context up.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

impl Driver for Running {
    fn block_on(&self, fut: Pin<&mut dyn Future<Output = ()>>) {
        let shared = &self.shared;
        crate::signal::poll_to_end(
            fut,
            || {},
            |woken| {
                // `Inline` work queued on this thread first: it runs
                // nowhere else, as in `block_on` outside a simulation.
                if woken() || crate::inline::run_one_queued() {
                    return;
                }
                match shared.step() {
                    Ok(Stepped::Ran | Stepped::Advanced) => {}
                    Ok(Stepped::Idle) => panic!(
                        "viaduct::block_on inside a simulation waits for a future that nothing will wake: {}",
                        SimError::Deadlock(shared.dump())
                    ),
                    Err(e) => panic!("viaduct::block_on inside a simulation: {e}"),
                }
            },
        )
    }

    /// `b` as a task of the world, `a` here, and the world run until `b`
    /// is done: a join inside a simulation is simulated too.
    fn join(&self, a: &mut dyn FnMut(), b: &mut (dyn FnMut() + Send)) -> bool {
        if self.shared.closed.load(SeqCst) {
            // Refused as a task: both here, as on a pool that has shut down.
            a();
            b();
            return true;
        }
        let task: Pin<Box<dyn Future<Output = ()> + Send + '_>> = Box::pin(async move { b() });
        // SAFETY: only the lifetime changes. `b` outlives this call, and
        // the task is dropped before the call returns or unwinds: it has
        // finished, or `Finish` aborts and drops it.
        let task: Pin<Box<dyn Future<Output = ()> + Send + 'static>> =
            unsafe { std::mem::transmute(task) };
        let mut finish = Finish {
            shared: &self.shared,
            handle: self.exec.spawn(task),
        };
        a();
        // Not taken meanwhile (by a wait inside `a`): run it here, as a
        // worker takes back a half nobody stole. Left queued, a deep
        // recursion of joins would nest a wait per level.
        let queued = self.shared.world().take(finish.handle.id());
        if let Some(runnable) = queued {
            runnable.run();
        }
        let handle = &mut finish.handle;
        let mut ended = std::pin::pin!(async move {
            let _ = handle.await;
        });
        self.block_on(ended.as_mut());
        true
    }

    fn finish(&self, done: &dyn Fn() -> bool) {
        self.shared.step_until(done);
    }
}

/// The step limit of one [`Simulation::block_on`], from its first step:
/// restores the enclosing call's limit when dropped.
struct Limit<'a> {
    shared: &'a Shared,
    outer: u64,
}

impl<'a> Limit<'a> {
    fn start(shared: &'a Shared) -> Limit<'a> {
        let mut world = shared.world();
        let outer = world.limit;
        world.limit = world.steps.saturating_add(shared.max_steps.load(Relaxed));
        Limit { shared, outer }
    }

    /// No limit until dropped: for ending what must end.
    fn lifted(shared: &'a Shared) -> Limit<'a> {
        let outer = std::mem::replace(&mut shared.world().limit, u64::MAX);
        Limit { shared, outer }
    }
}

impl Drop for Limit<'_> {
    fn drop(&mut self) {
        self.shared.world().limit = self.outer;
    }
}

/// Marks a virtual worker as polling on this thread until dropped.
struct OnWorker((*const (), usize));

impl Drop for OnWorker {
    fn drop(&mut self) {
        virtual_worker(|w| w.set(self.0));
    }
}

/// What one step of the world did.
enum Stepped {
    /// A task was polled.
    Ran,
    /// Nothing could run; the clock moved to the next timer.
    Advanced,
    /// Nothing could run and no timer is pending.
    Idle,
}

impl Simulation {
    /// A world of 4 virtual workers whose every choice comes from `seed`.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::sim::Simulation;
    ///
    /// let sim = Simulation::new(42);
    /// assert_eq!(sim.seed(), 42);
    /// assert_eq!(sim.block_on(async { 1 + 1 }).unwrap(), 2);
    /// ```
    pub fn new(seed: u64) -> Simulation {
        Simulation::build(Config::new(seed), DEFAULT_MAX_STEPS)
    }

    /// A world that replays `replay`, a string [`check`] printed for a
    /// failing run: the same schedule, shrunk to the departures from the
    /// default order that the failure needs. Run the same program in it
    /// (one [`block_on`](Simulation::block_on)).
    ///
    /// A departure names tasks by the order the world first saw them in,
    /// and polls by their count, not by spawn line or step: the replay
    /// survives edits that leave the order of spawns and awaits alone. If
    /// the program changed where it matters, or is another one,
    /// `block_on` says so with [`SimError::ReplayMismatch`], rather than
    /// run some other schedule.
    ///
    /// # Errors
    ///
    /// [`ReplayError`] if `replay` is not such a string, or was damaged.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::sim::Simulation;
    ///
    /// let sim = Simulation::replay("v1;seed=7;workers=2;run=;check=25a5").unwrap();
    /// assert_eq!(sim.worker_count(), 2);
    /// assert_eq!(sim.block_on(async { 3 }).unwrap(), 3);
    /// assert!(Simulation::replay("v1;seed=7;workers=2;run=;check=0000").is_err());
    /// ```
    pub fn replay(replay: &str) -> Result<Simulation, ReplayError> {
        let replay: Replay = replay.parse()?;
        Ok(Simulation::build(
            Config {
                workers: replay.workers,
                jitter: replay.jitter,
                replay: Some(Schedule::new(&replay.departures, true)),
                ..Config::new(replay.seed)
            },
            DEFAULT_MAX_STEPS,
        ))
    }

    fn build(config: Config, max_steps: u64) -> Simulation {
        let Config { seed, workers, .. } = config;
        let shared = Arc::new_cyclic(|me: &Weak<Shared>| {
            // Where its sinks will point: the books keep a waker of each
            // task counted here.
            let header = me.as_ptr() as usize + <Shared as Embeds<TrackerHeader>>::OFFSET;
            let books = Books::new(workers, header);
            let heres = (0..workers).map(|i| Here::new(&books, i)).collect();
            Shared {
                tracker: TrackerHeader::of::<Shared>(),
                header: ExecHeader::of::<Shared>(),
                me: me.clone(),
                seed,
                world: Mutex::new(match &config.replay {
                    Some(schedule) => World::replaying(seed, workers, schedule.clone()),
                    None => World::new(seed, workers, config.strategy, config.span),
                }),
                config,
                timer: Timer::manual(),
                books,
                heres,
                live: AtomicU64::new(0),
                panics: Mutex::new(Vec::new()),
                max_steps: AtomicU64::new(max_steps),
                closed: AtomicBool::new(false),
                handles: AtomicUsize::new(1),
            }
        });
        Simulation { shared }
    }

    /// The same world with `n` virtual workers. Call it first, on the
    /// handle [`new`](Simulation::new) gave: it makes a new world, which
    /// other handles do not see.
    ///
    /// # Panics
    ///
    /// If `n` is 0: a simulation needs a worker to run anything
    /// (`workers(1)` runs one task at a time, in a seeded order). If `n`
    /// is past [`pool::MAX_THREADS`](crate::pool::MAX_THREADS): it
    /// simulates a pool, which cannot have more workers.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::sim::Simulation;
    ///
    /// let sim = Simulation::new(1).workers(8);
    /// assert_eq!(sim.worker_count(), 8);
    /// ```
    pub fn workers(self, n: usize) -> Simulation {
        assert!(
            n > 0,
            "Simulation::workers(0): a simulation needs at least one virtual worker; \
             use workers(1) to run one task at a time"
        );
        assert!(
            n <= MAX_WORKERS,
            "Simulation::workers({n}): a simulated pool has at most {MAX_WORKERS} workers, as a \
             real one does; use fewer"
        );
        self.rebuilt(|c| c.workers = n)
    }

    /// A new world, configured as this one but for `change`.
    fn rebuilt(&self, change: impl FnOnce(&mut Config)) -> Simulation {
        let mut config = self.shared.config.clone();
        change(&mut config);
        Simulation::build(config, self.shared.max_steps.load(Relaxed))
    }

    /// The same world, choosing its schedule by `strategy`. Call it first,
    /// as [`workers`](Simulation::workers): it makes a new world.
    ///
    /// # Panics
    ///
    /// On [`Strategy::Pct`] with a depth of 0: the smallest depth, 1, runs
    /// each task until it blocks.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::sim::{Simulation, Strategy};
    ///
    /// let sim = Simulation::new(1).strategy(Strategy::Pct { depth: 3 }).workers(2);
    /// assert_eq!(sim.block_on(async { 7 }).unwrap(), 7);
    /// ```
    pub fn strategy(self, strategy: Strategy) -> Simulation {
        if let Strategy::Pct { depth: 0 } = strategy {
            panic!(
                "Simulation::strategy(Strategy::Pct {{ depth: 0 }}): the depth is one more than \
                 the preemptions a run makes, so it is at least 1 (which runs each task until it \
                 blocks); 3 finds most bugs"
            );
        }
        self.rebuilt(|c| {
            c.strategy = strategy;
            c.replay = None;
        })
    }

    /// The same world, with time that is not exact: each timer fires up
    /// to `max` late, and each poll may take up to `max` of virtual time
    /// (timers falling due meanwhile fire while other tasks are mid-way).
    /// Both are drawn from the seed, half of them zero. Without it, work
    /// takes no time and every duration is exact, so two tasks only
    /// overlap when their waits end at the same instant; with it, a race
    /// between a timeout and a reply, or between jobs whose waits end
    /// close together, is found. Call it first, as
    /// [`workers`](Simulation::workers): it makes a new world.
    ///
    /// `max` is clamped to one hour (a timer an hour late is as late as a
    /// simulation needs); zero turns jitter off.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::sim::Simulation;
    ///
    /// let sim = Simulation::new(8).jitter(Duration::from_millis(5));
    /// let t = sim.timer();
    /// sim.block_on(async move { t.sleep(Duration::from_secs(1)).await }).unwrap();
    /// let late = sim.elapsed() - Duration::from_secs(1);
    /// assert!(late <= Duration::from_millis(10)); // never early; the fire and a poll late
    /// ```
    pub fn jitter(self, max: Duration) -> Simulation {
        let max = max.min(MAX_JITTER).as_nanos() as u64;
        self.rebuilt(|c| c.jitter = max)
    }

    /// Stops each [`block_on`](Simulation::block_on) with
    /// [`SimError::StepLimit`] once it has taken `steps` steps (task polls
    /// and clock moves) since it began; default [`DEFAULT_MAX_STEPS`].
    /// The world survives a stop: its tasks are still there, and the next
    /// `block_on` runs them again, with a fresh count.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::sim::{SimError, Simulation};
    ///
    /// let sim = Simulation::new(1).max_steps(1_000);
    /// let spin = async {
    ///     loop {
    ///         viaduct::coop::consume_budget().await; // yields now and then: never settles
    ///     }
    /// };
    /// assert!(matches!(sim.block_on(spin), Err(SimError::StepLimit { steps: 1_000 })));
    /// ```
    pub fn max_steps(self, steps: u64) -> Simulation {
        self.shared.max_steps.store(steps, Relaxed);
        self
    }

    /// The seed this world draws its choices from.
    pub fn seed(&self) -> u64 {
        self.shared.seed
    }

    /// How many virtual workers it has.
    pub fn worker_count(&self) -> usize {
        self.shared.heres.len()
    }

    /// The simulated pool: tasks spawned on it run on the virtual workers
    /// when [`block_on`](Simulation::block_on) drives the world.
    ///
    /// Closing it (`Executor::close`) refuses new tasks, as a pool does.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::sim::Simulation;
    /// use viaduct::Guarded;
    ///
    /// let sim = Simulation::new(3);
    /// let counter = Guarded::new(sim.executor(), 0u32); // a strand on the simulated pool
    /// let c = counter.clone();
    /// let total = sim.block_on(async move {
    ///     for _ in 0..10 {
    ///         c.post(|n| *n += 1);
    ///     }
    ///     c.with(|n| *n).await.unwrap()
    /// });
    /// assert_eq!(total.unwrap(), 10);
    /// ```
    pub fn executor(&self) -> Exec {
        Exec::of(self.shared.clone())
    }

    /// The simulated clock. It stands still while tasks can run, and jumps
    /// to the next deadline when none can, firing what is due; timers due
    /// at the same instant fire in a seeded order.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::sim::Simulation;
    ///
    /// let sim = Simulation::new(5);
    /// let timer = sim.timer();
    /// let start = timer.now();
    /// let t = timer.clone();
    /// sim.block_on(async move { t.sleep(Duration::from_secs(3600)).await }).unwrap();
    /// assert_eq!(timer.now() - start, Duration::from_secs(3600)); // an hour, at once
    /// ```
    pub fn timer(&self) -> Timer {
        self.shared.timer.clone()
    }

    /// Simulated time since the world began.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.shared.timer.now_ns())
    }

    /// Steps taken so far in this world: task polls and moves of the
    /// clock.
    pub fn steps(&self) -> u64 {
        self.shared.world().steps
    }

    /// A hash of every choice made and every clock move so far: equal for
    /// two runs of the same program from the same seed, and (almost
    /// always) different when anything in the schedule differed.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::prelude::*;
    /// use viaduct::sim::Simulation;
    ///
    /// let run = |seed| {
    ///     let sim = Simulation::new(seed);
    ///     let ex = sim.executor();
    ///     sim.block_on(async move {
    ///         let hs: Vec<_> = (0..8).map(|i| ex.spawn(async move { i })).collect();
    ///         for h in hs {
    ///             h.await.unwrap();
    ///         }
    ///     })
    ///     .unwrap();
    ///     sim.trace_hash()
    /// };
    /// assert_eq!(run(11), run(11));
    /// ```
    pub fn trace_hash(&self) -> u64 {
        self.shared.world().trace
    }

    /// Every live task of the world now, as a [`TaskDump`] (what a
    /// deadlock reports).
    pub fn dump(&self) -> TaskDump {
        self.shared.dump()
    }

    /// Spawns `fut` on the simulated pool and runs the world until it
    /// finishes: its output, or why there is none. It does not hang on a
    /// wait: when nothing can run and no timer is pending (a timer of
    /// `Duration::MAX` never comes) it returns [`SimError::Deadlock`], and
    /// after [`max_steps`](Simulation::max_steps) steps
    /// [`SimError::StepLimit`]. A poll that never returns (a loop with no
    /// `.await`, a blocking call) holds the thread the world runs on, and
    /// cannot be stopped.
    ///
    /// While it runs, [`spawn`](crate::spawn), [`run`](crate::run),
    /// [`JoinSet::spawn`](crate::JoinSet::spawn), the [`time`](crate::time)
    /// functions, [`TimedExt`](crate::TimedExt) and
    /// [`CancellationToken::cancel_after`](crate::cancel::CancellationToken::cancel_after)
    /// use this world's pool and clock. It may be called again on the same
    /// world: tasks left over from an earlier call go on running.
    ///
    /// # Errors
    ///
    /// See [`SimError`]. On an error the future's task is aborted.
    ///
    /// # Examples
    ///
    /// Two tasks that lock two values in opposite orders:
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::prelude::*;
    /// use viaduct::sim::{SimError, Simulation};
    /// use viaduct::Guarded;
    ///
    /// let sim = Simulation::new(9);
    /// let ex = sim.executor();
    /// let outcome = sim.block_on(async move {
    ///     let (a, b) = (Guarded::new(ex.clone(), 0), Guarded::new(ex.clone(), 0));
    ///     let (a2, b2) = (a.clone(), b.clone());
    ///     let one = ex.spawn(async move {
    ///         let _a = a.lock().await;
    ///         viaduct::time::sleep(Duration::from_millis(1)).await;
    ///         let _b = b.lock().await;
    ///     });
    ///     let two = ex.spawn(async move {
    ///         let _b = b2.lock().await;
    ///         viaduct::time::sleep(Duration::from_millis(1)).await;
    ///         let _a = a2.lock().await;
    ///     });
    ///     one.await.unwrap();
    ///     two.await.unwrap();
    /// });
    /// let Err(SimError::Deadlock(dump)) = outcome else { panic!("{outcome:?}") };
    /// assert_eq!(dump.deadlocks()[0].steps().len(), 2); // the two tasks, each waiting on the other
    /// ```
    #[track_caller]
    pub fn block_on<'a, F>(&self, fut: F) -> Result<F::Output, SimError>
    where
        F: Future + Send + 'a,
        F::Output: Send + 'a,
    {
        let shared = &self.shared;
        let _active = Active::enter(shared);
        let _limit = Limit::start(shared);
        let slot = Arc::new(Mutex::new(None));
        let out = slot.clone();
        let task: Pin<Box<dyn Future<Output = ()> + Send + 'a>> = Box::pin(async move {
            let value = fut.await;
            *crate::loom::lock_std(&out) = Some(value);
        });
        // SAFETY: only the lifetime changes. What the future borrows
        // outlives this call, and the future is dropped before the call
        // returns or unwinds: the task is finished on success, and
        // `Finish` aborts it and drops it otherwise. Its output goes
        // through `slot`, which this call empties.
        let task: Pin<Box<dyn Future<Output = ()> + Send + 'static>> =
            unsafe { std::mem::transmute(task) };
        let mut finish = Finish {
            shared,
            handle: self.executor().spawn(task),
        };
        shared.drive(&|| finish.handle.is_finished())?;
        let waker = futures::task::noop_waker();
        // The caller's spent budget must not hold back a finished handle.
        let _lifted = crate::coop::lifted();
        // Finished means its future is dropped; the result follows at
        // once, from the thread that dropped it (here, unless the task
        // hopped to a real executor).
        let ended = loop {
            match Pin::new(&mut finish.handle).poll(&mut Context::from_waker(&waker)) {
                Poll::Ready(ended) => break ended,
                Poll::Pending => std::thread::yield_now(),
            }
        };
        let unused = shared.world().unused_departures();
        if unused > 0 && shared.live.load(Relaxed) == 0 {
            return Err(SimError::ReplayMismatch(format!(
                "the program ended with {unused} of its departures not come up"
            )));
        }
        match ended {
            Ok(()) => Ok(crate::loom::lock_std(&slot)
                .take()
                .expect("a finished task stored its output")),
            Err(TaskError::Panicked(p)) => Err(SimError::Panicked(p)),
            Err(_) => Err(SimError::Closed),
        }
    }
}

/// The task of a [`Simulation::block_on`], which may borrow from its
/// caller: dropped, it makes sure the task's future is gone.
struct Finish<'a> {
    shared: &'a Shared,
    handle: JoinHandle<()>,
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        if self.handle.is_finished() {
            return;
        }
        // Aborted, the task is queued to be dropped (or dropped at once on
        // an ended world): run it here, past the step limit, for it must
        // go before the call returns. Queued on an executor over the world
        // (a strand it hopped to), it needs the world stepped; on another
        // thread's executor, it needs that executor: wait for it.
        self.handle.abort();
        let finished = || self.handle.is_finished();
        while !finished() {
            let queued = self.shared.world().take(self.handle.id());
            match queued {
                Some(runnable) => {
                    runnable.run();
                }
                None => {
                    self.shared.step_until(&finished);
                    if !finished() {
                        std::thread::sleep(std::time::Duration::from_micros(100));
                    }
                }
            }
        }
    }
}

impl Shared {
    fn world(&self) -> MutexGuard<'_, World> {
        // Nothing runs user code under the lock, so a poisoned world is
        // still a consistent one.
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn dump(&self) -> TaskDump {
        TaskDump::collect(
            "simulation",
            |i| format!("sim-{i}"),
            &self.books,
            || self.live.load(Relaxed),
            crate::time::waiting_tasks,
            self.timer.now(),
        )
    }

    /// Steps the world until `done`, a panic nobody will read, or an error.
    fn drive(&self, done: &dyn Fn() -> bool) -> Result<(), SimError> {
        loop {
            let panic = crate::loom::lock_std(&self.panics).drain(..).next();
            if let Some(p) = panic {
                return Err(SimError::Panicked(Panic::new(p)));
            }
            if done() {
                return Ok(());
            }
            match self.step()? {
                Stepped::Ran | Stepped::Advanced => {}
                Stepped::Idle => return Err(SimError::Deadlock(self.dump())),
            }
        }
    }

    /// Polls one task, or moves the clock if none can run: one step
    /// either way, within the limit.
    fn step(&self) -> Result<Stepped, SimError> {
        let picked = {
            let mut world = self.world();
            if world.orphaned {
                // Ended: nothing runs, and the clock stays (a `Drop` that
                // blocks during the end finds nothing to wait for).
                return Ok(Stepped::Idle);
            }
            if world.steps >= world.limit {
                let steps = self.max_steps.load(Relaxed);
                return Err(SimError::StepLimit { steps });
            }
            let picked = world.pick().map_err(|misfit| {
                SimError::ReplayMismatch(match misfit.after {
                    Some((key, polls)) => format!(
                        "after poll {polls} of task {key} the replay polls task {}, which is not \
                         waiting to run then",
                        misfit.wanted
                    ),
                    None => format!(
                        "the replay polls task {} first, which is not waiting to run then",
                        misfit.wanted
                    ),
                })
            })?;
            if let Some(p) = &picked {
                world.steps += 1;
                world.record(&[p.worker as u64, p.source as u64, u64::from(p.key)]);
            }
            picked
        };
        if let Some(p) = picked {
            let _on = OnWorker(virtual_worker(|w| {
                w.replace((self as *const Shared as *const (), p.worker))
            }));
            let _here = crate::dump::records::enter_worker(&self.heres[p.worker]);
            crate::coop::take_held_back();
            crate::coop::with_fresh_budget(p.budget, || p.runnable.run());
            let held_back = crate::coop::take_held_back();
            self.world().polled(held_back);
            // With jitter, the poll took time: what fell due meanwhile
            // fires now, while other tasks may be mid-way.
            let worked = self.jitter_of(&[u64::from(p.key), u64::from(p.polls)]);
            if worked > 0 {
                let at = self.timer.now_ns().saturating_add(worked);
                let panic = self.advance_to(at);
                if let Some(p) = panic {
                    return Err(SimError::Panicked(Panic::new(p)));
                }
            }
            return Ok(Stepped::Ran);
        }
        let Some(at) = self.timer.next_expiration() else {
            return Ok(Stepped::Idle);
        };
        let at = {
            // A clock move is a step too (the limit was checked above):
            // timers whose jobs run where they fire (on `Inline`) move
            // the world without a poll.
            let mut world = self.world();
            world.steps += 1;
            // With jitter, the timers due next fire late, with the others
            // due by then, in a shuffled order.
            let at = at.saturating_add(self.jitter_of(&[u64::MAX, world.advances]));
            world.record(&[at]);
            at
        };
        let panic = self.advance_to(at);
        match panic {
            Some(p) => Err(SimError::Panicked(Panic::new(p))),
            None => Ok(Stepped::Advanced),
        }
    }

    /// Steps the world, past the step limit, until `done()` or nothing
    /// can run: for tasks that must end before a frame that they borrow
    /// from unwinds.
    fn step_until(&self, done: &dyn Fn() -> bool) {
        let _unlimited = Limit::lifted(self);
        while !done() && matches!(self.step(), Ok(Stepped::Ran | Stepped::Advanced)) {}
    }

    /// Moves the clock to `at`, firing what is due by then, those due
    /// together in a seeded order: keyed by the seed and the move, so a
    /// replay that moves the clock as the run did fires them in its order.
    fn advance_to(&self, at: u64) -> Option<PanicPayload> {
        let advance = {
            let mut world = self.world();
            world.advances += 1;
            world.advances
        };
        self.timer.advance_to_shuffled(at, &mut |n| {
            (self.keyed(&[u64::MAX - 1, advance, n as u64]) % n as u64) as usize
        })
    }

    /// A number drawn from the seed for the event named by `words`: the
    /// same whatever else the run drew before.
    fn keyed(&self, words: &[u64]) -> u64 {
        let mut h = self.seed ^ 0x6a09_e667_f3bc_c908;
        for &w in words {
            h = world::Rng::new(h ^ w).next();
        }
        h
    }

    /// A seeded lateness of up to the jitter, for the event named by
    /// `words`: a function of the seed and those words alone, so a replay
    /// that polls the same tasks the same number of times sees the same.
    fn jitter_of(&self, words: &[u64]) -> u64 {
        let max = self.config.jitter;
        if max == 0 {
            return 0;
        }
        let h = self.keyed(words);
        // Half the events take no time: most work is quick, and exact
        // instants keep their ties for the shuffle to order.
        if h & 1 == 0 {
            return 0;
        }
        ((u128::from(h >> 1) * (u128::from(max) + 1)) >> 63) as u64
    }

    /// Counts a task in, unless the simulation's executor is closed.
    fn count_in(&self) -> Result<Admission, RejectReason> {
        if self.closed.load(SeqCst) {
            return Err(RejectReason::Closed);
        }
        self.live.fetch_add(1, Relaxed);
        // SAFETY: `self` is borrowed, and a simulation's `Shared` is only
        // reached through an `Arc` (a handle, an `Exec`, a task's home).
        Ok(Admission::counted(unsafe { Sink::new(&self.me) }))
    }

    /// Nobody will run the world again: every task in it is cancelled,
    /// and so is every timer; the clock stays where it is. Queued tasks
    /// are dropped. Every task the world counts (the simulated pool's,
    /// those of strands and priority executors over it) that ever waited
    /// on a virtual worker is in its book with a waker: each is aborted,
    /// in task id order, and so dropped by the world (which drops
    /// whatever is scheduled on it now) or by the executor over it that
    /// the world refuses; one that first waits later is aborted then.
    /// Ending an ended world does nothing more.
    fn end(&self) {
        self.closed.store(true, SeqCst);
        let queued = {
            let mut world = self.world();
            world.orphaned = true;
            world.drain()
        };
        // Still this world's thread: what the drops spawn or time comes
        // here and is refused, rather than escaping to a real pool.
        let _active = self.me.upgrade().map(|me| Active::enter(&me));
        // First, so no timer fires or is set while tasks are dropped.
        self.timer.stop();
        drop(queued);
        for (_, waker) in self.books.abort_all() {
            waker.wake();
        }
    }
}

// SAFETY: `OFFSET` is the offset of the `tracker` field, which holds
// `TrackerHeader::of::<Shared>()`, and a `Shared` lives in an `Arc` (see
// `Simulation::build`).
unsafe impl Embeds<TrackerHeader> for Shared {
    const OFFSET: usize = std::mem::offset_of!(Shared, tracker);
}

impl Tracker for Shared {
    fn release(&self) {
        self.live.fetch_sub(1, Relaxed);
    }

    fn unobserved_panic(&self, payload: PanicPayload) {
        crate::loom::lock_std(&self.panics).push(payload);
    }
}

// SAFETY: `header` holds `ExecHeader::of::<Shared>()` (see `build`), and a
// `Shared` lives in an `Arc`, which `me` points to.
unsafe impl Embeds<ExecHeader> for Shared {
    const OFFSET: usize = std::mem::offset_of!(Shared, header);
}

impl Executor for Shared {
    fn schedule(&self, runnable: Runnable) {
        let Some(runnable) = Metadata::adopt(runnable, || self.count_in()) else {
            return;
        };
        let (sim, worker) = virtual_worker(Cell::get);
        let on = std::ptr::eq(sim, (self as *const Shared).cast()).then_some(worker);
        let mut world = self.world();
        if world.orphaned {
            drop(world);
            drop(runnable); // cancels the task: nobody is left to run it
            return;
        }
        world.push(on, runnable);
    }

    fn close(&self) {
        self.closed.store(true, SeqCst);
    }

    fn is_closed(&self) -> bool {
        self.closed.load(SeqCst)
    }

    /// One step of the world, if one can be taken, with the simulation
    /// running (as in [`Simulation::block_on`]).
    fn try_run_one(&self) -> bool {
        let Some(me) = self.me.upgrade() else {
            return false;
        };
        let _active = Active::enter(&me);
        let _limit = Limit::start(self);
        matches!(self.step(), Ok(Stepped::Ran | Stepped::Advanced))
    }

    fn name(&self) -> &str {
        "simulation"
    }
    fn own(&self, _: Internal) -> Option<&dyn Own> {
        Some(self)
    }
}

impl Own for Shared {
    fn admission(&self, _wait: bool) -> Result<Admission, RejectReason> {
        self.count_in()
    }

    fn home(&self) -> Option<Exec> {
        self.me.upgrade().map(Exec::of)
    }

    fn lets_steps_wait_in_line(&self) -> bool {
        true
    }
}

impl Clone for Simulation {
    fn clone(&self) -> Simulation {
        self.shared.handles.fetch_add(1, Relaxed);
        Simulation {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Simulation {
    fn drop(&mut self) {
        if self.shared.handles.fetch_sub(1, AcqRel) == 1 {
            self.shared.end();
        }
    }
}

impl fmt::Debug for Simulation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulation")
            .field("seed", &self.seed())
            .field("workers", &self.worker_count())
            .field("strategy", &self.shared.config.strategy)
            .field("jitter", &Duration::from_nanos(self.shared.config.jitter))
            .field("replaying", &self.shared.config.replay.is_some())
            .field("steps", &self.steps())
            .field("elapsed", &self.elapsed())
            .finish()
    }
}
