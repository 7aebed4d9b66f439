//! [`block_on`]: run a future to completion on the calling thread.

use std::future::Future;
use std::pin::pin;
use std::thread;

use crate::signal::poll_to_end;

/// Runs `fut` to completion on the calling thread and returns its output.
///
/// On a worker of a [`ThreadPool`](crate::ThreadPool) it runs that pool's
/// tasks while `fut` waits (boost's `reschedule_until`), so a task may
/// spawn children and block on them even on a one-thread pool without
/// deadlocking. Inside a task run by [`Inline`](crate::Inline) it runs the
/// `Inline` work queued on this thread, which could not run otherwise.
/// Inside a [simulation](crate::sim) it runs the simulation.
/// Elsewhere the thread parks until `fut` is woken. Either way it sleeps
/// rather than spins when there is nothing to do, and a wake-up is never
/// lost, even if `fut`'s own poll parks the thread.
///
/// # Panics
///
/// - If `fut` panics.
/// - On a pool worker, when the worker's stack is three quarters used:
///   every `block_on` there runs other tasks on the same stack, so nesting
///   them (a task blocking on a task blocking on a task...) grows it. The
///   panic, instead of a stack overflow that would abort the process,
///   reaches the task that called `block_on` as
///   [`TaskError::Panicked`](crate::TaskError::Panicked). Await instead of
///   blocking, or give the pool a larger
///   [`stack_size`](crate::pool::Builder::stack_size).
/// - Inside a [simulation](crate::sim), when nothing can run, no timer is
///   pending and `fut` has not finished (it never would): the message
///   holds the task dump. The task calling `block_on` fails the run with
///   it.
/// - With the `tokio` feature, on a thread that runs a tokio
///   current-thread runtime (inside its `block_on` or one of its tasks):
///   blocking would stop that runtime, so a future that needs it would
///   never end. `.await` it instead, or use a multi-thread runtime.
/// - Inside a section of a strand, on a future that waits for that same
///   strand (a task or section queued on it, its lock): the strand runs
///   one section at a time, so that wait could never end. Await the
///   handle in a task instead, or submit the work without waiting for it.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(1).build().unwrap();
/// let p = pool.clone();
/// // A task that blocks on its own child, on a one-thread pool.
/// let parent = pool.spawn(async move {
///     let child = p.spawn(async { 21 });
///     block_on(child).unwrap() * 2
/// });
/// assert_eq!(block_on(parent).unwrap(), 42);
/// ```
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let _blocking = crate::section::Blocking::enter();
    crate::context::with_driver(|driver| match driver {
        Some(driver) => {
            // A task blocked here shows in its pool's dumps (with what it
            // waits on), though its worker runs other tasks meanwhile.
            crate::task::list_current_while_blocked();
            let mut output = None;
            {
                let fut = pin!(async { output = Some(fut.await) });
                driver.block_on(fut);
            }
            output.expect("a driver's block_on returns once the future has ended")
        }
        None => {
            #[cfg(feature = "tokio")]
            refuse_blocking_a_current_thread_runtime();
            park_on(fut)
        }
    })
}

/// Panics if this thread runs a tokio current-thread runtime: blocking it
/// would stop that runtime (its tasks, I/O and timers run on this thread
/// only), so whatever the blocked-on future waits for there never comes.
/// A thread that only entered such a runtime, without running it, is
/// refused too: tokio does not tell the two apart.
#[cfg(feature = "tokio")]
fn refuse_blocking_a_current_thread_runtime() {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::CurrentThread) {
        panic!(
            "viaduct::block_on called on a thread that runs a tokio current-thread runtime: \
             blocking it stops that runtime, so the future could wait forever. `.await` the \
             future instead, or block on it from another thread (tokio's spawn_blocking, or a \
             viaduct pool's `run`), or use a multi-thread runtime"
        );
    }
}

/// `block_on` off any pool: park, but first run the `Inline` work this
/// thread has queued.
fn park_on<F: Future>(fut: F) -> F::Output {
    let me = thread::current();
    poll_to_end(
        fut,
        move || me.unpark(),
        |woken| {
            while !woken() {
                if !crate::inline::run_one_queued() {
                    // A wake-up before this park leaves the token set; one
                    // whose token a nested park took has raised the flag.
                    thread::park();
                }
            }
        },
    )
}
