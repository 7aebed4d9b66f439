//! [`ThreadPool`]: the work-stealing pool, viaduct's default executor.
//!
//! The design note is `src/pool/README.md`; in short: per-worker
//! `crossbeam-deque` queues (a FIFO one for tasks, a LIFO one for `join`
//! halves) plus a global injector, a LIFO slot for the task a worker just
//! woke, batch stealing, an injector check every 61 ticks, and idle workers
//! parked on a flag and std's thread parking (see `idle.rs`).
//!
//! # Shutdown
//!
//! 1. `close()` flips the state to closed: admission refuses new tasks, but
//!    wake-ups of accepted ones are still scheduled and run.
//! 2. Every accepted task holds an admission until its future is dropped
//!    (a task that a user's executor forwards here is counted in at its
//!    first `schedule`); when the last one is dropped in a closed pool, or
//!    when `shutdown_now()` flips the state to stopping, every worker is
//!    woken and exits once it finds no work (or, when stopping, right after
//!    its current job).
//! 3. The last worker to exit marks the pool terminated and drains the
//!    queues: task runnables are dropped (their handles say `Cancelled`),
//!    `join` halves are run, because a thread is waiting for them.
//! 4. A runnable scheduled after that is dropped by `schedule` itself; the
//!    check comes after the push, so a push racing the drain is never
//!    stranded.
//!
//! # Examples
//!
//! The shutdown steps from the outside: a closed pool refuses new work,
//! finishes what it accepted, then its workers exit.
//!
//! ```
//! use viaduct::pool::Builder;
//! use viaduct::{block_on, ExecutorExt, RejectReason, ThreadPool};
//!
//! let pool: ThreadPool = Builder::default().threads(2).name("cpu").build().unwrap();
//! let accepted: Vec<_> = (0..4).map(|i| pool.run(move || i * 10)).collect();
//! pool.close();
//! assert_eq!(pool.try_execute(|| ()).unwrap_err().reason(), RejectReason::Closed);
//! pool.join_workers().unwrap();
//! let results: Vec<i32> = accepted.into_iter().map(|h| block_on(h).unwrap()).collect();
//! assert_eq!(results, [0, 10, 20, 30]);
//! ```

mod builder;
mod idle;
mod job;
mod join;
#[cfg(feature = "tokio")]
mod reactor;
mod stall;
mod worker;

pub use builder::{BuildError, Builder, MAX_THREADS, MIN_STACK_SIZE};
pub use stall::Stall;

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, Weak};
use std::thread;

use crossbeam_deque::{Injector, Stealer};
use crossbeam_utils::CachePadded;
use event_listener::{Event, Listener};

use crate::admission::{admitting_past_limit, Admission, Sink, Tracker, TrackerHeader};
use crate::embedded::Embeds;
use crate::error::{drop_payload, PanicPayload, RejectReason};
use crate::executor::ExecHeader;
use crate::executor::Runnable;
use crate::executor::{Exec, Executor, Internal, Own};
use crate::spawn::impl_spawn;
use crate::task::Metadata;
use job::Job;
pub(crate) use worker::with_worker;

type Hook = Arc<dyn Fn() + Send + Sync>;
type PanicHandler = Arc<dyn Fn(PanicPayload) + Send + Sync>;

const OPEN: u8 = 0;
const CLOSED: u8 = 1;
const STOPPING: u8 = 2;

/// A work-stealing thread pool.
///
/// Cheap to clone: every clone is a handle to the same pool. Dropping the
/// last handle closes the pool; its workers finish what was accepted and
/// exit.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(2).name("cpu").build().unwrap();
/// let handles: Vec<_> = (0..10).map(|i| pool.spawn(async move { i * i })).collect();
/// let sum: i32 = handles.into_iter().map(|h| block_on(h).unwrap()).sum();
/// assert_eq!(sum, 285);
/// pool.shutdown().unwrap();
/// ```
pub struct ThreadPool {
    shared: Arc<Shared>,
}

