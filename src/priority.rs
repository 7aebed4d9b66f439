//! [`PriorityExecutor`]: priorities over any executor, and
//! [`FixedPriority`], an executor that submits at one fixed priority.
//!
//! Runnables wait in a heap ordered by priority, then by arrival. Each one
//! pushed schedules one *pump* on the inner executor; a pump, when the
//! inner executor runs it, pops the heap's best runnable *at that moment*
//! and runs it. So whatever the inner executor runs next is the best one
//! pending, and the inner executor's parallelism is used as is: it runs
//! as many pumps at once as it has threads.
//!
//! A pump is a long-lived task: after running its runnable it parks on a
//! free list, and the next push wakes it instead of making a new task.
//!
//! # Ground rules
//!
//! 1. Every push activates exactly one pump (wakes a parked one or makes a
//!    new one), and every activation pops at most one runnable: pushes and
//!    pops balance, so a runnable never waits in the heap without a pump
//!    on its way.
//! 2. A pump dropped while active (its executor threw it away) drops one
//!    runnable from the heap, the best one, cancelling its task, which
//!    keeps rule 1; an executor that throws work away runs none of it.
//! 3. Pumps hold the decorator weakly, the decorator holds every pump's
//!    task: when the decorator goes, its heap is dropped (those tasks are
//!    cancelled) and each pump is cancelled, so its future is dropped (by
//!    its executor, or right after its poll if the decorator went during
//!    it).
//!
//! # Examples
//!
//! A [`FixedPriority`] passes for any executor, so code that takes one
//! submits at its level without knowing priorities exist:
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use viaduct::{ExecutorExt, ManualExecutor, PriorityExecutor};
//!
//! fn log_on<E: ExecutorExt>(ex: &E, log: &Arc<Mutex<Vec<&'static str>>>, what: &'static str) {
//!     let log = log.clone();
//!     ex.execute(move || log.lock().unwrap().push(what));
//! }
//!
//! let manual = ManualExecutor::new();
//! let pq = PriorityExecutor::new(manual.clone());
//! let (background, urgent) = (pq.fixed(-10), pq.fixed(10));
//! let log = Arc::new(Mutex::new(Vec::new()));
//! log_on(&background, &log, "background");
//! log_on(&urgent, &log, "urgent");
//! manual.run_until_idle();
//! assert_eq!(*log.lock().unwrap(), ["urgent", "background"]);
//! ```

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::fmt;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};

use crate::admission::Admission;
use crate::embedded::Embeds;
use crate::error::RejectReason;
use crate::executor::ExecHeader;
use crate::executor::Runnable;
use crate::executor::{admission_of, home_of, Exec, Executor, Internal, Own};
use crate::spawn::impl_spawn;
use crate::task::{create_daemon, spawn_or_reject, Daemon, JoinHandle};
use crate::task_id::TaskKind;

/// Decorates an executor with priorities: when the inner executor next runs
/// one of this decorator's tasks, it is the highest-priority one pending,
/// the oldest among equals. Bigger numbers run first.
///
/// It owns no thread and uses all the parallelism of the inner executor. A
/// task keeps its priority when it is woken again. Used directly as an
/// [`Executor`], it spawns at priority 0.
///
/// Cloning gives another handle to the same decorator.
///
/// # Examples
///
/// On a one-thread pool, A runs; meanwhile B (low) and then C (high) are
/// queued; C runs before B.
///
/// ```
/// use std::sync::{mpsc, Arc, Mutex};
/// use viaduct::{block_on, PriorityExecutor, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(1).build().unwrap();
/// let pq = PriorityExecutor::new(pool);
/// let log = Arc::new(Mutex::new(Vec::new()));
/// let (b_queued, wait_b) = mpsc::channel();
/// let (pq2, log2) = (pq.clone(), log.clone());
/// let a = pq.spawn_with(100, async move {
///     log2.lock().unwrap().push("A");
///     wait_b.recv().unwrap(); // B is queued now
///     pq2.execute_with(100, move || log2.lock().unwrap().push("C"));
/// });
/// let log3 = log.clone();
/// let b = pq.spawn_with(-100, async move { log3.lock().unwrap().push("B") });
/// b_queued.send(()).unwrap();
/// block_on(a).unwrap();
/// block_on(b).unwrap();
/// assert_eq!(*log.lock().unwrap(), ["A", "C", "B"]);
/// ```
#[derive(Clone)]
pub struct PriorityExecutor {
    /// Priority 0, for use as a plain executor; `level.shared` is the
    /// decorator.
    level: Arc<Level>,
    /// Keeps the executor open while a handle lives; tasks hold only
    /// `Shared::inner`, which (for a pool) does not.
    _owner: Exec,
}

