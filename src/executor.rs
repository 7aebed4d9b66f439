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
///
/// # Writing an executor or a decorator
///
/// Implement [`schedule`](Executor::schedule), and [`close`](Executor::close)
/// with [`is_closed`](Executor::is_closed) if your executor can stop
/// taking work: once `is_closed` says so, `spawn` on it gives
/// `Err(TaskError::Rejected(Closed))` and `try_spawn` hands the future
/// back. `schedule` must still take the runnables of tasks it accepted
/// before (they come back each time such a task is woken).
///
/// A decorator (logging, metrics, a priority or a rate limit in front of
/// another executor) forwards those three methods and nothing more, and
/// gets the inner executor's guarantees: after a [`ThreadPool`] under it
/// is closed it reports closed and refuses new work, the tasks it accepted
/// before still finish (a task waiting for a wake-up is not dropped: the
/// pool counts every task that reaches its `schedule`, and waits for it),
/// and a pool's [`max_pending`](crate::pool::Builder::max_pending) bound
/// counts its tasks.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use viaduct::{block_on, Executor, ExecutorExt, RejectReason, Runnable, TaskError, ThreadPool};
///
/// /// Counts what it hands to the executor it decorates.
/// #[derive(Clone)]
/// struct Counted<E> {
///     inner: E,
///     scheduled: Arc<AtomicUsize>,
/// }
///
/// impl<E: Executor> Executor for Counted<E> {
///     fn schedule(&self, runnable: Runnable) {
///         self.scheduled.fetch_add(1, Ordering::Relaxed);
///         self.inner.schedule(runnable)
///     }
///     fn close(&self) {
///         self.inner.close()
///     }
///     fn is_closed(&self) -> bool {
///         self.inner.is_closed()
///     }
/// }
///
/// let pool = ThreadPool::builder().threads(1).build().unwrap();
/// let counted = Counted { inner: pool.clone(), scheduled: Arc::default() };
/// let (tx, rx) = futures::channel::oneshot::channel();
/// let waiting = counted.spawn(async move { rx.await.unwrap() * 2 });
///
/// pool.close();
/// assert!(counted.is_closed());
/// let refused = block_on(counted.spawn(async {})).unwrap_err();
/// assert!(matches!(refused, TaskError::Rejected(RejectReason::Closed)));
///
/// tx.send(21).unwrap(); // the task accepted before the close still runs
/// assert_eq!(block_on(waiting).unwrap(), 42);
/// pool.join_workers().unwrap();
/// assert!(counted.scheduled.load(Ordering::Relaxed) >= 1); // every run went through it
/// ```
///
/// [`ThreadPool`]: crate::ThreadPool
pub trait Executor: Send + Sync + 'static {
    /// Takes one runnable and arranges for it to run (or drops it, which
    /// cancels its task, if the executor can no longer run anything).
    ///
    /// This is called both for new tasks and for tasks woken again, so it
    /// must accept work even after [`close`](Executor::close): closing stops
    /// new tasks, not old ones.
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
    /// executor refuses new tasks:
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

    /// viaduct's own executors' admission control (closing, bounded
    /// mode); sealed: `Internal` cannot be named outside viaduct, so this
    /// cannot be called or overridden there. The default, which every
    /// user executor gets, refuses new tasks once
    /// [`is_closed`](Executor::is_closed) says so and counts nothing
    /// itself: a pool that such an executor forwards tasks to counts them
    /// when they reach its `schedule` (see "Writing an executor or a
    /// decorator" above).
    #[doc(hidden)]
    fn admission(&self, wait: bool, _: Internal) -> Result<Admission, RejectReason> {
        let _ = wait;
        if self.is_closed() {
            Err(RejectReason::Closed)
        } else {
            Ok(Admission::UNCOUNTED)
        }
    }

    /// The handle tasks of this executor keep to find their way back,
    /// which (unlike a user's handle) need not keep the executor open;
    /// sealed like [`admission`](Executor::admission). `None`: a boxed
    /// clone of the executor.
    #[doc(hidden)]
    fn home(&self, _: Internal) -> Option<Exec> {
        None
    }
}

/// What only viaduct can name: the key to [`Executor`]'s sealed methods.
#[derive(Clone, Copy)]
pub struct Internal(());

