//! The executor abstraction: [`Executor`] (what an executor must do),
//! [`Exec`] (any executor, type-erased) and [`ExecutorExt`] (what you can do
//! with one).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::task::{FutureObj, SpawnError};

use crate::task::{spawn_admitted, JoinHandle, PanicPayload, RejectReason, Runnable, TaskError};

/// Something that runs [`Runnable`]s.
///
/// One method is required, [`schedule`](Executor::schedule); the rest have
/// defaults that suit an executor that never closes and is never full. The
/// trait is object-safe, so [`Exec`] can hold any executor, and open, so a
/// GUI-thread queue or an adapter over another runtime plugs in wherever
/// viaduct takes an executor.
///
/// # Examples
///
/// An executor that runs everything on a fresh thread:
///
/// ```
/// use viaduct::{block_on, Executor, ExecutorExt, Runnable};
///
/// #[derive(Clone)]
/// struct NewThread;
///
/// impl Executor for NewThread {
///     fn schedule(&self, runnable: Runnable) {
///         std::thread::spawn(move || runnable.run());
///     }
/// }
///
/// assert_eq!(block_on(NewThread.spawn(async { 1 + 1 })).unwrap(), 2);
/// ```
pub trait Executor: Send + Sync + 'static {
    /// Takes one runnable and arranges for it to run (or drops it, which
    /// cancels its task, if the executor can no longer run anything).
    ///
    /// This is called both for new tasks and for tasks woken again, so it
    /// must accept work even after [`close`](Executor::close): closing stops
    /// new tasks (see [`try_admit`](Executor::try_admit)), not old ones.
    ///
    /// # Examples
    ///
    /// An executor that queues what it is given; each wake-up of a task comes
    /// back through `schedule`:
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use viaduct::{block_on, Executor, ExecutorExt, Runnable};
    ///
    /// #[derive(Clone, Default)]
    /// struct Queue(Arc<Mutex<Vec<Runnable>>>);
    ///
    /// impl Executor for Queue {
    ///     fn schedule(&self, runnable: Runnable) {
    ///         self.0.lock().unwrap().push(runnable);
    ///     }
    /// }
    ///
    /// let queue = Queue::default();
    /// let a = queue.run(|| 'a');
    /// let b = queue.run(|| 'b');
    /// let queued: Vec<Runnable> = std::mem::take(&mut *queue.0.lock().unwrap());
    /// assert_eq!(queued.len(), 2);
    /// for runnable in queued {
    ///     runnable.run();
    /// }
    /// assert_eq!((block_on(a).unwrap(), block_on(b).unwrap()), ('a', 'b'));
    /// ```
    fn schedule(&self, runnable: Runnable);

    /// Stops accepting new tasks. Tasks already accepted still run.
    ///
    /// # Examples
    ///
    /// With `close` and [`is_closed`](Executor::is_closed) implemented, the
    /// default [`try_admit`](Executor::try_admit) refuses new tasks:
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// use viaduct::{block_on, Executor, ExecutorExt, RejectReason, Runnable, TaskError};
    ///
    /// #[derive(Clone, Default)]
    /// struct Gate(Arc<AtomicBool>);
    ///
    /// impl Executor for Gate {
    ///     fn schedule(&self, runnable: Runnable) {
    ///         runnable.run();
    ///     }
    ///     fn close(&self) {
    ///         self.0.store(true, Ordering::SeqCst);
    ///     }
    ///     fn is_closed(&self) -> bool {
    ///         self.0.load(Ordering::SeqCst)
    ///     }
    /// }
    ///
    /// let gate = Gate::default();
    /// assert_eq!(block_on(gate.spawn(async { 1 })).unwrap(), 1);
    /// gate.close();
    /// let refused = block_on(gate.spawn(async { 2 }));
    /// assert!(matches!(refused, Err(TaskError::Rejected(RejectReason::Closed))));
    /// ```
    fn close(&self) {}

    /// `true` once [`close`](Executor::close) was called.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{Exec, Executor, ManualExecutor};
    ///
    /// let ex = Exec::new(ManualExecutor::new());
    /// assert!(!ex.is_closed());
    /// ex.close();
    /// assert!(ex.is_closed());
    /// ```
    fn is_closed(&self) -> bool {
        false
    }

    /// Runs one pending runnable on the calling thread, if the executor has
    /// one and can run it here. Returns `true` if it ran one.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, Exec, Executor, ExecutorExt, ManualExecutor};
    ///
    /// let ex = Exec::new(ManualExecutor::new());
    /// let h = ex.run(|| 3);
    /// assert!(ex.try_run_one());
    /// assert!(!ex.try_run_one()); // nothing left
    /// assert_eq!(block_on(h).unwrap(), 3);
    /// ```
    fn try_run_one(&self) -> bool {
        false
    }

    /// A name for diagnostics (the `tracing` feature's poll spans). The
    /// default is the type's name; a pool gives its builder's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{Executor, Inline, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).name("cpu").build().unwrap();
    /// assert_eq!(Executor::name(&pool), "cpu");
    /// assert!(Executor::name(&Inline).ends_with("Inline")); // the default: the type's name
    /// ```
    fn name(&self) -> &str {
        std::any::type_name::<Self>()
    }

    /// Asks the executor to accept one more task, without waiting. The
    /// [`Admission`] travels with the task and is dropped when the task's
    /// future is, which is how a bounded executor frees the slot.
    ///
    /// # Errors
    ///
    /// [`RejectReason::Closed`] when closed, [`RejectReason::Full`] when a
    /// bounded executor has no room.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{Executor, RejectReason, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).max_pending(1).build().unwrap();
    /// let slot = pool.try_admit().unwrap();
    /// assert_eq!(pool.try_admit().unwrap_err(), RejectReason::Full);
    /// drop(slot); // frees the slot
    /// let slot = pool.try_admit().unwrap();
    /// drop(slot);
    /// pool.close();
    /// assert_eq!(pool.try_admit().unwrap_err(), RejectReason::Closed);
    /// ```
    fn try_admit(&self) -> Result<Admission, RejectReason> {
        if self.is_closed() {
            Err(RejectReason::Closed)
        } else {
            Ok(Admission::default())
        }
    }

    /// Like [`try_admit`](Executor::try_admit), but waits for room instead
    /// of returning [`RejectReason::Full`].
    ///
    /// # Errors
    ///
    /// [`RejectReason::Closed`] when closed.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{Executor, RejectReason, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).max_pending(1).build().unwrap();
    /// let slot = pool.admit().unwrap();
    /// let freer = std::thread::spawn(move || drop(slot));
    /// let slot = pool.admit().unwrap(); // waits until the other thread frees the slot
    /// freer.join().unwrap();
    /// drop(slot);
    /// pool.close();
    /// assert_eq!(pool.admit().unwrap_err(), RejectReason::Closed);
    /// ```
    fn admit(&self) -> Result<Admission, RejectReason> {
        self.try_admit()
    }

    /// A type-erased handle to this executor, for the tasks spawned on it
    /// to find their way back. The default boxes a clone; executors that are
    /// already an `Arc` inside share it instead. Unlike [`Exec::new`], this
    /// need not keep the executor open (a task's reference to its pool does
    /// not stop the pool from closing when its last handle is dropped).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, Executor, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).name("cpu").build().unwrap();
    /// let exec = pool.to_exec();
    /// let name = exec.run(|| std::thread::current().name().map(str::to_owned));
    /// assert_eq!(block_on(name).unwrap().as_deref(), Some("cpu-0"));
    /// ```
    fn to_exec(&self) -> Exec
    where
        Self: Sized + Clone,
    {
        Exec(Arc::new(self.clone()))
    }

    /// For an executor erased by [`Exec::new`]: its [`to_exec`](Executor::to_exec),
    /// which tasks spawned through the `Exec` keep instead of the `Exec`
    /// (so that they do not keep the executor open). Not for implementors.
    #[doc(hidden)]
    fn erased_to_exec(&self) -> Option<Exec> {
        None
    }
}