/// An executor that submits everything to a [`PriorityExecutor`] at one
/// priority, so code that takes any executor submits at that level. Made by
/// [`PriorityExecutor::fixed`].
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, PriorityExecutor, ThreadPool};
///
/// let pq = PriorityExecutor::new(ThreadPool::builder().threads(2).build().unwrap());
/// let urgent = pq.fixed(10);
/// assert_eq!(urgent.priority(), 10);
/// assert_eq!(block_on(urgent.spawn(async { "served first" })).unwrap(), "served first");
/// ```
#[derive(Clone)]
pub struct FixedPriority {
    level: Arc<Level>,
    _owner: Exec,
}

/// The executor of a task with a fixed priority: what its wake-ups go to.
struct Level {
    /// What an `Exec` of this level points to.
    header: ExecHeader,
    shared: Arc<Shared>,
    priority: i32,
}

// SAFETY: `header` holds `ExecHeader::of::<Level>()` (see `Level::new`),
// and a `Level` lives in an `Arc`.
unsafe impl Embeds<ExecHeader> for Level {
    const OFFSET: usize = std::mem::offset_of!(Level, header);
}

struct Shared {
    inner: Exec,
    /// Where the executor was created: the location its pumps show in
    /// task dumps.
    created_at: &'static Location<'static>,
    state: Mutex<State>,
    closed: AtomicBool,
    me: Weak<Shared>,
}

struct State {
    heap: BinaryHeap<Entry>,
    /// Arrival order, for FIFO among equal priorities.
    arrivals: u64,
    /// Wakers of parked pumps.
    parked: Vec<Waker>,
    /// Every pump, cancelled when the decorator goes (ground rule 3).
    pumps: Vec<Daemon>,
}

struct Entry {
    priority: i32,
    arrival: u64,
    runnable: Runnable,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// The heap's maximum is the best: highest priority, then earliest.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.arrival.cmp(&self.arrival))
    }
}

impl PriorityExecutor {
    /// Priorities over `executor`.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, Inline, PriorityExecutor};
    ///
    /// let pq = PriorityExecutor::new(Inline);
    /// assert_eq!(block_on(pq.spawn(async { 1 })).unwrap(), 1); // priority 0
    /// ```
    #[track_caller]
    pub fn new<E: Executor + Clone>(executor: E) -> Self {
        let inner = home_of(&executor);
        let created_at = Location::caller();
        let shared = Arc::new_cyclic(|me| Shared {
            inner,
            created_at,
            state: Mutex::new(State {
                heap: BinaryHeap::new(),
                arrivals: 0,
                parked: Vec::new(),
                pumps: Vec::new(),
            }),
            closed: AtomicBool::new(false),
            me: me.clone(),
        });
        PriorityExecutor {
            level: Level::new(shared, 0),
            _owner: Exec::new(executor),
        }
    }

    /// Spawns `future` at `priority`; it keeps that priority whenever it is
    /// woken. The handle is as [`ExecutorExt::spawn`](crate::ExecutorExt::spawn)'s.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, PriorityExecutor, ThreadPool};
    ///
    /// let pq = PriorityExecutor::new(ThreadPool::builder().threads(2).build().unwrap());
    /// assert_eq!(block_on(pq.spawn_with(5, async { 2 + 2 })).unwrap(), 4);
    /// ```
    #[track_caller]
    pub fn spawn_with<F>(&self, priority: i32, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let shared = &self.level.shared;
        let exec = Exec::of(Level::new(shared.clone(), priority));
        spawn_or_reject(exec, future, shared.admission(true))
    }