pub(crate) struct Shared {
    name: String,
    injector: Injector<Job>,
    stealers: Box<[Stealer<Job>]>,
    fork_stealers: Box<[Stealer<job::JobRef>]>,
    idle: idle::Idle,
    state: AtomicU8,
    terminated: std::sync::atomic::AtomicBool,
    /// Tasks admitted, ever. With `finished`, gives the live count; the two
    /// live on separate cache lines because spawners write one and workers
    /// the other.
    spawned: CachePadded<AtomicU64>,
    finished: CachePadded<AtomicU64>,
    max_pending: Option<u64>,
    /// Notified when a bounded pool frees a slot; workers waiting for room
    /// are on `room_waiters` instead, to be unparked.
    room: Event,
    room_waiters: Mutex<Vec<usize>>,
    stats: Box<[CachePadded<WorkerStats>]>,
    /// User-visible `ThreadPool` handles; the last one to drop closes.
    handles: AtomicUsize,
    running_workers: AtomicUsize,
    all_exited: Event,
    threads: Mutex<Vec<thread::JoinHandle<()>>>,
    on_start: Option<Hook>,
    on_stop: Option<Hook>,
    on_panic: Option<PanicHandler>,
    /// What each worker polls, and the tasks that waited on it.
    books: Arc<crate::dump::records::Books>,
    /// The stall watcher, if any: woken when the pool terminates.
    watcher: std::sync::OnceLock<thread::Thread>,
    /// This very `Shared`, for admissions made through `&self`.
    me: Weak<Shared>,
    /// How admissions reach `release` and `unobserved_panic`.
    tracker: TrackerHeader,
    /// What an `Exec` of this pool points to.
    header: ExecHeader,
    /// The tokio runtime the workers entered, and the reactor they drive
    /// if it is the pool's own.
    #[cfg(feature = "tokio")]
    tokio: Option<reactor::TokioLink>,
}

#[derive(Default)]
struct WorkerStats {
    stolen: AtomicU64,
    parked: AtomicU64,
}

impl WorkerStats {
    /// Only the owning worker writes its stats, so a load and a store do.
    fn bump(counter: &AtomicU64) {
        counter.store(counter.load(Relaxed) + 1, Relaxed);
    }
}

/// Why a wait for an executor's threads could not happen.
///
/// # Examples
///
/// ```
/// use viaduct::pool::WaitError;
/// use viaduct::{block_on, ExecutorExt, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(1).build().unwrap();
/// let p = pool.clone();
/// // A worker joining its own pool would wait for itself.
/// let inside = block_on(pool.run(move || p.join_workers())).unwrap();
/// assert_eq!(inside, Err(WaitError::OwnThread));
/// assert_eq!(pool.shutdown(), Ok(())); // from outside it works
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitError {
    /// The wait (`join_workers`, `shutdown`, `join_threads`) was called
    /// from one of the executor's own threads, which would wait for itself
    /// forever. Close the executor there and wait from outside.
    OwnThread,
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("waited for an executor's threads from one of those threads, which would wait for itself; call close() there and wait from another thread")
    }
}

impl std::error::Error for WaitError {}

/// A snapshot of a pool's counters; see [`ThreadPool::metrics`].
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(2).build().unwrap();
/// for i in 0..10 {
///     assert_eq!(block_on(pool.run(move || i)).unwrap(), i);
/// }
/// pool.shutdown().unwrap();
/// let m = pool.metrics();
/// assert_eq!(m.threads, 2);
/// assert_eq!(m.spawned, 10);
/// assert_eq!(m.completed, 10);
/// assert_eq!(m.queued, 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Metrics {
    /// Worker threads.
    pub threads: usize,
    /// Tasks accepted since the pool started.
    pub spawned: u64,
    /// Accepted tasks that are over: finished, panicked or cancelled.
    pub completed: u64,
    /// Jobs a worker took from another worker's queue.
    pub stolen: u64,
    /// Times a worker went to sleep for lack of work.
    pub parked: u64,
    /// Runnables waiting in the queues right now (approximate; a worker's
    /// LIFO slot is not counted).
    pub queued: usize,
}

