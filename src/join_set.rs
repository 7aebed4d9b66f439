//! [`JoinSet`]: a group of tasks whose results come back in the order they
//! finish, cancelled together when the set goes.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::{FuturesUnordered, Stream};

use crate::error::TaskError;
use crate::executor::Executor;
use crate::pool::ThreadPool;
use crate::spawn::ExecutorExt;
use crate::task::{AbortHandle, JoinHandle};
use crate::task_id::TaskId;

/// A set of tasks, on any executors, awaited in the order they finish
/// (tokio's `JoinSet`).
///
/// A task's result comes out of [`join_next`](JoinSet::join_next) once the
/// task has ended: a value, or the [`TaskError`] that says why there is
/// none. A task aborted through the set reads
/// [`Cancelled`](TaskError::Cancelled) only once its future is gone, so
/// when [`shutdown`](JoinSet::shutdown) returns, nothing the tasks held is
/// held any more. Dropping the set aborts every task still in it (their
/// executors drop their futures); that works from inside one of its own
/// tasks too.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, JoinSet, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(2).build().unwrap();
/// let mut set = JoinSet::new();
/// for i in 0..10u64 {
///     set.spawn_on(async move { i * i }, &pool);
/// }
/// let mut sum = 0;
/// while let Some(result) = block_on(set.join_next()) {
///     sum += result.unwrap();
/// }
/// assert_eq!(sum, 285);
/// ```
pub struct JoinSet<T> {
    /// Each resolves once its task has ended (its future dropped).
    tasks: FuturesUnordered<Member<T>>,
}

/// A task of the set, with the id it comes out with.
struct Member<T> {
    id: TaskId,
    handle: JoinHandle<T>,
}

impl<T> Future for Member<T> {
    type Output = (TaskId, Result<T, TaskError>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let id = self.id;
        Pin::new(&mut self.handle)
            .poll(cx)
            .map(|result| (id, result))
    }
}

impl<T> JoinSet<T> {
    /// An empty set.
    pub fn new() -> JoinSet<T> {
        JoinSet {
            tasks: FuturesUnordered::new(),
        }
    }

    /// How many tasks are in the set: spawned, and not yet taken out by
    /// [`join_next`](JoinSet::join_next).
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// `true` if the set holds no task.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Aborts every task in the set. They stay in it: their results
    /// (most of them [`Cancelled`](TaskError::Cancelled); a task that had
    /// finished keeps its value) still come out of
    /// [`join_next`](JoinSet::join_next).
    pub fn abort_all(&mut self) {
        for task in self.tasks.iter() {
            task.handle.abort();
        }
    }

    /// Takes every task out of the set without aborting it: each goes on
    /// as a detached task would, and nothing reads its result.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// use viaduct::{JoinSet, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let mut set = JoinSet::new();
    /// let r = ran.clone();
    /// set.spawn_on(async move { r.store(true, Ordering::SeqCst) }, &ex);
    /// set.detach_all();
    /// drop(set); // aborts nothing: the task left the set
    /// ex.run_until_idle();
    /// assert!(ran.load(Ordering::SeqCst));
    /// ```
    pub fn detach_all(&mut self) {
        // Dropping a handle detaches its task.
        drop(std::mem::take(&mut self.tasks));
    }

    /// Puts a task spawned elsewhere into the set, as if the set had
    /// spawned it: its result comes out of
    /// [`join_next`](JoinSet::join_next), and the set aborts it when it is
    /// aborted or dropped. The abort handle cancels this one task.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, JoinSet, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let handles: Vec<_> = (1..=3).map(|i| pool.spawn(async move { i })).collect();
    /// let mut set = JoinSet::new();
    /// for handle in handles {
    ///     set.insert(handle);
    /// }
    /// let mut sum = 0;
    /// while let Some(result) = block_on(set.join_next()) {
    ///     sum += result.unwrap();
    /// }
    /// assert_eq!(sum, 6);
    /// ```
    pub fn insert(&mut self, handle: JoinHandle<T>) -> AbortHandle {
        let abort = handle.abort_handle();
        // A handle that names no task (a refused spawn, a section run on
        // the spot) gets an id of its own, to come out with like any other.
        let id = handle.id().unwrap_or_else(TaskId::next);
        self.tasks.push(Member { id, handle });
        abort
    }

    /// The result of the next task to end, in the order they end; `None`
    /// once the set is empty.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future loses nothing: a result is taken out of the set
    /// only when this returns it.
    pub async fn join_next(&mut self) -> Option<Result<T, TaskError>> {
        poll_fn(|cx| self.poll_join_next(cx)).await
    }

    /// [`join_next`](JoinSet::join_next) as a poll function, for
    /// hand-written futures and streams.
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, TaskError>>> {
        self.poll_join_next_with_id(cx)
            .map(|next| next.map(without_id))
    }

    /// Like [`join_next`](JoinSet::join_next), with the id of the task
    /// each result comes from, on either side: the id its handles report
    /// ([`JoinHandle::id`], [`AbortHandle::id`]). A handle that names no
    /// task (a spawn that was refused, a `Guarded::with` that ran on the
    /// spot, a cancellable spawn whose token had fired) comes out with an
    /// id of its own, unique like any other, which its handles do not
    /// report.
    ///
    /// # Cancel safety
    ///
    /// As for [`join_next`](JoinSet::join_next).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, JoinSet, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let mut set = JoinSet::new();
    /// let first = set.spawn_on(async { "done" }, &pool).id();
    /// let (id, value) = block_on(set.join_next_with_id()).unwrap().unwrap();
    /// assert_eq!((Some(id), value), (first, "done"));
    /// ```
    pub async fn join_next_with_id(&mut self) -> Option<Result<(TaskId, T), (TaskId, TaskError)>> {
        poll_fn(|cx| self.poll_join_next_with_id(cx)).await
    }

