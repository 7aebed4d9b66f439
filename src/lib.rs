//! viaduct: one execution core for every way async Rust code gets run.
//!
//! Futures, closures, continuations, strands and timers all become
//! `async-task` runnables handed to an [`Executor`]; the work-stealing
//! [`ThreadPool`] is the default home for them. You pick where each piece of
//! work runs, move work between executors, and never deadlock a pool by
//! waiting inside it: [`block_on`] on a pool worker runs the pool's tasks
//! while it waits.
//!
//! This page is a guide, in the order you will need it:
//! [executors](#which-executor-for-which-job),
//! [errors](#errors-panics-and-refused-work),
//! [continuations](#continuations-where-each-step-runs),
//! [strands](#strands-serial-executors-and-async-mutexes),
//! [time](#time), [waiting and fork-join](#block_on-and-fork-join),
//! [guarantees](#guarantees).
//!
//! # Which executor for which job
//!
//! | executor | runs work | use it for |
//! |---|---|---|
//! | [`ThreadPool`] | on N work-stealing threads (`cpu-0`, `cpu-1`, ...) | CPU work, the default |
//! | [`Inline`] | right away, on the scheduling thread (trampolined) | cheap continuations |
//! | [`ManualExecutor`] | when you call `run_*`, on your thread | tests, an event loop, a donated thread |
//! | [`ThreadPerTask`] | on a new named thread each time | blocking calls |
//! | [`Strand`] | one at a time, in order, on another executor | state without a lock |
//! | [`PriorityExecutor`] | highest priority first, on another executor | urgent work first |
//!
//! Every executor is a cheap `Clone` handle, and [`Exec`] holds any of them,
//! including your own: [`Executor`] has one required method.
//!
//! ```
//! use viaduct::prelude::*;
//! use viaduct::{block_on, Inline, ManualExecutor, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(2).name("cpu").build().unwrap();
//!
//! // Spawn a future, or run a closure; both give a handle to await.
//! let answer = pool.spawn(async { 6 * 7 });
//! let name = pool.run(|| std::thread::current().name().unwrap().to_owned());
//! assert_eq!(block_on(answer).unwrap(), 42);
//! assert!(block_on(name).unwrap().starts_with("cpu-"));
//!
//! // A manual executor runs only when told to.
//! let manual = ManualExecutor::new();
//! let h = manual.run(|| "later");
//! assert!(!h.is_finished());
//! manual.run_until_idle();
//! assert_eq!(block_on(h).unwrap(), "later");
//!
//! // Inline runs on the spot.
//! assert!(Inline.run(|| ()).is_finished());
//! ```
//!
//! # Errors, panics and refused work
//!
//! A [`JoinHandle`] resolves to `Result<T, TaskError>`: a panicking task
//! gives [`TaskError::Panicked`] with its [`Panic`] (the worker thread lives
//! on), an aborted or shut-down one [`TaskError::Cancelled`], and a spawn on
//! a closed executor [`TaskError::Rejected`]. Dropping a handle detaches the
//! task; a detached task's panic goes to the pool's
//! [`on_unobserved_panic`](pool::Builder::on_unobserved_panic) hook. The
//! `try_` variants hand refused work back instead, so nothing is lost:
//!
//! ```
//! use viaduct::prelude::*;
//! use viaduct::{block_on, Inline, RejectReason, TaskError, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(1).build().unwrap();
//! let err = block_on(pool.run(|| -> u8 { panic!("bad input") })).unwrap_err();
//! assert_eq!(err.panic_message(), Some("bad input"));
//!
//! pool.close();
//! assert!(matches!(block_on(pool.spawn(async {})), Err(TaskError::Rejected(RejectReason::Closed))));
//! let fut = pool.try_spawn(async { 5 }).unwrap_err().into_inner();
//! assert_eq!(block_on(Inline.spawn(fut)).unwrap(), 5);
//! ```
//!
//! # Continuations: where each step runs
//!
//! A handle's `then` runs the next step on the executor the handle's task
//! ran on; `via(&ex)` changes it for the steps that follow. An error skips
//! `then` steps and reaches the first `then_try` (folly's `thenValue` and
//! `thenTry`). Any future gets `.via(&ex)` from [`ViaExt`], and
//! [`hop_to`] moves the running task itself. Handles compose with what
//! `futures` has (`join_all`, `select`); see [`future`] for both.
//!
//! ```
//! use viaduct::prelude::*;
//! use viaduct::{block_on, Inline, ThreadPool};
//!
//! let cpu = ThreadPool::builder().threads(1).name("cpu").build().unwrap();
//! let io = ThreadPool::builder().threads(1).name("io").build().unwrap();
//! let here = || std::thread::current().name().unwrap().to_owned();
//! let (go, gate) = std::sync::mpsc::channel::<()>();
//! let steps = cpu
//!     .run(move || vec![here()])                          // on cpu
//!     .then(move |mut v| { v.push(here()); v })           // on cpu: a handle keeps its executor
//!     .via(&io)
//!     .then(move |mut v| { gate.recv().unwrap(); v.push(here()); v }) // on io
//!     .via(&Inline)
//!     .then(move |mut v| { v.push(here()); v });          // on whichever thread finished the step before
//! go.send(()).unwrap(); // the io step finishes after the Inline step is attached
//! assert_eq!(block_on(steps).unwrap(), ["cpu-0", "cpu-0", "io-0", "io-0"]);
//! ```
//!
//! # Strands: serial executors and async mutexes
//!
//! A [`Strand`] runs what is submitted to it one at a time, in submission
//! order, on the executor it decorates, without a thread of its own and
//! without holding one between batches. [`Guarded<T>`] is data owned by a
//! strand: `with` runs a section on the strand, `lock().await` gives a guard
//! in your own task. [`KeyedStrands`] gives each key its own strand (serial
//! tags).
//!
//! ```
//! use viaduct::prelude::*;
//! use viaduct::{block_on, Guarded, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(2).build().unwrap();
//! let hits = Guarded::new(pool.clone(), 0u32);
//! let tasks: Vec<_> = (0..4)
//!     .map(|_| {
//!         let hits = hits.clone();
//!         pool.spawn(async move {
//!             *hits.lock().await += 1;            // a section in this task
//!             hits.with(|h| *h += 1).await.unwrap(); // a section on the strand
//!         })
//!     })
//!     .collect();
//! for t in tasks {
//!     block_on(t).unwrap();
//! }
//! assert_eq!(block_on(hits.with(|h| *h)).unwrap(), 8);
//! ```
//!
//! # Time
//!
//! [`time`] has runtime-agnostic `sleep`, `timeout` and `interval` (they work
//! under tokio and `futures::executor` too), a manual clock for
//! deterministic tests ([`time::Timer::manual`]), and timed jobs on every
//! executor through [`TimedExt`]:
//!
//! ```
//! use std::time::Duration;
//! use viaduct::prelude::*;
//! use viaduct::{block_on, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(1).build().unwrap();
//! let later = pool.execute_after(Duration::from_millis(5), || "done");
//! assert_eq!(block_on(later).unwrap(), "done");
//! ```
//!
//! # `block_on` and fork-join
//!
//! [`block_on`] runs a future to completion on the calling thread; on a pool
//! worker it runs the pool's work while it waits, so a task may wait for its
//! own children even on a one-thread pool. [`ThreadPool::join`] is
//! rayon-style fork-join of closures that borrow from the stack.
//!
//! ```
//! use viaduct::ThreadPool;
//!
//! let pool = ThreadPool::builder().threads(2).build().unwrap();
//! let data = vec![1, 2, 3, 4];
//! let (left, right) = pool.join(|| data[..2].iter().sum::<i32>(), || data[2..].iter().sum::<i32>());
//! assert_eq!(left + right, 10);
//! ```
//!
//! # Guarantees
//!
//! - Every accepted task runs exactly once, or its handle says why not
//!   (`Cancelled`); refused work is handed back (`try_*`) or reported
//!   (`Rejected`).
//! - A panic never kills a worker thread and never wedges an executor.
//! - A strand's sections never overlap and run in submission order; a
//!   dropped guard or lock future never wedges it.
//! - A timer never fires early.
//!
//! The README's Guarantees section lists each executor's promises with the
//! test that proves each one.
#![doc(test(attr(deny(warnings, rust_2018_idioms))))]
#![warn(rust_2018_idioms, missing_docs, unreachable_pub)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod block_on;
pub mod cancel;
mod error;
mod executor;
pub mod future;
mod inline;
mod join_set;
mod loom;
mod manual;
pub mod metrics;
pub mod pool;
pub mod prelude;
pub mod priority;
mod scope;
mod section;
mod signal;
mod spawn;
pub mod strand;
mod task;
mod thread_per_task;
pub mod time;
mod trace;