impl fmt::Debug for Internal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Internal")
    }
}

/// The key, for viaduct's own calls.
pub(crate) const INTERNAL: Internal = Internal(());

/// Admits a new task, without waiting for room.
pub(crate) fn try_admit<E: Executor + ?Sized>(ex: &E) -> Result<Admission, RejectReason> {
    ex.admission(false, INTERNAL)
}

/// Admits a new task, waiting for room in a bounded executor.
pub(crate) fn admit<E: Executor + ?Sized>(ex: &E) -> Result<Admission, RejectReason> {
    ex.admission(true, INTERNAL)
}

/// The handle a task of `ex` keeps: the executor's own, or a boxed clone.
pub(crate) fn home_of<E: Executor + Clone>(ex: &E) -> Exec {
    ex.home(INTERNAL)
        .unwrap_or_else(|| Exec(Arc::new(ex.clone())))
}

/// Who counts a task, held in the task until its future is dropped.
pub struct Admission(Counter);

enum Counter {
    /// Nobody: a user executor admitted it. A pool it reaches counts it in.
    Nobody,
    /// Nobody, on purpose: viaduct's own machinery (a strand's runner),
    /// which must not keep a closed pool alive.
    Exempt,
    /// An executor that counts its live tasks, told when the task is over.
    Tracker(Sink),
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
    /// Counted by nobody; a pool the task reaches counts it in.
    pub(crate) const UNCOUNTED: Admission = Admission(Counter::Nobody);
    /// Counted by nobody, and never to be.
    pub(crate) const EXEMPT: Admission = Admission(Counter::Exempt);

    /// Counted by `tracker`.
    pub(crate) fn counted(tracker: Sink) -> Admission {
        Admission(Counter::Tracker(tracker))
    }

    /// `true` if nobody counts the task yet, though somebody may.
    pub(crate) fn is_uncounted(&self) -> bool {
        matches!(self.0, Counter::Nobody)
    }

    /// Where a panic of this task goes if its handle was dropped. Without
    /// a tracker the payload is dropped: std's panic hook has already
    /// printed the message by the time it is caught.
    pub(crate) fn sink(&self) -> Option<Sink> {
        match &self.0 {
            Counter::Tracker(sink) => Some(sink.clone()),
            _ => None,
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Counter::Tracker(t) = &self.0 {
            t.release();
        }
    }
}

impl fmt::Debug for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Counter::Nobody => "Admission(uncounted)",
            Counter::Exempt => "Admission(exempt)",
            Counter::Tracker(_) => "Admission(counted)",
        })
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
    /// Erases the type of `executor`. Like every handle you hold, the
    /// `Exec` keeps the executor open (a pool closes when its last handle,
    /// erased or not, is dropped); the tasks spawned through it hold what
    /// tasks spawned on the executor directly hold, which does not.
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
                home: home_of(&executor),
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
    fn admission(&self, wait: bool, key: Internal) -> Result<Admission, RejectReason> {
        self.0.admission(wait, key)
    }
    fn home(&self, key: Internal) -> Option<Exec> {
        Some(self.0.home(key).unwrap_or_else(|| self.clone()))
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
    fn admission(&self, wait: bool, key: Internal) -> Result<Admission, RejectReason> {
        self.executor.admission(wait, key)
    }
    fn home(&self, _: Internal) -> Option<Exec> {
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
        match admit(self) {
            Ok(admission) => spawn_admitted(home_of(self), future, admission),
            Err(reason) => JoinHandle::failed(TaskError::Rejected(reason), home_of(self)),
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
        match try_admit(self) {
            Ok(admission) => Ok(spawn_admitted(home_of(self), future, admission)),
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

    /// This executor, type-erased: the same as [`Exec::new`] of a clone,
    /// and like every handle you hold, it keeps the executor open.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, Exec, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).name("cpu").build().unwrap();
    /// let exec: Exec = pool.to_exec();
    /// drop(pool); // the `Exec` still holds the pool open
    /// let name = exec.run(|| std::thread::current().name().map(str::to_owned));
    /// assert_eq!(block_on(name).unwrap().as_deref(), Some("cpu-0"));
    /// ```
    fn to_exec(&self) -> Exec {
        Exec::new(self.clone())
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