/// An executor's consent to take one task, held by the task until its future
/// is dropped. The default one tracks nothing.
///
/// # Examples
///
/// A bounded pool's admission holds a slot until it is dropped:
///
/// ```
/// use viaduct::{Admission, Executor, RejectReason, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(1).max_pending(1).build().unwrap();
/// let slot: Admission = pool.try_admit().unwrap();
/// assert_eq!(pool.try_admit().unwrap_err(), RejectReason::Full);
/// drop(slot);
/// assert!(pool.try_admit().is_ok());
/// ```
#[derive(Default)]
pub struct Admission {
    tracker: Option<Arc<dyn Tracker>>,
}

/// What an executor that counts its tasks learns from an [`Admission`].
pub(crate) trait Tracker: Send + Sync {
    /// The task's future was dropped (it finished, panicked or was cancelled).
    fn release(&self);
    /// A detached task panicked; nobody will read the payload.
    fn unobserved_panic(&self, payload: PanicPayload);
}

pub(crate) type Sink = Arc<dyn Tracker>;

thread_local! {
    static PAST_LIMIT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with the admissions it asks for on this thread let past a
/// bounded executor's limit instead of waiting for room. For work queued on
/// a strand: it may wait behind a section or a guard that is waiting for
/// its submitter, and the room the submitter would wait for may be held by
/// that very backlog, so the wait could never end. A flag rather than an
/// `Executor` method, so that it reaches the pool through every decorator
/// in between.
pub(crate) fn past_limit<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            PAST_LIMIT.with(|p| p.set(self.0));
        }
    }
    let _restore = Restore(PAST_LIMIT.with(|p| p.replace(true)));
    f()
}

