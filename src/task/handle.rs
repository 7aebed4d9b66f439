//! The handles of a task: [`JoinHandle`], a future of its result, and
//! [`AbortHandle`], which cancels it from anywhere. Both behave as
//! tokio's: a handle says `Cancelled` only once the task's future has been
//! dropped, and they agree on whether the task is finished.

use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use async_task::FallibleTask;

use super::completion::{Common, Completion};
use super::current::current_task_id;
use super::fault::{Failure, Outcome};
use super::info::{ABORTED, DONE};
use crate::admission::Sink;
use crate::dump::records::{Noted, TaskRef, TaskSeen, WaitKey, WaitOn};
use crate::error::{ByValue, TaskError};
use crate::executor::{lock_book_of, Exec, Runnable, TaskInfo};
use crate::task_id::TaskId;

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
    /// What only handles in a chain carry (see [`Chain`]): boxed, so that
    /// the others do not.
    chain: Option<Box<Chain>>,
}

/// What `via` and `then` add to a handle.
#[derive(Default)]
struct Chain {
    /// The executor for continuations, where `via` chose one.
    next: Option<Exec>,
    /// For a continuation, the step before it, which `abort` cancels too.
    upstream: Option<Upstream>,
}

enum State<T> {
    Running {
        /// The wait for this task noted for task dumps, while one lasts,
        /// by the key `WaitKey::of(info)`. Taken out when the handle
        /// drops, before it lets go of the task: the noted wait points into
        /// the task's metadata.
        noted: Noted,
        /// Detached when the handle drops (taken out there, once).
        task: ManuallyDrop<FallibleTask<Outcome<T>, TaskInfo>>,
        info: InfoRef,
        /// Wakes the task to be aborted (and keeps its allocation alive).
        waker: Waker,
    },
    /// No task. One variant, not two: the pointers of `Running` can each
    /// tell it apart from one other variant, so the handle needs no tag.
    Born(Born<T>),
}

/// A handle that never had a task: born finished, or waiting for work
/// completed in place.
enum Born<T> {
    /// A strand's queued `with` section: its result comes in place.
    Section(Section<T>),
    /// Boxed: rare (a refusal, a section run on the spot that panicked),
    /// and the largest variant, which every handle would pay for.
    Failed(Box<Failed>),
    /// Done before any task was needed (a strand section run on the spot).
    Ready {
        value: Option<ByValue<T>>,
        exec: Exec,
    },
}

/// The handle of a section queued as a node (see `task::completion`).
struct Section<T> {
    /// The handle's reference, given up in `Drop`.
    done: NonNull<Completion<T>>,
    /// The strand: continuations run on it, and it keeps the strand's book
    /// (which the completion names) alive.
    exec: Exec,
    noted: Noted,
    /// The result was read: polling again is a programmer's error, and
    /// there is nothing to dispose of.
    read: bool,
}

// SAFETY: the completion is shared by its protocol (see
// `task::completion`), and holds a `T: Send` that only this handle reads.
unsafe impl<T: Send> Send for Section<T> {}
// SAFETY: `&Section` reads only the completion's atomics (its result is
// read through `&mut`), as a task's handle reads only its flags.
unsafe impl<T> Sync for Section<T> {}

impl<T> Section<T> {
    fn get(&self) -> &Completion<T> {
        // SAFETY: the handle's reference keeps it alive.
        unsafe { self.done.as_ref() }
    }
}

impl<T> Drop for Section<T> {
    fn drop(&mut self) {
        self.noted.done(WaitKey::of(&self.get().common));
        // SAFETY: the handle's reference, given up once, here.
        unsafe { Completion::detach(self.done, self.read) };
    }
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
    target: Option<Target>,
    upstream: Option<Upstream>,
}

/// What an [`AbortHandle`] cancels.
#[derive(Clone)]
enum Target {
    Task(InfoRef, Waker),
    Section(SectionRef),
}

/// A reference to a queued section's completion, for aborting it.
struct SectionRef(NonNull<Common>);

// SAFETY: only the completion's atomics are touched through it.
unsafe impl Send for SectionRef {}
// SAFETY: as above.
unsafe impl Sync for SectionRef {}

impl SectionRef {
    /// One more reference of the completion at `common`: a pointer with
    /// the whole node's provenance (the handle's), since the last
    /// reference frees the node through it.
    fn new(common: NonNull<Common>) -> SectionRef {
        // SAFETY: the caller holds a reference, which keeps it alive.
        unsafe { common.as_ref() }.acquire();
        SectionRef(common)
    }

    fn get(&self) -> &Common {
        // SAFETY: this reference keeps it alive.
        unsafe { self.0.as_ref() }
    }
}

impl Clone for SectionRef {
    fn clone(&self) -> Self {
        SectionRef::new(self.0)
    }
}

impl Drop for SectionRef {
    fn drop(&mut self) {
        // SAFETY: this reference, given up once.
        unsafe { Common::release(self.0) };
    }
}

impl Target {
    fn id(&self) -> TaskId {
        match self {
            Target::Task(info, _) => info.get().record.id,
            Target::Section(s) => s.get().id,
        }
    }

