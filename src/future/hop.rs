//! [`hop_to`] and [`try_hop_to`]: move the running task to another executor
//! (folly's `TeleportTo`).
//!
//! A viaduct task reads the executor it is scheduled on from its
//! [`TaskInfo`](crate::TaskInfo) every time it is woken. Hopping rewrites
//! that executor, wakes the task and returns `Pending` once: the wake-up
//! goes to the new executor, and the task's next poll, where the `await`
//! returns, runs there.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use crate::error::RejectReason;
use crate::executor::{home_of, Exec, Executor};
use crate::task::with_task_polled_by;

/// Moves the current task to `ex`: from its next poll on, the task runs on
/// `ex`. The returned future completes in that poll, so the code after
/// `hop_to(&ex).await` runs on `ex`.
///
/// It works in any task spawned by viaduct, on any of its executors and
/// decorators. Hopping into a [`Strand`](crate::Strand) and back out makes
/// the code between the two hops a critical section (folly's
/// `TeleportGuard`); see the [module docs](crate::future#hopping-between-executors).
///
/// Await it directly in the task (or through combinators that poll it with
/// the task's own waker, like `join!` and `select!`): it moves the viaduct
/// task whose waker it is polled with.
///
/// # Panics
///
/// When awaited outside a task spawned by viaduct (in a tokio task, under
/// a [`block_on`](crate::block_on), even one called inside a viaduct task,
/// or inside a combinator that polls it with a waker of its own, such as
/// `FuturesUnordered`): there is no task to move, or moving the task would
/// not move the future that awaits the hop. Spawn
/// the future with viaduct ([`ExecutorExt::spawn`](crate::ExecutorExt::spawn),
/// [`ViaExt::via`](crate::ViaExt::via)), or use [`try_hop_to`] to handle
/// that case. Also when `ex` is closed: a hop is admitted like a new task
/// of `ex` (and on a full bounded pool it waits for room, as `spawn`
/// does); the task stays where it was, and the panic reaches its handle.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, hop_to, ExecutorExt, ThreadPool};
///
/// let cpu = ThreadPool::builder().threads(1).name("cpu").build().unwrap();
/// let io = ThreadPool::builder().threads(1).name("io").build().unwrap();
/// let io2 = io.clone();
/// let task = cpu.spawn(async move {
///     let before = std::thread::current().name().unwrap().to_owned();
///     hop_to(&io2).await;
///     let after = std::thread::current().name().unwrap().to_owned();
///     (before, after)
/// });
/// assert_eq!(block_on(task).unwrap(), ("cpu-0".into(), "io-0".into()));
/// ```
pub fn hop_to<E: Executor + Clone>(ex: &E) -> Hop {
    Hop(TryHop {
        target: Some(home_of(ex)),
        wait: true,
    })
}

/// Like [`hop_to`], but where that would panic it resolves to [`HopError`]
/// instead, and the task stays where it is; and it does not wait for room
/// in a full bounded executor.
///
/// # Errors
///
/// - [`HopError::NotInTask`] when awaited outside a task spawned by
///   viaduct, or with a waker that is not the task's own (under a nested
///   `block_on`, inside `FuturesUnordered`): see [`hop_to`].
/// - [`HopError::Rejected`] when the target is closed or full: a hop is
///   admitted like a new task of the target, and counts as one of its
///   tasks from then on.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, try_hop_to, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(1).build().unwrap();
/// // `block_on` runs the future on this thread, not in a task: nothing to move.
/// let hopped = block_on(try_hop_to(&pool));
/// assert!(hopped.is_err());
/// ```
pub fn try_hop_to<E: Executor + Clone>(ex: &E) -> TryHop {
    TryHop {
        target: Some(home_of(ex)),
        wait: false,
    }
}

/// The future of [`hop_to`].
///
/// # Examples
///
/// ```
/// use viaduct::future::Hop;
/// use viaduct::{block_on, hop_to, ExecutorExt, ThreadPool};
///
/// let cpu = ThreadPool::builder().threads(1).name("cpu").build().unwrap();
/// let io = ThreadPool::builder().threads(1).name("io").build().unwrap();
/// let here = || std::thread::current().name().unwrap().to_owned();
/// let names = cpu.spawn(async move {
///     let before = here();
///     let hop: Hop = hop_to(&io);
///     hop.await;
///     (before, here())
/// });
/// assert_eq!(block_on(names).unwrap(), ("cpu-0".to_owned(), "io-0".to_owned()));
/// ```
#[must_use = "futures do nothing unless awaited: the task does not move until this is"]
#[derive(Debug)]
pub struct Hop(TryHop);

