//! viaduct and tokio in one program (feature `tokio`).
//!
//! - [`TokioExecutor`] runs viaduct tasks on a tokio runtime's threads,
//!   where tokio's sockets and timers work: spawn on it, make a strand
//!   over it, [`hop_to`](crate::hop_to) it and back.
//! - [`Builder::enter_tokio`](crate::pool::Builder::enter_tokio) makes every worker of a viaduct pool enter a
//!   tokio runtime, so tokio's sockets, timers and `tokio::spawn` work
//!   inside the pool's tasks too, while the pool runs them.
//! - With the feature on, [`block_on`](crate::block_on) knows tokio's
//!   threads. It refuses, with a panic that says what to do instead, a
//!   thread that runs a tokio current-thread runtime (its `block_on`, its
//!   tasks), as tokio's own `block_on` does: blocking it stops that
//!   runtime. On a multi-thread runtime's worker it first hands the
//!   worker's tasks to another thread, as `tokio::task::block_in_place`
//!   does, so none of them waits behind the blocked one.
//!
//! The other direction needs nothing: viaduct's handles, locks and timers
//! are ordinary futures a tokio task awaits.

use std::fmt;
use std::sync::Arc;

use tokio::runtime::Handle;

use super::Gate;
use crate::executor::{Executor, Runnable};

/// An [`Executor`] over a tokio runtime: each time a viaduct task is
/// scheduled (spawned, or woken), it runs once as a tokio task.
///
/// A task on it can use everything tokio offers its own tasks (sockets,
/// timers, `tokio::spawn`) and everything viaduct offers (strands, `via`,
/// hops, timers). Each run is a tokio task of its own, an allocation and
/// tokio's bookkeeping: right for a hop, a short job or a strand's
/// sections; a long-lived task woken very often (a busy connection) costs
/// less spawned on tokio itself, its handle awaited from viaduct.
///
/// Clones share the runtime and one closed flag: after
/// [`close`](Executor::close), every clone refuses new tasks with
/// [`RejectReason::Closed`](crate::RejectReason::Closed), and tasks already
/// accepted go on. A task scheduled after the runtime shut down is dropped
/// unrun, and its handle says [`Cancelled`](crate::TaskError::Cancelled).
///
/// # Examples
///
/// ```
/// use viaduct::compat::tokio::TokioExecutor;
/// use viaduct::prelude::*;
/// use viaduct::{hop_to, ThreadPool};
///
/// let rt = tokio::runtime::Builder::new_multi_thread()
///     .worker_threads(1)
///     .thread_name("tokio")
///     .enable_all()
///     .build()
///     .unwrap();
/// let on_tokio = TokioExecutor::new(rt.handle().clone());
/// let cpu = ThreadPool::builder().threads(1).name("cpu").build().unwrap();
///
/// let back = on_tokio.clone();
/// let trip = on_tokio.spawn(async move {
///     tokio::time::sleep(std::time::Duration::from_millis(1)).await; // tokio's timer
///     hop_to(&cpu).await; // CPU work off tokio's workers
///     let sum: u64 = (1..=1000).sum();
///     hop_to(&back).await;
///     (sum, std::thread::current().name().unwrap().to_owned())
/// });
/// // A tokio task awaits the viaduct handle as it is.
/// let (sum, thread) = rt.block_on(trip).unwrap();
/// assert_eq!((sum, thread.as_str()), (500_500, "tokio"));
/// ```
#[derive(Clone)]
pub struct TokioExecutor {
    shared: Arc<Shared>,
}

struct Shared {
    handle: Handle,
    gate: Gate,
}

impl TokioExecutor {
    /// An executor over the runtime `handle` belongs to.
    pub fn new(handle: Handle) -> TokioExecutor {
        TokioExecutor {
            shared: Arc::new(Shared {
                handle,
                gate: Gate::default(),
            }),
        }
    }

    /// An executor over the tokio runtime this thread is in (inside one
    /// of its tasks, or under its `enter` guard).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, as `tokio::runtime::Handle::current` does.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::compat::tokio::TokioExecutor;
    /// use viaduct::ExecutorExt;
    ///
    /// let rt = tokio::runtime::Runtime::new().unwrap();
    /// let answer = rt.block_on(async {
    ///     let here = TokioExecutor::current();
    ///     here.spawn(async { 6 * 7 }).await.unwrap()
    /// });
    /// assert_eq!(answer, 42);
    /// ```
    #[track_caller]
    pub fn current() -> TokioExecutor {
        TokioExecutor::new(Handle::current())
    }

    /// The runtime's handle.
    pub fn handle(&self) -> &Handle {
        &self.shared.handle
    }
}

impl Executor for TokioExecutor {
    fn schedule(&self, runnable: Runnable) {
        // A runtime that shut down drops the future unpolled, and the
        // runnable with it: the task is cancelled, not lost.
        drop(self.shared.handle.spawn(async move {
            runnable.run();
        }));
    }

    fn close(&self) {
        self.shared.gate.close();
    }

    fn is_closed(&self) -> bool {
        self.shared.gate.is_closed()
    }

    fn name(&self) -> &str {
        "tokio"
    }
}

impl fmt::Debug for TokioExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokioExecutor")
            .field("flavor", &self.shared.handle.runtime_flavor())
            .field("closed", &self.is_closed())
            .finish()
    }
}
