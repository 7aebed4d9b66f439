//! [`Builder`]: a pool's settings, and starting its workers.

use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crossbeam_deque::Injector;
use event_listener::Event;

use super::stall::{self, Stall, StallHandler, StallWatch};
use super::{idle, worker, Hook, PanicHandler, Shared, ThreadPool, OPEN};
use crate::admission::TrackerHeader;
use crate::error::PanicPayload;
use crate::executor::ExecHeader;

/// Configures and starts a [`ThreadPool`].
///
/// # Examples
///
/// ```
/// use viaduct::ThreadPool;
///
/// let pool = ThreadPool::builder()
///     .threads(4)
///     .name("cpu")
///     .stack_size(1 << 20)
///     .max_pending(10_000)
///     .on_thread_start(|| println!("{} up", std::thread::current().name().unwrap()))
///     .build()
///     .unwrap();
/// assert_eq!(pool.threads(), 4);
/// ```
#[must_use = "a builder does nothing until you call build()"]
pub struct Builder {
    threads: Option<usize>,
    name: String,
    stack_size: Option<usize>,
    max_pending: Option<usize>,
    on_start: Option<Hook>,
    on_stop: Option<Hook>,
    on_panic: Option<PanicHandler>,
    stall_threshold: Option<Duration>,
    on_stall: Option<StallHandler>,
    /// The tokio runtime every worker enters, or the reactor to make.
    #[cfg(feature = "tokio")]
    tokio: Option<Tokio>,
}

/// What the pool's workers do with tokio.
#[cfg(feature = "tokio")]
enum Tokio {
    /// Enter a runtime that others drive.
    Enter(tokio::runtime::Handle),
    /// Make a reactor of the pool's own, and drive it.
    Reactor,
}

/// Why [`Builder::build`] failed.
///
/// # Examples
///
/// ```
/// use viaduct::pool::BuildError;
/// use viaduct::ThreadPool;
///
/// let err = ThreadPool::builder().threads(0).build().unwrap_err();
/// assert!(matches!(err, BuildError::ZeroThreads));
/// assert!(err.to_string().contains("at least one thread"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `threads(0)`: a pool needs at least one thread.
    ZeroThreads,
    /// `max_pending(0)`: a bounded pool needs room for at least one task.
    ZeroMaxPending,
    /// The name holds a NUL byte, which no OS thread name can.
    InvalidName(String),
    /// `stall_threshold(Duration::ZERO)`: every poll would be a stall.
    ZeroStallThreshold,
    /// `on_stall` without `stall_threshold`: nothing says how long a poll
    /// may run.
    OnStallWithoutThreshold,
    /// `threads(n)` past [`MAX_THREADS`]: more workers than any machine
    /// runs threads for. Holds the `n` asked for.
    TooManyThreads(usize),
    /// `stack_size(n)` below [`MIN_STACK_SIZE`]: too small for a worker to
    /// run a task, let alone a `block_on` or a scope inside one. Holds the
    /// `n` asked for.
    StackTooSmall(usize),
    /// The operating system refused to start a worker thread (or the
    /// stall watcher's).
    Spawn(std::io::Error),
    /// `build` was called inside a [simulation](crate::sim): a real
    /// pool's threads would run its tasks outside the simulation, where
    /// no seed decides their order and no replay can repeat it.
    InsideSimulation,
}

/// The most workers a pool may have: far past what an operating system
/// runs well (Linux's default limits allow tens of thousands of threads in
/// all). A larger `threads(n)` is [`BuildError::TooManyThreads`]; up to
/// it, `build` asks the OS for each thread, and a refusal is
/// [`BuildError::Spawn`].
pub const MAX_THREADS: usize = 1 << 17;