    /// Runs `f` at `priority`, fire-and-forget (dropped unrun if the
    /// decorator or its executor is closed).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use viaduct::{ManualExecutor, PriorityExecutor};
    ///
    /// let manual = ManualExecutor::new();
    /// let pq = PriorityExecutor::new(manual.clone());
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// for (p, name) in [(-100, "low"), (0, "mid"), (100, "high")] {
    ///     let log = log.clone();
    ///     pq.execute_with(p, move || log.lock().unwrap().push(name));
    /// }
    /// manual.run_until_idle();
    /// assert_eq!(*log.lock().unwrap(), ["high", "mid", "low"]);
    /// ```
    #[track_caller]
    pub fn execute_with<F>(&self, priority: i32, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        drop(self.spawn_with(priority, async move { f() }));
    }

    /// An executor that submits here at `priority`, for code that takes
    /// any executor.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use viaduct::{ExecutorExt, ManualExecutor, PriorityExecutor};
    ///
    /// let manual = ManualExecutor::new();
    /// let pq = PriorityExecutor::new(manual.clone());
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// for (level, name) in [(1, "low"), (9, "high")] {
    ///     let log = log.clone();
    ///     pq.fixed(level).execute(move || log.lock().unwrap().push(name));
    /// }
    /// manual.run_until_idle();
    /// assert_eq!(*log.lock().unwrap(), ["high", "low"]);
    /// ```
    pub fn fixed(&self, priority: i32) -> FixedPriority {
        FixedPriority {
            level: Level::new(self.level.shared.clone(), priority),
            _owner: self._owner.clone(),
        }
    }

    /// How many runnables are waiting for their turn.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor, PriorityExecutor};
    ///
    /// let manual = ManualExecutor::new();
    /// let pq = PriorityExecutor::new(manual.clone());
    /// pq.execute(|| ());
    /// assert_eq!(pq.pending(), 1);
    /// manual.run_until_idle();
    /// assert_eq!(pq.pending(), 0);
    /// ```
    pub fn pending(&self) -> usize {
        self.level.shared.state().heap.len()
    }

    /// A snapshot of the decorator's counters, read under its lock.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor, PriorityExecutor};
    ///
    /// let manual = ManualExecutor::new();
    /// let pq = PriorityExecutor::new(manual.clone());
    /// pq.execute(|| ());
    /// let m = pq.metrics();
    /// assert_eq!((m.submitted, m.pending), (1, 1));
    /// manual.run_until_idle();
    /// assert_eq!(pq.metrics().pending, 0);
    /// ```
    pub fn metrics(&self) -> crate::metrics::PriorityMetrics {
        let state = self.level.shared.state();
        crate::metrics::PriorityMetrics {
            submitted: state.arrivals,
            pending: state.heap.len(),
            idle_pumps: state.parked.len(),
        }
    }
}

impl FixedPriority {
    /// The priority everything submitted here gets.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{Inline, PriorityExecutor};
    ///
    /// let pq = PriorityExecutor::new(Inline);
    /// assert_eq!(pq.fixed(5).priority(), 5);
    /// assert_eq!(pq.fixed(-1).priority(), -1);
    /// ```
    pub fn priority(&self) -> i32 {
        self.level.priority
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing runs under the lock but heap operations on our own
        // entries, so it is never poisoned in a way that matters.
        crate::loom::lock_std(&self.state)
    }