impl ThreadPool {
    /// A [`Builder`] with default settings.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::ThreadPool;
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// assert_eq!(pool.threads(), 1);
    /// ```
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The pool whose worker thread is calling, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// assert!(ThreadPool::current().is_none());
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let p = pool.clone();
    /// let inside = pool.run(move || ThreadPool::current().unwrap().same_pool(&p));
    /// assert!(block_on(inside).unwrap());
    /// ```
    pub fn current() -> Option<ThreadPool> {
        with_worker(|w| w.map(|w| ThreadPool::from_shared(w.shared().clone())))
    }

    /// The process-wide default pool, built on first use with the default
    /// settings and threads named `viaduct-N`.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let global = ThreadPool::global();
    /// assert!(global.same_pool(ThreadPool::global())); // built once
    /// let name = block_on(global.run(|| std::thread::current().name().map(str::to_owned))).unwrap();
    /// assert!(name.unwrap().starts_with("viaduct-"));
    /// ```
    pub fn global() -> &'static ThreadPool {
        static GLOBAL: std::sync::OnceLock<ThreadPool> = std::sync::OnceLock::new();
        GLOBAL.get_or_init(|| {
            ThreadPool::builder()
                .build_anywhere()
                .expect("viaduct: could not start the global thread pool")
        })
    }

    pub(crate) fn from_shared(shared: Arc<Shared>) -> ThreadPool {
        shared.hold_open();
        ThreadPool { shared }
    }

    /// `true` if both handles refer to the same pool.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::ThreadPool;
    ///
    /// let a = ThreadPool::builder().threads(1).build().unwrap();
    /// let b = ThreadPool::builder().threads(1).build().unwrap();
    /// assert!(a.same_pool(&a.clone()));
    /// assert!(!a.same_pool(&b));
    /// ```
    pub fn same_pool(&self, other: &ThreadPool) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Number of worker threads.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::ThreadPool;
    ///
    /// let pool = ThreadPool::builder().threads(2).build().unwrap();
    /// assert_eq!(pool.threads(), 2);
    /// ```
    pub fn threads(&self) -> usize {
        self.shared.stats.len()
    }

    /// Stops accepting new tasks; accepted ones still run to completion.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, RejectReason, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let accepted = pool.run(|| "still runs");
    /// pool.close();
    /// assert_eq!(pool.try_execute(|| ()).unwrap_err().reason(), RejectReason::Closed);
    /// assert_eq!(block_on(accepted).unwrap(), "still runs");
    /// ```
    pub fn close(&self) {
        self.shared.close();
    }

    /// `true` once the pool is closed.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::ThreadPool;
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// assert!(!pool.is_closed());
    /// pool.close();
    /// assert!(pool.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.shared.state.load(SeqCst) != OPEN
    }

    /// Waits until the pool is closed, every accepted task is over, and all
    /// workers have exited (boost's `join`; renamed because
    /// [`join`](ThreadPool::join) is fork-join). Does not close the pool
    /// itself: see [`shutdown`](ThreadPool::shutdown).
    ///
    /// # Errors
    ///
    /// [`WaitError::OwnThread`] when called from one of this pool's
    /// workers, which would wait for itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use viaduct::{ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(2).build().unwrap();
    /// let done = Arc::new(AtomicUsize::new(0));
    /// for _ in 0..8 {
    ///     let done = done.clone();
    ///     pool.execute(move || {
    ///         done.fetch_add(1, Ordering::SeqCst);
    ///     });
    /// }
    /// pool.close();
    /// pool.join_workers().unwrap();
    /// assert_eq!(done.load(Ordering::SeqCst), 8); // every accepted task ran
    /// ```
    pub fn join_workers(&self) -> Result<(), WaitError> {
        // By thread, not by worker context: a worker's last acts (dropping
        // what its queues still held) run after its context is gone, and
        // may run user code (a future's `Drop`) that shuts the pool down.
        let me = thread::current().id();
        let own_worker = with_worker(|w| w.is_some_and(|w| Arc::ptr_eq(w.shared(), &self.shared)));
        if own_worker
            || crate::loom::lock_std(&self.shared.threads)
                .iter()
                .any(|t| t.thread().id() == me)
        {
            return Err(WaitError::OwnThread);
        }
        loop {
            let listener = self.shared.all_exited.listen();
            if self.shared.running_workers.load(SeqCst) == 0 {
                break;
            }
            listener.wait();
        }
        let threads = std::mem::take(&mut *crate::loom::lock_std(&self.shared.threads));
        for t in threads {
            // Worker bodies catch every panic of tasks and hooks.
            let _ = t.join();
        }
        Ok(())
    }

    /// [`close`](ThreadPool::close), then [`join_workers`](ThreadPool::join_workers).
    ///
    /// # Errors
    ///
    /// As [`join_workers`](ThreadPool::join_workers); the pool is closed either way.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let h = pool.run(|| 7);
    /// pool.shutdown().unwrap();
    /// assert!(pool.is_closed());
    /// assert!(h.is_finished());
    /// assert_eq!(block_on(h).unwrap(), 7);
    /// ```
    pub fn shutdown(&self) -> Result<(), WaitError> {
        self.close();
        self.join_workers()
    }

    /// Closes the pool, cancels every task still queued (their handles
    /// resolve to [`TaskError::Cancelled`](crate::TaskError::Cancelled)),
    /// lets running tasks finish their current poll, and joins the workers.
    /// Tasks woken later are cancelled too.
    ///
    /// # Errors
    ///
    /// As [`join_workers`](ThreadPool::join_workers); the pool is stopping either way.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let (go, wait) = mpsc::channel::<()>();
    /// let p = pool.clone();
    /// // Occupy the only worker, then stop the pool from inside it.
    /// let busy = pool.run(move || {
    ///     wait.recv().unwrap();
    ///     p.shutdown_now().is_err() // stops the pool; a worker cannot join itself
    /// });
    /// let queued = pool.run(|| "never runs");
    /// go.send(()).unwrap();
    /// assert!(block_on(busy).unwrap());
    /// assert!(block_on(queued).unwrap_err().is_cancelled());
    /// pool.join_workers().unwrap();
    /// ```
    pub fn shutdown_now(&self) -> Result<(), WaitError> {
        self.shared.stop();
        self.join_workers()
    }

    /// Runs one pending task on the calling thread. Returns whether one ran.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let (started_tx, started) = mpsc::channel();
    /// let (go, wait) = mpsc::channel::<()>();
    /// let busy = pool.run(move || {
    ///     started_tx.send(()).unwrap();
    ///     wait.recv().unwrap()
    /// });
    /// started.recv().unwrap(); // the only worker is busy now
    /// let here = pool.run(|| std::thread::current().name().map(str::to_owned));
    /// assert!(pool.try_run_one()); // so this thread runs the queued task
    /// assert_eq!(block_on(here).unwrap().as_deref(), std::thread::current().name());
    /// go.send(()).unwrap();
    /// block_on(busy).unwrap();
    /// ```
    pub fn try_run_one(&self) -> bool {
        self.shared.try_run_one()
    }

    /// Runs pending tasks on the calling thread until `pred()` holds (boost
    /// `reschedule_until`). Returns `true` when `pred()` held, `false` when
    /// the queues ran dry first.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::{mpsc, Arc};
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let (started_tx, started) = mpsc::channel();
    /// let (go, wait) = mpsc::channel::<()>();
    /// let busy = pool.run(move || {
    ///     started_tx.send(()).unwrap();
    ///     wait.recv().unwrap()
    /// });
    /// started.recv().unwrap(); // the only worker is busy now
    /// let flag = Arc::new(AtomicBool::new(false));
    /// let setter = flag.clone();
    /// pool.execute(move || setter.store(true, Ordering::SeqCst));
    /// assert!(pool.reschedule_until(|| flag.load(Ordering::SeqCst)));
    /// assert!(!pool.reschedule_until(|| false)); // the queues ran dry
    /// go.send(()).unwrap();
    /// block_on(busy).unwrap();
    /// ```
    pub fn reschedule_until(&self, mut pred: impl FnMut() -> bool) -> bool {
        loop {
            if pred() {
                return true;
            }
            if !self.try_run_one() {
                return pred();
            }
        }
    }

    /// Runs `a` and `b`, potentially in parallel, and returns both results
    /// (rayon's `join`). The closures may borrow from the caller's stack.
    ///
    /// On a worker of this pool, `b` is offered to other workers while `a`
    /// runs here, and taken back if nobody stole it; no heap allocation is
    /// made. From any other thread the pair is handed to a worker and the
    /// caller blocks. If the pool has shut down, both run on the caller.
    /// In a task of a [simulation](crate::sim), `b` is a task of the
    /// simulation and `a` runs on the caller: nothing escapes to this
    /// pool's threads.
    ///
    /// # Panics
    ///
    /// If `a` or `b` panics, the panic is resumed here once both are done.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::ThreadPool;
    ///
    /// fn fib(pool: &ThreadPool, n: u64) -> u64 {
    ///     if n < 2 { return n; }
    ///     let (a, b) = pool.join(|| fib(pool, n - 1), || fib(pool, n - 2));
    ///     a + b
    /// }
    ///
    /// let pool = ThreadPool::builder().threads(2).build().unwrap();
    /// assert_eq!(fib(&pool, 20), 6765);
    /// ```
    #[inline]
    pub fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        join::join(&self.shared, a, b)
    }

    /// Every live task of the pool: what it does and what it waits on,
    /// with the cycles of tasks waiting on each other (see
    /// [`dump`](crate::dump)). Takes a lock per worker briefly; the pool
    /// runs on meanwhile, so the dump is a snapshot, not an instant, but
    /// every deadlock it reports is real: see "What a dump of a running
    /// pool guarantees" in [`dump`](crate::dump).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::dump::TaskState;
    /// use viaduct::{ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let line = line!() + 1;
    /// let parked = pool.spawn(std::future::pending::<()>());
    /// while !pool.dump().tasks().iter().any(|t| Some(t.id()) == parked.id()) {
    ///     std::thread::yield_now(); // until its first poll has returned
    /// }
    /// let dump = pool.dump();
    /// let entry = dump.task(parked.id().unwrap()).unwrap();
    /// assert_eq!(entry.state(), &TaskState::Waiting);
    /// assert_eq!(entry.location().line(), line);
    /// println!("{dump}");
    /// ```
    pub fn dump(&self) -> crate::dump::TaskDump {
        let s = &self.shared;
        crate::dump::TaskDump::collect(
            &s.name,
            |i| s.worker_name(i),
            &s.books,
            || s.live(),
            crate::time::waiting_tasks,
            std::time::Instant::now(),
        )
    }

    /// The tokio runtime the pool's workers entered: the pool's own
    /// reactor ([`Builder::tokio_reactor`]) or the runtime given to
    /// [`Builder::enter_tokio`]; `None` if neither. Feature `tokio`.
    ///
    /// Through it, code off the pool reaches what its tasks use: it may
    /// `spawn` on it, or `block_on` a future that uses tokio's sockets and
    /// timers while the pool's workers drive them.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::ThreadPool;
    ///
    /// let pool = ThreadPool::builder().threads(1).tokio_reactor().build().unwrap();
    /// let listener = pool
    ///     .tokio_handle()
    ///     .unwrap()
    ///     .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
    ///     .unwrap();
    /// assert!(listener.local_addr().unwrap().port() > 0);
    /// ```
    #[cfg(feature = "tokio")]
    pub fn tokio_handle(&self) -> Option<tokio::runtime::Handle> {
        self.shared.tokio.as_ref().map(|t| t.handle().clone())
    }

    /// A snapshot of the pool's counters.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// block_on(pool.run(|| ())).unwrap();
    /// let m = pool.metrics();
    /// assert_eq!((m.threads, m.spawned), (1, 1));
    /// assert!(m.completed <= m.spawned);
    /// ```
    pub fn metrics(&self) -> Metrics {
        let s = &self.shared;
        let queued = s.injector.len()
            + s.stealers.iter().map(Stealer::len).sum::<usize>()
            + s.fork_stealers.iter().map(Stealer::len).sum::<usize>();
        Metrics {
            threads: s.stats.len(),
            spawned: s.spawned.load(Relaxed),
            completed: s.finished.load(Relaxed),
            stolen: s.stats.iter().map(|w| w.stolen.load(Relaxed)).sum(),
            parked: s.stats.iter().map(|w| w.parked.load(Relaxed)).sum(),
            queued,
        }
    }
}

