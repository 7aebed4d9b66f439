//! What every executor can do: [`ExecutorExt`] (spawn futures, run
//! closures, with or without taking refused work back as [`Rejected`]),
//! and `futures::task::Spawn` for viaduct's executors.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::task::{FutureObj, SpawnError};

use crate::cancel::CancellationToken;
use crate::error::RejectReason;
use crate::executor::{admit, home_of, try_admit, Exec, Executor};
use crate::task::{spawn_admitted, spawn_or_reject, JoinHandle};

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

/// The executor the global [`spawn`](crate::spawn) uses on this thread,
/// if not the global pool: a simulation's, while it runs here.
pub(crate) fn ambient_executor() -> Option<Exec> {
    let exec: *const Exec = crate::context::with(|c| c.executor.get()).cast();
    // SAFETY: set only by `replace_ambient_executor`, whose callers keep
    // the `Exec` alive until they put back what it replaced.
    unsafe { exec.as_ref() }.cloned()
}

/// Makes `exec` (null: none) the executor [`ambient_executor`] gives on
/// this thread, and returns the one before, to be put back.
///
/// # Safety
///
/// `exec` stays alive until the one returned is put back.
pub(crate) unsafe fn replace_ambient_executor(exec: *const Exec) -> *const Exec {
    crate::context::with(|c| c.executor.replace(exec.cast())).cast()
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
    /// [`TaskError::Rejected`](crate::TaskError::Rejected); on a full bounded one this waits for room
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
    #[track_caller]
    fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        spawn_or_reject(home_of(self), future, admit(self))
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
    #[track_caller]
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

    /// Spawns `future`, to be aborted when `token` fires, as
    /// [`JoinHandle::abort`] does: the future is dropped at the executor's
    /// next turn, even if it was parked waiting for something that never
    /// comes. The handle says
    /// [`TaskError::Cancelled`](crate::TaskError::Cancelled) once the
    /// executor has dropped the future (on a pool with a free worker,
    /// microseconds after the token fired), so whatever the task held is
    /// released by then; a poll under way when the token fires runs to its
    /// end, and if it finishes the task, its value stands. If the token has fired already, the future is
    /// never polled. Continuations ([`then`](JoinHandle::then)) of the
    /// handle skip their value steps, as after any error. A task that ended
    /// before the token fired keeps its result.
    ///
    /// The task takes an entry in the token for as long as its future
    /// lives, so a long-lived token does not keep the tasks it once
    /// guarded; and the task does not keep the token alive: once nobody
    /// holds the token, the task goes on as if [`spawn`](ExecutorExt::spawn)ed.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::cancel::CancellationToken;
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let token = CancellationToken::new();
    /// let parked = pool.spawn_cancellable(&token, std::future::pending::<()>());
    /// let done = pool.spawn_cancellable(&token, async { 7 });
    /// assert_eq!(block_on(done).unwrap(), 7);
    /// token.cancel();
    /// assert!(block_on(parked).unwrap_err().is_cancelled());
    /// ```
    #[track_caller]
    fn spawn_cancellable<F>(&self, token: &CancellationToken, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        crate::cancel::spawn_cancellable(self, token, future)
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
    #[track_caller]
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
    #[track_caller]
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
    #[track_caller]
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
#[track_caller]
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
            #[track_caller]
            fn spawn_obj(&self, future: futures::task::FutureObj<'static, ()>) -> Result<(), futures::task::SpawnError> {
                $crate::spawn::spawn_obj(self, future)
            }
            fn status(&self) -> Result<(), futures::task::SpawnError> {
                if $crate::executor::Executor::is_closed(self) { Err(futures::task::SpawnError::shutdown()) } else { Ok(()) }
            }
        }
    )*};
}
pub(crate) use impl_spawn;

// `Inline` is implemented here rather than in its module, which the
// cancellation tokens (used by `ExecutorExt`) build on.
impl_spawn!(Exec, crate::inline::Inline);
