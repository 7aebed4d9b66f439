//! A tokio reactor the pool drives itself (feature `tokio`,
//! [`Builder::tokio_reactor`](super::Builder::tokio_reactor)).
//!
//! The pool owns a current-thread tokio runtime with I/O and timers, which
//! every worker enters. Its workers drive it, one at a time, as tokio's own
//! workers drive theirs:
//!
//! - An idle worker waits in the runtime's driver (`epoll`, until the next
//!   tokio timer) instead of sleeping on its parker. A socket that becomes
//!   ready wakes its task right there, into that worker's own queue: no
//!   hop from a reactor thread to the pool, which is what a pool that only
//!   entered another runtime pays on every wake-up.
//! - A busy worker gives the driver a turn that does not wait, at most
//!   every [`TURN_PERIOD`] (looking every [`TURN_EVERY`] jobs), so sockets
//!   and timers are served under load too.
//! - A worker that leaves the driver with work to do wakes a sleeping one,
//!   which takes the driver over: a long job does not hold up the sockets.
//! - A tokio task runs inside the driver, on a worker: if it waited there
//!   on the pool (a `block_on`), nothing would drive tokio meanwhile, so
//!   that is a panic that says so.
//!
//! Waking a worker that waits in the driver: [`Idle::unpark`] sets its
//! parker's flag and wakes the waker the wait registered (tokio's
//! `block_on` then returns from `epoll`); see `idle::Parker`.
//!
//! [`Idle::unpark`]: super::idle::Idle::unpark

use std::sync::{Mutex, TryLockError};
use std::task::{Poll, Waker};

use tokio::runtime::{Handle, Runtime};

/// Jobs a busy worker runs between two looks at whether to turn the
/// driver: tokio's `event_interval`.
pub(super) const TURN_EVERY: u32 = 61;

/// The least time between two turns by one busy worker: at most this
/// much is added to a socket's or a timer's latency while every worker is
/// busy (plus the job under way).
pub(super) const TURN_PERIOD: std::time::Duration = std::time::Duration::from_micros(250);

pub(crate) struct Reactor {
    /// Locked by the worker in the driver: the others sleep as usual.
    /// `None` once the pool has terminated (see [`shut_down`](Reactor::shut_down)).
    runtime: Mutex<Option<Runtime>>,
    handle: Handle,
}

impl Reactor {
    pub(super) fn new() -> std::io::Result<Reactor> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Reactor {
            handle: runtime.handle().clone(),
            runtime: Mutex::new(Some(runtime)),
        })
    }

    pub(super) fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Waits in the driver until `ready` says so, if no other worker is in
    /// it: `ready` is polled with the waker that ends the wait, first and
    /// after each wake-up. `false` if another worker holds the driver, or
    /// the reactor is shut down (the caller sleeps as usual).
    pub(super) fn wait(&self, mut ready: impl FnMut(&Waker) -> bool) -> bool {
        self.in_driver(|runtime| {
            runtime.block_on(std::future::poll_fn(|cx| {
                if ready(cx.waker()) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }))
        })
    }

    /// A turn of the driver that does not wait (and runs the tokio tasks
    /// that are ready), unless another worker is in it.
    pub(super) fn turn(&self) {
        // `yield_now` is woken only after the driver has looked at the
        // sockets and timers without waiting.
        self.in_driver(|runtime| runtime.block_on(tokio::task::yield_now()));
    }

    /// Runs `f` in the driver if nobody else is; `true` if it ran.
    fn in_driver(&self, f: impl FnOnce(&Runtime)) -> bool {
        let guard = match self.runtime.try_lock() {
            Ok(guard) => guard,
            // A tokio task's panic unwound through a turn: the runtime is
            // as sound as tokio leaves it after one.
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return false,
        };
        let Some(runtime) = guard.as_ref() else {
            return false;
        };
        f(runtime);
        true
    }

    /// Shuts the runtime down once the pool's workers have all exited: its
    /// timers and sockets wake what waits on them, with tokio's shutdown
    /// error, and those tasks, scheduled on a pool that runs nothing any
    /// more, are cancelled. Until then they would wait for a driver that
    /// nobody turns, and hold the pool alive.
    pub(super) fn shut_down(&self) {
        let runtime = self
            .runtime
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(runtime) = runtime {
            // Not a plain drop: that waits for tokio's blocking threads,
            // and panics in an async context.
            runtime.shutdown_background();
        }
    }
}

/// How a pool's workers stand to tokio.
pub(crate) enum TokioLink {
    /// They entered a runtime that others drive ([`Builder::enter_tokio`](super::Builder::enter_tokio)).
    Entered(Handle),
    /// They drive a reactor of the pool's own ([`Builder::tokio_reactor`](super::Builder::tokio_reactor)).
    Driven(Reactor),
}

impl TokioLink {
    /// The runtime the workers entered.
    pub(super) fn handle(&self) -> &Handle {
        match self {
            TokioLink::Entered(handle) => handle,
            TokioLink::Driven(reactor) => reactor.handle(),
        }
    }

    /// The reactor the workers drive, if they drive one.
    pub(super) fn reactor(&self) -> Option<&Reactor> {
        match self {
            TokioLink::Entered(_) => None,
            TokioLink::Driven(reactor) => Some(reactor),
        }
    }
}

impl Drop for Reactor {
    fn drop(&mut self) {
        self.shut_down();
    }
}
