//! Periodic timed jobs: [`Periodic`], made by
//! [`Timer::execute_every`](super::Timer::execute_every) and
//! [`TimedExt::execute_every`](super::TimedExt::execute_every). Each run is
//! a poll of one long-lived task, so runs never overlap; the job's claim
//! word (see `scheduled.rs`) stops it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project::pin_project;

use super::clock::nanos;
use super::interval::{Interval, MissedTickBehavior};
use super::scheduled::{Job, CANCELLED};
use super::sleep::Sleep;
use super::Timer;
use crate::error::TaskError;
use crate::executor::Executor;
use crate::loom::Ordering;
use crate::task::JoinHandle;

/// How a periodic job is spaced: [`Timer::execute_every_with`],
/// [`TimedExt::execute_every_with`](super::TimedExt::execute_every_with).
///
/// # Examples
///
/// ```
/// use viaduct::time::{MissedTickBehavior, Pacing};
///
/// assert_eq!(Pacing::default(), Pacing::FixedRate(MissedTickBehavior::Skip));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pacing {
    /// Runs start every period after the first, on a fixed grid; a run
    /// that overran its slot makes the following runs follow the
    /// [`MissedTickBehavior`] (as an [`Interval`]'s ticks do).
    FixedRate(MissedTickBehavior),
    /// Each run starts one period after the previous one finished.
    FixedDelay,
}

impl Default for Pacing {
    /// Fixed rate, missed runs skipped.
    fn default() -> Pacing {
        Pacing::FixedRate(MissedTickBehavior::Skip)
    }
}

/// What spaces the runs of a periodic job.
enum Pace {
    Rate(Interval),
    Delay { sleep: Pin<Box<Sleep>>, period: u64 },
}

impl Pace {
    fn poll_due(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            Pace::Rate(interval) => interval.poll_tick(cx).map(drop),
            Pace::Delay { sleep, .. } => sleep.as_mut().poll(cx),
        }
    }

    fn ran(&mut self) {
        if let Pace::Delay { sleep, period } = self {
            let now = sleep.timer.now_ns();
            sleep.as_mut().reset_ns(now.saturating_add(*period), now);
        }
    }
}

/// The task of a periodic job: at most one run per poll, so runs never
/// overlap, and a job that is behind yields between runs instead of
/// holding its worker.
#[pin_project]
struct Repeat<F> {
    f: F,
    pace: Pace,
    job: Arc<Job>,
    /// The next run is due already (seen right after the previous run).
    due: bool,
}