/// The smallest worker stack, in bytes, that [`Builder::stack_size`]
/// accepts: a worker's own frames, a task's poll, and a `block_on` or a
/// scope inside it (each needs a quarter of the stack free) fit in it.
pub const MIN_STACK_SIZE: usize = 64 << 10;

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroThreads => {
                f.write_str("a thread pool needs at least one thread: use threads(n) with n >= 1")
            }
            BuildError::ZeroMaxPending => f.write_str(
                "max_pending(0) leaves no room for any task: use n >= 1, or leave it unset",
            ),
            BuildError::InvalidName(name) => write!(
                f,
                "the pool name {name:?} holds a NUL byte, which a thread name cannot: use a name \
                 without one"
            ),
            BuildError::ZeroStallThreshold => f.write_str(
                "stall_threshold(0) would report every poll: use a duration of at least a \
                 millisecond, or leave it unset to turn stall detection off",
            ),
            BuildError::OnStallWithoutThreshold => f.write_str(
                "on_stall needs stall_threshold(d) too: say how long a poll may run before it is \
                 reported",
            ),
            BuildError::TooManyThreads(n) => write!(
                f,
                "threads({n}) asks for more workers than a pool may have ({MAX_THREADS}): use \
                 fewer threads; a pool's workers beyond the machine's cores only take turns"
            ),
            BuildError::StackTooSmall(n) => write!(
                f,
                "stack_size({n}) is too small for a worker to run tasks: use at least \
                 {MIN_STACK_SIZE} bytes, or leave it unset for the default"
            ),
            BuildError::Spawn(e) => write!(f, "could not start a worker thread: {e}"),
            BuildError::InsideSimulation => f.write_str(
                "a real thread pool cannot be built inside a simulation, whose tasks must all \
                 run on its virtual workers: spawn on the simulation's executor \
                 (Simulation::executor, or viaduct::spawn inside it) instead, or build the pool \
                 outside and hand its work to the simulation",
            ),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            threads: None,
            name: "viaduct".into(),
            stack_size: None,
            max_pending: None,
            on_start: None,
            on_stop: None,
            on_panic: None,
            stall_threshold: None,
            on_stall: None,
            #[cfg(feature = "tokio")]
            tokio: None,
        }
    }
}

