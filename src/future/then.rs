//! Continuations on a [`JoinHandle`]: [`then`](JoinHandle::then),
//! [`then_try`](JoinHandle::then_try), [`then_async`](JoinHandle::then_async),
//! [`and_then`](JoinHandle::and_then) and [`via`](JoinHandle::via).
//!
//! Each step of a chain is a task of its own that awaits the step before it,
//! so a step runs wherever its executor runs tasks, and on [`Inline`] it
//! runs inside the wake-up that the previous step's completion sends, on the
//! thread that completed it.
//!
//! # Ground rules
//!
//! 1. A step's task owns the handle of the step before it, in a [`Link`] it
//!    shares with its own handle (as the upstream of its chain). The link's slot
//!    is the only way to reach the earlier handle.
//! 2. The step takes the earlier step's result as soon as it is ready, and
//!    drops the earlier handle's own link then. A finished prefix of a
//!    chain is therefore freed step by step, and no drop ever follows more
//!    than one link: a million-step chain never recurses when it is freed.
//! 3. The spent earlier handle stays in the slot until the link goes,
//!    if it keeps no executor alive but this step's (no `via` before this
//!    step, no hop): the link of a chain's last step usually goes with
//!    that step's handle, on the thread that awaited it, which is usually
//!    the thread that built the chain and so allocated the earlier task.
//!    Dropped where the step ran, the earlier task would go back to the
//!    allocator on another thread than the one that allocated it, which
//!    glibc's malloc pays for with a lock both threads take once the
//!    freeing thread's cache is full: 0.2 to 0.56 futex calls per message
//!    in `benches/offload.rs`, when it was measured. Links further back
//!    are dropped as rule 2 says, where the next step runs.
//! 4. Aborting a step (its handle's `abort`, or its task's future dropped
//!    before it finished) cuts the links before it one at a time, in a
//!    loop, aborting each earlier handle found waiting there. The walk
//!    stops at a link with nothing to wait for: that step already had its
//!    input (so everything before it has finished) or was cut already.
//!    Every step not yet started is cancelled before `abort` returns, in
//!    constant stack.
//! 5. A step that finds its link cut was aborted from downstream: it ends
//!    with [`TaskError::Cancelled`], which nobody reads.
//! 6. Dropping a handle (detaching) never cancels anything: the chain runs to
//!    its end.
//! 7. A step chained on a task of a pool (or a simulation) that it runs on
//!    too (no `via`, no hop), before that task's first poll has ended,
//!    waits in line behind that poll, unscheduled (`crate::successor`):
//!    it goes to the pool when the poll ends, or when the task's future
//!    is dropped unpolled. Scheduled at once, it would
//!    have been polled only to find its input not ready, and, chained
//!    from outside the pool, pushed on the pool's shared queue next to
//!    the task it follows. In line it is what a queued task is: not
//!    started, holding nothing, counted by the pool. A step in line closes
//!    its own line, so letting one go never lets another go in turn: a
//!    chain built ahead alternates steps in line with steps scheduled at
//!    once. Everywhere else a step is scheduled at once: `via` another
//!    executor (whose end must find the step, while the step before's
//!    executor may never run), on strands and priority executors (whose
//!    order of tasks users rely on), and on user executors (which may
//!    refuse a task they admitted, or drop one under their own lock).
//!
//! [`Inline`]: crate::Inline

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use crate::error::TaskError;
use crate::executor::Executor;
use crate::loom::lock_std;
use crate::task::{
    abort_chain, admitted_or_rejected, create_fallible, AbortStep, JoinHandle, Upstream,
};

/// The handle of the step before, shared between the step's task (which
/// awaits it) and the step's handle (which may abort it).
struct Link<T> {
    slot: Mutex<Slot<T>>,
}

