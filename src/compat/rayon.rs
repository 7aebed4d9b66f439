//! viaduct tasks as rayon jobs (feature `rayon`): [`RayonExecutor`].
//!
//! rayon is for data parallelism (its parallel iterators, `join`); with
//! this executor viaduct can hand it work and chain what comes back, on
//! strands, continuations and timers, so that rayon's workers and
//! viaduct's share the work of one request.

use std::fmt;
use std::sync::Arc;

use super::Gate;
use crate::executor::{Executor, Runnable};

/// An [`Executor`] over a rayon pool: each time a viaduct task is
/// scheduled (spawned, or woken), it runs once as a job of that pool
/// (`rayon::ThreadPool::spawn`, or `rayon::spawn` for the global pool).
///
/// Inside such a task, rayon's parallel iterators and `join` run on that
/// same pool. A task that waits should `.await`: [`block_on`](crate::block_on)
/// parks the rayon worker it runs on, which then runs nothing else.
///
/// Clones share the pool and one closed flag: after
/// [`close`](Executor::close), every clone refuses new tasks with
/// [`RejectReason::Closed`](crate::RejectReason::Closed), and tasks already
/// accepted go on.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use rayon::prelude::*;
/// use viaduct::compat::rayon::RayonExecutor;
/// use viaduct::prelude::*;
/// use viaduct::{block_on, Guarded, ThreadPool};
///
/// let rayon = RayonExecutor::new(Arc::new(
///     rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap(),
/// ));
/// let totals = Guarded::new(ThreadPool::builder().threads(1).build().unwrap(), 0u64);
/// let t = totals.clone();
/// let added = rayon
///     .run(|| (1..=100_000u64).into_par_iter().map(|x| x % 7).sum::<u64>()) // on rayon
///     .and_then(move |sum| t.with(move |total| { *total += sum; *total }));   // under the strand
/// assert_eq!(block_on(added).unwrap(), 300_000);
/// ```
#[derive(Clone)]
pub struct RayonExecutor {
    shared: Arc<Shared>,
}

struct Shared {
    /// `None`: rayon's global pool.
    pool: Option<Arc<rayon::ThreadPool>>,
    gate: Gate,
}

impl RayonExecutor {
    /// An executor over `pool`.
    pub fn new(pool: Arc<rayon::ThreadPool>) -> RayonExecutor {
        RayonExecutor::over(Some(pool))
    }

    /// An executor over rayon's global pool (made, as rayon makes it, on
    /// first use).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::compat::rayon::RayonExecutor;
    /// use viaduct::{block_on, ExecutorExt};
    ///
    /// let on_rayon = RayonExecutor::global();
    /// let index = block_on(on_rayon.run(rayon::current_thread_index)).unwrap();
    /// assert!(index.is_some()); // it ran on one of rayon's workers
    /// ```
    pub fn global() -> RayonExecutor {
        RayonExecutor::over(None)
    }

    fn over(pool: Option<Arc<rayon::ThreadPool>>) -> RayonExecutor {
        RayonExecutor {
            shared: Arc::new(Shared {
                pool,
                gate: Gate::default(),
            }),
        }
    }
}

impl Executor for RayonExecutor {
    fn schedule(&self, runnable: Runnable) {
        let job = move || {
            runnable.run();
        };
        match &self.shared.pool {
            Some(pool) => pool.spawn(job),
            None => rayon::spawn(job),
        }
    }

    fn close(&self) {
        self.shared.gate.close();
    }

    fn is_closed(&self) -> bool {
        self.shared.gate.is_closed()
    }

    fn name(&self) -> &str {
        "rayon"
    }
}

impl fmt::Debug for RayonExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RayonExecutor")
            .field("global", &self.shared.pool.is_none())
            .field("closed", &self.is_closed())
            .finish()
    }
}
