//! [`ManualExecutor`]: a queue that runs only when you say so.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use event_listener::{Event, Listener};

use crate::embedded::Embeds;
use crate::executor::ExecHeader;
use crate::executor::Runnable;
use crate::executor::{Exec, Executor, Internal, Own};
use crate::metrics::ManualMetrics;
use crate::run_queue::RunQueue;
use crate::signal::poll_to_end;
use crate::spawn::impl_spawn;

/// A queue of runnables and no threads: the owner decides when they run.
///
/// Feeding it is safe from any thread; running it happens on whichever
/// thread calls one of the `run_*` methods. It makes tests of async code
/// deterministic, and gives a thread to an executor on demand (boost's
/// `loop_executor`, via [`run_until_closed`](ManualExecutor::run_until_closed)).
///
/// # Examples
///
/// ```
/// use viaduct::{ExecutorExt, ManualExecutor};
///
/// let ex = ManualExecutor::new();
/// let h = ex.run(|| 40 + 2);
/// assert_eq!(ex.len(), 1);
/// assert_eq!(ex.run_until(h).unwrap(), 42);
/// ```
///
/// Dropping the last `ManualExecutor` handle (an [`Exec`] made with
/// [`Exec::new`] counts as one) closes it and cancels what is still queued,
/// and tasks woken later are cancelled too: nobody is left to run them, so
/// their handles resolve to [`TaskError::Cancelled`](crate::TaskError::Cancelled)
/// instead of waiting forever.
pub struct ManualExecutor {
    shared: Arc<Shared>,
}

struct Shared {
    /// What an `Exec` of this executor points to.
    header: ExecHeader,
    queue: Mutex<RunQueue>,
    closed: AtomicBool,
    /// Notified on every push and on close, for threads waiting in
    /// `run_until` and `run_until_closed`.
    activity: Event,
    /// `ManualExecutor` handles alive. Tasks hold the `Shared` itself, so
    /// this, not the `Arc`'s count, says whether anyone can still run them.
    handles: AtomicUsize,
    /// Counters for `metrics`, written under the queue's lock so that a
    /// snapshot taken under it is exact.
    scheduled: AtomicU64,
    ran: AtomicU64,
}

impl ManualExecutor {
    /// An empty, open executor.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::ManualExecutor;
    ///
    /// let ex = ManualExecutor::new();
    /// assert!(ex.is_empty());
    /// assert!(!ex.is_closed());
    /// ```
    pub fn new() -> ManualExecutor {
        let shared = Arc::new(Shared {
            header: ExecHeader::of::<Shared>(),
            queue: Mutex::default(),
            closed: AtomicBool::new(false),
            activity: Event::new(),
            handles: AtomicUsize::new(1),
            scheduled: AtomicU64::new(0),
            ran: AtomicU64::new(0),
        });
        ManualExecutor { shared }
    }