enum Slot<T> {
    /// The step before, until this step has its result.
    Before(JoinHandle<T>),
    /// The step before, its result taken and its own link dropped: held
    /// only to be freed with the link (ground rule 3).
    Spent(#[allow(dead_code)] JoinHandle<T>),
    /// Cut by an abort before this step had its input.
    Cut,
}

impl<T> Slot<T> {
    /// The step before, taken out if this step still waits on it (the
    /// slot is then left `Cut`).
    fn take_before(&mut self) -> Option<JoinHandle<T>> {
        match std::mem::replace(self, Slot::Cut) {
            Slot::Before(handle) => Some(handle),
            other => {
                *self = other;
                None
            }
        }
    }
}

impl<T> Link<T> {
    /// Aborts the handle in this link, if the step still waits on it, and
    /// hands back the link before it.
    fn cut(&self) -> Option<Upstream> {
        // Taken out, so the lock is not held while aborting runs other code
        // (on `Inline`, cancelling a task drops its future right here).
        let mut handle = lock_std(&self.slot).take_before()?;
        let before = handle.take_upstream();
        handle.abort();
        before
    }
}

impl<T: Send> AbortStep for Link<T> {
    fn abort_step(&self) -> Option<Upstream> {
        self.cut()
    }
}

/// The future a step's task awaits first: the result of the step before.
struct Previous<T> {
    link: Arc<Link<T>>,
}

impl<T> Future for Previous<T> {
    type Output = Result<T, TaskError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = lock_std(&self.link.slot);
        let Slot::Before(handle) = &mut *slot else {
            return Poll::Ready(Err(TaskError::Cancelled));
        };
        let result = ready!(Pin::new(handle).poll(cx));
        let mut spent = slot.take_before().expect("matched just above");
        // Dropped unlocked: freeing it may free the links further back.
        let before = spent.take_upstream();
        let spent = if spent.holds_only_next_executor() {
            *slot = Slot::Spent(spent);
            None
        } else {
            Some(spent)
        };
        drop(slot);
        drop(before);
        drop(spent);
        Poll::Ready(result)
    }
}

impl<T> Drop for Previous<T> {
    fn drop(&mut self) {
        // Dropped before it had the result: this step was cancelled, and so
        // is the work feeding it. After the result the slot holds nothing
        // to wait for, and this stops at once.
        abort_chain(self.link.cut());
    }
}