impl Shared {
    fn close(&self) {
        if self
            .state
            .compare_exchange(OPEN, CLOSED, SeqCst, SeqCst)
            .is_ok()
        {
            // Workers may now exit once no task is live; wake them to see.
            self.idle.notify_all();
            self.room.notify(usize::MAX);
        }
    }

    fn stop(&self) {
        self.state.store(STOPPING, SeqCst);
        self.idle.notify_all();
        self.room.notify(usize::MAX);
    }

    /// The name of worker `index`'s thread.
    pub(crate) fn worker_name(&self, index: usize) -> String {
        format!("{}-{index}", self.name)
    }

    /// Accepted tasks whose future has not been dropped yet.
    fn live(&self) -> u64 {
        // `finished` first: it never passes `spawned`, and both only grow,
        // so equal readings mean nothing was live at the first read.
        let finished = self.finished.load(SeqCst);
        self.spawned.load(SeqCst) - finished
    }

    /// `true` if any queue other workers can take from has work.
    fn has_visible_work(&self) -> bool {
        !self.injector.is_empty()
            || self.stealers.iter().any(|s| !s.is_empty())
            || self.fork_stealers.iter().any(|s| !s.is_empty())
    }

    /// Whether a worker in its outermost loop, with no work in sight,
    /// should exit.
    fn should_exit(&self) -> bool {
        match self.state.load(SeqCst) {
            OPEN => false,
            CLOSED => self.live() == 0 && !self.has_visible_work(),
            _ => true,
        }
    }

