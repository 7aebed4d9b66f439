//! Continuations and hops: choosing, step by step, where work runs.
//!
//! Three tools, as in boost's `async(ex, f).then(ex2, g)`, folly's
//! `via(e).thenValue(f)` and folly fibers' `TeleportTo` another pool:
//!
//! - [`JoinHandle::then`], [`then_try`](JoinHandle::then_try) and
//!   [`then_async`](JoinHandle::then_async) chain a step onto a task; each
//!   step is a task of its own and returns a [`JoinHandle`].
//!   [`JoinHandle::via`] picks the executor for the steps that follow.
//! - [`ViaExt::via`] spawns any future on an executor, so a chain can start
//!   from a future as well as from [`ExecutorExt::run`].
//! - [`hop_to`] moves the running task itself to another executor.
//!
//! # Chains
//!
//! A step runs on the executor of the handle it is chained to: the one its
//! task runs on, unless [`via`](JoinHandle::via) chose another. Errors skip
//! the value steps and arrive at the first [`then_try`](JoinHandle::then_try),
//! which sees the whole `Result`:
//!
//! ```
//! use viaduct::{block_on, ExecutorExt, Inline, TaskError, ThreadPool};
//!
//! let cpu = ThreadPool::builder().threads(2).name("cpu").build().unwrap();
//! let io = ThreadPool::builder().threads(1).name("io").build().unwrap();
//!
//! let report = cpu
//!     .run(|| "12,30,7".to_owned())                          // on cpu
//!     .then(|text| -> Vec<u32> {                             // on cpu
//!         text.split(',').map(|n| n.parse().unwrap()).collect()
//!     })
//!     .via(&Inline)
//!     .then(|mut v| { v.sort(); v })                         // where cpu finished
//!     .via(&io)
//!     .then_try(|r: Result<Vec<u32>, TaskError>| match r {   // on io
//!         Ok(v) => format!("sorted {v:?}"),
//!         Err(e) => format!("failed: {e}"),
//!     });
//! assert_eq!(block_on(report).unwrap(), "sorted [7, 12, 30]");
//! ```
//!
//! On [`Inline`](crate::Inline) a step runs on the thread that completed the
//! step before it, as that step completes, and a chain of any length runs
//! in constant stack. Dropping the last handle of a chain detaches it: every
//! step still runs. [`abort`](JoinHandle::abort) on it cancels every step
//! that has not started yet.
//!
//! # Composing handles with `futures`
//!
//! A [`JoinHandle`] is a plain `Future<Output = Result<T, TaskError>>`, so
//! the combinators of the `futures` crate take handles as they are; viaduct
//! does not repeat them. Wait for all of them, collecting every result:
//!
//! ```
//! use futures::future::join_all;
//! use viaduct::{block_on, ExecutorExt, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(2).build().unwrap();
//! let squares = (1..=4u64).map(|i| pool.run(move || i * i).then(|sq| sq + 1));
//! let results = block_on(join_all(squares));
//! let values: Vec<u64> = results.into_iter().map(Result::unwrap).collect();
//! assert_eq!(values, [2, 5, 10, 17]);
//! ```
//!
//! Stop at the first error instead (`try_join_all` stops waiting; the other
//! tasks run on, detached, unless you abort them):
//!
//! ```
//! use futures::future::try_join_all;
//! use viaduct::{block_on, ExecutorExt, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(2).build().unwrap();
//! let ok = (1..=3).map(|i| pool.run(move || i));
//! assert_eq!(block_on(try_join_all(ok)).unwrap(), [1, 2, 3]);
//!
//! let one_fails = (1..=3).map(|i| pool.run(move || if i == 2 { panic!("bad input {i}") } else { i }));
//! let err = block_on(try_join_all(one_fails)).unwrap_err();
//! assert_eq!(err.panic_message(), Some("bad input 2"));
//! ```
//!
//! Take whichever finishes first, and cancel the other with
//! [`abort`](JoinHandle::abort) (dropping it would only detach it):
//!
//! ```
//! use futures::future::{select, Either};
//! use viaduct::{block_on, ExecutorExt, ManualExecutor, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(1).build().unwrap();
//! let never_run = ManualExecutor::new(); // nobody drives it
//! let fast = pool.run(|| "pool");
//! let slow = never_run.run(|| "manual");
//! match block_on(select(fast, slow)) {
//!     Either::Left((winner, loser)) => {
//!         assert_eq!(winner.unwrap(), "pool");
//!         loser.abort();
//!         never_run.run_until_idle(); // drops the aborted task, unrun
//!         assert!(block_on(loser).unwrap_err().is_cancelled());
//!     }
//!     Either::Right(_) => unreachable!("the manual executor never ran"),
//! }
//! ```
//!
//! # Hopping between executors
//!
//! [`hop_to`] moves the task that awaits it: the code after
//! `hop_to(&ex).await` runs on `ex`. A task can do its CPU work on one pool,
//! its blocking I/O on another, and come back:
//!
//! ```
//! use viaduct::{block_on, hop_to, ExecutorExt, ThreadPool};
//!
//! let cpu = ThreadPool::builder().threads(2).name("cpu").build().unwrap();
//! let io = ThreadPool::builder().threads(1).name("io").build().unwrap();
//! let (cpu2, io2) = (cpu.clone(), io.clone());
//! let task = cpu.spawn(async move {
//!     let mut seen = vec![ThreadPool::current().unwrap().same_pool(&cpu2)];
//!     hop_to(&io2).await;
//!     seen.push(ThreadPool::current().unwrap().same_pool(&io2));
//!     hop_to(&cpu2).await;
//!     seen.push(ThreadPool::current().unwrap().same_pool(&cpu2));
//!     seen
//! });
//! assert_eq!(block_on(task).unwrap(), [true, true, true]);
//! ```
//!
//! Hopping into a [`Strand`](crate::Strand) and back out makes the code
//! between the two hops a critical section, run one task at a time, in the
//! order the tasks arrived (folly's `TeleportGuard`). Unlike a mutex guard
//! it is not held across a thread: the task is *on* the strand.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
//! use std::sync::Arc;
//! use viaduct::{block_on, hop_to, ExecutorExt, Strand, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(2).build().unwrap();
//! let strand = Strand::new(pool.clone());
//! let count = Arc::new(AtomicUsize::new(0));
//! let tasks: Vec<_> = (0..4)
//!     .map(|_| {
//!         let (home, strand, count) = (pool.clone(), strand.clone(), count.clone());
//!         pool.spawn(async move {
//!             hop_to(&strand).await;
//!             // One task at a time here: a load and a store lose nothing.
//!             count.store(count.load(Relaxed) + 1, Relaxed);
//!             hop_to(&home).await;
//!         })
//!     })
//!     .collect();
//! for t in tasks {
//!     block_on(t).unwrap();
//! }
//! assert_eq!(count.load(Relaxed), 4);
//! ```

mod hop;
mod then;
mod via;

pub use hop::{hop_to, try_hop_to, Hop, HopError, TryHop};
pub use via::ViaExt;

#[cfg(doc)]
use crate::{spawn::ExecutorExt, task::JoinHandle};
