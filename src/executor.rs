//! The bottom of the task core: [`Executor`] (what an executor must do),
//! [`Exec`] (any executor, type-erased), and what every executor is handed:
//! [`Runnable`]s carrying a [`TaskInfo`]. How a task is made, run and
//! ended is `task/`; who counts it, `admission.rs`; what you can do with
//! an executor, `spawn.rs`.

use std::fmt;
use std::marker::PhantomData;
use std::panic::Location;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::admission::Admission;
use crate::dump::lock::{LockBook, LockKind, LockSeen};
use crate::embedded::{whole, Counts, CountsOf, Embeds, Header, HeaderPtr, WeakHeaderPtr};
use crate::error::RejectReason;
use crate::task::Metadata;
use crate::task_id::TaskId;

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

    /// What viaduct's own executors tell the task core beyond this
    /// trait (see [`Own`]); sealed: `Internal` cannot be named outside
    /// viaduct, so this cannot be called or overridden there. `None`, which
    /// every user executor gets: it refuses new tasks once
    /// [`is_closed`](Executor::is_closed) says so and counts nothing
    /// itself, a pool that it forwards tasks to counting them when they
    /// reach its `schedule` (see "Writing an executor or a decorator"
    /// above).
    #[doc(hidden)]
    fn own(&self, _: Internal) -> Option<&dyn Own> {
        None
    }
}

/// What one of viaduct's own executors tells the task core, through
/// [`Executor::own`]; sealed (nothing outside viaduct can reach it).
#[doc(hidden)]
pub trait Own: Executor {
    /// Admits a new task, waiting for room in a bounded executor if
    /// `wait`: refused once closed (the default), counted by an executor
    /// that counts its tasks.
    fn admission(&self, wait: bool) -> Result<Admission, RejectReason> {
        let _ = wait;
        uncounted_unless_closed(self)
    }

    /// The handle tasks of this executor keep to find their way back,
    /// which (unlike a user's handle) need not keep the executor open.
    /// `None`: a boxed clone of the executor.
    fn home(&self) -> Option<Exec> {
        None
    }

    /// The lock a task of this executor waits for before it runs, if the
    /// executor is a strand (for task dumps).
    fn lock_book(&self) -> Option<StrandBook<'_>> {
        None
    }

    /// Whether this handle keeps its executor open, as a user's handle of
    /// a pool does (and its tasks' home does not). A strand's handles made
    /// over such a handle then keep the executor open by
    /// [`hold_open`](Own::hold_open) on the tasks' home, rather than by a
    /// handle of their own.
    fn keeps_open(&self) -> bool {
        false
    }

    /// Counts one more handle that keeps the executor open, on the home of
    /// an executor that closes when its last handle goes (a pool, a
    /// `ManualExecutor`), or that decorates one. Nothing for the others:
    /// the home alone keeps what they need.
    fn hold_open(&self) {}

    /// Gives back a count taken by [`hold_open`](Own::hold_open); the last
    /// handle to go closes the executor.
    fn let_go(&self) {}

    /// Whether a step chained on a task of this executor, before the
    /// task's first poll has ended, may wait in line behind that poll
    /// (ground rule 7 in `future::then`). Only where that changes nothing
    /// a user can rely on: an executor that promises no order between its
    /// tasks, never refuses a task it admitted, and never drops a runnable
    /// under a lock its `schedule` takes (the pool and the simulation).
    fn lets_steps_wait_in_line(&self) -> bool {
        false
    }
}

/// A user's executor's admission: refused once closed, counted by nobody.
fn uncounted_unless_closed<E: Executor + ?Sized>(ex: &E) -> Result<Admission, RejectReason> {
    if ex.is_closed() {
        Err(RejectReason::Closed)
    } else {
        Ok(Admission::UNCOUNTED)
    }
}

/// A strand's record of who holds it, as [`Own::lock_book`] hands it
/// out; opaque.
#[doc(hidden)]
pub struct StrandBook<'a>(pub(crate) &'a LockBook, pub(crate) LockKind);

impl StrandBook<'_> {
    /// The lock as a dump sees it now.
    pub(crate) fn seen(&self) -> LockSeen {
        self.0.seen(self.1)
    }
}

/// What only viaduct can name: the key to [`Executor::own`], its sealed method.
#[derive(Clone, Copy)]
pub struct Internal(());

impl fmt::Debug for Internal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Internal")
    }
}

/// The key, for viaduct's own calls.
pub(crate) const INTERNAL: Internal = Internal(());

/// Admits a new task on `ex`, waiting for room in a bounded executor if
/// `wait`.
pub(crate) fn admission_of<E: Executor + ?Sized>(
    ex: &E,
    wait: bool,
) -> Result<Admission, RejectReason> {
    match ex.own(INTERNAL) {
        Some(own) => own.admission(wait),
        None => uncounted_unless_closed(ex),
    }
}