    fn stopping(&self) -> bool {
        self.state.load(SeqCst) == STOPPING
    }

    /// Called by each worker on exit; the last one terminates the pool.
    /// The tokio reactor the workers drive, if the pool has its own.
    #[cfg(feature = "tokio")]
    fn reactor(&self) -> Option<&reactor::Reactor> {
        self.tokio.as_ref().and_then(reactor::TokioLink::reactor)
    }

    fn worker_exited(&self) {
        if self.running_workers.fetch_sub(1, SeqCst) == 1 {
            self.terminated.store(true, SeqCst);
            if let Some(watcher) = self.watcher.get() {
                watcher.unpark();
            }
            // Before the drain: what it wakes lands in the injector.
            #[cfg(feature = "tokio")]
            if let Some(reactor) = self.reactor() {
                reactor.shut_down();
            }
            self.drain_injector();
            self.all_exited.notify(usize::MAX);
        }
    }

    /// After termination nobody runs tasks: drop them (cancelling them),
    /// but run `join` halves, whose owners are blocked on them.
    fn drain_injector(&self) {
        loop {
            match self.injector.steal() {
                crossbeam_deque::Steal::Success(job) => drop_or_run(job),
                crossbeam_deque::Steal::Retry => continue,
                crossbeam_deque::Steal::Empty => break,
            }
        }
    }

