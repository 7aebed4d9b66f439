//! Borrowing scopes: tasks that borrow from their caller and end before it
//! returns ([`ThreadPool::scope`], [`scope`](crate::scope())).

use std::future::Future;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use event_listener::{Event, Listener};

use crate::block_on::block_on;
use crate::dump::records::{Noted, ScopeBook, WaitKey, WaitOn};
use crate::error::{drop_payload, Panic, PanicPayload, TaskError};
use crate::executor::Exec;
use crate::loom::lock_std;
use crate::pool::with_worker;
use crate::pool::ThreadPool;
use crate::section::{Frame, Held};
use crate::spawn::ExecutorExt;
use crate::task::AbortHandle;
use crate::task::{current_task, current_task_id};
use crate::task::{DropOnce, JoinHandle};

/// Stack the scope's wait may use below `ThreadPool::scope`'s frame, for
/// its check that the wait will be allowed to help.
const WAIT_FRAMES: usize = 16 * 1024;

/// A scope to spawn borrowing tasks in: see [`ThreadPool::scope`].
///
/// `'scope` is the scope's own lifetime: tasks and their handles live
/// within it. `'env` is what the tasks may borrow: anything that outlives
/// the scope. The compiler holds both lines; a handle cannot leave the
/// scope:
///
/// ```compile_fail
/// let pool = viaduct::ThreadPool::builder().threads(1).build().unwrap();
/// let escaped = pool.scope(|s| s.run(|| 1));
/// ```
///
/// and a task cannot borrow what the scope outlives:
///
/// ```compile_fail
/// let pool = viaduct::ThreadPool::builder().threads(1).build().unwrap();
/// pool.scope(|s| {
///     let local = 5;
///     s.run(|| local + 1);
/// });
/// ```
///
/// # Soundness: nothing borrowed is touched after `scope` returns
///
/// A scoped task is an ordinary pool task whose future's lifetime is
/// erased, so the proof is about when that future, and everything that
/// holds borrowed data, can run or be dropped:
///
/// 1. Every task spawned in the scope is counted before it is handed to
///    the pool, and counts itself out only as the last thing it does with
///    borrowed data: after its future has been dropped (finished, aborted,
///    or thrown away unpolled by a pool shutting down) and its output was
///    handed to its handle or dropped. A task the pool refuses is dropped
///    inside `spawn`, and counted out there.
/// 2. `scope` returns, or unwinds, only once the count is zero. The
///    closure's own panic is caught and re-raised after the wait, and the
///    wait itself cannot unwind: the stack guard of `block_on` is checked
///    before the closure runs, and should `block_on` refuse anyway, the
///    scope waits by parking instead. The count is never lowered by
///    anything else, so a task that is still running keeps `scope`
///    waiting.
/// 3. After a task counted itself out, what is left of it in the pool is
///    its emptied future, whose drop touches nothing, and shares of the
///    scope's bookkeeping, which borrows nothing. A waker of the task that
///    is woken later (it was stored somewhere and outlives the task) finds
///    the task finished and does nothing.
/// 4. A task's output lives in a slot shared with its
///    [`ScopedJoinHandle`], which cannot outlive `'scope`; a handle that is
///    leaked leaks the output too, never touching it again.
///
/// The repository checks this under Miri (`MIRIFLAGS="-Zmiri-tree-borrows
/// -Zmiri-ignore-leaks" cargo +nightly miri test --test miri_smoke`, as
/// `tests/README.md` explains): borrowed data, dropped,
/// leaked and joined handles, a waker woken after the scope, an aborted
/// parked task, tasks thrown away by `shutdown_now`, a future whose `Drop`
/// panics, and an unread panic.
pub struct Scope<'scope, 'env: 'scope> {
    /// Where its tasks run.
    runner: Runner,
    state: Arc<ScopeState>,
    /// Invariant in both lifetimes, as `std::thread::Scope`, so neither can
    /// be shortened or stretched to let a borrow escape.
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

/// Where a scope's tasks run.
enum Runner {
    Pool(ThreadPool),
    /// The simulation that runs the thread the scope was opened on.
    Simulation(Exec),
}