impl<T: Send + 'static> JoinHandle<T> {
    /// Runs `f` on the task's value once it is ready, as a new task; the
    /// handle returned resolves to what `f` returns (folly `thenValue`).
    ///
    /// The new task runs on this handle's executor: the one chosen with
    /// [`via`](JoinHandle::via), else the one this task is on when `then`
    /// is called (where it was spawned, or where it
    /// [hopped](crate::hop_to)). On [`Inline`](crate::Inline) it runs on
    /// the thread that completed this task, right as it completes.
    ///
    /// If this task ends in an error, `f` is not called and the error
    /// travels on: every later `then` and `then_async` is skipped, and the
    /// first [`then_try`](JoinHandle::then_try) sees it. A panic in `f`
    /// becomes [`TaskError::Panicked`] the same way. If the executor
    /// refuses the new task, its handle resolves to
    /// [`TaskError::Rejected`] and this task runs on, detached. On a full
    /// bounded pool `then` waits for room, as
    /// [`spawn`](crate::ExecutorExt::spawn) does.
    ///
    /// Dropping the returned handle detaches the whole chain, which still
    /// runs; [`abort`](JoinHandle::abort) on it cancels every step that
    /// has not started.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(2).build().unwrap();
    /// let len = pool.run(|| "seven".to_owned()).then(|s| s.len()).then(|n| n + 2);
    /// assert_eq!(block_on(len).unwrap(), 7);
    /// ```
    #[track_caller]
    pub fn then<F, U>(self, f: F) -> JoinHandle<U>
    where
        F: FnOnce(T) -> U + Send + 'static,
        U: Send + 'static,
    {
        self.chain(|previous| async move { previous.await.map(f) })
    }

    /// Runs `f` on the task's result, value or error, once it is ready, as
    /// a new task (folly `thenTry`); the handle returned resolves to what `f`
    /// returns. Placement as for [`then`](JoinHandle::then).
    ///
    /// # Examples
    ///
    /// A panic two steps back arrives here with its message:
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let report = pool
    ///     .run(|| -> u32 { panic!("parse error") })
    ///     .then(|n| n + 1) // skipped
    ///     .then_try(|r| match r {
    ///         Ok(n) => format!("got {n}"),
    ///         Err(e) => format!("failed: {}", e.panic_message().unwrap()),
    ///     });
    /// assert_eq!(block_on(report).unwrap(), "failed: parse error");
    /// ```
    #[track_caller]
    pub fn then_try<F, U>(self, f: F) -> JoinHandle<U>
    where
        F: FnOnce(Result<T, TaskError>) -> U + Send + 'static,
        U: Send + 'static,
    {
        self.chain(|previous| async move { Ok(f(previous.await)) })
    }

    /// Like [`then`](JoinHandle::then), for a closure that returns a
    /// future: the new task runs `f` on the value and then awaits what it
    /// returns.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let cpu = ThreadPool::builder().threads(1).build().unwrap();
    /// let io = ThreadPool::builder().threads(1).build().unwrap();
    /// let io2 = io.clone();
    /// let stored = cpu
    ///     .run(|| vec![3, 1, 2])
    ///     .then_async(move |v| {
    ///         // A step may start more work and await it.
    ///         let write = io2.run(move || v.len());
    ///         async move { write.await.unwrap() }
    ///     });
    /// assert_eq!(block_on(stored).unwrap(), 3);
    /// ```
    #[track_caller]
    pub fn then_async<F, Fut>(self, f: F) -> JoinHandle<Fut::Output>
    where
        F: FnOnce(T) -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: Send + 'static,
    {
        self.chain(|previous| async move {
            match previous.await {
                Ok(v) => Ok(f(v).await),
                Err(e) => Err(e),
            }
        })
    }

    /// Like [`then`](JoinHandle::then), for a step that starts more work
    /// and returns its handle: the handle returned stands for that work,
    /// so the result is a `JoinHandle<U>`, not a handle of a handle.
    ///
    /// Errors short-circuit as in `then`: if this task ends in an error,
    /// `f` is not called and the error travels on; an error of the handle
    /// `f` returns travels on the same way. Aborting the returned handle
    /// also aborts the handle `f` returned, if it is still running.
    ///
    /// # Examples
    ///
    /// A value computed on a pool, then added up under a strand:
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, Guarded, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(2).build().unwrap();
    /// let total = Guarded::new(pool.clone(), 0u64);
    /// let t = total.clone();
    /// let sum = pool
    ///     .run(|| (1..=10u64).sum::<u64>())
    ///     .and_then(move |n| t.with(move |total| { *total += n; *total }));
    /// assert_eq!(block_on(sum).unwrap(), 55); // a JoinHandle<u64>
    /// ```
    #[track_caller]
    pub fn and_then<F, U>(self, f: F) -> JoinHandle<U>
    where
        F: FnOnce(T) -> JoinHandle<U> + Send + 'static,
        U: Send + 'static,
    {
        self.chain(|previous| async move {
            let next = f(previous.await?);
            Flattened(Some(next)).await
        })
    }

    /// Chooses the executor for the continuations that follow (folly
    /// `via`). Continuations chained after theirs run where they run, until
    /// the next `via`.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ThreadPool};
    ///
    /// let cpu = ThreadPool::builder().threads(1).name("cpu").build().unwrap();
    /// let io = ThreadPool::builder().threads(1).name("io").build().unwrap();
    /// let thread = || std::thread::current().name().unwrap().to_owned();
    /// let names = cpu
    ///     .run(move || vec![thread()])
    ///     .via(&io)
    ///     .then(move |mut v| { v.push(thread()); v })
    ///     .then(move |mut v| { v.push(thread()); v });
    /// assert_eq!(block_on(names).unwrap(), ["cpu-0", "io-0", "io-0"]);
    /// ```
    pub fn via<E: Executor + Clone>(mut self, ex: &E) -> JoinHandle<T> {
        self.set_next(crate::executor::home_of(ex));
        self
    }

    /// Spawns the next step: `step` turns the future of this task's result
    /// into the step's body.
    #[track_caller]
    fn chain<S, Fut, U>(self, step: S) -> JoinHandle<U>
    where
        S: FnOnce(Previous<T>) -> Fut,
        Fut: Future<Output = Result<U, TaskError>> + Send + 'static,
        U: Send + 'static,
    {
        let ex = self.executor();
        let admission = match admitted_or_rejected(&ex, crate::executor::admit(&ex)) {
            Ok(admission) => admission,
            // `self` is dropped here, unlinked: the work already under way
            // runs on, detached (ground rule 6).
            Err(refused) => return refused,
        };
        let may_wait_in_line =
            self.holds_only_next_executor() && crate::executor::lets_steps_wait_in_line(&ex);
        let link = Arc::new(Link {
            slot: Mutex::new(Slot::Before(self)),
        });
        let previous = Previous { link: link.clone() };
        let (runnable, mut handle) = create_fallible(ex, step(previous), admission);
        let in_line = if may_wait_in_line {
            let slot = lock_std(&link.slot);
            let Slot::Before(before) = &*slot else {
                unreachable!("nothing else reaches the link yet");
            };
            before.queue_behind(runnable)
        } else {
            Err(runnable)
        };
        match in_line {
            // Nothing waits in line behind a step that waits in line
            // itself (ground rule 7).
            Ok(()) => handle.close_line(),
            // Scheduled unlocked: on `Inline` the step runs right here.
            Err(runnable) => runnable.schedule(),
        }
        handle.set_upstream(Upstream(link));
        handle
    }
}

/// The handle an [`and_then`](JoinHandle::and_then) step awaits: dropped
/// before it resolved (the step was aborted), it aborts the work it stands
/// for.
struct Flattened<U>(Option<JoinHandle<U>>);

impl<U> Future for Flattened<U> {
    type Output = Result<U, TaskError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let handle = self.0.as_mut().expect("polled after it resolved");
        let result = ready!(Pin::new(handle).poll(cx));
        self.0 = None;
        Poll::Ready(result)
    }
}

impl<U> Drop for Flattened<U> {
    fn drop(&mut self) {
        if let Some(handle) = &self.0 {
            handle.abort();
        }
    }
}
