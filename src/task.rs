//! Tasks: how a future becomes an `async-task` runnable, and the handle that
//! reports how it ended.
//!
//! Every future spawned by viaduct is wrapped in a [`TaskFuture`] that
//!
//! 1. catches a panic of the user's future, so a worker thread never unwinds
//!    and the payload reaches the [`JoinHandle`] as [`TaskError::Panicked`];
//! 2. marks the running task in a thread-local, which is what lets
//!    [`hop_to`](crate::hop_to) find the task it is moving;
//! 3. holds the executor's [`Admission`] until the future is dropped, so a
//!    pool counts its live tasks and a bounded pool frees a slot.
//!
//! The task's metadata ([`TaskInfo`]) names the executor it is scheduled on.

use std::cell::{Cell, UnsafeCell};
use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use async_task::{Builder, FallibleTask, ScheduleInfo, WithInfo};

use crate::error::{drop_payload, ByValue, Panic, PanicPayload, RejectReason, TaskError};
use crate::executor::INTERNAL;
use crate::executor::{report, Admission, Exec, Executor, Failure, Runnable, Sink, TaskInfo};
use crate::task_id::{TaskId, TaskKind};
use crate::watch::{EndedFlag, Noted, WaitOn};

/// The viaduct task being polled on this thread: its metadata, and the data
/// pointer of the waker it was polled with (compared, never dereferenced).
#[derive(Clone, Copy)]
struct Current {
    info: *const TaskInfo,
    waker: *const (),
    /// The task's admission, for where its panics go.
    admission: *const UnsafeCell<Admission>,
}

thread_local! {
    static CURRENT_TASK: Cell<Current> = const {
        Cell::new(Current {
            info: std::ptr::null(),
            waker: std::ptr::null(),
            admission: std::ptr::null(),
        })
    };
}

/// Where a panic of the viaduct task being polled on this thread goes if
/// nobody reads it (its executor's panic hook), if there is such a task.
pub(crate) fn current_task_sink() -> Option<Sink> {
    let admission = CURRENT_TASK.with(Cell::get).admission;
    // SAFETY: set only by `TaskFuture::poll`, to its task's admission, for
    // the duration of that poll (as `info`), which is on this thread: the
    // metadata is alive, and this thread, polling, is the one that may
    // touch the admission.
    unsafe { admission.as_ref().and_then(|a| (*a.get()).sink()) }
}

/// Runs `f`, a user's code (a waker, a `Drop`) called where a panic must
/// not unwind: a panic goes where the polled task's unread panic would
/// ([`current_task_sink`]), or is dropped.
pub(crate) fn reporting_panics(f: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        report(current_task_sink().as_ref(), payload);
    }
}

/// Runs `f` with the metadata of the viaduct task being polled on this
/// thread, if any.
#[inline]
pub(crate) fn with_current_task<R>(f: impl FnOnce(Option<&TaskInfo>) -> R) -> R {
    let ptr = CURRENT_TASK.with(Cell::get).info;
    // SAFETY: the pointer is set only by `TaskFuture::poll` for the duration
    // of that poll and reset (by `CurrentGuard`) before it returns; while the
    // task is being polled its allocation, metadata included, is alive.
    f(unsafe { ptr.as_ref() })
}

/// Lists the viaduct task being polled on this thread, if any, in the
/// dump records of the pool worker it runs on while its poll blocks (a
/// `block_on`, a scope's wait), so that a dump shows it and what it waits
/// on.
pub(crate) fn list_current_while_blocked() {
    with_current_task(|t| {
        if let Some(info) = t {
            crate::watch::list_while_blocked(info);
        }
    });
}

/// The viaduct task being polled on this thread, by address (null if
/// none): its identity for [`section`](crate::section).
#[inline]
pub(crate) fn current_task_id() -> *const () {
    CURRENT_TASK.with(Cell::get).info as *const ()
}

/// The id of the viaduct task being polled on this thread, if any.
#[inline]
pub(crate) fn current_task() -> Option<TaskId> {
    with_current_task(|t| t.map(|t| t.id))
}

/// A task's identity for [`section`](crate::section).
pub(crate) fn task_id(info: &TaskInfo) -> *const () {
    info as *const TaskInfo as *const ()
}