impl Future for Hop {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match ready!(Pin::new(&mut self.0).poll(cx)) {
            Ok(()) => Poll::Ready(()),
            Err(e) => panic!("{e}"),
        }
    }
}

/// The future of [`try_hop_to`].
///
/// # Examples
///
/// ```
/// use viaduct::future::TryHop;
/// use viaduct::{block_on, try_hop_to, ExecutorExt, ThreadPool};
///
/// let cpu = ThreadPool::builder().threads(1).name("cpu").build().unwrap();
/// let io = ThreadPool::builder().threads(1).name("io").build().unwrap();
/// let name = cpu.spawn(async move {
///     let hop: TryHop = try_hop_to(&io);
///     hop.await.unwrap(); // inside a viaduct task, so the task can move
///     std::thread::current().name().unwrap().to_owned()
/// });
/// assert_eq!(block_on(name).unwrap(), "io-0");
/// ```
#[must_use = "futures do nothing unless awaited: the task does not move until this is"]
#[derive(Debug)]
pub struct TryHop {
    /// `Some` until the task has been moved.
    target: Option<Exec>,
    /// Wait for room in a full bounded target, rather than fail.
    wait: bool,
}

impl Future for TryHop {
    type Output = Result<(), HopError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // The second poll is the first one on the target executor.
        let Some(target) = self.target.take() else {
            return Poll::Ready(Ok(()));
        };
        let wait = self.wait;
        let moved = with_task_polled_by(cx.waker(), |task| {
            let task = task.ok_or(HopError::NotInTask)?;
            // The target counts the task from here on, as it would a task
            // spawned on it; the executor it leaves stops counting it.
            let admission =
                crate::executor::admission_of(&target, wait).map_err(HopError::Rejected)?;
            // SAFETY: `with_task_polled_by` gave the task being polled here.
            unsafe { task.move_to(target, admission) };
            Ok(())
        });
        if let Err(e) = moved {
            return Poll::Ready(Err(e));
        }
        // The task reads its new executor when this wake-up schedules it.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Why [`try_hop_to`] left the task where it was.
///
/// # Examples
///
/// ```
/// use viaduct::future::HopError;
/// use viaduct::{block_on, try_hop_to, ExecutorExt, Inline, RejectReason, ThreadPool};
///
/// let err = block_on(try_hop_to(&Inline)).unwrap_err();
/// assert_eq!(err, HopError::NotInTask);
/// assert!(err.to_string().contains("try_hop_to"));
///
/// let cpu = ThreadPool::builder().threads(1).build().unwrap();
/// let closed = ThreadPool::builder().threads(1).build().unwrap();
/// closed.close();
/// let stayed = cpu.spawn(async move { try_hop_to(&closed).await });
/// assert_eq!(block_on(stayed).unwrap(), Err(HopError::Rejected(RejectReason::Closed)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HopError {
    /// Awaited outside a task spawned by viaduct, or with a waker that is
    /// not the task's own: there was no task to move.
    NotInTask,
    /// The target refused the task, as it would refuse a new one: it is
    /// closed, or (for [`try_hop_to`]) bounded and full.
    Rejected(RejectReason),
}

impl fmt::Display for HopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HopError::NotInTask => f.write_str(
                "viaduct::hop_to awaited outside a task spawned by viaduct (or under a block_on \
                 or a combinator with wakers of its own), so there is no task to move: spawn the \
                 future on a viaduct executor (`ex.spawn(fut)` or `fut.via(&ex)`) and await the \
                 hop directly in it, or use `try_hop_to` and handle this error",
            ),
            HopError::Rejected(reason) => write!(
                f,
                "viaduct::hop_to: the target executor refused the task ({reason}), which stays \
                 where it was; use `try_hop_to` to handle this"
            ),
        }
    }
}

impl std::error::Error for HopError {}