pub use block_on::block_on;
pub use error::{Panic, PanicPayload, RejectReason, TaskError};
pub use executor::{Exec, Executor, Runnable, TaskInfo};
pub use future::{hop_to, try_hop_to, HopError, ViaExt};
pub use inline::Inline;
pub use join_set::JoinSet;
pub use manual::ManualExecutor;
pub use pool::ThreadPool;
pub use priority::PriorityExecutor;
pub use scope::{Scope, ScopedJoinHandle};
pub use spawn::{ExecutorExt, Rejected};
pub use strand::{Guarded, KeyedStrands, Strand};
pub use task::{AbortHandle, JoinHandle};
pub use thread_per_task::ThreadPerTask;
pub use time::TimedExt;

/// Spawns `future` on the [global pool](ThreadPool::global).
///
/// # Examples
///
/// ```
/// assert_eq!(viaduct::block_on(viaduct::spawn(async { 3 })).unwrap(), 3);
/// ```
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    ThreadPool::global().spawn(future)
}

/// Runs `f` on the [global pool](ThreadPool::global).
///
/// # Examples
///
/// ```
/// assert_eq!(viaduct::block_on(viaduct::run(|| 2 + 2)).unwrap(), 4);
/// ```
pub fn run<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    ThreadPool::global().run(f)
}

/// [`ThreadPool::scope`] on the [global pool](ThreadPool::global): tasks
/// that borrow from the caller, all ended when this returns.
///
/// # Examples
///
/// ```
/// let names = vec!["ada".to_owned(), "grace".to_owned()];
/// let lengths = viaduct::scope(|s| {
///     let handles: Vec<_> = names.iter().map(|n| s.run(move || n.len())).collect();
///     handles.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
/// });
/// assert_eq!(lengths, [3, 5]);
/// ```
pub fn scope<'env, F, R>(f: F) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    ThreadPool::global().scope(f)
}

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
