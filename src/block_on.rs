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
///   current-thread runtime (inside its `block_on` or one of its tasks;
///   not one of its `spawn_blocking` threads): blocking would stop that
///   runtime, so a future that needs it would never end, and tokio's own
///   `block_on` refuses such a thread too. `.await` it instead, or use a
///   multi-thread runtime. On a multi-thread runtime's worker, `block_on`
///   first hands the worker's tasks to another thread, as tokio's
///   `block_in_place` does, so that none of them waits for it.
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
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                return block_in_tokio(&handle, fut);
            }
            park_on(fut)
        }
    })
}

/// `block_on` on a thread where a tokio runtime is current.
///
/// - A thread that runs a current-thread runtime (inside its `block_on`
///   or one of its tasks) is refused: blocking it stops that runtime, so a
///   future that needs it never ends. tokio's `block_in_place` refuses
///   exactly those threads, and takes the others (one of `spawn_blocking`'s,
///   one that only entered the runtime): it is the probe. It panics with
///   tokio's own message first, then this one says what to do.
/// - A multi-thread runtime's worker hands its queues to another thread
///   (`block_in_place`) before it parks, so the tasks it held (one it just
///   spawned, in its LIFO slot, among them) run meanwhile.
#[cfg(feature = "tokio")]
fn block_in_tokio<F: Future>(handle: &tokio::runtime::Handle, fut: F) -> F::Output {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use tokio::runtime::RuntimeFlavor;
    if handle.runtime_flavor() == RuntimeFlavor::CurrentThread {
        if catch_unwind(AssertUnwindSafe(|| tokio::task::block_in_place(|| ()))).is_err() {
            panic!(
                "viaduct::block_on called on a thread that runs a tokio current-thread runtime: \
                 blocking it stops that runtime, so the future could wait forever. `.await` the \
                 future instead, or block on it from another thread (tokio's spawn_blocking, or \
                 a viaduct pool's `run`), or use a multi-thread runtime"
            );
        }
        return park_on(fut);
    }
    tokio::task::block_in_place(|| park_on(fut))
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