impl<F: FnMut()> Future for Repeat<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        if !*this.due && this.pace.poll_due(cx).is_pending() {
            return Poll::Pending;
        }
        *this.due = false;
        if this.job.cancelled() {
            return Poll::Ready(());
        }
        // A panic here ends the task; its handle reports the payload.
        (this.f)();
        this.job.runs.fetch_add(1, Ordering::Release);
        this.pace.ran();
        if this.pace.poll_due(cx).is_ready() {
            *this.due = true;
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

/// A periodic job: returned by `execute_every` and `execute_every_with`.
///
/// Runs never overlap: the next run is timed only once the previous one
/// has returned. The job stops when [`cancel`](Periodic::cancel)led, or
/// when a run panics; awaiting the handle waits for that and says why, as
/// a [`TaskError`]: `Cancelled`, `Panicked` with the payload, or `Rejected`
/// if the executor refused the job. A job never stops silently. Dropping
/// the handle detaches the job: it runs until its executor shuts down.
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
/// let job = timer.execute_every(&ex, Duration::from_secs(1), || println!("tick"));
/// for _ in 0..3 {
///     timer.advance(Duration::from_secs(1));
///     ex.run_until_idle();
/// }
/// assert_eq!(job.runs(), 3);
/// job.cancel();
/// assert!(ex.run_until(job).is_cancelled());
/// ```
#[must_use = "dropping a Periodic detaches the job; keep it to cancel it or see it fail"]
pub struct Periodic {
    join: JoinHandle<()>,
    job: Arc<Job>,
    timer: Timer,
}

impl Periodic {
    /// The job's task id, as stall reports and task dumps show it (`None`
    /// if the executor refused it).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::{ManualExecutor, TimedExt};
    ///
    /// let job = ManualExecutor::new().execute_every(Duration::from_secs(1), || ());
    /// assert!(job.id().is_some());
    /// ```
    pub fn id(&self) -> Option<crate::task_id::TaskId> {
        self.join.id()
    }

    /// Stops the job: no run starts after this returns (one in progress
    /// finishes). Returns `false` if it had stopped already.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    /// use viaduct::Inline;
    ///
    /// let timer = Timer::manual();
    /// let job = timer.execute_every(&Inline, Duration::from_secs(1), || ());
    /// assert!(job.cancel());
    /// assert!(!job.cancel());
    /// timer.advance(Duration::from_secs(5));
    /// assert_eq!(job.runs(), 0);
    /// ```
    pub fn cancel(&self) -> bool {
        let finished = self.join.is_finished();
        let before = self.job.claim.swap(CANCELLED, Ordering::AcqRel);
        self.timer.remove(&self.job.entry);
        self.join.abort();
        before != CANCELLED && !finished
    }

    /// How many runs have completed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    /// use viaduct::Inline;
    ///
    /// let timer = Timer::manual();
    /// let job = timer.execute_every(&Inline, Duration::from_secs(1), || ());
    /// timer.advance(Duration::from_secs(1));
    /// timer.advance(Duration::from_secs(1));
    /// assert_eq!(job.runs(), 2);
    /// ```
    pub fn runs(&self) -> u64 {
        self.job.runs.load(Ordering::Acquire)
    }

    /// `true` once the job has stopped for good.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    /// use viaduct::Inline;
    ///
    /// let timer = Timer::manual();
    /// let job = timer.execute_every(&Inline, Duration::from_secs(1), || panic!("boom"));
    /// assert!(!job.is_finished());
    /// timer.advance(Duration::from_secs(1));
    /// assert!(job.is_finished());
    /// ```
    pub fn is_finished(&self) -> bool {
        self.join.is_finished()
    }
}

impl Future for Periodic {
    /// Why the job stopped.
    type Output = TaskError;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<TaskError> {
        Pin::new(&mut self.join).poll(cx).map(|r| match r {
            Ok(()) => TaskError::Cancelled,
            Err(e) => e,
        })
    }
}

impl fmt::Debug for Periodic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Periodic")
            .field("runs", &self.runs())
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

impl Timer {
    /// Runs `f` on `ex` every `period` (the first run one period from
    /// now), at a fixed rate, skipping runs missed because the job or its
    /// executor fell a whole period behind. Same as
    /// [`execute_every_with`](Timer::execute_every_with) with
    /// [`Pacing::default()`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    /// use viaduct::Inline;
    ///
    /// let timer = Timer::manual();
    /// let count = Arc::new(AtomicU32::new(0));
    /// let c = count.clone();
    /// let _job = timer.execute_every(&Inline, Duration::from_secs(1), move || {
    ///     c.fetch_add(1, Ordering::Relaxed);
    /// });
    /// for _ in 0..5 {
    ///     timer.advance(Duration::from_secs(1));
    /// }
    /// assert_eq!(count.load(Ordering::Relaxed), 5);
    /// ```
    #[track_caller]
    pub fn execute_every<E, F>(&self, ex: &E, period: Duration, f: F) -> Periodic
    where
        E: Executor + Clone,
        F: FnMut() + Send + 'static,
    {
        self.execute_every_with(ex, period, Pacing::default(), f)
    }

    /// Runs `f` on `ex` every `period`, spaced as `pacing` says; the first
    /// run is one period from now. A zero period is raised to one
    /// nanosecond. Runs never overlap, and a job that is behind yields to
    /// the executor between runs.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::{Pacing, Timer};
    /// use viaduct::ManualExecutor;
    ///
    /// let timer = Timer::manual();
    /// let ex = ManualExecutor::new();
    /// let job = timer.execute_every_with(&ex, Duration::from_secs(1), Pacing::FixedDelay, || ());
    /// timer.advance(Duration::from_secs(1));
    /// ex.run_until_idle(); // run 1 ends at t = 1 s: run 2 is due at 2 s
    /// timer.advance(Duration::from_millis(999));
    /// assert_eq!(ex.run_until_idle(), 0);
    /// timer.advance(Duration::from_millis(1));
    /// ex.run_until_idle();
    /// assert_eq!(job.runs(), 2);
    /// ```
    #[track_caller]
    pub fn execute_every_with<E, F>(
        &self,
        ex: &E,
        period: Duration,
        pacing: Pacing,
        f: F,
    ) -> Periodic
    where
        E: Executor + Clone,
        F: FnMut() + Send + 'static,
    {
        let period = nanos(period).max(1);
        let now = self.now_ns();
        let first = now.saturating_add(period);
        let pace = match pacing {
            Pacing::FixedRate(missed) => {
                let mut interval = Interval::new(self.clone(), first, Duration::from_nanos(period));
                interval.set_missed_tick_behavior(missed);
                Pace::Rate(interval)
            }
            Pacing::FixedDelay => Pace::Delay {
                sleep: Box::pin(Sleep::new(self.clone(), first, now)),
                period,
            },
        };
        let (join, job) = self.park(ex, first, |job| Repeat {
            f,
            pace,
            job,
            due: false,
        });
        Periodic {
            join,
            job,
            timer: self.clone(),
        }
    }
}
