//! The bottom of the task core: [`Executor`] (what an executor must do),
//! [`Exec`] (any executor, type-erased), and what every executor is handed:
//! [`Runnable`]s carrying [`TaskInfo`] (where the task is scheduled, who
//! counts it, why it ended early). Tasks and handles (`task.rs`) and what
//! you can do with an executor (`spawn.rs`) build on this.

use std::cell::UnsafeCell;
use std::fmt;
use std::panic::Location;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::error::{drop_payload, Panic, PanicPayload, RejectReason, TaskError};
use crate::task_id::{TaskId, TaskKind};

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

    /// Sealed: the lock a task of this executor waits for before it runs,
    /// if the executor is a strand (for task dumps).
    #[doc(hidden)]
    fn lock_book(&self, _: Internal) -> Option<LockRef> {
        None
    }

    /// Sealed: whether a step chained on a task of this executor, before
    /// the task's first poll has ended, may wait in line behind that poll
    /// (ground rule 7 in `future::then`). Only where that changes nothing
    /// a user can rely on: an executor that promises no order between its
    /// tasks, never refuses a task it admitted, and never drops a runnable
    /// under a lock its `schedule` takes (the pool and the simulation).
    #[doc(hidden)]
    fn lets_steps_wait_in_line(&self, _: Internal) -> bool {
        false
    }
}

/// A strand's record of who holds it, as [`Executor::lock_book`] hands it
/// out; opaque.
#[doc(hidden)]
pub struct LockRef(pub(crate) Arc<crate::watch::LockBook>);

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

/// Who counts a task, held in the task until its future is dropped: an
/// executor that counts its live tasks, told when the task is over; or
/// nobody (a user executor admitted it, and a pool it reaches counts it
/// in, see [`adopt`]). One word, so that it is passed in a register: it
/// travels through every spawn.
pub struct Admission(Option<Sink>);

/// What an executor that counts its tasks learns from an [`Admission`].
///
/// # Safety
///
/// `HEADER` is the offset, in `Self`, of a field holding
/// `TrackerHeader::of::<Self>()`, and `Self` lives in an `Arc` whenever a
/// [`Sink`] is made of it.
pub(crate) unsafe trait Tracker: Send + Sync + Sized + 'static {
    /// `std::mem::offset_of!` the header field.
    const HEADER: usize;
    /// The task's future was dropped (it finished, panicked or was cancelled).
    fn release(&self);
    /// A detached task panicked; nobody will read the payload.
    fn unobserved_panic(&self, payload: PanicPayload);
}