    fn queue(&self) -> MutexGuard<'_, RunQueue> {
        self.shared.queue()
    }

    /// Runs the first queued runnable, if any. Returns whether one ran.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// ex.execute(|| ());
    /// ex.execute(|| ());
    /// assert!(ex.run_at_most_one());
    /// assert_eq!(ex.len(), 1);
    /// assert!(ex.run_at_most_one());
    /// assert!(!ex.run_at_most_one()); // nothing left
    /// ```
    pub fn run_at_most_one(&self) -> bool {
        self.shared.try_run_one()
    }

    /// Runs queued runnables, at most `n`. Returns how many ran.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// for _ in 0..5 {
    ///     ex.execute(|| ());
    /// }
    /// assert_eq!(ex.run_at_most(3), 3);
    /// assert_eq!(ex.run_at_most(3), 2);
    /// assert!(ex.is_empty());
    /// ```
    pub fn run_at_most(&self, n: usize) -> usize {
        (0..n).take_while(|_| self.run_at_most_one()).count()
    }

    /// Runs runnables until the queue is empty, including those queued while
    /// it runs. Returns how many ran.
    ///
    /// # Examples
    ///
    /// A runnable queued by a running one is run in the same call:
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// let inner = ex.clone();
    /// let outer = ex.run(move || inner.run(|| "inner"));
    /// assert_eq!(ex.run_until_idle(), 2);
    /// let inner = viaduct::block_on(outer).unwrap();
    /// assert_eq!(viaduct::block_on(inner).unwrap(), "inner");
    /// ```
    pub fn run_until_idle(&self) -> usize {
        std::iter::from_fn(|| self.run_at_most_one().then_some(())).count()
    }

    /// Runs only what was queued when called (boost `run_queued_closures`):
    /// runnables queued meanwhile wait for the next call. Returns how many ran.
    ///
    /// # Examples
    ///
    /// A runnable queued by a running one waits for the next call:
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// let inner = ex.clone();
    /// ex.execute(move || inner.execute(|| ()));
    /// assert_eq!(ex.run_queued(), 1);
    /// assert_eq!(ex.len(), 1);
    /// assert_eq!(ex.run_queued(), 1);
    /// assert!(ex.is_empty());
    /// ```
    pub fn run_queued(&self) -> usize {
        let n = self.len();
        self.run_at_most(n)
    }

    /// Runs queued runnables until `fut` completes, and returns its output.
    /// Waits (without spinning) when the queue is empty and `fut` is pending.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// let a = ex.spawn(async { 1 });
    /// let b = ex.spawn(async { 2 });
    /// let sum = ex.run_until(async move { a.await.unwrap() + b.await.unwrap() });
    /// assert_eq!(sum, 3);
    /// ```
    pub fn run_until<F: Future>(&self, fut: F) -> F::Output {
        let shared = self.shared.clone();
        poll_to_end(
            fut,
            move || {
                shared.activity.notify(usize::MAX);
            },
            |woken| {
                if self.run_at_most_one() {
                    return;
                }
                let listener = self.shared.activity.listen();
                if !woken() && self.is_empty() {
                    listener.wait();
                }
            },
        )
    }

    /// Donates the calling thread: runs runnables as they arrive until the
    /// executor is closed and its queue is empty (boost `loop_executor::loop`).
    /// Returns how many ran.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// let looper = { let ex = ex.clone(); std::thread::spawn(move || ex.run_until_closed()) };
    /// ex.execute(|| ());
    /// ex.close();
    /// assert_eq!(looper.join().unwrap(), 1);
    /// ```
    pub fn run_until_closed(&self) -> usize {
        let mut ran = 0;
        loop {
            ran += self.run_until_idle();
            let listener = self.shared.activity.listen();
            if !self.is_empty() {
                continue;
            }
            if self.is_closed() {
                return ran;
            }
            listener.wait();
        }
    }

    /// How many runnables are queued.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// ex.execute(|| ());
    /// ex.execute(|| ());
    /// assert_eq!(ex.len(), 2);
    /// ex.run_until_idle();
    /// assert_eq!(ex.len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.queue().len()
    }

    /// `true` if no runnable is queued.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// assert!(ex.is_empty());
    /// ex.execute(|| ());
    /// assert!(!ex.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `true` once [`close`](ManualExecutor::close) was called.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::ManualExecutor;
    ///
    /// let ex = ManualExecutor::new();
    /// assert!(!ex.is_closed());
    /// ex.close();
    /// assert!(ex.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// Stops accepting new tasks and wakes any thread in
    /// [`run_until_closed`](ManualExecutor::run_until_closed). Tasks already
    /// accepted can still be run.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// let accepted = ex.run(|| 1);
    /// ex.close();
    /// assert!(ex.try_execute(|| ()).is_err()); // new work is refused
    /// ex.run_until_idle(); // accepted work still runs
    /// assert_eq!(block_on(accepted).unwrap(), 1);
    /// ```
    pub fn close(&self) {
        self.shared.close()
    }

    /// A snapshot of the executor's counters: runnables scheduled and run,
    /// and how many are queued.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// ex.execute(|| ());
    /// assert_eq!(ex.metrics().queued, 1);
    /// ex.run_until_idle();
    /// let m = ex.metrics();
    /// assert_eq!((m.scheduled, m.ran, m.queued), (1, 1, 0));
    /// ```
    pub fn metrics(&self) -> ManualMetrics {
        let queue = self.queue();
        ManualMetrics {
            scheduled: self.shared.scheduled.load(Ordering::Relaxed),
            ran: self.shared.ran.load(Ordering::Relaxed),
            queued: queue.len(),
        }
    }
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, RunQueue> {
        // Runnables never run under the lock, so it cannot be poisoned by a
        // task; a poisoned queue is still a valid queue.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Cancels every queued task once no handle is left to run them. The
    /// runnables are dropped outside the lock: dropping a future may wake
    /// another task of this executor.
    fn cancel_if_orphaned(&self) {
        if self.handles.load(Ordering::SeqCst) == 0 {
            let mut queued = std::mem::take(&mut *self.queue());
            while let Some(runnable) = queued.pop_front() {
                crate::dropping::drop_runnable(runnable);
            }
        }
    }
}