/// What a scope and its tasks share; borrows nothing.
struct ScopeState {
    /// Tasks spawned and not yet ended.
    running: AtomicUsize,
    ended: Event,
    /// The first panic of a task whose handle did not read it.
    panic: Mutex<Option<PanicPayload>>,
    /// Its tasks a dump may list, as what the scope's wait waits on.
    book: Arc<ScopeBook>,
    /// The strands held by the sections the scope was opened in, until it
    /// returns: its tasks must not wait on them.
    held: Held,
    /// Its tasks are a simulation's, which its wait runs.
    simulated: bool,
    /// A simulated scope's tasks, to abort if its wait fails (a deadlock,
    /// the step limit): they must end before the scope unwinds.
    aborts: Mutex<Vec<AbortHandle>>,
}

impl ScopeState {
    fn record(&self, payload: PanicPayload) {
        let mut first = lock_std(&self.panic);
        if first.is_none() {
            *first = Some(payload);
        } else {
            drop(first);
            drop_payload(payload);
        }
    }

    /// Waits until every task has ended, helping the pool on one of its
    /// workers. The wait is noted for task dumps, on what the scope's
    /// tasks are (`block_on` lists the waiting task while it blocks).
    fn wait_all(&self) {
        let all_ended = || self.running.load(Ordering::Acquire) == 0;
        let key = WaitKey::of(&*self.book);
        let mut noted = Noted::default();
        crate::task::note_wait(&mut noted, key, || WaitOn::Scope(self.book.clone()));
        let ended = || async {
            while !all_ended() {
                let listener = self.ended.listen();
                if all_ended() {
                    break;
                }
                listener.await;
            }
        };
        if self.simulated {
            // Its tasks are the simulation's: `block_on` runs them. A wait
            // that fails there (a deadlock, the step limit) would unwind
            // past what the tasks borrow: end them first.
            if let Err(failed) = catch_unwind(AssertUnwindSafe(|| block_on(ended()))) {
                for task in lock_std(&self.aborts).drain(..) {
                    task.abort();
                }
                crate::context::with_driver(|driver| {
                    if let Some(driver) = driver {
                        driver.finish(&all_ended);
                    }
                });
                // Left only if a task hopped to an executor outside the
                // simulation: it ends there.
                while !all_ended() {
                    let listener = self.ended.listen();
                    if !all_ended() {
                        listener.wait();
                    }
                }
                noted.done(key);
                resume_unwind(failed);
            }
            noted.done(key);
            return;
        }
        let helping = catch_unwind(AssertUnwindSafe(|| block_on(ended())));
        if helping.is_err() {
            // `block_on` refused (its stack guard on a nearly full worker
            // stack). Unwinding now would free what running tasks borrow:
            // wait without helping instead.
            while !all_ended() {
                let listener = self.ended.listen();
                if !all_ended() {
                    listener.wait();
                }
            }
        }
        noted.done(key);
    }
}

/// A task's place in its scope's count, given up once.
struct Member(Option<Arc<ScopeState>>);

impl Member {
    fn join(state: &Arc<ScopeState>) -> Member {
        state.running.fetch_add(1, Ordering::Relaxed);
        Member(Some(state.clone()))
    }

    fn leave(&mut self) {
        if let Some(state) = self.0.take() {
            if state.running.fetch_sub(1, Ordering::AcqRel) == 1 {
                state.ended.notify(usize::MAX);
            }
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.leave();
    }
}

/// Where a task's outcome waits for its handle.
struct Slot<T> {
    stage: Mutex<Stage<T>>,
}

enum Stage<T> {
    Running,
    Done(Result<T, PanicPayload>),
    /// The handle is gone (or took the outcome): nobody will read it.
    Detached,
}

impl<T> Slot<T> {
    /// Hands the outcome to the handle, or, if it is gone, drops a value
    /// and passes a panic to the scope.
    fn deliver(&self, outcome: Result<T, PanicPayload>, scope: &ScopeState) {
        let mut stage = lock_std(&self.stage);
        if let Stage::Running = *stage {
            *stage = Stage::Done(outcome);
            return;
        }
        drop(stage);
        unread(outcome, scope);
    }

