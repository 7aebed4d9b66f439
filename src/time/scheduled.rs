//! Timed tasks: run a closure or a future on any executor after a delay, at
//! an instant, or periodically.
//!
//! A timed task is created as an ordinary viaduct task when it is
//! scheduled (so the executor admits it then: a closed executor refuses it
//! at once, and a bounded pool counts it while it waits), but its runnable
//! is parked in the timer instead of being handed to the executor. When the
//! deadline comes the timer schedules it, and it runs like any other task.
//!
//! # Ground rules
//!
//! A job's claim word decides between "it runs" and "it was cancelled":
//!
//! | from | to | by |
//! |---|---|---|
//! | [`WAITING`] | [`STARTED`] | the task, before it first runs the job |
//! | [`WAITING`] | [`CANCELLED`] | `Scheduled::cancel` |
//! | any | [`CANCELLED`] | `Periodic::cancel`: no run starts after it |
//!
//! Whoever moves a one-shot job out of [`WAITING`] wins: `cancel` returns
//! `true` exactly when the job never runs. A periodic task checks the word
//! before each run. Cancelling also unlinks the parked runnable (so no
//! timer is left behind) or aborts the task if it was already handed over.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use pin_project::pin_project;

use super::entry::{Action, Entry};
use super::wheel::Inserted;
use super::Timer;
use crate::error::TaskError;
use crate::executor::Executor;
use crate::loom::{AtomicU64, AtomicUsize, Ordering};
use crate::task::{admitted_or_rejected, create_admitted, JoinHandle};

/// The job has not started and may still be cancelled.
const WAITING: usize = 0;
/// The job has started (a one-shot job can no longer be cancelled), or its
/// executor refused it: either way `cancel` has nothing to stop.
const STARTED: usize = 1;
/// Cancelled: no run starts from now on.
pub(super) const CANCELLED: usize = 2;

/// What a timed task and its handle share.
pub(super) struct Job {
    pub(super) claim: AtomicUsize,
    pub(super) runs: AtomicU64,
    /// The timer that holds the task's runnable until its first run. The
    /// runnable's future holds this `Job`, so the entry outlives its stay
    /// in the wheel.
    pub(super) entry: Entry,
}

impl Job {
    fn new(entry: Entry) -> Arc<Job> {
        Arc::new(Job {
            claim: AtomicUsize::new(WAITING),
            runs: AtomicU64::new(0),
            entry,
        })
    }

    pub(super) fn cancelled(&self) -> bool {
        // Acquire pairs with the AcqRel of `cancel`'s swap or exchange.
        self.claim.load(Ordering::Acquire) == CANCELLED
    }
}

/// Runs `fut` on the executor once the claim is won; `None` if the job was
/// cancelled first.
#[pin_project]
struct Claimed<F> {
    job: Arc<Job>,
    started: bool,
    #[pin]
    fut: F,
}

impl<F: Future> Future for Claimed<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if !*this.started {
            let won = this.job.claim.compare_exchange(
                WAITING,
                STARTED,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            if won.is_err() {
                return Poll::Ready(None);
            }
            *this.started = true;
        }
        this.fut.poll(cx).map(Some)
    }
}

/// A timed task that runs once: returned by `execute_after`, `execute_at`,
/// `spawn_after` and `spawn_at`.
///
/// Await it for the task's output, or [`TaskError`] (`Cancelled` if
/// cancelled, `Panicked` if it panicked, `Rejected` if the executor refused
/// it). [`cancel`](Scheduled::cancel) stops it if it has not started.
/// Dropping the handle detaches the task: it still runs.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use viaduct::time::Timer;
/// use viaduct::ManualExecutor;
///
/// let timer = Timer::manual();
/// let ex = ManualExecutor::new();
/// let job = timer.execute_after(&ex, Duration::from_secs(1), || 42);
/// assert!(!job.is_finished());
/// timer.advance(Duration::from_secs(1));
/// assert_eq!(ex.run_until(job).unwrap(), 42);
/// ```
#[must_use = "dropping a Scheduled detaches the task; keep it to cancel or await it"]
pub struct Scheduled<T> {
    join: JoinHandle<Option<T>>,
    job: Arc<Job>,
    timer: Timer,
}

impl<T> Scheduled<T> {
    /// The job's task id, as stall reports and task dumps show it (`None`
    /// if the executor refused it).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::{ManualExecutor, TimedExt};
    ///
    /// let job = ManualExecutor::new().execute_after(Duration::from_secs(1), || ());
    /// assert!(job.id().is_some());
    /// ```
    pub fn id(&self) -> Option<crate::task_id::TaskId> {
        self.join.id()
    }