impl Builder {
    /// Number of worker threads (default: the available parallelism), at
    /// most [`MAX_THREADS`].
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::ThreadPool;
    ///
    /// let pool = ThreadPool::builder().threads(3).build().unwrap();
    /// assert_eq!(pool.threads(), 3);
    /// ```
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n);
        self
    }

    /// Thread name prefix: workers are `{name}-0`, `{name}-1`, ...
    /// (default `viaduct`).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).name("io").build().unwrap();
    /// let name = block_on(pool.run(|| std::thread::current().name().map(str::to_owned))).unwrap();
    /// assert_eq!(name.as_deref(), Some("io-0"));
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Stack size of each worker thread, in bytes, at least
    /// [`MIN_STACK_SIZE`] (default: what std gives a new thread,
    /// `RUST_MIN_STACK` or 2 MiB).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).stack_size(4 << 20).build().unwrap();
    /// // A 1 MiB array on the stack fits in a 4 MiB worker stack.
    /// let sum = pool.run(|| {
    ///     let big = std::hint::black_box([1u8; 1 << 20]);
    ///     big.iter().map(|&b| u64::from(b)).sum::<u64>()
    /// });
    /// assert_eq!(block_on(sum).unwrap(), 1 << 20);
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Bounded mode: at most `n` tasks accepted and not yet finished. Past
    /// that, `try_spawn` returns [`RejectReason::Full`](crate::RejectReason::Full) with the future, and
    /// `spawn` waits for room (on a worker of this pool, by running tasks).
    /// Work queued on a [`Strand`](crate::Strand) or a
    /// [`Guarded`](crate::Guarded) over this pool counts toward the bound
    /// (each task; a strand's posts and queued sections count as one while
    /// any is in line) but never waits for room: it may be queued
    /// behind a section or a guard that is waiting for its submitter, so
    /// waiting could deadlock. `try_spawn` and `try_execute` on a strand
    /// still say `Full`, for back-pressure.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use viaduct::{block_on, ExecutorExt, RejectReason, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).max_pending(1).build().unwrap();
    /// let (go, wait) = mpsc::channel::<()>();
    /// let busy = pool.run(move || wait.recv().unwrap()); // takes the only slot
    /// let refused = pool.try_spawn(async { 1 }).unwrap_err();
    /// assert_eq!(refused.reason(), RejectReason::Full);
    /// go.send(()).unwrap();
    /// block_on(busy).unwrap();
    /// // The slot is free again; `spawn` would also have waited for it.
    /// assert_eq!(block_on(pool.spawn(refused.into_inner())).unwrap(), 1);
    /// ```
    pub fn max_pending(mut self, n: usize) -> Self {
        self.max_pending = Some(n);
        self
    }

    /// Runs on each worker thread when it starts. A panic in it is caught,
    /// reported like a detached task's panic, and the worker serves anyway.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use viaduct::ThreadPool;
    ///
    /// let started = Arc::new(AtomicUsize::new(0));
    /// let counter = started.clone();
    /// let pool = ThreadPool::builder()
    ///     .threads(2)
    ///     .on_thread_start(move || {
    ///         counter.fetch_add(1, Ordering::SeqCst);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// pool.shutdown().unwrap();
    /// assert_eq!(started.load(Ordering::SeqCst), 2);
    /// ```
    pub fn on_thread_start(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_start = Some(Arc::new(f));
        self
    }

    /// Makes every worker of the pool enter the tokio runtime `handle`
    /// belongs to, for its whole life (its start and stop hooks
    /// included): tokio's sockets, timers and `tokio::spawn` then work
    /// inside the pool's tasks, as they do in tokio's own. Feature `tokio`.
    ///
    /// The tasks still run on the pool; tokio's I/O and timers are driven
    /// by that runtime, which must have them enabled and be running: a
    /// multi-thread runtime drives them on its own workers, a
    /// current-thread one only while some thread is in its `block_on`.
    /// Without this, making a tokio socket or timer in a pool's task
    /// panics ("there is no reactor running").
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let rt = tokio::runtime::Builder::new_multi_thread()
    ///     .worker_threads(1)
    ///     .enable_all()
    ///     .build()
    ///     .unwrap();
    /// let pool = ThreadPool::builder()
    ///     .threads(2)
    ///     .enter_tokio(rt.handle().clone())
    ///     .build()
    ///     .unwrap();
    /// let slept = pool.spawn(async {
    ///     tokio::time::sleep(Duration::from_millis(1)).await; // tokio's timer, in a pool task
    ///     tokio::spawn(async { 7 }).await.unwrap()          // and a tokio task
    /// });
    /// assert_eq!(block_on(slept).unwrap(), 7);
    /// ```
    #[cfg(feature = "tokio")]
    pub fn enter_tokio(mut self, handle: tokio::runtime::Handle) -> Self {
        self.tokio = Some(Tokio::Enter(handle));
        self
    }

    /// Gives the pool a tokio reactor of its own, which its workers drive:
    /// tokio's sockets, timers and `tokio::spawn` work in the pool's tasks
    /// with no tokio runtime anywhere else. Feature `tokio`; replaces an
    /// [`enter_tokio`](Builder::enter_tokio).
    ///
    /// The reactor is a current-thread tokio runtime with I/O and timers
    /// (those tokio was built with), which every worker enters. An idle
    /// worker waits in its driver (one at a time), so a socket that becomes
    /// ready wakes its task on the worker that saw it, as in tokio's own
    /// workers; busy ones give the driver a turn at most every 250 us. A
    /// worker that leaves the driver for a job wakes a sleeping one to take
    /// it over. A pool that
    /// only entered another runtime pays, on every wake-up, a hop from
    /// that runtime's thread to a worker: `examples/http.rs` serves small
    /// requests about a third faster this way (BENCHMARKS.md, issue 33).
    /// `tokio::spawn` from a pool task makes a tokio task, which runs in
    /// the driver, on a worker: it must not wait on the pool there (a
    /// viaduct `block_on` in it panics, saying so); `.await` instead.
    /// [`ThreadPool::tokio_handle`] reaches the reactor from outside.
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio::io::{AsyncReadExt, AsyncWriteExt};
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(2).tokio_reactor().build().unwrap();
    /// let echoed = pool.spawn(async {
    ///     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let addr = listener.local_addr().unwrap();
    ///     let server = tokio::spawn(async move {
    ///         let (mut socket, _) = listener.accept().await.unwrap();
    ///         let mut word = [0; 4];
    ///         socket.read_exact(&mut word).await.unwrap();
    ///         socket.write_all(&word).await.unwrap();
    ///     });
    ///     let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    ///     client.write_all(b"ping").await.unwrap();
    ///     let mut back = [0; 4];
    ///     client.read_exact(&mut back).await.unwrap();
    ///     server.await.unwrap();
    ///     back
    /// });
    /// assert_eq!(&block_on(echoed).unwrap(), b"ping");
    /// ```
    #[cfg(feature = "tokio")]
    pub fn tokio_reactor(mut self) -> Self {
        self.tokio = Some(Tokio::Reactor);
        self
    }

    /// Runs on each worker thread just before it exits.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use viaduct::ThreadPool;
    ///
    /// let stopped = Arc::new(Mutex::new(Vec::new()));
    /// let log = stopped.clone();
    /// let pool = ThreadPool::builder()
    ///     .threads(2)
    ///     .name("w")
    ///     .on_thread_stop(move || {
    ///         let name = std::thread::current().name().unwrap().to_owned();
    ///         log.lock().unwrap().push(name);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// pool.shutdown().unwrap();
    /// let mut names = stopped.lock().unwrap().clone();
    /// names.sort();
    /// assert_eq!(names, ["w-0", "w-1"]);
    /// ```
    pub fn on_thread_stop(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_stop = Some(Arc::new(f));
        self
    }

    /// Receives the panic payload of every task that panicked with nobody
    /// to hear it: its [`JoinHandle`](crate::JoinHandle) was dropped. Without
    /// a handler such a panic is dropped after std's panic hook printed it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::sync::Mutex;
    /// use viaduct::{ExecutorExt, ThreadPool};
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let tx = Mutex::new(tx);
    /// let pool = ThreadPool::builder()
    ///     .threads(1)
    ///     .on_unobserved_panic(move |payload| {
    ///         let msg = payload.downcast_ref::<&str>().copied().unwrap_or("?");
    ///         tx.lock().unwrap().send(msg.to_owned()).unwrap();
    ///     })
    ///     .build()
    ///     .unwrap();
    /// pool.execute(|| panic!("nobody listens")); // the handle is dropped
    /// assert_eq!(rx.recv().unwrap(), "nobody listens");
    /// ```
    pub fn on_unobserved_panic(mut self, f: impl Fn(PanicPayload) + Send + Sync + 'static) -> Self {
        self.on_panic = Some(Arc::new(f));
        self
    }

    /// Turns stall detection on: a task poll that runs longer than
    /// `threshold` without returning is reported once, while it still runs,
    /// as a [`Stall`] (task id, worker thread, spawn location, how long it
    /// has run) to [`on_stall`](Builder::on_stall), or printed to standard
    /// error without one; with the `tracing` feature it is also a `warn`
    /// event, target `viaduct`, message `stall`. A thread named
    /// `{name}-watch` looks at the workers every eighth of the threshold;
    /// the workers themselves do no more than without it. Off by default.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::pool::BuildError;
    /// use viaduct::ThreadPool;
    ///
    /// let pool = ThreadPool::builder().stall_threshold(Duration::from_millis(100)).build();
    /// assert!(pool.is_ok());
    /// let err = ThreadPool::builder().stall_threshold(Duration::ZERO).build().unwrap_err();
    /// assert!(matches!(err, BuildError::ZeroStallThreshold));
    /// ```
    pub fn stall_threshold(mut self, threshold: Duration) -> Self {
        self.stall_threshold = Some(threshold);
        self
    }

    /// Receives each [`Stall`] (see
    /// [`stall_threshold`](Builder::stall_threshold), which must be set
    /// too), on the watcher thread. A panic in it is caught and reported
    /// like a detached task's panic; the watcher goes on.
    ///
    /// # Examples
    ///
    /// See [`Stall`].
    pub fn on_stall(mut self, f: impl Fn(&Stall) + Send + Sync + 'static) -> Self {
        self.on_stall = Some(Arc::new(f));
        self
    }

    /// Starts the pool.
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroThreads`] for `threads(0)`,
    /// [`BuildError::ZeroMaxPending`] for `max_pending(0)`,
    /// [`BuildError::InvalidName`] for a name with a NUL byte,
    /// [`BuildError::TooManyThreads`] past [`MAX_THREADS`],
    /// [`BuildError::StackTooSmall`] below [`MIN_STACK_SIZE`],
    /// [`BuildError::Spawn`] if a thread could not be started (the threads
    /// already started are stopped again), [`BuildError::InsideSimulation`]
    /// inside a [simulation](crate::sim) (use its executor).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::pool::BuildError;
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(2).build().unwrap();
    /// assert_eq!(block_on(pool.run(|| 1 + 1)).unwrap(), 2);
    ///
    /// let err = ThreadPool::builder().max_pending(0).build().unwrap_err();
    /// assert!(matches!(err, BuildError::ZeroMaxPending));
    /// ```
    pub fn build(self) -> Result<ThreadPool, BuildError> {
        if crate::spawn::ambient_executor().is_some() {
            return Err(BuildError::InsideSimulation);
        }
        self.build_anywhere()
    }

    /// [`build`](Builder::build), inside a simulation too: for the global
    /// pool, which belongs to no simulation (whoever first names it).
    pub(super) fn build_anywhere(self) -> Result<ThreadPool, BuildError> {
        let n = match self.threads {
            Some(0) => return Err(BuildError::ZeroThreads),
            Some(n) if n > MAX_THREADS => return Err(BuildError::TooManyThreads(n)),
            Some(n) => n,
            None => thread::available_parallelism().map_or(1, |n| n.get().min(MAX_THREADS)),
        };
        // Set explicitly, so that `block_on` knows how much stack it has.
        let stack_size = self.stack_size.unwrap_or_else(default_stack_size);
        if stack_size < MIN_STACK_SIZE {
            return Err(BuildError::StackTooSmall(stack_size));
        }
        if self.max_pending == Some(0) {
            return Err(BuildError::ZeroMaxPending);
        }
        if self.name.contains('\0') {
            return Err(BuildError::InvalidName(self.name));
        }
        let stall_watch = match (self.stall_threshold, self.on_stall) {
            (Some(Duration::ZERO), _) => return Err(BuildError::ZeroStallThreshold),
            (None, Some(_)) => return Err(BuildError::OnStallWithoutThreshold),
            (Some(threshold), on_stall) => Some(StallWatch {
                threshold,
                on_stall,
            }),
            (None, None) => None,
        };
        check_map_room(n).map_err(BuildError::Spawn)?;
        #[cfg(feature = "tokio")]
        let tokio = match self.tokio {
            Some(Tokio::Reactor) => Some(super::reactor::TokioLink::Driven(
                super::reactor::Reactor::new().map_err(BuildError::Spawn)?,
            )),
            Some(Tokio::Enter(handle)) => Some(super::reactor::TokioLink::Entered(handle)),
            None => None,
        };
        let workers: Vec<_> = (0..n).map(|_| worker::Queues::new()).collect();
        let shared = Arc::new_cyclic(|me| Shared {
            me: me.clone(),
            tracker: TrackerHeader::of::<Shared>(),
            header: ExecHeader::of::<Shared>(),
            name: self.name,
            injector: Injector::new(),
            stealers: workers.iter().map(|w| w.tasks.stealer()).collect(),
            fork_stealers: workers.iter().map(|w| w.forks.stealer()).collect(),
            idle: idle::Idle::new(n, thread::available_parallelism().map_or(1, |c| c.get())),
            state: AtomicU8::new(OPEN),
            terminated: Default::default(),
            spawned: Default::default(),
            finished: Default::default(),
            max_pending: self.max_pending.map(|m| m as u64),
            room: Event::new(),
            room_waiters: Mutex::new(Vec::new()),
            stats: (0..n).map(|_| Default::default()).collect(),
            handles: AtomicUsize::new(1),
            running_workers: AtomicUsize::new(n),
            all_exited: Event::new(),
            threads: Mutex::new(Vec::with_capacity(n)),
            on_start: self.on_start,
            on_stop: self.on_stop,
            on_panic: self.on_panic,
            books: crate::dump::records::Books::new(n, 0),
            watcher: Default::default(),
            #[cfg(feature = "tokio")]
            tokio,
        });
        let pool = ThreadPool { shared };
        for (index, queues) in workers.into_iter().enumerate() {
            let b = thread::Builder::new()
                .name(pool.shared.worker_name(index))
                .stack_size(stack_size);
            let shared = pool.shared.clone();
            #[cfg(feature = "tokio")]
            let tokio = pool.shared.tokio.as_ref().map(|t| t.handle().clone());
            let work = move || {
                // Entered before the start hook and left after the stop
                // hook: both may use tokio too.
                #[cfg(feature = "tokio")]
                let _entered = tokio.as_ref().map(tokio::runtime::Handle::enter);
                worker::run(shared, index, queues, stack_size)
            };
            match b.spawn(work) {
                Ok(t) => crate::loom::lock_std(&pool.shared.threads).push(t),
                Err(e) => {
                    // Workers not started never decrement the count: do it
                    // for them, then stop the ones that did start.
                    let missing = n - index;
                    pool.shared.running_workers.fetch_sub(missing - 1, SeqCst);
                    pool.shared.worker_exited();
                    pool.shared.stop();
                    let _ = pool.join_workers();
                    return Err(BuildError::Spawn(e));
                }
            }
        }
        if let Some(watch) = stall_watch {
            match stall::start(&pool.shared, watch) {
                Ok(t) => {
                    let _ = pool.shared.watcher.set(t.thread().clone());
                    crate::loom::lock_std(&pool.shared.threads).push(t);
                }
                Err(e) => {
                    pool.shared.stop();
                    let _ = pool.join_workers();
                    return Err(BuildError::Spawn(e));
                }
            }
        }
        Ok(pool)
    }
}