    /// [`join_next_with_id`](JoinSet::join_next_with_id) as a poll
    /// function.
    #[allow(clippy::type_complexity)] // the shape tokio's has, spelled out
    pub fn poll_join_next_with_id(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<(TaskId, T), (TaskId, TaskError)>>> {
        Pin::new(&mut self.tasks).poll_next(cx).map(|next| {
            next.map(|(id, result)| match result {
                Ok(value) => Ok((id, value)),
                Err(error) => Err((id, error)),
            })
        })
    }

    /// The result of a task that has ended, if there is one now; never
    /// waits. It ignores the [cooperative budget](crate::coop), as tokio's
    /// does: a loop over it inside a task gets every result that is ready,
    /// however many.
    pub fn try_join_next(&mut self) -> Option<Result<T, TaskError>> {
        self.try_join_next_with_id().map(without_id)
    }

    /// [`try_join_next`](JoinSet::try_join_next) with the task's id, as
    /// [`join_next_with_id`](JoinSet::join_next_with_id) gives it.
    pub fn try_join_next_with_id(&mut self) -> Option<Result<(TaskId, T), (TaskId, TaskError)>> {
        let _unconstrained = crate::coop::lifted();
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        match self.poll_join_next_with_id(&mut cx) {
            Poll::Ready(result) => result,
            Poll::Pending => None,
        }
    }

    /// Aborts every task and waits until each has ended (its future
    /// dropped), discarding the results. The set is empty afterwards.
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }

    /// Waits for every task and returns their values in the order they
    /// ended.
    ///
    /// # Panics
    ///
    /// If a task panicked, its panic is resumed here; if one ended without
    /// a value for another reason (cancelled, refused by its executor),
    /// this panics with that reason. Either way the tasks still in the set
    /// are aborted first. To handle failures, loop on
    /// [`join_next`](JoinSet::join_next) instead.
    pub async fn join_all(mut self) -> Vec<T> {
        let mut values = Vec::with_capacity(self.len());
        while let Some(result) = self.join_next().await {
            match result {
                Ok(value) => values.push(value),
                Err(error) => {
                    drop(self);
                    match error {
                        TaskError::Panicked(panic) => panic.resume(),
                        error => panic!("a task of the JoinSet ended without a value: {error}"),
                    }
                }
            }
        }
        values
    }
}

impl<T: Send + 'static> JoinSet<T> {
    /// Spawns `future` on `executor` into the set; the abort handle cancels
    /// this one task. On a closed executor the task's result is
    /// [`Rejected`](TaskError::Rejected), and it comes out of
    /// [`join_next`](JoinSet::join_next) like any other.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, JoinSet, ManualExecutor, TaskError};
    ///
    /// let closed = ManualExecutor::new();
    /// closed.close();
    /// let mut set = JoinSet::new();
    /// set.spawn_on(async { 1 }, &closed);
    /// let result = block_on(set.join_next()).unwrap();
    /// assert!(matches!(result, Err(TaskError::Rejected(_))));
    /// ```
    #[track_caller]
    pub fn spawn_on<F, E>(&mut self, future: F, executor: &E) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
        E: Executor + Clone,
    {
        self.insert(executor.spawn(future))
    }

    /// Spawns `future` on the [global pool](ThreadPool::global) (the
    /// simulated pool inside a [simulation](crate::sim)) into the set.
    #[track_caller]
    pub fn spawn<F>(&mut self, future: F) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
    {
        match crate::spawn::ambient_executor() {
            Some(ambient) => self.spawn_on(future, &ambient),
            None => self.spawn_on(future, ThreadPool::global()),
        }
    }
}

impl<T> Default for JoinSet<T> {
    fn default() -> Self {
        JoinSet::new()
    }
}

/// A result of [`JoinSet::join_next_with_id`] as
/// [`JoinSet::join_next`] gives it.
fn without_id<T>(result: Result<(TaskId, T), (TaskId, TaskError)>) -> Result<T, TaskError> {
    result.map(|(_, value)| value).map_err(|(_, error)| error)
}

/// Puts tasks spawned elsewhere into the set, as
/// [`insert`](JoinSet::insert) does.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, JoinSet, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(1).build().unwrap();
/// let mut set = JoinSet::new();
/// set.extend((0..4).map(|i| pool.spawn(async move { i })));
/// assert_eq!(set.len(), 4);
/// let mut all = block_on(set.join_all());
/// all.sort();
/// assert_eq!(all, [0, 1, 2, 3]);
/// ```
impl<T> Extend<JoinHandle<T>> for JoinSet<T> {
    fn extend<I: IntoIterator<Item = JoinHandle<T>>>(&mut self, handles: I) {
        for handle in handles {
            self.insert(handle);
        }
    }
}

impl<T> Drop for JoinSet<T> {
    fn drop(&mut self) {
        self.abort_all();
    }
}

impl<T> fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len()).finish()
    }
}