    fn is_finished(&self) -> bool {
        match self {
            Target::Task(info, _) => info.get().record.flags.load(Ordering::Acquire) & DONE != 0,
            Target::Section(s) => s.get().is_finished(),
        }
    }
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
        match &self.target {
            Some(Target::Task(info, waker)) => abort_task(info.get(), waker),
            Some(Target::Section(s)) => s.get().abort(),
            None => {}
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
        self.target.as_ref().map(Target::id)
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
        self.target.as_ref().is_none_or(Target::is_finished)
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
    if info.record.flags.fetch_or(ABORTED, Ordering::AcqRel) & (ABORTED | DONE) == 0 {
        waker.wake_by_ref();
    }
}

impl<T> Unpin for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    /// The handle of a task just created: `waker` is one of its wakers.
    pub(crate) fn running(task: async_task::Task<Outcome<T>, TaskInfo>, waker: Waker) -> Self {
        JoinHandle {
            state: State::Running {
                info: InfoRef(NonNull::from(task.metadata())),
                task: ManuallyDrop::new(task.fallible()),
                waker,
                noted: Noted::default(),
            },
            chain: None,
        }
    }

    pub(crate) fn failed(error: TaskError, exec: Exec) -> Self {
        Self::failed_reporting(error, exec, None)
    }

    /// Like [`failed`](Self::failed); if the error is a panic and the
    /// handle is dropped without reading it, the payload goes to `sink`.
    pub(crate) fn failed_reporting(error: TaskError, exec: Exec, sink: Option<Sink>) -> Self {
        JoinHandle {
            state: State::Born(Born::Failed(Box::new(Failed {
                failure: Failure {
                    error: Some(error),
                    sink,
                },
                exec,
            }))),
            chain: None,
        }
    }

    /// The handle of a section queued on the strand `exec` as a node, whose
    /// result `done` will hold; takes over one reference of `done`.
    pub(crate) fn section(done: NonNull<Completion<T>>, exec: Exec) -> Self {
        JoinHandle {
            state: State::Born(Born::Section(Section {
                done,
                exec,
                noted: Noted::default(),
                read: false,
            })),
            chain: None,
        }
    }