    fn take(&self) -> Option<Result<T, PanicPayload>> {
        match std::mem::replace(&mut *lock_std(&self.stage), Stage::Detached) {
            Stage::Done(outcome) => Some(outcome),
            _ => None,
        }
    }
}

/// An outcome nobody will read: a value is dropped; a panic (the task's,
/// or the value's `Drop`) goes to the scope, which re-raises it.
fn unread<T>(outcome: Result<T, PanicPayload>, scope: &ScopeState) {
    let payload = match outcome {
        Ok(value) => catch_unwind(AssertUnwindSafe(move || drop(value))).err(),
        Err(payload) => Some(payload),
    };
    if let Some(payload) = payload {
        scope.record(payload);
    }
}

/// A scoped task's future, as the pool runs it.
struct ScopedTask<F: Future> {
    fut: DropOnce<F>,
    slot: Arc<Slot<F::Output>>,
    member: Member,
    /// Its key in the scope's book, once a poll of it returned `Pending`.
    listed: Option<usize>,
}

impl<F: Future> ScopedTask<F> {
    fn scope(&self) -> &ScopeState {
        self.member
            .0
            .as_ref()
            .expect("a task leaves its scope last")
    }

    /// Leaves the scope's book, if in it.
    fn unlist(&mut self) {
        if let Some(key) = self.listed.take() {
            self.scope().book.leave(key);
        }
    }
}

impl<F: Future> Future for ScopedTask<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: `fut` is structurally pinned: it is never moved out of
        // `self`, and `ScopedTask` has no `Unpin` impl. The other fields
        // are not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let Some(fut) = unsafe { Pin::new_unchecked(&mut this.fut) }.as_pin_mut() else {
            return Poll::Ready(());
        };
        let scope = this
            .member
            .0
            .as_ref()
            .expect("a task leaves its scope last");
        // Opened inside sections: the task must not wait on their strands.
        let frame =
            (!scope.held.is_empty()).then(|| Frame::for_scope_task(current_task_id(), &scope.held));
        let entered = frame.as_ref().map(Frame::enter);
        let polled = catch_unwind(AssertUnwindSafe(|| fut.poll(cx)));
        drop(entered);
        let outcome = match polled {
            Ok(Poll::Pending) => {
                if this.listed.is_none() {
                    this.listed = current_task().map(|id| scope.book.enter(id));
                }
                return Poll::Pending;
            }
            Ok(Poll::Ready(value)) => Ok(value),
            Err(payload) => Err(payload),
        };
        this.unlist();
        // Point 1 of "Soundness" (`Scope`): the future goes first, then
        // the outcome, then the count.
        let outcome = match (this.fut.drop_now(), outcome) {
            (None, outcome) => outcome,
            (Some(payload), Ok(value)) => {
                unread(Ok(value), this.scope());
                Err(payload)
            }
            (Some(second), Err(first)) => {
                drop_payload(second);
                Err(first)
            }
        };
        this.slot.deliver(outcome, this.scope());
        this.member.leave();
        Poll::Ready(())
    }
}

impl<F: Future> Drop for ScopedTask<F> {
    fn drop(&mut self) {
        // Dropped unfinished (aborted, or thrown away by a pool shutting
        // down): the future goes before `member` counts the task out.
        if let Some(payload) = self.fut.drop_now() {
            self.scope().record(payload);
        }
        self.unlist();
    }
}