/// A field of a [`Tracker`]: what its [`Sink`]s find the tracker's
/// functions through.
pub(crate) struct TrackerHeader(&'static TrackerVTable);

struct TrackerVTable {
    release: unsafe fn(NonNull<TrackerHeader>),
    unobserved_panic: unsafe fn(NonNull<TrackerHeader>, PanicPayload),
    clone: unsafe fn(NonNull<TrackerHeader>),
    drop: unsafe fn(NonNull<TrackerHeader>),
}

struct VTableOf<T>(std::marker::PhantomData<T>);

impl<T: Tracker> VTableOf<T> {
    const VTABLE: TrackerVTable = TrackerVTable {
        release: |h| {
            // SAFETY: `h` comes from a live `Sink` of a `T` (see `Sink`).
            unsafe { Self::tracker(h).as_ref() }.release()
        },
        unobserved_panic: |h, payload| {
            // SAFETY: as for `release`.
            unsafe { Self::tracker(h).as_ref() }.unobserved_panic(payload)
        },
        clone: |h| {
            // SAFETY: the sink holds a strong count of the `Arc<T>`, which
            // is therefore live; the clone owns the count added.
            unsafe { Arc::increment_strong_count(Self::tracker(h).as_ptr()) }
        },
        drop: |h| {
            // SAFETY: the sink gives up the strong count it held.
            unsafe { Arc::decrement_strong_count(Self::tracker(h).as_ptr()) }
        },
    };

    /// # Safety
    ///
    /// `header` points at the header field of a live `T`.
    unsafe fn tracker(header: NonNull<TrackerHeader>) -> NonNull<T> {
        // SAFETY: the header is `T::HEADER` bytes into the `T` (the
        // trait's contract), and the pointer came from one to the whole `T`.
        unsafe { header.byte_sub(T::HEADER).cast() }
    }
}

impl TrackerHeader {
    /// The header a `T` holds at `T::HEADER`.
    pub(crate) const fn of<T: Tracker>() -> TrackerHeader {
        TrackerHeader(&VTableOf::<T>::VTABLE)
    }
}

/// An executor that counts its tasks (a pool), as a strong reference of
/// one word. A fat `Arc<dyn Tracker>` made an admission three words,
/// passed through memory on every spawn.
pub(crate) struct Sink(NonNull<TrackerHeader>);

// SAFETY: a sink is an `Arc<T>` of a `T: Tracker`, which is `Send + Sync`.
unsafe impl Send for Sink {}
// SAFETY: as above.
unsafe impl Sync for Sink {}

impl Sink {
    /// A new strong reference to the tracker `me` points to.
    ///
    /// # Safety
    ///
    /// The tracker must be alive: its strong count is not zero for the
    /// whole call (the caller borrows the `T` through an `Arc` it holds).
    pub(crate) unsafe fn new<T: Tracker>(me: &std::sync::Weak<T>) -> Sink {
        debug_assert!(me.strong_count() > 0, "a sink of a dropped tracker");
        // `Weak::as_ptr` of a `Weak` made by `Arc::downgrade` (or
        // `Arc::new_cyclic`) is the pointer `Arc::into_raw` would give.
        let ptr = me.as_ptr();
        // SAFETY: `ptr` is the value pointer of a live `Arc<T>` (see above
        // and the caller's contract), so its strong count is not zero and
        // may grow; the `Sink`'s drop gives the reference back.
        unsafe { Arc::increment_strong_count(ptr) };
        // SAFETY: the pointer is non-null; the header is `T::HEADER` bytes
        // into the `T`, and stays within it.
        Sink(unsafe {
            NonNull::new_unchecked(ptr.cast_mut())
                .byte_add(T::HEADER)
                .cast()
        })
    }

    fn vtable(&self) -> &'static TrackerVTable {
        // SAFETY: the sink keeps its tracker, and so the header, alive.
        unsafe { self.0.as_ref() }.0
    }

    /// See [`Tracker::release`].
    pub(crate) fn release(&self) {
        // SAFETY: the header is live and its vtable is its tracker's.
        unsafe { (self.vtable().release)(self.0) }
    }

    /// See [`Tracker::unobserved_panic`].
    pub(crate) fn unobserved_panic(&self, payload: PanicPayload) {
        // SAFETY: as in `release`.
        unsafe { (self.vtable().unobserved_panic)(self.0, payload) }
    }
}

impl Clone for Sink {
    fn clone(&self) -> Sink {
        // SAFETY: as in `release`; the new sink owns the count added.
        unsafe { (self.vtable().clone)(self.0) };
        Sink(self.0)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        // SAFETY: as in `release`; this gives up the sink's own count.
        unsafe { (self.vtable().drop)(self.0) }
    }
}

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
    /// Counted by nobody (yet).
    pub(crate) const UNCOUNTED: Admission = Admission(None);

    /// Whether the tracker whose header is at address `header` counts it.
    pub(crate) fn counted_by(&self, header: usize) -> bool {
        self.0
            .as_ref()
            .is_some_and(|sink| sink.0.as_ptr() as usize == header)
    }

    /// Counted by `tracker`.
    pub(crate) fn counted(tracker: Sink) -> Admission {
        Admission(Some(tracker))
    }

    /// `true` if nobody counts the task.
    pub(crate) fn is_uncounted(&self) -> bool {
        self.0.is_none()
    }

    /// Where a panic of this task goes if its handle was dropped. Without
    /// a tracker the payload is dropped: std's panic hook has already
    /// printed the message by the time it is caught.
    pub(crate) fn sink(&self) -> Option<Sink> {
        self.0.clone()
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(t) = &self.0 {
            t.release();
        }
    }
}