/// Memory maps a thread takes on Linux: its stack and guard page, and
/// the signal stack and guard page std gives every thread it starts.
const MAPS_PER_THREAD: usize = 4;

/// Maps left for everything else the process maps meanwhile (the
/// allocator's arenas, files, other threads).
const SPARE_MAPS: usize = 1024;

/// Refuses, before any thread starts, `threads` threads that would run the
/// process out of memory maps (`vm.max_map_count`). The OS does not then
/// simply refuse a thread: one that started but cannot map its signal
/// stack aborts the whole process, inside std. Other limits (threads,
/// processes) are met by a clean refusal that `build` turns into
/// [`BuildError::Spawn`].
fn check_map_room(threads: usize) -> std::io::Result<()> {
    // Miri runs no OS threads of its own, and reads no `/proc`.
    if !cfg!(target_os = "linux") || cfg!(miri) {
        return Ok(());
    }
    let read = |path| std::fs::read_to_string(path).ok();
    let (Some(max), Some(maps)) = (read("/proc/sys/vm/max_map_count"), read("/proc/self/maps"))
    else {
        return Ok(()); // no /proc: nothing to go by
    };
    let Ok(max) = max.trim().parse::<usize>() else {
        return Ok(());
    };
    let left = max.saturating_sub(maps.lines().count() + SPARE_MAPS);
    let room = left / MAPS_PER_THREAD;
    if threads <= room {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::OutOfMemory,
        format!(
            "{threads} threads would take {} memory maps, and this process has room for about \
             {room} more threads under the system's limit (vm.max_map_count = {max})",
            threads * MAPS_PER_THREAD
        ),
    ))
}

/// The stack size std gives a new thread: `RUST_MIN_STACK`, else 2 MiB;
/// never below [`MIN_STACK_SIZE`] (a small `RUST_MIN_STACK` is meant for
/// other threads).
fn default_stack_size() -> usize {
    std::env::var("RUST_MIN_STACK")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2 << 20)
        .max(MIN_STACK_SIZE)
}
