//! hyper on viaduct (feature `hyper`): [`HyperExecutor`] runs the tasks
//! hyper spawns (HTTP/2 streams, a client's connections, graceful
//! shutdown's watchers) on any viaduct executor, and [`HyperTimer`] runs
//! hyper's timeouts (header reads, keep-alive) on viaduct's timer wheel.
//!
//! The sockets come from whatever does the I/O (tokio, through
//! `hyper-util`'s `TokioIo`, for example); see `examples/http.rs` for a
//! whole server whose handlers run on a viaduct pool.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::executor::Executor;
use crate::spawn::ExecutorExt;
use crate::time::{Sleep, Timer};

/// hyper's [`Executor`](hyper::rt::Executor) over a viaduct executor: each
/// future hyper hands it is spawned there as a detached task.
///
/// hyper cannot be told that a spawn was refused, and it calls `execute`
/// inside a poll, where waiting is not allowed: on a closed executor, or a
/// bounded pool with no room left, the future is dropped unrun, which ends
/// what it served (a connection, a stream), as a runtime that shut down
/// would. A panic in its `Drop` goes where the calling task's unread
/// panics go.
///
/// # Examples
///
/// ```
/// use hyper::rt::Executor as _;
/// use viaduct::compat::hyper::HyperExecutor;
/// use viaduct::ThreadPool;
///
/// let pool = ThreadPool::builder().threads(1).name("http").build().unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// HyperExecutor::new(pool).execute(async move {
///     tx.send(std::thread::current().name().unwrap().to_owned()).unwrap();
/// });
/// assert_eq!(rx.recv().unwrap(), "http-0");
/// ```
#[derive(Clone, Debug)]
pub struct HyperExecutor<E> {
    executor: E,
}

impl<E: Executor + Clone> HyperExecutor<E> {
    /// Spawns hyper's tasks on `executor`.
    pub fn new(executor: E) -> HyperExecutor<E> {
        HyperExecutor { executor }
    }

    /// The executor hyper's tasks are spawned on.
    pub fn executor(&self) -> &E {
        &self.executor
    }
}

impl<E, F> hyper::rt::Executor<F> for HyperExecutor<E>
where
    E: Executor + Clone,
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        // Detached: hyper keeps no handle of what it spawns. Never waits
        // for room (`try_spawn`): the caller is inside a poll.
        if let Err(refused) = self.executor.try_spawn(future) {
            crate::task::reporting_panics(move || drop(refused));
        }
    }
}

/// hyper's [`Timer`](hyper::rt::Timer) over a viaduct [`Timer`]: hyper's
/// sleeps are entries in its wheel, `now` is read from its clock, and a
/// reset moves an entry rather than making a new one.
///
/// Over a [manual](Timer::manual) timer, hyper's timeouts follow that
/// timer's clock, which a test moves by hand.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hyper::rt::Timer as _;
/// use viaduct::compat::hyper::HyperTimer;
/// use viaduct::time::Timer;
///
/// let clock = Timer::manual();
/// let timer = HyperTimer::new(clock.clone());
/// let start = timer.now();
/// let nap = timer.sleep(Duration::from_secs(30));
/// clock.advance(Duration::from_secs(30));
/// viaduct::block_on(nap); // over at once: the manual clock says so
/// assert_eq!(timer.now() - start, Duration::from_secs(30));
/// ```
#[derive(Clone)]
pub struct HyperTimer {
    timer: Timer,
}

impl HyperTimer {
    /// hyper's timeouts on `timer` ([`Timer::global`] for real time).
    pub fn new(timer: Timer) -> HyperTimer {
        HyperTimer { timer }
    }
}

impl fmt::Debug for HyperTimer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HyperTimer")
            .field("timer", &self.timer)
            .finish()
    }
}

impl hyper::rt::Timer for HyperTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(self.timer.sleep(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(self.timer.sleep_until(deadline)))
    }

    fn now(&self) -> Instant {
        self.timer.now()
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<HyperSleep>() {
            // One of ours, on this timer's clock: moved in its wheel.
            Some(mine) if mine.0.timer().same_as(&self.timer) => {
                mine.project().0.reset(new_deadline)
            }
            _ => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// A viaduct [`Sleep`] as hyper's.
#[pin_project::pin_project]
struct HyperSleep(#[pin] Sleep);

impl Future for HyperSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.project().0.poll(cx)
    }
}

impl hyper::rt::Sleep for HyperSleep {}