/// Like [`with_current_task`], but only if `waker` is the task's own: a
/// future polled with another waker (under a `block_on`, or inside a
/// combinator that wakes its parts separately) is not the task itself, and
/// waking the task would not be what resumes that future.
pub(crate) fn with_task_polled_by<R>(waker: &Waker, f: impl FnOnce(Option<&TaskInfo>) -> R) -> R {
    let current = CURRENT_TASK.with(Cell::get);
    if current.waker != waker.data() {
        return f(None);
    }
    // SAFETY: as in `with_current_task`.
    f(unsafe { current.info.as_ref() })
}

struct CurrentGuard(Current);

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        CURRENT_TASK.with(|c| c.set(self.0));
    }
}

/// A task's value on its way to the handle. If the handle is gone,
/// async-task drops it where a panic would abort the process, so a
/// panicking `Drop` of the value is caught here and reported like a
/// detached task's panic.
pub(crate) struct Value<T> {
    value: ManuallyDrop<T>,
    /// Only for values with drop glue: a `u32` cannot panic when dropped.
    sink: Option<Sink>,
}

impl<T> Value<T> {
    fn into_inner(self) -> T {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again, so the value is
        // taken out once; the sink is dropped in place, once.
        unsafe {
            std::ptr::drop_in_place(&mut this.sink);
            ManuallyDrop::take(&mut this.value)
        }
    }
}

impl<T> Drop for Value<T> {
    fn drop(&mut self) {
        // SAFETY: dropped once, here; `into_inner` skips this `Drop`.
        let dropped = catch_unwind(AssertUnwindSafe(|| unsafe {
            ManuallyDrop::drop(&mut self.value)
        }));
        if let Err(p) = dropped {
            report(self.sink.as_ref(), p);
        }
    }
}

type Outcome<T> = Result<Value<T>, Failure>;

/// A user's future that its task may drop early (an abort, a scoped task
/// ending), at most once, in place (so it may be pinned), catching a panic
/// of its `Drop`.
pub(crate) struct DropOnce<F> {
    fut: ManuallyDrop<F>,
    /// `false` once `fut` is dropped.
    live: bool,
}

impl<F> DropOnce<F> {
    pub(crate) fn new(fut: F) -> DropOnce<F> {
        DropOnce {
            fut: ManuallyDrop::new(fut),
            live: true,
        }
    }

    /// The future, if it has not been dropped.
    pub(crate) fn as_pin_mut(self: Pin<&mut Self>) -> Option<Pin<&mut F>> {
        // SAFETY: `fut` is structurally pinned: it is never moved, only
        // dropped in place (`drop_now`), and `DropOnce` has no `Unpin` impl.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above; `live` says `fut` has not been dropped.
        this.live
            .then(|| unsafe { Pin::new_unchecked(&mut *this.fut) })
    }

    /// Drops the future now, if it has not been; the panic of its `Drop`,
    /// if any. Dropping in place keeps the pinning promise.
    pub(crate) fn drop_now(&mut self) -> Option<PanicPayload> {
        if !std::mem::take(&mut self.live) {
            return None;
        }
        // SAFETY: `fut` is dropped once (`live` is now false), and never
        // used again.
        catch_unwind(AssertUnwindSafe(|| unsafe {
            ManuallyDrop::drop(&mut self.fut)
        }))
        .err()
    }
}

impl<F> Drop for DropOnce<F> {
    fn drop(&mut self) {
        // Its owners drop the future themselves, to say where a panic
        // goes; one left here has nowhere to go.
        if let Some(payload) = self.drop_now() {
            drop_payload(payload);
        }
    }
}

/// The future async-task runs: the user's future plus the bookkeeping above.
struct TaskFuture<'a, F> {
    fut: DropOnce<F>,
    /// `true` once a poll returned `Ready`: the task's end is its output.
    completed: bool,
    info: &'a TaskInfo,
}

impl<F> TaskFuture<'_, F> {
    /// Drops the user's future, once; a panic of its `Drop` is reported.
    fn drop_future(&mut self) {
        if let Some(p) = self.fut.drop_now() {
            // SAFETY: whoever drops the future holds the runnable.
            report(unsafe { self.info.admission() }.sink().as_ref(), p);
        }
    }
}