/// `true` inside [`past_limit`]: a full bounded executor admits anyway.
pub(crate) fn admitting_past_limit() -> bool {
    PAST_LIMIT.with(std::cell::Cell::get)
}

impl Admission {
    pub(crate) fn tracked(tracker: Arc<dyn Tracker>) -> Self {
        Admission {
            tracker: Some(tracker),
        }
    }

    /// Where a panic of this task goes if its handle was dropped. Without a
    /// tracker the payload is dropped: std's panic hook has already printed
    /// the message by the time it is caught.
    pub(crate) fn sink(&self) -> Option<Sink> {
        self.tracker.clone()
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(t) = &self.tracker {
            t.release();
        }
    }
}

impl fmt::Debug for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admission")
            .field("tracked", &self.tracker.is_some())
            .finish()
    }
}

/// Any executor, type-erased: a cheap, clonable `Arc<dyn Executor>`.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, Exec, ExecutorExt, Inline, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(1).build().unwrap();
/// let executors: Vec<Exec> = vec![Exec::new(Inline), Exec::new(pool)];
/// for ex in &executors {
///     assert_eq!(block_on(ex.run(|| 2 + 2)).unwrap(), 4);
/// }
/// ```
#[derive(Clone)]
pub struct Exec(pub(crate) Arc<dyn Executor>);

impl Exec {
    /// Erases the type of `executor`. The `Exec` holds the handle itself,
    /// so a pool stays open while an `Exec` of it exists; the tasks spawned
    /// through it hold only what [`Executor::to_exec`] gives, as tasks
    /// spawned on the executor directly do.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, Exec, ExecutorExt, ManualExecutor};
    ///
    /// let manual = ManualExecutor::new();
    /// let ex = Exec::new(manual.clone());
    /// let h = ex.run(|| 3);
    /// assert_eq!(manual.run_until_idle(), 1);
    /// assert_eq!(block_on(h).unwrap(), 3);
    /// assert!(Exec::new(ex.clone()).same_as(&ex)); // an `Exec` is not wrapped twice
    /// ```
    pub fn new<E: Executor + Clone>(executor: E) -> Exec {
        match (&executor as &dyn std::any::Any).downcast_ref::<Exec>() {
            Some(exec) => exec.clone(),
            None => Exec(Arc::new(Erased {
                home: executor.to_exec(),
                executor,
            })),
        }
    }

    /// `true` if both handles refer to the same executor.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{Exec, Inline};
    ///
    /// let a = Exec::new(Inline);
    /// assert!(a.same_as(&a.clone()));
    /// assert!(!a.same_as(&Exec::new(Inline)));
    /// ```
    pub fn same_as(&self, other: &Exec) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.0), Arc::as_ptr(&other.0))
    }
}

impl fmt::Debug for Exec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Exec").field(&Arc::as_ptr(&self.0)).finish()
    }
}