/// Admits a new task, without waiting for room.
pub(crate) fn try_admit<E: Executor + ?Sized>(ex: &E) -> Result<Admission, RejectReason> {
    admission_of(ex, false)
}

/// Admits a new task, waiting for room in a bounded executor.
pub(crate) fn admit<E: Executor + ?Sized>(ex: &E) -> Result<Admission, RejectReason> {
    admission_of(ex, true)
}

/// The handle a task of `ex` keeps: the executor's own, else `ex` itself
/// if it is an `Exec`, else a boxed clone.
pub(crate) fn home_of<E: Executor + Clone>(ex: &E) -> Exec {
    if let Some(home) = ex.own(INTERNAL).and_then(Own::home) {
        return home;
    }
    match (ex as &dyn std::any::Any).downcast_ref::<Exec>() {
        Some(exec) => exec.clone(),
        None => Exec::boxed(ex.clone()),
    }
}

/// Whether `ex` keeps its executor open (see [`Own::keeps_open`]).
pub(crate) fn keeps_open<E: Executor + ?Sized>(ex: &E) -> bool {
    ex.own(INTERNAL).is_some_and(Own::keeps_open)
}

/// Counts a handle that keeps `ex` open (see [`Own::hold_open`]).
pub(crate) fn hold_open(ex: &Exec) {
    if let Some(own) = ex.own(INTERNAL) {
        own.hold_open();
    }
}

/// Gives back a count taken by [`hold_open`].
pub(crate) fn let_go(ex: &Exec) {
    if let Some(own) = ex.own(INTERNAL) {
        own.let_go();
    }
}

/// The lock a task on `ex` waits for before it runs, if `ex` is a strand.
pub(crate) fn lock_book_of(ex: &Exec) -> Option<StrandBook<'_>> {
    ex.own(INTERNAL).and_then(Own::lock_book)
}

/// See [`Own::lets_steps_wait_in_line`].
pub(crate) fn lets_steps_wait_in_line(ex: &Exec) -> bool {
    ex.own(INTERNAL).is_some_and(Own::lets_steps_wait_in_line)
}

/// Any executor, type-erased: a clonable handle one word wide, which
/// holds the executor as an `Arc` does.
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
pub struct Exec(HeaderPtr<ExecHeader>);

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
            None => Exec::of(Arc::new(Erased {
                header: ExecHeader::of::<Erased<E>>(),
                home: Some(home_of(&executor)),
                executor,
            })),
        }
    }

    /// `executor`, as an `Exec`.
    pub(crate) fn of<T: Executor + Embeds<ExecHeader>>(executor: Arc<T>) -> Exec {
        Exec(HeaderPtr::new(executor))
    }

    /// A new handle of the executor whose header `header` points at.
    ///
    /// # Safety
    ///
    /// As for [`HeaderPtr::of_header`]: the executor is alive, and
    /// `header` has the provenance of its whole allocation (it comes from
    /// an `Exec` or an `Arc`, see [`Exec::header`]).
    pub(crate) unsafe fn of_header(header: NonNull<ExecHeader>) -> Exec {
        // SAFETY: the caller's contract.
        Exec(unsafe { HeaderPtr::of_header(header) })
    }

    /// The header this handle points at, with the provenance of the
    /// executor's whole allocation.
    #[inline]
    pub(crate) fn header(&self) -> NonNull<ExecHeader> {
        self.0.as_ptr()
    }

    /// A handle that keeps the executor's allocation, not the executor.
    pub(crate) fn downgrade(&self) -> WeakExec {
        WeakExec(self.0.downgrade())
    }

    /// `executor`, boxed as an `Exec` that is its own tasks' home.
    pub(crate) fn boxed<E: Executor>(executor: E) -> Exec {
        Exec::of(Arc::new(Erased {
            header: ExecHeader::of::<Erased<E>>(),
            home: None,
            executor,
        }))
    }

    /// The executor's address: the same for every `Exec` of it, and the
    /// address of the value its own handles share (a strand's, a pool's).
    pub(crate) fn addr(&self) -> *const () {
        self.executor() as *const dyn Executor as *const ()
    }

    /// The executor.
    #[inline]
    fn executor(&self) -> &dyn Executor {
        // SAFETY: the header is live and its vtable is its executor's; the
        // executor lives as long as `self` does.
        unsafe { (self.0.header().0.get)(self.0.as_ptr()).as_ref() }
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
    #[inline]
    pub fn same_as(&self, other: &Exec) -> bool {
        // Each executor has one header, and each header one executor
        // around it: the same as comparing `addr`, without the calls
        // through the vtable.
        self.0.as_ptr() == other.0.as_ptr()
    }
}