impl<F: Future<Output = Result<T, TaskError>>, T> Future for TaskFuture<'_, F> {
    type Output = Outcome<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `fut` is structurally pinned: it is never moved out of
        // `self`, and `TaskFuture` has no `Unpin` impl that would let it
        // move while pinned. The other fields are not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let info = this.info;
        // Dropped last, once this task is no longer the current one: the
        // step in line behind this poll goes to its executor.
        let _successor = CloseLine(info);
        let current = Current {
            info,
            waker: cx.waker().data(),
            admission: &info.admission,
        };
        // The poll's own view of the admission: read when it ends, after a
        // hop may have replaced it.
        let sink = current_task_sink;
        let prev = CURRENT_TASK.with(|c| c.replace(current));
        let _restore = CurrentGuard(prev);
        let _budget = crate::coop::fresh();
        let polling = crate::watch::enter_poll(info);
        #[cfg(feature = "tracing")]
        let _span = tracing::trace_span!(
            target: "viaduct",
            "poll",
            executor = info.home.name(),
            task = info.id.as_u64(),
            worker = std::thread::current().name().unwrap_or("")
        )
        .entered();
        let failure = |error| Failure {
            error: Some(error),
            sink: sink(),
        };
        let failed = |error| Poll::Ready(Err(failure(error)));
        if info.aborted.load(Ordering::Acquire) {
            // Aborted: the future is dropped now, unpolled, while the task
            // is still marked current (its `Drop` may ask for the task).
            this.drop_future();
            this.completed = true;
            return failed(TaskError::Cancelled);
        }
        // SAFETY: `fut` is structurally pinned (see above).
        let fut = unsafe { Pin::new_unchecked(&mut this.fut) }
            .as_pin_mut()
            .expect("the only early drop is just above, and returns");
        // `Pending` returns on its own path: merged with the others, it
        // went through the same stack temporary, copied out in wide loads
        // that stall on the narrow stores that had just written it.
        let outcome = match catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Pending) => {
                crate::watch::left_pending(info, polling.as_ref(), cx.waker());
                return Poll::Pending;
            }
            Ok(Poll::Ready(Ok(v))) => Ok(Value {
                value: ManuallyDrop::new(v),
                sink: if std::mem::needs_drop::<T>() {
                    sink()
                } else {
                    None
                },
            }),
            Ok(Poll::Ready(Err(error))) => Err(failure(error)),
            Err(payload) => Err(failure(TaskError::Panicked(Panic::new(payload)))),
        };
        // An abort that landed during this poll loses to its result, as
        // in tokio: the handle has not resolved yet (it waits for the
        // future to be dropped), and the body did run to its end.
        this.completed = true;
        Poll::Ready(outcome)
    }
}

/// Closes a task's line (see `successor`) when its poll ends, or its
/// future is dropped.
struct CloseLine<'a>(&'a TaskInfo);

impl Drop for CloseLine<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.close_line();
    }
}

impl TaskInfo {
    /// Lets the step waiting in line behind this task's first poll go to
    /// its executor, if one is, and lets no other wait there from now on.
    #[inline]
    fn close_line(&self) {
        if let Some(next) = self.successor.seal() {
            next.schedule();
        }
    }
}

impl<F> Drop for TaskFuture<'_, F> {
    fn drop(&mut self) {
        // A task dropped before its first poll ended lets the step in line
        // behind it go too, to find out how the task ended.
        let _successor = CloseLine(self.info);
        crate::watch::task_ended(self.info);
        // A future that panics in `Drop` while being cancelled must not unwind
        // into the executor that dropped it (a worker, or `shutdown_now`).
        self.drop_future();
        self.info.done.store(true, Ordering::Release);
        // Left uncounted: no runnable outlives the future, so nothing
        // admits the task again (a closed task that async-task schedules
        // once more, to drop its future, ends here).
        // SAFETY: whoever drops the future holds the runnable.
        let admission = unsafe { self.info.replace_admission(Admission::UNCOUNTED) };
        if !self.completed && std::ptr::eq(SCHEDULING.with(Cell::get), self.info) {
            // Dropped unfinished inside the task's own executor's
            // `schedule`: the handle waits for that call to end, to tell a
            // panicking `schedule` from a refusal; see `schedule_catching`.
            self.info.fault_began(admission.sink());
        }
        // Released once the future is gone: a pool counts the task live
        // until then. Only the step in line behind it goes later (the
        // guard above), counted by the pool on its own.
        drop(admission);
    }
}