impl fmt::Debug for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            None => "Admission(uncounted)",
            Some(_) => "Admission(counted)",
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
    #[inline]
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
    fn lock_book(&self, key: Internal) -> Option<LockRef> {
        self.0.lock_book(key)
    }
    fn lets_steps_wait_in_line(&self, key: Internal) -> bool {
        self.0.lets_steps_wait_in_line(key)
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
    fn lock_book(&self, key: Internal) -> Option<LockRef> {
        self.executor.lock_book(key)
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
pub struct TaskInfo {
    /// The worker book the task is in, if it has waited on a pool worker.
    /// First, so that it leaves the book before any other field is
    /// dropped (a dump reads them under the book's lock).
    pub(crate) booking: crate::watch::BookingSlot,
    pub(crate) home: Exec,
    /// Set by `hop_to`; read by `schedule`. `hopped` lets the common case
    /// skip the lock.
    pub(crate) hop: Mutex<Option<Exec>>,
    pub(crate) hopped: AtomicBool,
    pub(crate) yielded: AtomicBool,
    /// Set by `abort`: the task's next poll drops its future instead.
    pub(crate) aborted: AtomicBool,
    /// Set once the task's future has been dropped: the task is over.
    pub(crate) done: AtomicBool,
    /// Set when the task's future was dropped by a panicking `schedule`;
    /// `fault` then says what the handle reports. Rare, so boxed.
    pub(crate) faulted: AtomicBool,
    pub(crate) fault: Mutex<Option<Box<Fault>>>,
    /// Who counts the task: released when its future is dropped. Touched
    /// only by whoever holds the task's runnable (see the `Sync` impl).
    pub(crate) admission: UnsafeCell<Admission>,
    /// The next item while the runnable sits in a strand's queue: the
    /// queue is intrusive, so submitting to a strand allocates nothing
    /// (see `strand::queue`). A runnable is in one queue at a time.
    pub(crate) strand_link: AtomicUsize,
    pub(crate) id: TaskId,
    /// Where the task was spawned (`#[track_caller]` on every spawn path).
    pub(crate) location: &'static Location<'static>,
    /// What runs in the task: user code, or a queue viaduct drains.
    pub(crate) kind: TaskKind,
    /// Queued, running or waiting, for dumps (see `watch`).
    pub(crate) state: std::sync::atomic::AtomicU8,
    /// The step waiting in line behind the task's first poll, if any (see
    /// `successor`).
    pub(crate) successor: crate::successor::Successor<Runnable>,
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
        self.yielded.load(Ordering::Relaxed)
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
        self.id
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
        self.location
    }

    /// The executor the task is scheduled on now.
    pub(crate) fn executor(&self) -> Exec {
        if self.hopped.load(Ordering::Acquire) {
            if let Some(ex) = crate::loom::lock_std(&self.hop).as_ref() {
                return ex.clone();
            }
        }
        self.home.clone()
    }

    /// Moves the task: its next schedule goes to `ex`.
    pub(crate) fn set_executor(&self, ex: Exec) {
        *crate::loom::lock_std(&self.hop) = Some(ex);
        self.hopped.store(true, Ordering::Release);
    }

    /// Runs `f` with the executor the task is scheduled on now, cloning it
    /// only when the task has hopped.
    #[inline]
    pub(crate) fn with_executor<R>(&self, f: impl FnOnce(&Exec) -> R) -> R {
        if self.hopped.load(Ordering::Acquire) {
            // Unlocked before `f` runs: `f` schedules the task, which may
            // then run, and hop again, before `f` returns.
            let hop = crate::loom::lock_std(&self.hop).clone();
            if let Some(ex) = hop {
                return f(&ex);
            }
        }
        f(&self.home)
    }
}

/// Why a task ended inside its own executor's `schedule`, for its handle.
pub(crate) enum Fault {
    /// Its future was dropped unfinished during that call, which has not
    /// returned yet (it may be unwinding). A handle polled meanwhile waits
    /// here.
    Unwinding {
        sink: Option<Sink>,
        waiter: Option<Waker>,
    },
    /// The panic, for the handle; reported to the sink if the handle never
    /// takes it (when the task is freed).
    Panicked(Failure),
    /// An executor that counts its tasks refused this one when it reached
    /// it through a user's executor.
    Refused(RejectReason),
}

impl TaskInfo {
    /// The task's future was dropped unfinished inside its own executor's
    /// `schedule` (the executor refused or threw away the runnable, perhaps
    /// as that `schedule` panics): its handle waits for that call to end,
    /// to tell a panic from a plain cancellation. A refusal recorded
    /// already stands.
    pub(crate) fn fault_began(&self, sink: Option<Sink>) {
        let mut fault = crate::loom::lock_std(&self.fault);
        if fault.is_none() {
            *fault = Some(Box::new(Fault::Unwinding { sink, waiter: None }));
            self.faulted.store(true, Ordering::Release);
        }
    }

    /// The `schedule` call during which the future may have been dropped
    /// has ended, with `panicked` if it unwound. Never unwinds itself: it
    /// runs in the schedule function.
    pub(crate) fn fault_ended(&self, panicked: Option<PanicPayload>) {
        if !self.faulted.load(Ordering::Acquire) {
            // The future was not dropped in that call: the executor kept
            // the runnable, the task lives on, and has no use for a payload
            // (std's hook has printed it).
            if let Some(payload) = panicked {
                drop_payload(payload);
            }
            return;
        }
        let mut fault = crate::loom::lock_std(&self.fault);
        let waiter = match fault.as_deref_mut() {
            Some(Fault::Unwinding { sink, waiter }) => {
                let waiter = waiter.take();
                let sink = sink.take();
                *fault = panicked.map(|payload| {
                    Box::new(Fault::Panicked(Failure {
                        error: Some(TaskError::Panicked(Panic::new(payload))),
                        sink,
                    }))
                });
                waiter
            }
            // A refusal, or an earlier outcome: it stands.
            _ => {
                if let Some(payload) = panicked {
                    drop_payload(payload);
                }
                None
            }
        };
        drop(fault);
        if let Some(w) = waiter {
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wake())) {
                drop_payload(p);
            }
        }
    }

    /// For a handle whose task was closed without a result: why, if its
    /// executor's `schedule` panicked (`None`: plain cancellation).
    pub(crate) fn poll_fault(&self, cx: &mut Context<'_>) -> Option<Poll<TaskError>> {
        if !self.faulted.load(Ordering::Acquire) {
            return None;
        }
        let mut fault = crate::loom::lock_std(&self.fault);
        match fault.as_deref_mut() {
            Some(Fault::Unwinding { waiter, .. }) => {
                *waiter = Some(cx.waker().clone());
                Some(Poll::Pending)
            }
            Some(Fault::Panicked(failure)) => Some(Poll::Ready(
                failure.error.take().unwrap_or(TaskError::Cancelled),
            )),
            Some(Fault::Refused(reason)) => Some(Poll::Ready(TaskError::Rejected(*reason))),
            None => None,
        }
    }
}

