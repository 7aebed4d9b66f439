//! Creating a task, its schedule function, and the wrapper its future is
//! polled through ([`TaskFuture`]), which
//!
//! 1. catches a panic of the user's future, so a worker thread never unwinds
//!    and the payload reaches the `JoinHandle` as [`TaskError::Panicked`];
//! 2. marks the running task in a thread-local, which is what lets
//!    [`hop_to`](crate::hop_to) find the task it is moving;
//! 3. holds the executor's [`Admission`] until the future is dropped, so a
//!    pool counts its live tasks and a bounded pool frees a slot.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::pin::Pin;
use std::sync::atomic::Ordering;

use std::task::{Context, Poll};

use async_task::{Builder, ScheduleInfo, WithInfo};

use super::current::{self, current_task_sink};
use super::fault::{self, report, DropOnce, Failure, Outcome, Value};
use super::handle::JoinHandle;
use super::info::{Metadata, ABORTED, DONE};
use crate::admission::Admission;
use crate::dump::records::{Flag, TaskRecord, QUEUED, YIELDED};
use crate::error::{Panic, RejectReason, TaskError};
use crate::executor::{Exec, Executor, Runnable, TaskInfo};
use crate::task_id::{TaskId, TaskKind};

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
        // The poll's own view of the admission: read when it ends, after a
        // hop may have replaced it.
        let sink = current_task_sink;
        let poll = crate::context::enter_poll(
            (current::task_id(info), cx.waker().data()),
            crate::coop::BUDGET,
        );
        // SAFETY: the worker records were read from the context just now,
        // where a non-null address is live (see `dump::records::WorkerGuard`).
        let polling =
            unsafe { crate::dump::records::enter_poll(&info.record, poll.worker_records()) };
        #[cfg(feature = "tracing")]
        let _span = tracing::trace_span!(
            target: "viaduct",
            "poll",
            executor = info.home.name(),
            task = info.record.id.as_u64(),
            worker = std::thread::current().name().unwrap_or("")
        )
        .entered();
        let failure = |error| {
            Box::new(Failure {
                error: Some(error),
                sink: sink(),
            })
        };
        let failed = |error| Poll::Ready(Err(failure(error)));
        if info.record.flags.load(Ordering::Acquire) & ABORTED != 0 {
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
                let pending = crate::dump::records::Pending {
                    waker: cx.waker(),
                    aborted: Flag::new(&info.record.flags, ABORTED),
                    // SAFETY: the poller holds the runnable.
                    counted_by: |world| unsafe { info.admission() }.counted_by(world),
                };
                crate::dump::records::left_pending(&info.record, polling.as_ref(), pending);
                return Poll::Pending;
            }
            Ok(Poll::Ready(Ok(v))) => Ok(Value::new(v, sink)),
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

impl<F> Drop for TaskFuture<'_, F> {
    fn drop(&mut self) {
        // A task dropped before its first poll ended lets the step in line
        // behind it go too, to find out how the task ended.
        let _successor = CloseLine(self.info);
        crate::dump::records::task_ended(&self.info.record);
        // A future that panics in `Drop` while being cancelled must not unwind
        // into the executor that dropped it (a worker, or `shutdown_now`).
        self.drop_future();
        self.info.record.flags.fetch_or(DONE, Ordering::Release);
        // Left uncounted: no runnable outlives the future, so nothing
        // admits the task again (a closed task that async-task schedules
        // once more, to drop its future, ends here).
        // SAFETY: whoever drops the future holds the runnable.
        let admission = unsafe { self.info.replace_admission(Admission::UNCOUNTED) };
        if !self.completed && fault::dropped_while_scheduling(current::task_id(self.info)) {
            // Dropped unfinished inside the task's own executor's
            // `schedule`: the handle waits for that call to end, to tell a
            // panicking `schedule` from a refusal (see `fault`).
            self.info.fault().began(admission.sink());
        }
        // Released once the future is gone: a pool counts the task live
        // until then. Only the step in line behind it goes later (the
        // guard above), counted by the pool on its own.
        drop(admission);
    }
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
        Err(refused) => {
            // The caller is told by the handle; a panic in the future's
            // `Drop` goes where the caller's unread panics go, not into
            // a spawn that promises not to panic.
            current::reporting_panics(move || drop(fut));
            refused
        }
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
    let waker = runnable.waker();
    (runnable, JoinHandle::running(task, waker))
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
    let record = TaskRecord::new(TaskId::next(), location, kind);
    let info = TaskInfo::new(Metadata::new(record, exec, admission));
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
        let yielded = if how.woken_while_running { YIELDED } else { 0 };
        info.record.state.store(QUEUED | yielded, Ordering::Relaxed);
        fault::catching(
            current::task_id(info),
            || info.fault_if_any(),
            || info.with_executor(|ex| ex.schedule(runnable)),
        );
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