impl fmt::Debug for Exec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Exec").field(&self.addr()).finish()
    }
}

impl Executor for Exec {
    #[inline]
    fn schedule(&self, runnable: Runnable) {
        // SAFETY: as in `executor`.
        unsafe { (self.0.header().0.schedule)(self.0.as_ptr(), runnable) }
    }
    fn close(&self) {
        self.executor().close()
    }
    fn is_closed(&self) -> bool {
        self.executor().is_closed()
    }
    fn try_run_one(&self) -> bool {
        self.executor().try_run_one()
    }
    fn name(&self) -> &str {
        self.executor().name()
    }
    fn own(&self, key: Internal) -> Option<&dyn Own> {
        self.executor().own(key)
    }
}

/// A weak [`Exec`]: it keeps the executor's allocation, not the executor.
pub(crate) struct WeakExec(WeakHeaderPtr<ExecHeader>);

impl WeakExec {
    /// A handle, if the executor is alive.
    pub(crate) fn upgrade(&self) -> Option<Exec> {
        self.0.upgrade().map(Exec)
    }
}

// An `Exec` is one word: a strong pointer to a header each of viaduct's
// executors embeds (see `embedded`), whose vtable finds the executor. An
// `Arc<dyn Executor>` took two words in every task.

/// A field of an executor that [`Embeds`] it: what an [`Exec`] of it
/// finds the executor through.
pub(crate) struct ExecHeader(&'static ExecVTable);

struct ExecVTable {
    counts: Counts,
    /// The executor whose header this is.
    get: unsafe fn(NonNull<ExecHeader>) -> NonNull<dyn Executor>,
    /// Its `schedule`, called directly: the one call every wake-up makes.
    schedule: unsafe fn(NonNull<ExecHeader>, Runnable),
}

impl Header for ExecHeader {
    fn counts(&self) -> &'static Counts {
        &self.0.counts
    }
}

struct VTableOf<T>(PhantomData<T>);

impl<T: Executor + Embeds<ExecHeader>> VTableOf<T> {
    const VTABLE: ExecVTable = ExecVTable {
        counts: CountsOf::<T, ExecHeader>::COUNTS,
        get: |h| {
            // SAFETY: `h` comes from a live `Exec` of a `T`.
            let whole: NonNull<dyn Executor> = unsafe { whole::<T, ExecHeader>(h) };
            whole
        },
        schedule: |h, runnable| {
            // SAFETY: as for `get`.
            unsafe { whole::<T, ExecHeader>(h).as_ref() }.schedule(runnable)
        },
    };
}

/// An executor whose `schedule` needs the pointer that the `Exec` it is
/// called through holds (a strand, which may make its runner from it).
pub(crate) trait ScheduleAt: Executor + Embeds<ExecHeader> {
    /// Schedules `runnable` on the executor whose header `header` points
    /// at.
    ///
    /// # Safety
    ///
    /// `header` comes from a live `Exec` of a `Self`.
    unsafe fn schedule_at(header: NonNull<ExecHeader>, runnable: Runnable);
}

struct VTableAt<T>(PhantomData<T>);

impl<T: ScheduleAt> VTableAt<T> {
    const VTABLE: ExecVTable = ExecVTable {
        schedule: |h, runnable| {
            // SAFETY: `h` comes from a live `Exec` of a `T`.
            unsafe { T::schedule_at(h, runnable) }
        },
        ..VTableOf::<T>::VTABLE
    };
}

impl ExecHeader {
    /// The header a `T` holds at its offset.
    pub(crate) const fn of<T: Executor + Embeds<ExecHeader>>() -> ExecHeader {
        ExecHeader(&VTableOf::<T>::VTABLE)
    }

    /// As [`of`](ExecHeader::of), for a `T` that schedules through
    /// [`ScheduleAt`].
    pub(crate) const fn scheduling_at<T: ScheduleAt>() -> ExecHeader {
        ExecHeader(&VTableAt::<T>::VTABLE)
    }
}

/// What [`Exec::new`] erases: the user's handle, and the handle its tasks
/// keep (`None`: this one).
struct Erased<E> {
    header: ExecHeader,
    executor: E,
    home: Option<Exec>,
}

// SAFETY: `header` holds `ExecHeader::of::<Self>()` (see `Exec::new` and
// `Exec::boxed`), and an `Erased` lives in the `Arc` an `Exec` is made of.
unsafe impl<E: Executor> Embeds<ExecHeader> for Erased<E> {
    const OFFSET: usize = std::mem::offset_of!(Erased<E>, header);
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
    fn own(&self, _: Internal) -> Option<&dyn Own> {
        Some(self)
    }
}