// SAFETY: `header` holds `ExecHeader::of::<Shared>()` (see `new`), and a
// `Shared` lives in an `Arc`.
unsafe impl Embeds<ExecHeader> for Shared {
    const OFFSET: usize = std::mem::offset_of!(Shared, header);
}

/// `Shared` is the executor behind an [`Exec`] made from a `ManualExecutor`,
/// so tasks point at the queue itself, not at a boxed handle.
impl Executor for Shared {
    fn schedule(&self, runnable: Runnable) {
        let mut queue = self.queue();
        queue.push_back(runnable);
        self.scheduled.fetch_add(1, Ordering::Relaxed);
        drop(queue);
        self.activity.notify(usize::MAX);
        // After the push: a last handle dropped meanwhile either drains after
        // the push (the queue lock orders them) or is seen here.
        self.cancel_if_orphaned();
    }
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.activity.notify(usize::MAX);
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
    fn own(&self, _: Internal) -> Option<&dyn Own> {
        Some(self)
    }
    fn try_run_one(&self) -> bool {
        let next = {
            let mut queue = self.queue();
            let next = queue.pop_front();
            if next.is_some() {
                self.ran.fetch_add(1, Ordering::Relaxed);
            }
            next
        };
        next.map(Runnable::run).is_some()
    }
}

impl Executor for ManualExecutor {
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
    fn own(&self, _: Internal) -> Option<&dyn Own> {
        Some(self)
    }
}

impl Own for ManualExecutor {
    fn home(&self) -> Option<Exec> {
        Some(Exec::of(self.shared.clone()))
    }

    fn keeps_open(&self) -> bool {
        true
    }
}

/// The count of handles that keep the executor open: its own handles', and
/// those of the strands made over one.
impl Own for Shared {
    fn hold_open(&self) {
        self.handles.fetch_add(1, Ordering::Relaxed);
    }

    fn let_go(&self) {
        if self.handles.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.close();
            self.cancel_if_orphaned();
        }
    }
}

impl Default for ManualExecutor {
    fn default() -> Self {
        ManualExecutor::new()
    }
}

impl Clone for ManualExecutor {
    fn clone(&self) -> Self {
        self.shared.hold_open();
        ManualExecutor {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for ManualExecutor {
    fn drop(&mut self) {
        self.shared.let_go();
    }
}

impl_spawn!(ManualExecutor);

impl std::fmt::Debug for ManualExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualExecutor")
            .field("len", &self.len())
            .field("closed", &self.is_closed())
            .finish()
    }
}