    /// Cancels the task if it has not started. Returns `true` if it will
    /// never run (awaiting the handle then gives
    /// [`TaskError::Cancelled`]), `false` if it has started or finished
    /// (awaiting gives how it ended). Its timer is unregistered at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    /// use viaduct::{block_on, ManualExecutor};
    ///
    /// let timer = Timer::manual();
    /// let ex = ManualExecutor::new();
    /// let job = timer.execute_after(&ex, Duration::from_secs(1), || println!("never"));
    /// assert!(job.cancel());
    /// timer.advance(Duration::from_secs(2));
    /// assert_eq!(ex.run_until_idle(), 0);
    /// assert!(block_on(job).unwrap_err().is_cancelled());
    /// ```
    pub fn cancel(&self) -> bool {
        let won = self.job.claim.compare_exchange(
            WAITING,
            CANCELLED,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        if won.is_err() {
            return false;
        }
        // If the runnable is still parked, this drops it: the task is
        // cancelled and its timer gone. If not, it is queued or about to
        // be, and will not run the job (the claim is lost).
        self.timer.remove(&self.job.entry);
        self.join.abort();
        true
    }

    /// `true` once the task is over: it finished, or was rejected, or was
    /// cancelled and its future dropped (by `cancel` itself while the job
    /// still waits in the timer; by its executor once it was handed over).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    /// use viaduct::Inline;
    ///
    /// let timer = Timer::manual();
    /// let job = timer.execute_after(&Inline, Duration::from_secs(1), || ());
    /// assert!(!job.is_finished());
    /// timer.advance(Duration::from_secs(1)); // Inline runs it right here
    /// assert!(job.is_finished());
    /// ```
    pub fn is_finished(&self) -> bool {
        self.join.is_finished()
    }
}

impl<T> Future for Scheduled<T> {
    type Output = Result<T, TaskError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.join).poll(cx).map(|r| match r {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err(TaskError::Cancelled),
            Err(e) => Err(e),
        })
    }
}

impl<T> fmt::Debug for Scheduled<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduled")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