impl<E: Executor> Own for Erased<E> {
    fn admission(&self, wait: bool) -> Result<Admission, RejectReason> {
        admission_of(&self.executor, wait)
    }
    fn home(&self) -> Option<Exec> {
        // `None` when this is its tasks' home: `home_of` then keeps the
        // `Exec` it was handed.
        self.home.clone()
    }
    fn lock_book(&self) -> Option<StrandBook<'_>> {
        self.executor.own(INTERNAL).and_then(Own::lock_book)
    }
    fn keeps_open(&self) -> bool {
        keeps_open(&self.executor)
    }
}

/// A unit of work handed to an [`Executor`](crate::Executor): run it with
/// [`Runnable::run`](async_task::Runnable::run), or drop it to cancel the task.
///
/// # Examples
///
/// An executor that queues runnables for the caller to run:
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use viaduct::{Executor, ExecutorExt, Runnable};
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
/// let handle = queue.run(|| 6 * 7);
/// assert!(!handle.is_finished());
/// let runnable = queue.0.lock().unwrap().pop().unwrap();
/// runnable.run();
/// assert!(handle.is_finished());
/// assert_eq!(viaduct::block_on(handle).unwrap(), 42);
/// ```
pub type Runnable = async_task::Runnable<TaskInfo>;

/// Metadata every viaduct task carries: where it is scheduled.
///
/// An [`Executor`](crate::Executor) sees it through
/// [`Runnable::metadata`](async_task::Runnable::metadata); the one thing it
/// tells an executor is [`woken_while_running`](TaskInfo::woken_while_running),
/// which a fair scheduler uses to queue a yielding task behind the others.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use viaduct::{Executor, ExecutorExt, Runnable};
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
/// let _handle = queue.spawn(async {});
/// let runnable = queue.0.lock().unwrap().pop().unwrap();
/// // A new task was not woken by itself.
/// assert!(!runnable.metadata().woken_while_running());
/// runnable.run();
/// ```
// Aligned to 8 on every target: a strand's queue word keeps its state in
// the low three bits of a task's address (see `strand::queue`).
#[repr(align(8))]
pub struct TaskInfo(Metadata<Exec, Runnable>);

impl TaskInfo {
    pub(crate) fn new(metadata: Metadata<Exec, Runnable>) -> TaskInfo {
        TaskInfo(metadata)
    }
}

/// Viaduct's own view of the metadata.
#[doc(hidden)]
impl std::ops::Deref for TaskInfo {
    type Target = Metadata<Exec, Runnable>;

    #[inline]
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl fmt::Debug for TaskInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskInfo").finish_non_exhaustive()
    }
}

impl TaskInfo {
    /// `true` if this wake-up came from the task itself while it was being
    /// polled (a yield), so the executor should run other tasks first.
    ///
    /// # Examples
    ///
    /// A task that yields is scheduled again with the flag set:
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::task::Poll;
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
    /// let handle = queue.spawn(async {
    ///     let mut yielded = false;
    ///     std::future::poll_fn(|cx| {
    ///         if yielded {
    ///             return Poll::Ready(7);
    ///         }
    ///         yielded = true;
    ///         cx.waker().wake_by_ref(); // a yield: wake ourselves, then return Pending
    ///         Poll::Pending
    ///     })
    ///     .await
    /// });
    /// let first = queue.0.lock().unwrap().pop().unwrap();
    /// assert!(!first.metadata().woken_while_running());
    /// first.run();
    /// let again = queue.0.lock().unwrap().pop().unwrap();
    /// assert!(again.metadata().woken_while_running());
    /// again.run();
    /// assert_eq!(block_on(handle).unwrap(), 7);
    /// ```
    pub fn woken_while_running(&self) -> bool {
        self.record.state.load(Ordering::Relaxed) & crate::dump::records::YIELDED != 0
    }

    /// The task's id, as stall reports and task dumps show it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use viaduct::{Executor, ExecutorExt, Runnable};
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
    /// let handle = queue.run(|| ());
    /// let runnable = queue.0.lock().unwrap().pop().unwrap();
    /// assert_eq!(Some(runnable.metadata().id()), handle.id());
    /// runnable.run();
    /// ```
    pub fn id(&self) -> TaskId {
        self.record.id
    }

    /// Where the task was spawned: the caller of `spawn`, `run`,
    /// `execute`, a strand's or a timer's spawn, or a continuation.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use viaduct::{Executor, ExecutorExt, Runnable};
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
    /// let line = line!() + 1;
    /// let _handle = queue.run(|| ());
    /// let runnable = queue.0.lock().unwrap().pop().unwrap();
    /// assert_eq!(runnable.metadata().location().line(), line);
    /// runnable.run();
    /// ```
    pub fn location(&self) -> &'static Location<'static> {
        self.record.location
    }
}