thread_local! {
    /// The task whose executor's `schedule` this thread is in.
    static SCHEDULING: Cell<*const TaskInfo> = const { Cell::new(std::ptr::null()) };
}

/// Hands `runnable` to its task's executor. A panic of the executor's
/// `schedule` must not unwind into async-task (which aborts the process
/// when a waker panics) or a worker's loop (which would die): it is caught
/// here. If the runnable was dropped as it unwound, the task is over, and
/// its handle reports the panic (or, if detached, the executor's panic
/// hook gets it); if the executor kept the runnable, the task lives on and
/// the panic is only printed.
fn schedule_catching(info: &TaskInfo, runnable: Runnable) {
    let outer = SCHEDULING.with(|s| s.replace(info));
    let scheduled = catch_unwind(AssertUnwindSafe(|| {
        info.with_executor(|ex| ex.schedule(runnable))
    }));
    SCHEDULING.with(|s| s.set(outer));
    info.fault_ended(scheduled.err());
}

/// Spawns `fut` on `exec`, which has already admitted it.
#[track_caller]
pub(crate) fn spawn_admitted<F>(exec: Exec, fut: F, admission: Admission) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (runnable, handle) = create_admitted(exec, fut, admission);
    runnable.schedule();
    handle
}

/// The admission, or the handle of a task `exec` refused: every spawn
/// goes through here, so a refusal always reads `Rejected` with its
/// reason, on a handle whose continuations run on `exec`.
pub(crate) fn admitted_or_rejected<T>(
    exec: &Exec,
    admitted: Result<Admission, RejectReason>,
) -> Result<Admission, JoinHandle<T>> {
    admitted.map_err(|reason| JoinHandle::failed(TaskError::Rejected(reason), exec.clone()))
}

/// Spawns `fut` on `exec` if it was admitted; otherwise a handle that says
/// `Rejected` with the reason.
#[track_caller]
pub(crate) fn spawn_or_reject<F>(
    exec: Exec,
    fut: F,
    admitted: Result<Admission, RejectReason>,
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match admitted_or_rejected(&exec, admitted) {
        Ok(admission) => spawn_admitted(exec, fut, admission),
        Err(refused) => refused,
    }
}

/// Creates the task [`spawn_admitted`] spawns, but leaves its first
/// schedule to the caller (the timer holds it until its deadline).
#[track_caller]
pub(crate) fn create_admitted<F>(
    exec: Exec,
    fut: F,
    admission: Admission,
) -> (Runnable, JoinHandle<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    create_fallible(exec, futures::FutureExt::map(fut, Ok), admission)
}

/// Machinery that lives as long as its owner (a strand's runner, a
/// priority decorator's pumps): a task whose future holds its owner weakly
/// and that the owner cancels when it goes. Its first schedule is left to
/// the caller. Nobody counts it, ever (its `kind` keeps pools from counting
/// it in): it must not keep a closed pool alive.
#[track_caller]
pub(crate) fn create_daemon<F>(
    exec: Exec,
    fut: F,
    kind: TaskKind,
    owner_created_at: &'static Location<'static>,
) -> (Runnable, Daemon)
where
    F: Future<Output = ()> + Send + 'static,
{
    debug_assert_ne!(kind, TaskKind::Spawned, "a daemon is machinery");
    let fut = futures::FutureExt::map(fut, Ok);
    let (runnable, task) = create_task(exec, fut, Admission::UNCOUNTED, kind, owner_created_at);
    (runnable, Daemon(task))
}