// SAFETY: every field but `admission` and `booking` is `Sync`. Those two
// are read and written only by the thread that holds the task's runnable
// (and `booking` by its `Drop`, once none does): the schedule
// function and the executor's `schedule` it calls (which are handed the
// runnable), the task's poll (`Runnable::run`) and the drop of its future
// (by `run`, or by dropping the runnable). async-task lets one thread hold
// the runnable at a time and hands it over with release/acquire on the
// task's state, so those accesses never overlap and each sees the last.
unsafe impl Sync for TaskInfo {}

impl TaskInfo {
    /// # Safety
    ///
    /// The caller holds the task's runnable, or polls or drops its future.
    pub(crate) unsafe fn admission(&self) -> &Admission {
        // SAFETY: the caller's contract makes this the only access.
        unsafe { &*self.admission.get() }
    }

    /// # Safety
    ///
    /// As for [`admission`](Self::admission).
    pub(crate) unsafe fn replace_admission(&self, admission: Admission) -> Admission {
        // SAFETY: the caller's contract makes this the only access.
        unsafe { std::mem::replace(&mut *self.admission.get(), admission) }
    }

    /// Moves the task: its next schedule goes to `ex`, which counts it by
    /// `admission` from now on (the old admission is released).
    ///
    /// # Safety
    ///
    /// The caller is polling the task.
    pub(crate) unsafe fn move_to(&self, ex: Exec, admission: Admission) {
        // SAFETY: the caller polls the task, so holds its runnable.
        drop(unsafe { self.replace_admission(admission) });
        self.set_executor(ex);
    }

