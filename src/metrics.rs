//! Snapshots of the counters of executors and decorators that queue work.
//!
//! Every executor or decorator that holds work back has a `metrics()`
//! method returning a plain, `Copy` snapshot, cheap enough to call from a
//! monitoring loop. The snapshot types live here, except the two that
//! belong to their subsystem:
//!
//! | handle | `metrics()` returns |
//! | --- | --- |
//! | [`ThreadPool`](crate::ThreadPool) | [`pool::Metrics`](crate::pool::Metrics) |
//! | [`Strand`](crate::Strand), [`Guarded`](crate::Guarded) | [`StrandMetrics`](crate::strand::StrandMetrics) |
//! | [`ManualExecutor`](crate::ManualExecutor) | [`ManualMetrics`] |
//! | [`ThreadPerTask`](crate::ThreadPerTask) | [`ThreadPerTaskMetrics`] |
//! | [`PriorityExecutor`](crate::PriorityExecutor) | [`PriorityMetrics`] |
//! | [`KeyedStrands`](crate::KeyedStrands) | [`KeyedMetrics`] |
//! | [`Timer`](crate::time::Timer) | [`TimerMetrics`] |
//!
//! [`Inline`](crate::Inline) queues nothing and has none.
//!
//! Counters (`u64`) only grow; gauges (`usize`) say how things are now.
//! Each snapshot is taken without stopping the executor, so under load its
//! fields may be a moment apart; on a [`ManualExecutor`](crate::ManualExecutor)
//! and a manual [`Timer`](crate::time::Timer) they are exact.
//!
//! The structs are `#[non_exhaustive]`: counters may be added.
//!
//! # Examples
//!
//! Polling the snapshots of two executors:
//!
//! ```
//! use viaduct::metrics::ManualMetrics;
//! use viaduct::{block_on, ExecutorExt, ManualExecutor, ThreadPool};
//!
//! let manual = ManualExecutor::new();
//! manual.execute(|| ());
//! manual.execute(|| ());
//! manual.run_at_most_one();
//! let m: ManualMetrics = manual.metrics();
//! assert_eq!((m.scheduled, m.ran, m.queued), (2, 1, 1));
//!
//! let pool = ThreadPool::builder().threads(1).build().unwrap();
//! block_on(pool.run(|| ())).unwrap();
//! pool.shutdown().unwrap();
//! assert_eq!(pool.metrics().completed, 1);
//! ```

/// A snapshot of a [`ManualExecutor`](crate::ManualExecutor)'s counters;
/// see [`ManualExecutor::metrics`](crate::ManualExecutor::metrics).
///
/// Runnables are counted, not tasks: a task woken three times is scheduled
/// three times. The fields are read together under the queue's lock, so
/// `scheduled == ran + queued` as long as no queued runnable was cancelled
/// by dropping the executor's last handle.
///
/// # Examples
///
/// ```
/// use viaduct::{ExecutorExt, ManualExecutor};
///
/// let ex = ManualExecutor::new();
/// ex.execute(|| ());
/// ex.execute(|| ());
/// ex.run_at_most_one();
/// let m = ex.metrics();
/// assert_eq!((m.scheduled, m.ran, m.queued), (2, 1, 1));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ManualMetrics {
    /// Runnables handed to the executor: new tasks and wake-ups.
    pub scheduled: u64,
    /// Runnables taken off the queue and run.
    pub ran: u64,
    /// Runnables waiting in the queue now.
    pub queued: usize,
}

/// A snapshot of a [`ThreadPerTask`](crate::ThreadPerTask)'s counters; see
/// [`ThreadPerTask::metrics`](crate::ThreadPerTask::metrics).
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, ThreadPerTask};
///
/// let ex = ThreadPerTask::new("metrics");
/// block_on(ex.run(|| ())).unwrap();
/// ex.join_threads().unwrap();
/// let m = ex.metrics();
/// assert_eq!((m.started, m.running), (1, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThreadPerTaskMetrics {
    /// Runnables scheduled, each given a thread of its own (one the OS
    /// refused counts too; its task was cancelled).
    pub started: u64,
    /// Threads started and not finished yet.
    pub running: usize,
}

/// A snapshot of a [`PriorityExecutor`](crate::PriorityExecutor)'s
/// counters; see [`PriorityExecutor::metrics`](crate::PriorityExecutor::metrics).
///
/// The fields are read together under the decorator's lock:
/// `submitted - pending` runnables have left the heap (to run, or to be
/// dropped with a pump its executor threw away).
///
/// # Examples
///
/// ```
/// use viaduct::{ManualExecutor, PriorityExecutor};
///
/// let manual = ManualExecutor::new();
/// let pq = PriorityExecutor::new(manual.clone());
/// pq.execute_with(1, || ());
/// pq.execute_with(2, || ());
/// assert_eq!(pq.metrics().pending, 2);
/// manual.run_until_idle();
/// let m = pq.metrics();
/// assert_eq!((m.submitted, m.pending, m.idle_pumps), (2, 0, 2));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PriorityMetrics {
    /// Runnables pushed onto the heap: new tasks and wake-ups.
    pub submitted: u64,
    /// Runnables in the heap now, waiting for a pump.
    pub pending: usize,
    /// Pumps parked, each ready to carry one submission to the inner
    /// executor without making a new task.
    pub idle_pumps: usize,
}

/// A snapshot of a [`KeyedStrands`](crate::KeyedStrands)' gauges; see
/// [`KeyedStrands::metrics`](crate::KeyedStrands::metrics).
///
/// # Examples
///
/// ```
/// use viaduct::{KeyedStrands, ManualExecutor};
///
/// let manual = ManualExecutor::new();
/// let keyed = KeyedStrands::new(manual.clone());
/// keyed.execute("a", || ());
/// keyed.execute("a", || ());
/// keyed.execute("b", || ());
/// assert_eq!((keyed.metrics().keys, keyed.metrics().tasks), (2, 3));
/// manual.run_until_idle();
/// assert_eq!((keyed.metrics().keys, keyed.metrics().tasks), (0, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyedMetrics {
    /// Keys with live tasks, each with its strand.
    pub keys: usize,
    /// Tasks of all keys whose futures are alive: queued, running or
    /// waiting.
    pub tasks: usize,
}

/// A snapshot of a [`Timer`](crate::time::Timer)'s gauges; see
/// [`Timer::metrics`](crate::time::Timer::metrics).
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
/// let _job = timer.execute_after(&ex, Duration::from_secs(1), || ());
/// assert_eq!(timer.metrics().pending, 1);
/// timer.advance(Duration::from_secs(1));
/// assert_eq!(timer.metrics().pending, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimerMetrics {
    /// Timers registered and neither fired nor cancelled (as
    /// [`Timer::pending`](crate::time::Timer::pending)).
    pub pending: usize,
}