/// The handle of a [`create_daemon`] task: dropping it cancels the task.
///
/// Detaching would leak: when the owner's last reference goes inside the
/// daemon's own poll (the poll upgraded its weak reference), the owner's
/// wakers of the daemon go while it runs, and async-task then frees the
/// task without dropping its future, whose weak reference keeps the
/// owner's allocation alive (smol-rs/async-executor#140). Dropping the
/// async-task handle (not detaching it) marks the task closed, so its
/// future is dropped right after that poll, or by its executor if it is not
/// running.
pub(crate) struct Daemon(#[allow(dead_code)] async_task::Task<Outcome<()>, TaskInfo>);

/// Creates a task, unscheduled, whose future's `Err` reaches the handle as
/// the task's own error: that is how a continuation passes on the error of
/// the step before it.
#[track_caller]
pub(crate) fn create_fallible<F, T>(
    exec: Exec,
    fut: F,
    admission: Admission,
) -> (Runnable, JoinHandle<T>)
where
    F: Future<Output = Result<T, TaskError>> + Send + 'static,
    T: Send + 'static,
{
    let (runnable, task) = create_task(exec, fut, admission, TaskKind::Spawned, Location::caller());
    let info = InfoRef(NonNull::from(task.metadata()));
    let handle = JoinHandle {
        state: State::Running {
            task: Some(task.fallible()),
            info,
            waker: runnable.waker(),
            noted: Noted::default(),
        },
        next: None,
        upstream: None,
    };
    (runnable, handle)
}

/// The async-task task under every viaduct task.
fn create_task<F, T>(
    exec: Exec,
    fut: F,
    admission: Admission,
    kind: TaskKind,
    location: &'static Location<'static>,
) -> (Runnable, async_task::Task<Outcome<T>, TaskInfo>)
where
    F: Future<Output = Result<T, TaskError>> + Send + 'static,
    T: Send + 'static,
{
    let info = TaskInfo {
        booking: Default::default(),
        home: exec,
        hop: Mutex::new(None),
        hopped: AtomicBool::new(false),
        yielded: AtomicBool::new(false),
        aborted: AtomicBool::new(false),
        done: AtomicBool::new(false),
        faulted: AtomicBool::new(false),
        fault: Mutex::new(None),
        admission: UnsafeCell::new(admission),
        strand_link: AtomicUsize::new(0),
        id: TaskId::next(),
        location,
        kind,
        state: std::sync::atomic::AtomicU8::new(crate::watch::QUEUED),
        successor: crate::successor::Successor::new(),
    };
    let schedule = move |runnable: Runnable, how: ScheduleInfo| {
        // The executor may run the task, to its end, on another thread as
        // soon as it has the runnable, while this call still reads the
        // task's metadata (the executor it is calling lives there). A
        // waker of the task keeps the task's allocation alive: that is
        // what a waker promises, so nothing here relies on what async-task
        // does around a schedule function.
        let alive = runnable.waker();
        let info: *const TaskInfo = runnable.metadata();
        // SAFETY: `info` points into the task's allocation, which `alive`
        // keeps alive until the end of this call, even after `runnable` is
        // handed over.
        let info = unsafe { &*info };
        info.yielded
            .store(how.woken_while_running, Ordering::Relaxed);
        info.state.store(crate::watch::QUEUED, Ordering::Relaxed);
        schedule_catching(info, runnable);
        drop(alive);
    };
    // SAFETY: `spawn_unchecked` asks for:
    // - `Fut: Send` or single-thread use: `TaskFuture<F>` is Send because `F`
    //   is Send and `&TaskInfo` is Send (TaskInfo is Sync).
    // - borrowed non-metadata variables outliving the runnable: the future
    //   borrows only the metadata; `F` itself is 'static.
    // - `schedule` Send + Sync + 'static: it captures nothing.
    let (runnable, task) = unsafe {
        Builder::new().metadata(info).spawn_unchecked(
            move |info: &TaskInfo| TaskFuture {
                fut: DropOnce::new(fut),
                completed: false,
                info,
            },
            WithInfo(schedule),
        )
    };
    (runnable, task)
}

/// The step before a continuation, type-erased, as its handle holds it so
/// that `abort` can cancel it.
#[derive(Clone)]
pub(crate) struct Upstream(pub(crate) Arc<dyn AbortStep>);

/// A step before a continuation (a link of the chain, which
/// `future::then` makes), with its value type erased.
pub(crate) trait AbortStep: Send + Sync {
    /// Aborts the step, if it has not started, and hands back the one
    /// before it.
    fn abort_step(&self) -> Option<Upstream>;
}

/// Cancels the steps before a continuation that have not started, walking
/// the chain back in a loop, so a chain of any length is cut in constant
/// stack.
pub(crate) fn abort_chain(mut next: Option<Upstream>) {
    while let Some(Upstream(link)) = next {
        next = link.abort_step();
    }
}

/// A handle to a spawned task: a future of its result.
///
/// Awaiting it gives `Ok(value)`, or the [`TaskError`] saying why there is no
/// value. Dropping it detaches the task, which runs on; [`abort`] cancels it.
///
/// [`abort`]: JoinHandle::abort
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(2).build().unwrap();
/// let handle = pool.spawn(async { 6 * 7 });
/// assert_eq!(block_on(handle).unwrap(), 42);
/// ```
#[must_use = "dropping a JoinHandle detaches the task; await it to see how it ended"]
pub struct JoinHandle<T> {
    state: State<T>,
    /// The executor for continuations, where `via` chose one.
    pub(crate) next: Option<Exec>,
    /// For a continuation, the step before it, which `abort` cancels too.
    pub(crate) upstream: Option<Upstream>,
}

enum State<T> {
    Running {
        /// The wait for this task noted for task dumps, while one lasts.
        /// First, so dropped first: the noted wait points into the task's
        /// metadata, which `waker` keeps alive.
        noted: Noted,
        task: Option<FallibleTask<Outcome<T>, TaskInfo>>,
        info: InfoRef,
        /// Wakes the task to be aborted (and keeps its allocation alive).
        waker: Waker,
    },
    /// Boxed: rare (a refusal, a section run on the spot that panicked),
    /// and the largest variant, which every handle would pay for.
    Failed(Box<Failed>),
    /// Done before any task was needed (a strand section run on the spot).
    Ready {
        value: Option<ByValue<T>>,
        exec: Exec,
    },
}

/// A handle that never had a task, or whose work failed before it needed
/// one.
struct Failed {
    /// Reports a panic nobody read to `sink`, as a task's result does.
    failure: Failure,
    exec: Exec,
}

/// A shared reference to a task's metadata, kept alive by the task handle
/// or waker held beside it.
#[derive(Clone, Copy)]
struct InfoRef(NonNull<TaskInfo>);

// SAFETY: an `InfoRef` is used as a `&TaskInfo` (it is only ever turned
// into one, by `get`), and `&TaskInfo` is `Send` and `Sync` because
// `TaskInfo` is `Sync`.
unsafe impl Send for InfoRef {}
// SAFETY: as above.
unsafe impl Sync for InfoRef {}

impl InfoRef {
    fn get(&self) -> &TaskInfo {
        // SAFETY: every `InfoRef` is held beside a task handle or a waker
        // of the task, which keeps the task's allocation, metadata
        // included, alive.
        unsafe { self.0.as_ref() }
    }
}

/// Aborts a task from anywhere: a cheap, clonable, thread-safe handle that
/// cannot read the task's result (tokio's `AbortHandle`). Get one with
/// [`JoinHandle::abort_handle`].
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, AbortHandle, ExecutorExt, ManualExecutor};
///
/// let ex = ManualExecutor::new();
/// let handle = ex.spawn(async { "never" });
/// let abort: AbortHandle = handle.abort_handle();
/// std::thread::spawn(move || abort.abort()).join().unwrap();
/// assert!(!handle.abort_handle().is_finished()); // its future is not dropped yet
/// ex.run_until_idle(); // the executor drops it, unpolled
/// assert!(handle.abort_handle().is_finished());
/// assert!(block_on(handle).unwrap_err().is_cancelled());
/// ```
#[derive(Clone)]
pub struct AbortHandle {
    target: Option<(InfoRef, Waker)>,
    upstream: Option<Upstream>,
}