    /// Pushes work from outside the pool's workers.
    fn inject(&self, job: Job) {
        self.injector.push(job);
        if self.terminated.load(SeqCst) {
            self.drain_injector();
        } else {
            self.idle.notify_one();
        }
    }
}

fn drop_or_run(job: Job) {
    match job {
        Job::Task(r) => crate::dropping::drop_runnable(r),
        fork @ Job::Fork(_) => fork.run(),
    }
}

// SAFETY: `tracker` holds `TrackerHeader::of::<Shared>()` (see the
// builder), and a pool's `Shared` lives in an `Arc`, which `me` points to.
unsafe impl Embeds<TrackerHeader> for Shared {
    const OFFSET: usize = std::mem::offset_of!(Shared, tracker);
}

impl Tracker for Shared {
    fn release(&self) {
        self.finished.fetch_add(1, SeqCst);
        if self.max_pending.is_some() {
            self.room.notify(1);
            worker::wake_room_waiters(self);
        }
        if self.state.load(SeqCst) != OPEN && self.live() == 0 {
            self.idle.notify_all();
        }
    }

    fn unobserved_panic(&self, payload: PanicPayload) {
        match &self.on_panic {
            Some(handler) => {
                // A panicking handler must not take down the thread reporting.
                let handled =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(payload)));
                if let Err(again) = handled {
                    drop_payload(again);
                }
            }
            None => drop_payload(payload),
        }
    }
}