impl Executor for Exec {
    fn schedule(&self, runnable: Runnable) {
        self.0.schedule(runnable)
    }
    fn close(&self) {
        self.0.close()
    }
    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
    fn try_run_one(&self) -> bool {
        self.0.try_run_one()
    }
    fn name(&self) -> &str {
        self.0.name()
    }
    fn try_admit(&self) -> Result<Admission, RejectReason> {
        self.0.try_admit()
    }
    fn admit(&self) -> Result<Admission, RejectReason> {
        self.0.admit()
    }
    fn to_exec(&self) -> Exec {
        self.0.erased_to_exec().unwrap_or_else(|| self.clone())
    }
    fn erased_to_exec(&self) -> Option<Exec> {
        self.0.erased_to_exec()
    }
}

/// What [`Exec::new`] erases: the user's handle, and the handle its tasks
/// keep.
struct Erased<E> {
    executor: E,
    home: Exec,
}

impl<E: Executor> Executor for Erased<E> {
    fn schedule(&self, runnable: Runnable) {
        self.executor.schedule(runnable)
    }
    fn close(&self) {
        self.executor.close()
    }
    fn is_closed(&self) -> bool {
        self.executor.is_closed()
    }
    fn try_run_one(&self) -> bool {
        self.executor.try_run_one()
    }
    fn name(&self) -> &str {
        self.executor.name()
    }
    fn try_admit(&self) -> Result<Admission, RejectReason> {
        self.executor.try_admit()
    }
    fn admit(&self) -> Result<Admission, RejectReason> {
        self.executor.admit()
    }
    fn erased_to_exec(&self) -> Option<Exec> {
        Some(self.home.clone())
    }
}

/// Work an executor refused, handed back with the reason.
///
/// # Examples
///
/// ```
/// use viaduct::{ExecutorExt, ManualExecutor, RejectReason};
///
/// let ex = ManualExecutor::new();
/// ex.close();
/// let rejected = ex.try_execute(|| println!("never here")).unwrap_err();
/// assert_eq!(rejected.reason(), RejectReason::Closed);
/// let closure = rejected.into_inner(); // yours again: run it elsewhere
/// closure();
/// ```
pub struct Rejected<W> {
    work: W,
    reason: RejectReason,
}

impl<W> Rejected<W> {
    /// Why the executor refused.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor, RejectReason};
    ///
    /// let ex = ManualExecutor::new();
    /// ex.close();
    /// assert_eq!(ex.try_spawn(async {}).unwrap_err().reason(), RejectReason::Closed);
    /// ```
    pub fn reason(&self) -> RejectReason {
        self.reason
    }

    /// The refused work.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// ex.close();
    /// let future = ex.try_spawn(async { 40 + 2 }).unwrap_err().into_inner();
    /// assert_eq!(viaduct::block_on(future), 42); // the future, unpolled
    /// ```
    pub fn into_inner(self) -> W {
        self.work
    }
}

impl<W> fmt::Debug for Rejected<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("reason", &self.reason)
            .finish_non_exhaustive()
    }
}

impl<W> fmt::Display for Rejected<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "work rejected: {}", self.reason)
    }
}

impl<W> std::error::Error for Rejected<W> {}

mod sealed {
    pub trait Sealed {}
    impl<E: super::Executor + Clone> Sealed for E {}
}