    /// A handle whose work is done already: it resolves to `value`, and its
    /// continuations run on `exec`.
    #[inline]
    pub(crate) fn ready(value: T, exec: Exec) -> Self {
        JoinHandle {
            state: State::Born(Born::Ready {
                value: Some(ByValue(value)),
                exec,
            }),
            chain: None,
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
                State::Running { info, waker, .. } => Some(Target::Task(*info, waker.clone())),
                State::Born(Born::Section(s)) => {
                    Some(Target::Section(SectionRef::new(s.done.cast())))
                }
                _ => None,
            },
            upstream: self.upstream().cloned(),
        }
    }

    /// The task's id, as stall reports and task dumps show it; `None` if
    /// there never was a task (the spawn was refused, or its work was done
    /// on the spot). A `Guarded::with` section that was queued has an id
    /// of its own, though it runs in its strand's runner task.
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
            State::Running { info, .. } => Some(info.get().record.id),
            State::Born(Born::Section(s)) => Some(s.get().common.id),
            _ => None,
        }
    }

    /// `true` once the task is over: its future has been dropped (it
    /// finished, panicked, or was cancelled and its executor has dropped
    /// it), or there never was one (it was rejected). For a queued
    /// `Guarded::with` section: once it ran, or its closure was dropped
    /// unrun. Always the same as
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
            State::Running { info, .. } => {
                info.get().record.flags.load(Ordering::Acquire) & DONE != 0
            }
            State::Born(Born::Section(s)) => s.get().common.is_finished(),
            _ => true,
        }
    }

    /// The executor `via` chose for continuations, if it did.
    fn next(&self) -> Option<&Exec> {
        self.chain.as_ref()?.next.as_ref()
    }

    /// Continuations chained on this handle run on `ex` (`via`).
    pub(crate) fn set_next(&mut self, ex: Exec) {
        self.chain.get_or_insert_with(Box::default).next = Some(ex);
    }

    /// For a continuation, the step before it.
    fn upstream(&self) -> Option<&Upstream> {
        self.chain.as_ref()?.upstream.as_ref()
    }

    /// This handle's task is a continuation of `upstream`: aborting it
    /// cancels that step too, if it has not started.
    pub(crate) fn set_upstream(&mut self, upstream: Upstream) {
        self.chain.get_or_insert_with(Box::default).upstream = Some(upstream);
    }

    /// Takes out the step before this continuation, if any: the handle
    /// forgets it.
    pub(crate) fn take_upstream(&mut self) -> Option<Upstream> {
        self.chain.as_mut()?.upstream.take()
    }

    /// Lets `next`, the runnable of a continuation chained on this handle,
    /// wait in line behind the task's first poll (see `successor`); hands
    /// it back, to be scheduled now, if that poll is over or there is no
    /// task.
    pub(crate) fn queue_behind(&self, next: Runnable) -> Result<(), Runnable> {
        match &self.state {
            State::Running { info, .. } => info.get().successor.park(next),
            State::Born(_) => Err(next),
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
        self.next().is_none()
            && match &self.state {
                State::Running { info, .. } => !info.get().has_hopped(),
                // Their executor is the one `executor` names.
                State::Born(_) => true,
            }
    }

    /// The executor continuations of this handle run on: the one `via`
    /// chose, else the one the task was spawned on.
    pub(crate) fn executor(&self) -> Exec {
        if let Some(ex) = self.next() {
            return ex.clone();
        }
        match &self.state {
            State::Running { info, .. } => info.get().executor(),
            State::Born(Born::Failed(failed)) => failed.exec.clone(),
            State::Born(Born::Ready { exec, .. }) => exec.clone(),
            State::Born(Born::Section(s)) => s.exec.clone(),
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
                std::task::ready!(crate::coop::poll_proceed(cx));
                let polled = Pin::new(&mut **task).poll(cx);
                if polled.is_ready() {
                    crate::coop::spend();
                    noted.done(WaitKey::of(info));
                }
                match polled {
                    Poll::Pending => {
                        super::current::note_wait(noted, WaitKey::of(info), || WaitOn::Task {
                            id: info.record.id,
                            task: TaskRef {
                                task: NonNull::from(info).cast(),
                                read: read_task,
                            },
                        });
                        crate::section::check_not_blocking_on("a task or section", || {
                            let strand = info.with_executor(Exec::addr);
                            (strand, current_task_id())
                        });
                        Poll::Pending
                    }
                    Poll::Ready(Some(Ok(v))) => Poll::Ready(Ok(v.into_inner())),
                    Poll::Ready(Some(Err(failure))) => Poll::Ready(Err((*failure).take())),
                    Poll::Ready(None) => match info.fault_if_any().and_then(|f| f.poll(cx)) {
                        Some(Poll::Pending) => Poll::Pending,
                        Some(Poll::Ready(error)) => Poll::Ready(Err(error)),
                        None => Poll::Ready(Err(TaskError::Cancelled)),
                    },
                }
            }
            State::Born(Born::Section(s)) => {
                assert!(!s.read, "JoinHandle polled after it returned its result");
                std::task::ready!(crate::coop::poll_proceed(cx));
                let ptr = s.done;
                // SAFETY: the handle's reference keeps it alive while `s`
                // lives, and nothing here gives it up.
                let done = unsafe { ptr.as_ref() };
                // SAFETY: the handle's poll, not again once it was ready
                // (`read`, checked above).
                match unsafe { done.poll(cx) } {
                    Poll::Ready(result) => {
                        s.read = true;
                        crate::coop::spend();
                        s.noted.done(WaitKey::of(&done.common));
                        Poll::Ready(result)
                    }
                    Poll::Pending => {
                        let common = &done.common;
                        super::current::note_wait(&mut s.noted, WaitKey::of(common), || {
                            WaitOn::Task {
                                id: common.id,
                                task: TaskRef {
                                    task: NonNull::from(common).cast(),
                                    read: read_section,
                                },
                            }
                        });
                        crate::section::check_not_blocking_on("a task or section", || {
                            (s.exec.addr(), current_task_id())
                        });
                        Poll::Pending
                    }
                }
            }
            // Born finished (a section run on the spot, a refused task):
            // as ready as a finished task, so it spends budget the same.
            State::Born(Born::Failed(failed)) => {
                std::task::ready!(crate::coop::poll_proceed(cx));
                crate::coop::spend();
                Poll::Ready(Err(failed
                    .failure
                    .error
                    .take()
                    .expect("JoinHandle polled after it returned its result")))
            }
            State::Born(Born::Ready { value, .. }) => {
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

/// A task, for a dump reading a wait on it: the strand it is queued on,
/// and whether it ended.
///
/// # Safety
///
/// `task` is the `TaskInfo` of a live task.
unsafe fn read_task(task: NonNull<()>) -> TaskSeen {
    // SAFETY: the caller's contract.
    let info = unsafe { task.cast::<TaskInfo>().as_ref() };
    TaskSeen {
        queued_on: info.with_executor(|ex| lock_book_of(ex).map(|book| book.seen())),
        run_by: None,
        ended: info.record.flags.load(Ordering::Acquire) & DONE != 0,
    }
}

/// A queued section, for a dump reading a wait on it: its strand, the
/// runner running it while it runs (what the section waits on is noted
/// there), and whether it ended.
///
/// # Safety
///
/// `task` is the `Common` of a section whose handle is alive (it keeps
/// the strand, and so its book).
unsafe fn read_section(task: NonNull<()>) -> TaskSeen {
    // SAFETY: the caller's contract.
    let common = unsafe { task.cast::<Common>().as_ref() };
    TaskSeen {
        // SAFETY: as above: the book outlives the handle.
        queued_on: Some(unsafe { common.book.as_ref() }.seen((common.kind)())),
        run_by: common.run_by(),
        ended: common.is_finished(),
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let State::Running {
            task, noted, info, ..
        } = &mut self.state
        {
            noted.done(WaitKey::of(info.get()));
            // SAFETY: taken once, here, and the handle is not used again.
            unsafe { ManuallyDrop::take(task) }.detach();
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
