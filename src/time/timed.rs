//! [`TimedExt`]: timed tasks on every executor, on the ambient timer.

use std::future::Future;
use std::time::{Duration, Instant};

use super::periodic::{Pacing, Periodic};
use super::scheduled::Scheduled;
use super::Timer;
use crate::executor::Executor;

mod sealed {
    pub trait Sealed {}
    impl<E: crate::executor::Executor + Clone> Sealed for E {}
}

/// Timed tasks on every executor, on the [global timer](Timer::global)
/// (the simulated clock inside a [simulation](crate::sim)): boost's
/// `scheduler.on(ex).after(d).submit(f)` reads `ex.execute_after(d, f)`.
///
/// Implemented for every [`Executor`] that is `Clone`; sealed. For a
/// [manual](Timer::manual) timer, call the methods of the same names on
/// the [`Timer`], passing the executor.
///
/// # Examples
///
/// B (after 20 ms) runs before A (after 40 ms), whatever the order they
/// were submitted in.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use viaduct::{block_on, ThreadPool, TimedExt};
///
/// let pool = ThreadPool::builder().threads(2).build().unwrap();
/// let order = Arc::new(Mutex::new(Vec::new()));
/// let (a, b) = (order.clone(), order.clone());
/// let ha = pool.execute_after(Duration::from_millis(40), move || a.lock().unwrap().push("A"));
/// let hb = pool.execute_after(Duration::from_millis(20), move || b.lock().unwrap().push("B"));
/// block_on(ha).unwrap();
/// block_on(hb).unwrap();
/// assert_eq!(*order.lock().unwrap(), ["B", "A"]);
/// ```
pub trait TimedExt: Executor + Clone + sealed::Sealed {
    /// Runs `f` on this executor once `delay` has passed. See
    /// [`Timer::execute_after`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use viaduct::{block_on, ThreadPool, TimedExt};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let start = Instant::now();
    /// let job = pool.execute_after(Duration::from_millis(5), move || start.elapsed());
    /// assert!(block_on(job).unwrap() >= Duration::from_millis(5));
    /// ```
    #[track_caller]
    fn execute_after<F, R>(&self, delay: Duration, f: F) -> Scheduled<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        Timer::ambient().execute_after(self, delay, f)
    }

    /// Runs `f` on this executor at `deadline`. See [`Timer::execute_at`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use viaduct::{block_on, Inline, TimedExt};
    ///
    /// let at = Instant::now() + Duration::from_millis(5);
    /// let ran_at = block_on(Inline.execute_at(at, Instant::now)).unwrap();
    /// assert!(ran_at >= at);
    /// ```
    #[track_caller]
    fn execute_at<F, R>(&self, deadline: Instant, f: F) -> Scheduled<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        Timer::ambient().execute_at(self, deadline, f)
    }

    /// Spawns `fut` on this executor once `delay` has passed. See
    /// [`Timer::spawn_after`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::{block_on, ThreadPool, TimedExt};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// assert_eq!(block_on(pool.spawn_after(Duration::from_millis(1), async { 9 })).unwrap(), 9);
    /// ```
    #[track_caller]
    fn spawn_after<F>(&self, delay: Duration, fut: F) -> Scheduled<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Timer::ambient().spawn_after(self, delay, fut)
    }

    /// Spawns `fut` on this executor at `deadline`. See
    /// [`Timer::spawn_at`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use viaduct::{block_on, Inline, TimedExt};
    ///
    /// let at = Instant::now() + Duration::from_millis(1);
    /// assert_eq!(block_on(Inline.spawn_at(at, async { 'x' })).unwrap(), 'x');
    /// ```
    #[track_caller]
    fn spawn_at<F>(&self, deadline: Instant, fut: F) -> Scheduled<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Timer::ambient().spawn_at(self, deadline, fut)
    }

    /// Runs `f` on this executor every `period`, fixed rate, missed runs
    /// skipped. See [`Timer::execute_every`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::{block_on, ThreadPool, TimedExt};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let job = pool.execute_every(Duration::from_millis(1), || ());
    /// while job.runs() < 3 {
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// job.cancel();
    /// assert!(block_on(job).is_cancelled());
    /// ```
    #[track_caller]
    fn execute_every<F>(&self, period: Duration, f: F) -> Periodic
    where
        F: FnMut() + Send + 'static,
    {
        Timer::ambient().execute_every(self, period, f)
    }

    /// Runs `f` on this executor every `period`, spaced as `pacing` says.
    /// See [`Timer::execute_every_with`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Pacing;
    /// use viaduct::{block_on, ThreadPool, TimedExt};
    ///
    /// let pool = ThreadPool::builder().threads(1).build().unwrap();
    /// let mut n = 0;
    /// let job = pool.execute_every_with(Duration::from_millis(1), Pacing::FixedDelay, move || {
    ///     n += 1;
    ///     assert!(n < 3, "third run panics");
    /// });
    /// let why = block_on(job);
    /// assert_eq!(why.panic_message(), Some("third run panics"));
    /// ```
    #[track_caller]
    fn execute_every_with<F>(&self, period: Duration, pacing: Pacing, f: F) -> Periodic
    where
        F: FnMut() + Send + 'static,
    {
        Timer::ambient().execute_every_with(self, period, pacing, f)
    }
}

impl<E: Executor + Clone> TimedExt for E {}