impl AbortHandle {
    /// Cancels the task if it has not finished, as
    /// [`JoinHandle::abort`] does.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// let handle = ex.run(|| 1);
    /// handle.abort_handle().abort();
    /// ex.run_until_idle();
    /// assert!(block_on(handle).unwrap_err().is_cancelled());
    /// ```
    pub fn abort(&self) {
        if let Some((info, waker)) = &self.target {
            abort_task(info.get(), waker);
        }
        if let Some(up) = &self.upstream {
            abort_chain(Some(up.clone()));
        }
    }

    /// The task's id, as stall reports and task dumps show it; `None` if
    /// there never was a task (the spawn was refused).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// let handle = ex.run(|| ());
    /// assert_eq!(handle.abort_handle().id(), handle.id());
    /// ex.close();
    /// assert_eq!(ex.run(|| ()).abort_handle().id(), None); // refused
    /// ```
    pub fn id(&self) -> Option<TaskId> {
        self.target.as_ref().map(|(info, _)| info.get().id)
    }

    /// `true` once the task is over: its future has been dropped (it
    /// finished, panicked, or was cancelled and its executor has dropped
    /// it), or there never was one.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// let handle = ex.run(|| 1);
    /// let abort = handle.abort_handle();
    /// assert!(!abort.is_finished());
    /// ex.run_until_idle();
    /// assert!(abort.is_finished());
    /// assert_eq!(block_on(handle).unwrap(), 1);
    /// ```
    pub fn is_finished(&self) -> bool {
        self.target
            .as_ref()
            .is_none_or(|(info, _)| info.get().done.load(Ordering::Acquire))
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

/// Marks the task aborted and wakes it: its next poll drops its future
/// instead of polling it (or its executor drops it, if closed). A poll
/// under way when the abort lands runs to its end, and if it finishes the
/// task, its result stands.
fn abort_task(info: &TaskInfo, waker: &Waker) {
    if !info.done.load(Ordering::Acquire) && !info.aborted.swap(true, Ordering::AcqRel) {
        waker.wake_by_ref();
    }
}

impl<T> Unpin for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    pub(crate) fn failed(error: TaskError, exec: Exec) -> Self {
        Self::failed_reporting(error, exec, None)
    }

    /// Like [`failed`](Self::failed); if the error is a panic and the
    /// handle is dropped without reading it, the payload goes to `sink`.
    pub(crate) fn failed_reporting(error: TaskError, exec: Exec, sink: Option<Sink>) -> Self {
        JoinHandle {
            state: State::Failed(Box::new(Failed {
                failure: Failure {
                    error: Some(error),
                    sink,
                },
                exec,
            })),
            next: None,
            upstream: None,
        }
    }

    /// A handle whose work is done already: it resolves to `value`, and its
    /// continuations run on `exec`.
    #[inline]
    pub(crate) fn ready(value: T, exec: Exec) -> Self {
        JoinHandle {
            state: State::Ready {
                value: Some(ByValue(value)),
                exec,
            },
            next: None,
            upstream: None,
        }
    }

    /// Cancels the task if it has not finished, as tokio's does: it is
    /// woken and will not be polled again; its executor drops its future
    /// (at the task's next run, or when the executor drops it), and only
    /// then does the handle resolve, to [`TaskError::Cancelled`]. So once
    /// the handle says `Cancelled`, every lock, guard and value the task
    /// held is released. A task that finished keeps its result, also when
    /// the abort lands during the poll that finishes it: that poll's
    /// result wins. Aborting a continuation (see
    /// [`then`](JoinHandle::then)) also cancels the steps before it that
    /// have not started. Takes `&self`, like tokio's; to abort from
    /// elsewhere, use an [`abort_handle`](JoinHandle::abort_handle).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// let handle = ex.run(|| "never runs");
    /// handle.abort();
    /// assert!(!handle.is_finished()); // its future is not dropped yet
    /// ex.run_until_idle(); // the queued task is dropped, not run
    /// assert!(handle.is_finished());
    /// assert!(block_on(handle).unwrap_err().is_cancelled());
    /// ```
    pub fn abort(&self) {
        self.abort_handle().abort();
    }

    /// A handle that can abort this task from anywhere (`Clone`, `Send`,
    /// `Sync`), and tell whether it is over, but cannot read its result.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let handle = pool.spawn(std::future::pending::<()>());
    /// let abort = handle.abort_handle();
    /// std::thread::spawn(move || abort.abort());
    /// assert!(block_on(handle).unwrap_err().is_cancelled());
    /// ```
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle {
            target: match &self.state {
                State::Running { info, waker, .. } => Some((*info, waker.clone())),
                _ => None,
            },
            upstream: self.upstream.clone(),
        }
    }