impl Timer {
    /// Creates the task `make(job)` on `ex` and parks its runnable until
    /// `deadline`, in `job`'s entry (which the task's future must hold).
    #[track_caller]
    pub(super) fn park<E, F>(
        &self,
        ex: &E,
        deadline: u64,
        make: impl FnOnce(Arc<Job>) -> F,
    ) -> (JoinHandle<F::Output>, Arc<Job>)
    where
        E: Executor + Clone,
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let job = Job::new(self.entry());
        let home = crate::executor::home_of(ex);
        let admission = match admitted_or_rejected(&home, crate::executor::admit(ex)) {
            Ok(a) => a,
            Err(refused) => {
                job.claim.store(STARTED, Ordering::Release);
                return (refused, job);
            }
        };
        let (runnable, join) = create_admitted(home, make(job.clone()), admission);
        if deadline <= self.now_ns() {
            runnable.schedule();
            return (join, job);
        }
        // SAFETY: the entry was made by `self.entry()` and is IDLE. It
        // lives in the `Job` that the task's future holds, and the future
        // lives as long as its runnable, which is the entry's action while
        // it is linked: the entry stays in place until it is unlinked.
        match unsafe { self.insert(&job.entry, deadline, Action::Run(runnable), None) } {
            Inserted::Linked => {}
            Inserted::Due(action) => action.fire(),
            Inserted::Stopped(action) => drop(action), // the task is cancelled
        }
        (join, job)
    }

    #[track_caller]
    fn spawn_at_ns<E, F>(&self, ex: &E, deadline: u64, fut: F) -> Scheduled<F::Output>
    where
        E: Executor + Clone,
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (join, job) = self.park(ex, deadline, |job| Claimed {
            job,
            started: false,
            fut,
        });
        Scheduled {
            join,
            job,
            timer: self.clone(),
        }
    }

    /// Runs `f` on `ex` once `delay` has passed by this timer's clock.
    ///
    /// The task is admitted by `ex` now (on a full bounded pool this waits
    /// for room, as [`spawn`](crate::ExecutorExt::spawn) does) and handed to
    /// it when the delay is over; on [`Inline`](crate::Inline) it then runs
    /// on the thread that fires the timer (`viaduct-timer`, or the caller of
    /// [`advance`](Timer::advance)), so keep such jobs short, and never
    /// block there on another timer: the thread would wait for itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    /// use viaduct::ManualExecutor;
    ///
    /// let timer = Timer::manual();
    /// let ex = ManualExecutor::new();
    /// let job = timer.execute_after(&ex, Duration::from_millis(5), || "ran");
    /// timer.advance(Duration::from_millis(4));
    /// assert_eq!(ex.len(), 0); // not yet handed over
    /// timer.advance(Duration::from_millis(1));
    /// assert_eq!(ex.len(), 1);
    /// assert_eq!(ex.run_until(job).unwrap(), "ran");
    /// ```
    #[track_caller]
    pub fn execute_after<E, F, R>(&self, ex: &E, delay: Duration, f: F) -> Scheduled<R>
    where
        E: Executor + Clone,
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let deadline = self.inner().clock.after(delay);
        self.spawn_at_ns(ex, deadline, futures::future::lazy(move |_| f()))
    }

    /// Runs `f` on `ex` at `deadline` by this timer's clock (at once if it
    /// has passed). See [`execute_after`](Timer::execute_after).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    /// use viaduct::ManualExecutor;
    ///
    /// let timer = Timer::manual();
    /// let ex = ManualExecutor::new();
    /// let at = timer.now() + Duration::from_secs(3);
    /// let job = timer.execute_at(&ex, at, || 1);
    /// timer.advance(Duration::from_secs(3));
    /// assert_eq!(ex.run_until(job).unwrap(), 1);
    /// ```
    #[track_caller]
    pub fn execute_at<E, F, R>(&self, ex: &E, deadline: Instant, f: F) -> Scheduled<R>
    where
        E: Executor + Clone,
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let deadline = self.inner().clock.at(deadline);
        self.spawn_at_ns(ex, deadline, futures::future::lazy(move |_| f()))
    }

    /// Spawns `fut` on `ex` once `delay` has passed: it is first polled
    /// then. See [`execute_after`](Timer::execute_after).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    /// use viaduct::ManualExecutor;
    ///
    /// let timer = Timer::manual();
    /// let ex = ManualExecutor::new();
    /// let job = timer.spawn_after(&ex, Duration::from_secs(1), async { 2 + 2 });
    /// timer.advance(Duration::from_secs(1));
    /// assert_eq!(ex.run_until(job).unwrap(), 4);
    /// ```
    #[track_caller]
    pub fn spawn_after<E, F>(&self, ex: &E, delay: Duration, fut: F) -> Scheduled<F::Output>
    where
        E: Executor + Clone,
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let deadline = self.inner().clock.after(delay);
        self.spawn_at_ns(ex, deadline, fut)
    }

    /// Spawns `fut` on `ex` at `deadline`: it is first polled then. See
    /// [`execute_after`](Timer::execute_after).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::time::Timer;
    /// use viaduct::ManualExecutor;
    ///
    /// let timer = Timer::manual();
    /// let ex = ManualExecutor::new();
    /// let job = timer.spawn_at(&ex, timer.now(), async { "now" }); // due already
    /// assert_eq!(ex.run_until(job).unwrap(), "now");
    /// ```
    #[track_caller]
    pub fn spawn_at<E, F>(&self, ex: &E, deadline: Instant, fut: F) -> Scheduled<F::Output>
    where
        E: Executor + Clone,
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let deadline = self.inner().clock.at(deadline);
        self.spawn_at_ns(ex, deadline, fut)
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::executor::Runnable;
    use crate::loom::{lock, Mutex};
    use loom::thread;

    /// Collects runnables for the model's main thread to run.
    #[derive(Clone)]
    struct Collect(crate::loom::Arc<Mutex<Vec<Runnable>>>);

    impl Executor for Collect {
        fn schedule(&self, runnable: Runnable) {
            lock(&self.0).push(runnable);
        }
    }

    /// `cancel` against the timer firing the job: exactly one wins, the
    /// loser sees it, and nothing is left in the timer.
    #[test]
    fn cancel_against_fire() {
        loom::model(|| {
            let timer = Timer::manual();
            let ex = Collect(crate::loom::Arc::new(Mutex::new(Vec::new())));
            let ran = Arc::new(AtomicUsize::new(0));
            let r = ran.clone();
            let mut job = timer.execute_after(&ex, Duration::from_nanos(10), move || {
                r.fetch_add(1, Ordering::SeqCst);
            });
            let t = timer.clone();
            let firer = thread::spawn(move || t.advance(Duration::from_nanos(10)));
            let cancelled = job.cancel();
            firer.join().unwrap();

            let queued: Vec<_> = lock(&ex.0).drain(..).collect();
            for runnable in queued {
                runnable.run();
            }
            assert_eq!(ran.load(Ordering::SeqCst), usize::from(!cancelled));
            assert_eq!(timer.pending(), 0);
            let mut cx = Context::from_waker(futures::task::noop_waker_ref());
            match Pin::new(&mut job).poll(&mut cx) {
                Poll::Ready(Ok(())) => assert!(!cancelled),
                Poll::Ready(Err(TaskError::Cancelled)) => assert!(cancelled),
                other => panic!("unexpected {other:?}"),
            }
        });
    }
}
