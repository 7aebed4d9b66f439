//! [`ThreadPerTask`]: a new OS thread for every runnable.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::executor::Executor;
use crate::executor::Runnable;
use crate::metrics::ThreadPerTaskMetrics;
use crate::pool::WaitError;
use crate::spawn::impl_spawn;

/// Runs each scheduled runnable on a new, named OS thread
/// (`{name}-0`, `{name}-1`, ...). For blocking work that must not occupy a
/// pool worker; [`join_threads`](ThreadPerTask::join_threads) waits for all of its threads.
///
/// A task that is woken again gets a new thread for each wake-up.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, ThreadPerTask};
///
/// let ex = ThreadPerTask::new("blocking");
/// let h = ex.run(|| std::thread::current().name().unwrap().to_owned());
/// assert!(block_on(h).unwrap().starts_with("blocking-"));
/// ex.join_threads().unwrap();
/// ```
#[derive(Clone)]
pub struct ThreadPerTask {
    shared: Arc<Shared>,
}

struct Shared {
    name: String,
    /// `name` as a thread name can hold it: NUL bytes written `\0`.
    thread_name: String,
    next_id: AtomicUsize,
    closed: AtomicBool,
    running: Mutex<usize>,
    all_done: Condvar,
}

impl ThreadPerTask {
    /// An executor naming its threads `{name}-N`. An OS thread name
    /// cannot hold a NUL byte, so one in `name` is written `\0` there.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPerTask};
    ///
    /// let ex = ThreadPerTask::new("io");
    /// let first = block_on(ex.run(|| std::thread::current().name().map(str::to_owned))).unwrap();
    /// let second = block_on(ex.run(|| std::thread::current().name().map(str::to_owned))).unwrap();
    /// assert_eq!(first.as_deref(), Some("io-0"));
    /// assert_eq!(second.as_deref(), Some("io-1")); // a new thread each time
    /// ex.join_threads().unwrap();
    /// ```
    pub fn new(name: impl Into<String>) -> ThreadPerTask {
        let name = name.into();
        ThreadPerTask {
            shared: Arc::new(Shared {
                thread_name: name.replace('\0', "\\0"),
                name,
                next_id: AtomicUsize::new(0),
                closed: AtomicBool::new(false),
                running: Mutex::new(0),
                all_done: Condvar::new(),
            }),
        }
    }

    /// Waits until every thread this executor started has finished.
    ///
    /// # Errors
    ///
    /// [`WaitError`] if called from one of those threads, which would wait
    /// for itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use viaduct::pool::WaitError;
    /// use viaduct::{block_on, ExecutorExt, ThreadPerTask};
    ///
    /// let ex = ThreadPerTask::new("blocking");
    /// let done = Arc::new(AtomicUsize::new(0));
    /// for _ in 0..3 {
    ///     let done = done.clone();
    ///     ex.execute(move || {
    ///         done.fetch_add(1, Ordering::SeqCst);
    ///     });
    /// }
    /// ex.join_threads().unwrap();
    /// assert_eq!(done.load(Ordering::SeqCst), 3);
    ///
    /// let inner = ex.clone();
    /// assert_eq!(block_on(ex.run(move || inner.join_threads())).unwrap(), Err(WaitError::OwnThread));
    /// ```
    pub fn join_threads(&self) -> Result<(), WaitError> {
        if crate::context::with(|c| c.thread_owner.get()) == Arc::as_ptr(&self.shared).cast() {
            return Err(WaitError::OwnThread);
        }
        let mut running = self.shared.running();
        while *running > 0 {
            running = self
                .shared
                .all_done
                .wait(running)
                .unwrap_or_else(|e| e.into_inner());
        }
        Ok(())
    }

    /// A snapshot of the executor's counters: threads started, and how many
    /// of them still run.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPerTask};
    ///
    /// let ex = ThreadPerTask::new("worker");
    /// for _ in 0..3 {
    ///     block_on(ex.run(|| ())).unwrap();
    /// }
    /// ex.join_threads().unwrap();
    /// let m = ex.metrics();
    /// assert_eq!((m.started, m.running), (3, 0));
    /// ```
    pub fn metrics(&self) -> ThreadPerTaskMetrics {
        ThreadPerTaskMetrics {
            started: self.shared.next_id.load(Ordering::Relaxed) as u64,
            running: *self.shared.running(),
        }
    }
}

impl Shared {
    fn running(&self) -> std::sync::MutexGuard<'_, usize> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Counts a thread out even if it unwinds.
struct Running(Arc<Shared>);

impl Drop for Running {
    fn drop(&mut self) {
        let mut n = self.0.running();
        *n -= 1;
        if *n == 0 {
            self.0.all_done.notify_all();
        }
    }
}

impl Executor for ThreadPerTask {
    fn schedule(&self, runnable: Runnable) {
        let shared = &self.shared;
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        *shared.running() += 1;
        let guard = Running(shared.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("{}-{id}", shared.thread_name))
            .spawn(move || {
                crate::context::with(|c| c.thread_owner.set(Arc::as_ptr(&guard.0).cast()));
                runnable.run();
                drop(guard);
            });
        // If the OS refuses a thread, the closure (and with it the runnable)
        // is dropped, which cancels the task: its handle says `Cancelled`.
        drop(spawned);
    }
    fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
    }
    fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::SeqCst)
    }
}

impl_spawn!(ThreadPerTask);

impl std::fmt::Debug for ThreadPerTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPerTask")
            .field("name", &self.shared.name)
            .finish()
    }
}