    /// Queues `runnable` and activates one pump (ground rule 1).
    fn push(&self, priority: i32, runnable: Runnable) {
        let parked = {
            let mut state = self.state();
            let arrival = state.arrivals;
            state.arrivals += 1;
            state.heap.push(Entry {
                priority,
                arrival,
                runnable,
            });
            state.parked.pop()
        };
        match parked {
            Some(waker) => waker.wake(),
            None => {
                let pump = Pump {
                    shared: self.me.clone(),
                };
                // Pumps are the decorator's machinery, not tasks of the
                // inner executor's users: they take no admission, so a
                // parked pump does not keep a closed pool alive.
                let (runnable, daemon) = create_daemon(
                    self.inner.clone(),
                    pump,
                    TaskKind::PriorityPump,
                    self.created_at,
                );
                self.state().pumps.push(daemon);
                runnable.schedule();
            }
        }
    }

    fn pop(&self) -> Option<Runnable> {
        self.state().heap.pop().map(|e| e.runnable)
    }

    fn refused(&self) -> bool {
        self.closed.load(SeqCst)
    }

    fn close(&self) {
        self.closed.store(true, SeqCst);
    }

    fn is_closed(&self) -> bool {
        self.refused() || self.inner.is_closed()
    }

    fn admission(&self, wait: bool) -> Result<Admission, RejectReason> {
        if self.refused() {
            return Err(RejectReason::Closed);
        }
        admission_of(&self.inner, wait)
    }
}

/// A pump task's future: one runnable per activation.
struct Pump {
    shared: Weak<Shared>,
}

impl Future for Pump {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(shared) = self.shared.upgrade() else {
            // The decorator is gone: this is the last run, to drop us.
            return Poll::Ready(());
        };
        if let Some(runnable) = shared.pop() {
            runnable.run();
        }
        shared.state().parked.push(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        // Parked pumps are dropped only with the decorator; a pump dropped
        // while the decorator lives was active (ground rule 2).
        if let Some(shared) = self.shared.upgrade() {
            drop(shared.pop());
        }
    }
}

impl Level {
    fn new(shared: Arc<Shared>, priority: i32) -> Arc<Level> {
        Arc::new(Level {
            header: ExecHeader::of::<Level>(),
            shared,
            priority,
        })
    }
}

impl Executor for Level {
    fn schedule(&self, runnable: Runnable) {
        self.shared.push(self.priority, runnable)
    }
    fn close(&self) {
        self.shared.close()
    }
    fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }
    fn own(&self, _: Internal) -> Option<&dyn Own> {
        Some(self)
    }
}

impl Own for Level {
    fn admission(&self, wait: bool) -> Result<Admission, RejectReason> {
        self.shared.admission(wait)
    }
    // What keeps a level open is what keeps the executor it decorates open.
    fn hold_open(&self) {
        crate::executor::hold_open(&self.shared.inner);
    }
    fn let_go(&self) {
        crate::executor::let_go(&self.shared.inner);
    }
}

/// The user-facing handles are their `Level` plus the owner handle.
macro_rules! via_level {
    ($($ty:ty),*) => {$(
        impl Executor for $ty {
            fn schedule(&self, runnable: Runnable) {
                self.level.schedule(runnable)
            }
            fn close(&self) {
                self.level.close()
            }
            fn is_closed(&self) -> bool {
                self.level.is_closed()
            }
            fn own(&self, _: Internal) -> Option<&dyn Own> {
                Some(self)
            }
        }

        impl Own for $ty {
            fn admission(&self, wait: bool) -> Result<Admission, RejectReason> {
                self.level.admission(wait)
            }
            fn home(&self) -> Option<Exec> {
                Some(Exec::of(self.level.clone()))
            }
            fn keeps_open(&self) -> bool {
                crate::executor::keeps_open(&self._owner)
            }
        }
    )*};
}

via_level!(PriorityExecutor, FixedPriority);
impl_spawn!(PriorityExecutor, FixedPriority);

impl fmt::Debug for PriorityExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PriorityExecutor")
            .field("inner", &self.level.shared.inner)
            .field("pending", &self.pending())
            .finish()
    }
}

impl fmt::Debug for FixedPriority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FixedPriority")
            .field("priority", &self.level.priority)
            .finish_non_exhaustive()
    }
}