impl<'scope> Scope<'scope, '_> {
    /// Spawns `future` on the scope's pool. It may borrow anything that
    /// outlives the scope; the scope waits for it.
    ///
    /// On a closed pool the handle resolves to
    /// [`TaskError::Rejected`]; on a full bounded pool this waits for
    /// room, as [`spawn`](crate::ExecutorExt::spawn) does.
    #[track_caller]
    pub fn spawn<F>(&'scope self, future: F) -> ScopedJoinHandle<'scope, F::Output>
    where
        F: Future + Send + 'scope,
        F::Output: Send + 'scope,
    {
        let slot = Arc::new(Slot {
            stage: Mutex::new(Stage::Running),
        });
        let task: Pin<Box<dyn Future<Output = ()> + Send + 'scope>> = Box::pin(ScopedTask {
            fut: DropOnce::new(future),
            slot: slot.clone(),
            member: Member::join(&self.state),
            listed: None,
        });
        // SAFETY: only the lifetime changes. The task touches what it
        // borrows only before its member counts it out, and the scope
        // (`'scope`) does not end before every member has: see
        // "Soundness" in the docs of `Scope`.
        let task: Pin<Box<dyn Future<Output = ()> + Send + 'static>> =
            unsafe { std::mem::transmute(task) };
        ScopedJoinHandle {
            handle: match &self.runner {
                Runner::Pool(pool) => pool.spawn(task),
                Runner::Simulation(exec) => {
                    let handle = exec.spawn(task);
                    lock_std(&self.state.aborts).push(handle.abort_handle());
                    handle
                }
            },
            slot,
            scope: self.state.clone(),
            _scope: PhantomData,
        }
    }

    /// Runs `f` on the scope's pool: [`spawn`](Scope::spawn) for a
    /// closure.
    #[track_caller]
    pub fn run<F, R>(&'scope self, f: F) -> ScopedJoinHandle<'scope, R>
    where
        F: FnOnce() -> R + Send + 'scope,
        R: Send + 'scope,
    {
        self.spawn(async move { f() })
    }
}

impl std::fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("running", &self.state.running.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The handle of a task spawned in a [`Scope`]: a future of its result,
/// or [`join`](ScopedJoinHandle::join) it to wait for it.
///
/// Dropping it leaves the task running; the scope still waits for it, and
/// re-raises its panic.
pub struct ScopedJoinHandle<'scope, T> {
    handle: JoinHandle<()>,
    slot: Arc<Slot<T>>,
    scope: Arc<ScopeState>,
    _scope: PhantomData<&'scope ()>,
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Waits for the task and returns its result. On a worker of a pool,
    /// waiting runs the pool's tasks ([`block_on`]), so joining on a
    /// one-thread pool does not deadlock.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::ThreadPool;
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let words = ["a", "bb", "ccc"];
    /// let total = pool.scope(|s| {
    ///     let lens: Vec<_> = words.iter().map(|w| s.run(move || w.len())).collect();
    ///     lens.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
    /// });
    /// assert_eq!(total, 6);
    /// ```
    pub fn join(self) -> Result<T, TaskError> {
        block_on(self)
    }

    /// `true` once the task is over: its future has been dropped (it
    /// finished, panicked, or was aborted and the pool has dropped it), as
    /// [`JoinHandle::is_finished`] says.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Cancels the task if it has not finished, as
    /// [`JoinHandle::abort`] does; its future is dropped by the pool, and
    /// the scope still waits for that.
    pub fn abort(&self) {
        self.handle.abort();
    }
}

impl<T> Future for ScopedJoinHandle<'_, T> {
    type Output = Result<T, TaskError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let ended = ready!(Pin::new(&mut self.handle).poll(cx));
        Poll::Ready(ended.and_then(|()| {
            match self
                .slot
                .take()
                .expect("a finished scoped task delivered its outcome")
            {
                Ok(value) => Ok(value),
                Err(payload) => Err(TaskError::Panicked(Panic::new(payload))),
            }
        }))
    }
}

impl<T> Drop for ScopedJoinHandle<'_, T> {
    fn drop(&mut self) {
        if let Some(outcome) = self.slot.take() {
            unread(outcome, &self.scope);
        }
    }
}

impl<T> std::fmt::Debug for ScopedJoinHandle<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedJoinHandle")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