    /// Marks the task refused by the executor it was scheduled on, before
    /// its runnable is dropped: its handle says `Rejected(reason)`.
    pub(crate) fn refuse(&self, reason: RejectReason) {
        *crate::loom::lock_std(&self.fault) = Some(Box::new(Fault::Refused(reason)));
        self.faulted.store(true, Ordering::Release);
    }
}

/// For an executor that counts its tasks, in its `schedule`: if nobody
/// counts the task of `runnable` yet (a user's executor admitted it and
/// forwarded it here), count it in with `admit`. If that fails, the task is
/// refused: its handle says `Rejected`, and its runnable is dropped.
pub(crate) fn adopt(
    runnable: Runnable,
    admit: impl FnOnce() -> Result<Admission, RejectReason>,
) -> Option<Runnable> {
    let info = runnable.metadata();
    // A runnable holds its future, which keeps the task unfinished.
    debug_assert!(
        !info.done.load(Ordering::Relaxed),
        "a finished task scheduled"
    );
    // SAFETY: we hold the runnable.
    // viaduct's own machinery (strand runners, priority pumps) must not
    // keep a closed pool alive: nobody counts it.
    if !unsafe { info.admission() }.is_uncounted() || info.kind != TaskKind::Spawned {
        return Some(runnable);
    }
    match admit() {
        Ok(admission) => {
            // SAFETY: we hold the runnable.
            drop(unsafe { info.replace_admission(admission) });
            Some(runnable)
        }
        Err(reason) => {
            info.refuse(reason);
            drop(runnable);
            None
        }
    }
}

impl fmt::Debug for TaskInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskInfo").finish_non_exhaustive()
    }
}

/// Why a task has no value, on its way to the handle: a caught panic, or the
/// error a continuation carries from the step before it. If the handle is
/// gone (the task was detached), dropping a panic hands the payload to the
/// executor's panic hook, so a detached task never dies silently.
pub(crate) struct Failure {
    pub(crate) error: Option<TaskError>,
    pub(crate) sink: Option<Sink>,
}

impl Failure {
    pub(crate) fn take(mut self) -> TaskError {
        self.error.take().expect("the error is taken once")
    }
}

impl Drop for Failure {
    fn drop(&mut self) {
        if let Some(TaskError::Panicked(p)) = self.error.take() {
            report(self.sink.as_ref(), p.into_payload());
        }
    }
}

/// Hands a panic nobody will read to `sink`, or drops it. Never unwinds:
/// this runs where async-task aborts the process on a panic (dropping a
/// detached task's output or future, freeing a task).
pub(crate) fn report(sink: Option<&Sink>, payload: PanicPayload) {
    match sink {
        Some(sink) => sink.unobserved_panic(payload),
        None => drop_payload(payload),
    }
}