// SAFETY: `header` holds `ExecHeader::of::<Shared>()` (see the builder),
// and a pool's `Shared` lives in an `Arc`.
unsafe impl Embeds<ExecHeader> for Shared {
    const OFFSET: usize = std::mem::offset_of!(Shared, header);
}

impl Executor for Shared {
    fn schedule(&self, runnable: Runnable) {
        // A task that a user's executor admitted and forwarded here is
        // counted in now (past the bound: it was accepted already), so
        // closing waits for it; a closed pool refuses it instead.
        if let Some(runnable) = Metadata::adopt(runnable, || self.count_in(None)) {
            worker::schedule(self, runnable)
        }
    }

    fn close(&self) {
        Shared::close(self)
    }

    fn is_closed(&self) -> bool {
        self.state.load(SeqCst) != OPEN
    }

    fn try_run_one(&self) -> bool {
        worker::try_run_one(self)
    }

    fn name(&self) -> &str {
        &self.name
    }
    fn own(&self, _: Internal) -> Option<&dyn Own> {
        Some(self)
    }
}

impl Own for Shared {
    fn hold_open(&self) {
        self.handles.fetch_add(1, Relaxed);
    }

    fn let_go(&self) {
        if self.handles.fetch_sub(1, AcqRel) == 1 {
            self.close();
        }
    }

    fn admission(&self, wait: bool) -> Result<Admission, RejectReason> {
        loop {
            match self.count_in(self.max_pending) {
                Err(RejectReason::Full) if wait && admitting_past_limit() => {
                    return self.count_in(None)
                }
                Err(RejectReason::Full) if wait => worker::wait_for_room(self),
                other => return other,
            }
        }
    }

    fn lets_steps_wait_in_line(&self) -> bool {
        true
    }
}

impl Shared {
    /// Counts a task in, unless that would make more than `limit` live.
    fn count_in(&self, limit: Option<u64>) -> Result<Admission, RejectReason> {
        if self.is_closed() {
            return Err(RejectReason::Closed);
        }
        match limit {
            None => {
                self.spawned.fetch_add(1, SeqCst);
            }
            Some(max) => loop {
                let spawned = self.spawned.load(SeqCst);
                if spawned - self.finished.load(SeqCst) >= max {
                    return Err(RejectReason::Full);
                }
                if self
                    .spawned
                    .compare_exchange_weak(spawned, spawned + 1, SeqCst, SeqCst)
                    .is_ok()
                {
                    break;
                }
            },
        }
        // SAFETY: `self` is borrowed, and a pool's `Shared` is only reached
        // through an `Arc` (held by a handle, a worker or an `Exec`).
        let admission = Admission::counted(unsafe { Sink::new(&self.me) });
        // A close between the check above and the count would let workers
        // exit with this task uncounted; look again now that it counts.
        if self.is_closed() {
            drop(admission);
            return Err(RejectReason::Closed);
        }
        Ok(admission)
    }
}

impl Executor for ThreadPool {
    fn schedule(&self, runnable: Runnable) {
        self.shared.schedule(runnable)
    }
    fn close(&self) {
        self.shared.close()
    }
    fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }
    fn try_run_one(&self) -> bool {
        self.shared.try_run_one()
    }
    fn name(&self) -> &str {
        &self.shared.name
    }
    fn own(&self, _: Internal) -> Option<&dyn Own> {
        Some(self)
    }
}

impl Own for ThreadPool {
    fn admission(&self, wait: bool) -> Result<Admission, RejectReason> {
        self.shared.admission(wait)
    }

    fn keeps_open(&self) -> bool {
        true
    }

    fn home(&self) -> Option<Exec> {
        Some(Exec::of(self.shared.clone()))
    }
}

impl Clone for ThreadPool {
    fn clone(&self) -> Self {
        ThreadPool::from_shared(self.shared.clone())
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shared.let_go();
    }
}

impl fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadPool")
            .field("name", &self.shared.name)
            .field("threads", &self.threads())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl_spawn!(ThreadPool);