impl ThreadPool {
    /// Runs `f` with a [`Scope`] whose tasks, spawned on this pool, may
    /// borrow anything that outlives the call, and returns once every one
    /// of them has ended (as `std::thread::scope` does for threads).
    ///
    /// Waiting helps: on a worker of this pool the scope runs the pool's
    /// tasks while it waits, so scopes nest, may be opened inside a task,
    /// and work on a one-thread pool; the scope's own wait never deadlocks
    /// it. Elsewhere the thread parks. Opened in a task of a
    /// [simulation](crate::sim), the scope's tasks are the simulation's,
    /// on its virtual workers, not this pool's.
    ///
    /// Two waits can still never end, as they could not with
    /// `std::thread::scope`:
    ///
    /// - a task parked on something that never comes keeps the scope
    ///   waiting: give such tasks a way out ([`ScopedJoinHandle::abort`],
    ///   a [`CancellationToken`](crate::cancel::CancellationToken)). A task
    ///   thrown away by [`shutdown_now`](ThreadPool::shutdown_now) has
    ///   ended;
    /// - a blocking wait *inside* a task (a [`join`](ScopedJoinHandle::join)
    ///   or [`block_on`] of a sibling) helps by running other tasks on top
    ///   of itself, so it may start the very task it waits for, or one that
    ///   waits for a task below it on the same stack. Inside tasks,
    ///   `.await` handles; `join` them from the scope's closure.
    ///
    /// # Panics
    ///
    /// After every task has ended: with the panic of `f`, if it panicked;
    /// otherwise with the first panic of a task whose handle did not read
    /// it (dropped, or never joined; a task aborted as it panicked counts
    /// as unread).
    ///
    /// Before calling `f`, on a pool worker whose stack is nearly full
    /// (scopes or `block_on`s nested too deep), as [`block_on`] does: the
    /// scope could not wait there.
    ///
    /// Opened inside a section of a strand (a [`Guarded::with`] closure, a
    /// task on a [`Strand`]), the section holds the strand until the scope
    /// returns: a task of the scope that waits on that strand (its lock, a
    /// section or task queued on it) could never go on, and panics at once
    /// instead, saying so; `scope` then re-raises that panic as above. A
    /// wait on the strand further removed (through another task) is not
    /// caught, but a [dump](ThreadPool::dump) shows its cycle, through the
    /// scope's wait.
    ///
    /// Inside a simulated task ([`sim`](crate::sim)), the scope's tasks
    /// are the simulation's (see above), and its wait runs them. If that
    /// wait fails (a deadlock, the step limit), the scope's tasks are
    /// aborted and ended before the failure comes out of `scope`.
    ///
    /// [`Guarded::with`]: crate::Guarded::with
    /// [`Strand`]: crate::Strand
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::ThreadPool;
    ///
    /// let pool = ThreadPool::builder().threads(2).build().unwrap();
    /// let mut data = vec![1, 2, 3, 4];
    /// let (left, right) = data.split_at_mut(2);
    /// pool.scope(|s| {
    ///     s.run(|| left.iter_mut().for_each(|x| *x *= 10));
    ///     s.spawn(async { right.iter_mut().for_each(|x| *x += 1) });
    /// }); // both have ended here
    /// assert_eq!(data, [10, 20, 4, 5]);
    /// ```
    pub fn scope<'env, F, R>(&self, f: F) -> R
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        // Opened by a simulated task, its tasks are simulated too:
        // nothing escapes the simulation.
        let simulated = crate::spawn::ambient_executor();
        let scope = Scope {
            state: Arc::new(ScopeState {
                running: AtomicUsize::new(0),
                ended: Event::new(),
                panic: Mutex::new(None),
                book: Arc::default(),
                held: crate::section::held_strands(current_task_id()),
                simulated: simulated.is_some(),
                aborts: Mutex::new(Vec::new()),
            }),
            runner: match simulated {
                Some(exec) => Runner::Simulation(exec),
                None => Runner::Pool(self.clone()),
            },
            scope: PhantomData,
            env: PhantomData,
        };
        // The wait below is a `block_on`, which refuses to start on a
        // nearly full worker stack. Refused there, it could only park
        // (unwinding would free what tasks borrow), and on a one-thread
        // pool nobody would run the tasks: refuse now instead, while
        // nothing is borrowed yet. The margin covers the frames between
        // here and that `block_on`.
        with_worker(|w| {
            if let Some(w) = w {
                w.check_stack(WAIT_FRAMES);
            }
        });
        let result = catch_unwind(AssertUnwindSafe(|| f(&scope)));
        scope.state.wait_all();
        let unread = lock_std(&scope.state.panic).take();
        match (result, unread) {
            (Err(payload), unread) => {
                if let Some(unread) = unread {
                    drop_payload(unread);
                }
                resume_unwind(payload)
            }
            (Ok(_), Some(payload)) => resume_unwind(payload),
            (Ok(value), None) => value,
        }
    }
}