/// What every executor can do: spawn futures, run closures.
///
/// Implemented for every [`Executor`] that is `Clone`; sealed.
///
/// # Examples
///
/// Code generic over where it runs:
///
/// ```
/// use viaduct::{block_on, ExecutorExt, Inline, JoinHandle, ThreadPool};
///
/// fn square<E: ExecutorExt>(ex: &E, x: u64) -> JoinHandle<u64> {
///     ex.run(move || x * x)
/// }
///
/// let pool = ThreadPool::builder().threads(1).build().unwrap();
/// assert_eq!(block_on(square(&pool, 7)).unwrap(), 49);
/// assert_eq!(block_on(square(&Inline, 8)).unwrap(), 64);
/// ```
pub trait ExecutorExt: Executor + Clone + sealed::Sealed {
    /// Spawns `future`; the handle resolves to its output.
    ///
    /// Never panics. On a closed executor the handle resolves to
    /// [`TaskError::Rejected`]; on a full bounded one this waits for room
    /// (on a worker of that pool, by running its tasks).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(2).build().unwrap();
    /// let h = pool.spawn(async { "hello" });
    /// assert_eq!(block_on(h).unwrap(), "hello");
    /// ```
    fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self.admit() {
            Ok(admission) => spawn_admitted(self.to_exec(), future, admission),
            Err(reason) => JoinHandle::failed(TaskError::Rejected(reason), self.to_exec()),
        }
    }

    /// Spawns `future` if the executor takes it now; otherwise hands it back.
    ///
    /// # Errors
    ///
    /// [`Rejected`] with the future when the executor is closed or full.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, Inline, ManualExecutor};
    ///
    /// let closed = ManualExecutor::new();
    /// closed.close();
    /// let fut = closed.try_spawn(async { 5 }).unwrap_err().into_inner();
    /// assert_eq!(block_on(Inline.spawn(fut)).unwrap(), 5); // run it elsewhere
    /// ```
    fn try_spawn<F>(&self, future: F) -> Result<JoinHandle<F::Output>, Rejected<F>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self.try_admit() {
            Ok(admission) => Ok(spawn_admitted(self.to_exec(), future, admission)),
            Err(reason) => Err(Rejected {
                work: future,
                reason,
            }),
        }
    }

    /// Runs `f` on the executor; the handle resolves to its result (boost
    /// `async`, folly `via(e).then(f)` on a fresh future).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).name("cpu").build().unwrap();
    /// let name = pool.run(|| std::thread::current().name().unwrap().to_owned());
    /// assert_eq!(block_on(name).unwrap(), "cpu-0");
    /// ```
    fn run<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.spawn(Call(Some(f)))
    }

    /// Runs `f` on the executor, fire-and-forget. If the executor is closed,
    /// `f` is dropped unrun; use [`try_execute`](ExecutorExt::try_execute)
    /// to get it back.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// ex.execute(|| println!("ran"));
    /// assert_eq!(ex.run_until_idle(), 1);
    /// ```
    fn execute<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        drop(self.run(f));
    }

    /// Runs `f` on the executor if it takes it now; otherwise hands it back.
    ///
    /// # Errors
    ///
    /// [`Rejected`] with the closure when the executor is closed or full.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor, RejectReason};
    ///
    /// let ex = ManualExecutor::new();
    /// assert!(ex.try_execute(|| ()).is_ok());
    /// assert_eq!(ex.run_until_idle(), 1);
    /// ex.close();
    /// let rejected = ex.try_execute(|| ()).unwrap_err();
    /// assert_eq!(rejected.reason(), RejectReason::Closed);
    /// ```
    fn try_execute<F>(&self, f: F) -> Result<(), Rejected<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        match self.try_spawn(Call(Some(f))) {
            Ok(handle) => {
                drop(handle);
                Ok(())
            }
            Err(r) => Err(Rejected {
                work: r.work.0.expect("an unpolled Call holds its closure"),
                reason: r.reason,
            }),
        }
    }
}

impl<E: Executor + Clone> ExecutorExt for E {}

/// A closure as a future that calls it on first poll.
struct Call<F>(Option<F>);

impl<F> Unpin for Call<F> {}

impl<F: FnOnce() -> R, R> Future for Call<F> {
    type Output = R;
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<R> {
        let f = self.0.take().expect("Call polled after completion");
        Poll::Ready(f())
    }
}

/// `futures::task::Spawn` for an executor: spawns detached, and reports a
/// closed or full executor as `SpawnError::shutdown()`.
pub(crate) fn spawn_obj<E: ExecutorExt>(
    ex: &E,
    future: FutureObj<'static, ()>,
) -> Result<(), SpawnError> {
    ex.try_spawn(future)
        .map(drop)
        .map_err(|_| SpawnError::shutdown())
}

macro_rules! impl_spawn {
    ($($ty:ty),* $(,)?) => {$(
        impl futures::task::Spawn for $ty {
            fn spawn_obj(&self, future: futures::task::FutureObj<'static, ()>) -> Result<(), futures::task::SpawnError> {
                $crate::executor::spawn_obj(self, future)
            }
            fn status(&self) -> Result<(), futures::task::SpawnError> {
                if $crate::Executor::is_closed(self) { Err(futures::task::SpawnError::shutdown()) } else { Ok(()) }
            }
        }
    )*};
}
pub(crate) use impl_spawn;

impl_spawn!(Exec);