    /// The task's id, as stall reports and task dumps show it; `None` if
    /// there never was a task (the spawn was refused, or its work was done
    /// on the spot).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// let a = ex.run(|| ());
    /// let b = ex.run(|| ());
    /// assert!(a.id().is_some());
    /// assert_ne!(a.id(), b.id());
    /// ```
    pub fn id(&self) -> Option<TaskId> {
        match &self.state {
            State::Running { info, .. } => Some(info.get().id),
            _ => None,
        }
    }

    /// `true` once the task is over: its future has been dropped (it
    /// finished, panicked, or was cancelled and its executor has dropped
    /// it), or there never was one (it was rejected). Always the same as
    /// [`AbortHandle::is_finished`]. Awaiting the handle then gives the
    /// result without waiting for the task, at most for its executor to
    /// finish handing the result over.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// let handle = ex.run(|| 5);
    /// assert!(!handle.is_finished());
    /// ex.run_until_idle();
    /// assert!(handle.is_finished());
    /// assert_eq!(block_on(handle).unwrap(), 5);
    /// ```
    pub fn is_finished(&self) -> bool {
        match &self.state {
            State::Running { info, .. } => info.get().done.load(Ordering::Acquire),
            _ => true,
        }
    }

    /// Lets `next`, the runnable of a continuation chained on this handle,
    /// wait in line behind the task's first poll (see `successor`); hands
    /// it back, to be scheduled now, if that poll is over or there is no
    /// task.
    pub(crate) fn queue_behind(&self, next: Runnable) -> Result<(), Runnable> {
        match &self.state {
            State::Running { info, .. } => info.get().successor.park(next),
            State::Failed(_) | State::Ready { .. } => Err(next),
        }
    }

    /// Lets the step waiting in line behind the task's first poll go now,
    /// if one is, and lets no other wait there (see `successor`).
    pub(crate) fn close_line(&self) {
        if let State::Running { info, .. } = &self.state {
            info.get().close_line();
        }
    }

    /// `true` if the task keeps no executor alive but the one a
    /// continuation chained on this handle runs on (no `via`, no hop):
    /// keeping the handle beside that continuation keeps nothing else.
    pub(crate) fn holds_only_next_executor(&self) -> bool {
        self.next.is_none()
            && match &self.state {
                State::Running { info, .. } => !info.get().hopped.load(Ordering::Acquire),
                // Their executor is the one `executor` names.
                State::Failed(_) | State::Ready { .. } => true,
            }
    }

    /// The executor continuations of this handle run on: the one `via`
    /// chose, else the one the task was spawned on.
    pub(crate) fn executor(&self) -> Exec {
        if let Some(ex) = &self.next {
            return ex.clone();
        }
        match &self.state {
            State::Running { info, .. } => info.get().executor(),
            State::Failed(failed) => failed.exec.clone(),
            State::Ready { exec, .. } => exec.clone(),
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, TaskError>;

    /// Resolves once the task's future has been dropped: an aborted
    /// task's handle says `Cancelled` only then.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.state {
            State::Running {
                task, info, noted, ..
            } => {
                let info = info.get();
                let task = task.as_mut().expect("task is held until drop");
                std::task::ready!(crate::coop::poll_proceed(cx));
                let polled = Pin::new(task).poll(cx);
                if polled.is_ready() {
                    crate::coop::spend();
                    noted.done();
                }
                match polled {
                    Poll::Pending => {
                        noted.waiting(current_task(), || WaitOn::Task {
                            id: info.id,
                            queued_on: info.with_executor(|ex| ex.lock_book(INTERNAL)).map(|b| b.0),
                            ended: EndedFlag::of(&info.done),
                        });
                        crate::section::check_not_blocking_on("a task or section", || {
                            let strand = info.with_executor(|ex| Arc::as_ptr(&ex.0) as *const ());
                            (strand, current_task_id())
                        });
                        Poll::Pending
                    }
                    Poll::Ready(Some(Ok(v))) => Poll::Ready(Ok(v.into_inner())),
                    Poll::Ready(Some(Err(failure))) => Poll::Ready(Err(failure.take())),
                    Poll::Ready(None) => match info.poll_fault(cx) {
                        Some(Poll::Pending) => Poll::Pending,
                        Some(Poll::Ready(error)) => Poll::Ready(Err(error)),
                        None => Poll::Ready(Err(TaskError::Cancelled)),
                    },
                }
            }
            // Born finished (a section run on the spot, a refused task):
            // as ready as a finished task, so it spends budget the same.
            State::Failed(failed) => {
                std::task::ready!(crate::coop::poll_proceed(cx));
                crate::coop::spend();
                Poll::Ready(Err(failed
                    .failure
                    .error
                    .take()
                    .expect("JoinHandle polled after it returned its result")))
            }
            State::Ready { value, .. } => {
                std::task::ready!(crate::coop::poll_proceed(cx));
                crate::coop::spend();
                Poll::Ready(Ok(value
                    .take()
                    .expect("JoinHandle polled after it returned its result")
                    .0))
            }
        }
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let State::Running { task, .. } = &mut self.state {
            if let Some(task) = task.take() {
                task.detach();
            }
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}
