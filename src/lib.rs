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
//! [structured work and cancellation](#structured-work-and-cancellation),
//! [viaduct inside a tokio server](#viaduct-inside-a-tokio-server),
//! [testing with the simulation](#testing-with-the-simulation),
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
//! # Structured work and cancellation
//!
//! Three tools keep work inside the code that started it:
//!
//! - [`ThreadPool::scope`] (and [`scope()`] on the global pool): tasks that
//!   borrow from the caller, all ended when `scope` returns; waiting helps
//!   the pool, so a scope inside a task of a one-thread pool is fine.
//! - [`JoinSet`]: tasks on any executors, awaited in the order they end,
//!   aborted together when the set is dropped.
//! - [`cancel::CancellationToken`]: one call stops a whole tree of work;
//!   [`spawn_cancellable`](ExecutorExt::spawn_cancellable) aborts a task
//!   when its token fires, even while it waits: its executor drops the
//!   future at its next turn, and its handle then says `Cancelled`.
//!
//! ```
//! use std::time::Duration;
//! use viaduct::cancel::CancellationToken;
//! use viaduct::prelude::*;
//! use viaduct::{block_on, JoinSet, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(2).build().unwrap();
//!
//! // Borrow, fan out, join: no 'static, no Arc.
//! let words = ["tokio", "rayon", "asio"];
//! let total: usize = pool.scope(|s| {
//!     let lens: Vec<_> = words.iter().map(|w| s.run(move || w.len())).collect();
//!     lens.into_iter().map(|h| h.join().unwrap()).sum()
//! });
//! assert_eq!(total, 14);
//!
//! // A group of workers, stopped by one token.
//! let stop = CancellationToken::new();
//! let mut workers = JoinSet::new();
//! for id in 0..3u32 {
//!     let stop = stop.child_token();
//!     workers.spawn_on(
//!         async move {
//!             let mut rounds = 0u32;
//!             while !stop.is_cancelled() {
//!                 viaduct::time::sleep(Duration::from_millis(1)).await; // a round of work
//!                 rounds += 1;
//!             }
//!             (id, rounds)
//!         },
//!         &pool,
//!     );
//! }
//! // A task that would wait forever is dropped when the token fires.
//! let stuck = pool.spawn_cancellable(&stop, std::future::pending::<()>());
//! stop.cancel();
//! assert!(block_on(stuck).unwrap_err().is_cancelled());
//! let mut ended = block_on(workers.join_all()); // in the order they ended
//! ended.sort();
//! assert_eq!(ended.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [0, 1, 2]);
//! ```
//!
//! A continuation step that starts more work returns its handle through
//! [`and_then`](JoinHandle::and_then), which flattens it.
//!
//! # viaduct inside a tokio server
//!
//! tokio owns the sockets; viaduct adds a CPU pool that never deadlocks on
//! waits, strands and `Guarded` state, continuations across executors, and
//! timers. Both sides' futures run on the other: a viaduct handle, lock or
//! timer is an ordinary future a tokio task awaits, and tokio's sockets and
//! timers work inside viaduct tasks that run on tokio's threads.
//!
//! The adapters ship behind features (all off by default, so the default
//! build pulls in none of these crates): `tokio`, `hyper` and `rayon`,
//! in [`compat`]. With `tokio`,
//! [`TokioExecutor`](compat::tokio::TokioExecutor) runs viaduct tasks
//! (and strands, `via`, [`hop_to`]) on tokio's workers, where tokio's I/O
//! is at hand, and
//! [`Builder::enter_tokio`](pool::Builder::enter_tokio) makes a pool's
//! own workers able to use tokio's sockets, timers and `tokio::spawn`:
//!
//! ```
//! # #[cfg(feature = "tokio")] {
//! use viaduct::compat::tokio::TokioExecutor;
//! use viaduct::prelude::*;
//! use viaduct::{hop_to, Guarded, ThreadPool};
//!
//! let rt = tokio::runtime::Builder::new_multi_thread()
//!     .worker_threads(2)
//!     .thread_name("tokio")
//!     .enable_all()
//!     .build()
//!     .unwrap();
//! let tokio_ex = TokioExecutor::new(rt.handle().clone());
//! let cpu = ThreadPool::builder()
//!     .threads(2)
//!     .name("cpu")
//!     .enter_tokio(rt.handle().clone()) // tokio's timers and sockets work in its tasks too
//!     .build()
//!     .unwrap();
//! let rooms = Guarded::new(tokio_ex.clone(), Vec::<String>::new());
//!
//! let (back, pool, r) = (tokio_ex.clone(), cpu.clone(), rooms.clone());
//! // A viaduct task on tokio's threads: it may hop, and use tokio's I/O.
//! let trip = tokio_ex.spawn(async move {
//!     tokio::time::sleep(std::time::Duration::from_millis(1)).await;
//!     hop_to(&pool).await; // CPU work off tokio's workers
//!     let digest = (1..=1000u64).sum::<u64>();
//!     tokio::time::sleep(std::time::Duration::from_millis(1)).await; // on the pool, entered
//!     hop_to(&back).await;
//!     r.lock().await.push(format!("digest {digest}"));
//!     std::thread::current().name().unwrap().to_owned()
//! });
//! rt.block_on(async {
//!     // Plain tokio tasks await viaduct handles and locks as they are.
//!     assert_eq!(trip.await.unwrap(), "tokio");
//!     let len = cpu.run(|| "from the pool".len()).await.unwrap();
//!     rooms.lock().await.push(format!("len {len}"));
//!     assert_eq!(*rooms.lock().await, ["digest 500500", "len 13"]);
//! });
//! # }
//! ```
//!
//! For data parallelism, use rayon: its parallel iterators are what it is
//! for. [`RayonExecutor`](compat::rayon::RayonExecutor) (feature `rayon`)
//! lets viaduct hand it work and chain what comes back; rayon's workers
//! and viaduct's then share the work of one request:
//!
//! ```
//! # #[cfg(feature = "rayon")] {
//! use std::sync::Arc;
//! use rayon::prelude::*;
//! use viaduct::compat::rayon::RayonExecutor;
//! use viaduct::prelude::*;
//! use viaduct::{block_on, Guarded, ThreadPool};
//!
//! let rayon = RayonExecutor::new(Arc::new(rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap()));
//! let pool = ThreadPool::builder().threads(1).build().unwrap();
//! let totals = Guarded::new(pool, 0u64);
//! let t = totals.clone();
//! let added = rayon
//!     .run(|| (1..=100_000u64).into_par_iter().map(|x| x % 7).sum::<u64>()) // on rayon
//!     .and_then(move |sum| t.with(move |total| { *total += sum; *total }));   // under the strand
//! assert_eq!(block_on(added).unwrap(), 300_000);
//! # }
//! ```
//!
//! What each call costs from a task of another runtime (a tokio task, say):
//!
//! | call | what happens |
//! |---|---|
//! | `guarded.lock().await` | a drop-in for `tokio::sync::Mutex`: FIFO, held across `.await`, granted in the awaiting task; no task, no thread hop (about 85 ns a section, `BENCHMARKS.md`) |
//! | `guarded.with(f).await` | `f` cannot run on the spot (the caller is not on the strand's executor), so it is queued as a task there and the caller is woken when it is done: a round trip |
//! | `handle.then(f)`, `and_then` | each step is a task on the handle's executor |
//! | `pool.run(f).await` | a task on the pool; the tokio worker is free meanwhile |
//! | a viaduct task on `TokioExecutor` | every wake-up is a tokio task of its own (an allocation and tokio's bookkeeping): fine for a hop or a short job; for a long-lived task woken often (a connection), spawn it on tokio and keep its handle (`examples/chat.rs` keeps such handles in a [`JoinSet`]; aborting one only asks tokio to cancel the task, it does not wait for it to end) |
//! | `viaduct::time::sleep(d).await` | an entry in viaduct's timer wheel; works under any runtime |
//! | `pool.scope(..)`, `handle.join()`, [`block_on`] | block the calling thread until done: call them on the pool (`pool.run(..)`) or in `spawn_blocking`, not on a tokio worker |
//!
//! Two calls go wrong from a plain tokio task:
//!
//! - [`block_on`] blocks the tokio worker it runs on: tokio cannot run its
//!   other tasks there meanwhile. On a current-thread runtime it would
//!   deadlock if the awaited work needs that runtime; with the `tokio`
//!   feature it panics there at once instead, saying so. `.await` the
//!   handle instead.
//! - [`hop_to`] moves the viaduct task it is awaited in; a tokio task is
//!   not one, so it panics ([`try_hop_to`] says
//!   [`HopError::NotInTask`]). Spawn the work as a viaduct task (on a
//!   `TokioExecutor` to stay on tokio's threads) and hop there, or use
//!   `pool.run(..).await`.
//!
//! ```
//! use viaduct::prelude::*;
//! use viaduct::{try_hop_to, HopError, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(1).build().unwrap();
//! let rt = tokio::runtime::Runtime::new().unwrap();
//! rt.block_on(async {
//!     assert_eq!(try_hop_to(&pool).await, Err(HopError::NotInTask));
//!     assert_eq!(pool.run(|| 6 * 7).await.unwrap(), 42); // the way to do it
//! });
//! ```
//!
//! `examples/chat.rs` puts it together: a TCP chat server on tokio's I/O,
//! rooms in `Guarded`, digests on a viaduct pool with a continuation into
//! the room, idle timeouts and a stats job on viaduct's timers, and the
//! connections (tokio tasks) in a `JoinSet` stopped by one token.
//!
//! # An axum or hyper app with its CPU work on viaduct
//!
//! A handler (axum's, hyper's `service_fn`) is a future on tokio; a
//! viaduct handle is a plain future it awaits. So the smallest change is
//! to send the CPU work to a pool and await it: tokio's workers stay free
//! for I/O, and the pool never deadlocks on waits inside it.
//!
//! ```
//! use viaduct::prelude::*;
//! use viaduct::ThreadPool;
//!
//! /// A handler's body: the CPU part on the pool, the rest where it runs.
//! async fn thumbnail(pool: &ThreadPool, image: Vec<u8>) -> usize {
//!     pool.run(move || image.iter().map(|b| *b as usize).sum::<usize>())
//!         .await
//!         .expect("the pool is open")
//! }
//!
//! let pool = ThreadPool::builder().threads(2).name("cpu").build().unwrap();
//! let rt = tokio::runtime::Runtime::new().unwrap();
//! assert_eq!(rt.block_on(thumbnail(&pool, vec![1, 2, 3])), 6);
//! ```
//!
//! To serve the connections themselves on a viaduct pool, turn on the
//! `tokio` and `hyper` features: build the pool with
//! [`tokio_reactor`](pool::Builder::tokio_reactor) (its workers then
//! drive tokio's sockets and timers themselves), spawn each connection
//! with [`HyperExecutor`](compat::hyper::HyperExecutor), and give hyper
//! viaduct's timer with [`HyperTimer`](compat::hyper::HyperTimer).
//! `examples/http.rs` is such a server, with a load test against the same
//! server on plain tokio (BENCHMARKS.md has the figures). A pool that
//! only [entered](pool::Builder::enter_tokio) a runtime running elsewhere
//! works too, but each wake-up then crosses from that runtime's thread to
//! the pool.
//!
//! # Limiting concurrency
//!
//! A well-kept semaphore works on any executor: async-lock's, or
//! `tokio::sync::Semaphore`. There is no need to write one.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//! use std::time::Duration;
//! use viaduct::prelude::*;
//! use viaduct::{block_on, time, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(4).build().unwrap();
//! let limit = Arc::new(async_lock::Semaphore::new(2)); // at most 2 at once
//! let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
//! let calls: Vec<_> = (0..10)
//!     .map(|_| {
//!         let (limit, running, peak) = (limit.clone(), running.clone(), peak.clone());
//!         pool.spawn(async move {
//!             let _permit = limit.acquire().await;
//!             let now = running.fetch_add(1, Ordering::SeqCst) + 1;
//!             peak.fetch_max(now, Ordering::SeqCst);
//!             time::sleep(Duration::from_millis(1)).await; // a call to a backend
//!             running.fetch_sub(1, Ordering::SeqCst);
//!         })
//!     })
//!     .collect();
//! for call in calls {
//!     block_on(call).unwrap();
//! }
//! assert!(peak.load(Ordering::SeqCst) <= 2);
//! ```
//!
//! # Testing with the simulation
//!
//! A test of concurrent code that passes a thousand times may still hide
//! a schedule that breaks it. [`sim`] runs viaduct itself (the
//! work-stealing pool's queues, strands, `Guarded`, `KeyedStrands`,
//! priorities, continuations, `JoinSet`, tokens, timers, `join` and
//! scopes) on one thread, with every choice drawn from a seed: which task
//! runs next, where a task is stopped at an await point although what it
//! awaits is ready, and which of the timers due together fires first. So
//! a seed is a schedule: [`sim::check`] tries many and names the first
//! that fails, and replays it exactly, as often as you need to debug it.
//! By default the choices are PCT's ([`sim::Strategy::Pct`]): a few
//! preemptions per run, at random await points, which finds a bug that
//! needs a few preemptions at the right places with a probability that
//! does not shrink as the program grows; in the bug zoo
//! (`benches/sim_zoo.rs`) it takes fewer seeds than shuttle's PCT for
//! every bug.
//!
//! ```
//! use std::time::Duration;
//! use viaduct::prelude::*;
//! use viaduct::Guarded;
//!
//! // A counter whose updates are sections: no schedule of 500 loses one.
//! viaduct::sim::check(0..500, |sim| {
//!     let ex = sim.executor();
//!     async move {
//!         let hits = Guarded::new(ex.clone(), 0u32);
//!         let tasks: Vec<_> = (0..3)
//!             .map(|i| {
//!                 let hits = hits.clone();
//!                 ex.spawn(async move {
//!                     viaduct::time::sleep(Duration::from_millis(i)).await; // virtual time
//!                     hits.with(|h| *h += 1).await.unwrap();
//!                 })
//!             })
//!             .collect();
//!         for t in tasks {
//!             t.await.unwrap();
//!         }
//!         assert_eq!(hits.with(|h| *h).await.unwrap(), 3);
//!     }
//! });
//! ```
//!
//! When a seed fails, `check` shrinks the run: it cuts away every
//! departure from a plain order (run the task that ran last while it
//! can, else the one waiting longest) that the failure does not need, and
//! prints what is left, usually a preemption or two, as a replay string:
//!
//! ```text
//! viaduct::sim::check: seed 1 failed: a simulated task panicked: money appeared
//! It fails the same way every time (trace 0x…). Shrunk to 1 preemption(s),
//! 2 departure(s) from the default order, in 9 runs: replay it with
//!     Simulation::replay("v1;seed=1;workers=4;run=1.1=0,1.1>2;check=1b3e")
//! and the same program, or the whole run with the same check over the same seeds.
//! ```
//!
//! `Simulation::replay` runs that schedule again, in a test of its own or
//! under a debugger, and keeps doing so after edits that leave the order
//! of spawns and awaits alone; a replay that no longer fits the program
//! says so ([`SimError::ReplayMismatch`](sim::SimError::ReplayMismatch))
//! rather than run another schedule. The default strategy,
//! [`Strategy::Pct`](sim::Strategy::Pct) at depth 3, looks for bugs that
//! need up to two preemptions at exact places; a deeper bug wants a
//! greater depth, set with
//! [`Simulation::strategy`](sim::Simulation::strategy) and run by
//! [`Simulation::check`](sim::Simulation::check), and
//! [`Strategy::Random`](sim::Strategy::Random) makes many small
//! interleavings instead of a few exact ones.
//!
//! Time in a simulation is exact: work takes none, and a sleep of 10 ms
//! ends at 10 ms. Two tasks then only overlap when their waits end at the
//! same instant, and a race between a timeout and a reply, or between
//! jobs whose fetches end close together, never shows.
//! [`Simulation::jitter`](sim::Simulation::jitter) makes time loose: each
//! timer fires up to the jitter late and each poll may take up to it,
//! drawn from the seed like everything else. Run `check` over worlds made
//! that way with [`Simulation::check`](sim::Simulation::check):
//!
//! ```
//! use std::time::Duration;
//! use viaduct::prelude::*;
//! use viaduct::sim::Simulation;
//!
//! // A reply that takes 10 ms, awaited for 11 ms: never late on exact
//! // time, late once the server's work takes a little time.
//! let program = |sim: &Simulation| {
//!     let (t, ex) = (sim.timer(), sim.executor());
//!     async move {
//!         let (tx, rx) = futures::channel::oneshot::channel();
//!         let work = t.clone();
//!         drop(ex.spawn(async move {
//!             work.sleep(Duration::from_millis(10)).await;
//!             viaduct::coop::consume_budget().await; // a little more work
//!             let _ = tx.send(42);
//!         }));
//!         assert!(t.timeout(Duration::from_millis(11), rx).await.is_ok(), "too late");
//!     }
//! };
//! viaduct::sim::check(0..200, program); // passes
//! let jittery = Simulation::new(0).jitter(Duration::from_millis(2));
//! assert!(std::panic::catch_unwind(|| jittery.check(0..200, program)).is_err());
//! ```
//!
//! What it finds: lost updates between sections (a value read in one
//! section and written back in another, the bug `examples/simulation.rs`
//! finds by seed), orders your code assumed but no executor promises,
//! deadlocks (a run in which nothing can move ends in
//! [`SimError::Deadlock`](sim::SimError::Deadlock) with the task dump and
//! its wait-for cycles, not in a hang), timeouts that fire in the
//! wrong order, and tasks that never stop waking
//! ([`SimError::StepLimit`](sim::SimError::StepLimit)). The one thing it
//! cannot stop is a poll that never returns: a loop with no `.await`, or
//! a blocking call, holds the thread everything runs on. Time is virtual:
//! the clock jumps to the next deadline when nothing can run, so a
//! simulated hour of one-second ticks takes milliseconds.
//!
//! What escapes it, and breaks determinism: real threads, the real clock
//! (`std::time::Instant::now`), blocking calls (they block the one thread
//! everything runs on), and work spawned on a real pool or runtime by
//! name. Inside [`Simulation::block_on`](sim::Simulation::block_on),
//! [`spawn`], [`run`], [`JoinSet::spawn`], the [`time`] functions,
//! [`TimedExt`], `join` and scopes use the simulated pool and clock;
//! name the simulation's [`executor`](sim::Simulation::executor) and
//! [`timer`](sim::Simulation::timer) everywhere else. [`check`](sim::check)
//! runs a failing seed twice and tells you when the replay differs, which
//! means something escaped.
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

mod admission;
mod block_on;
pub mod cancel;
#[cfg(any(feature = "tokio", feature = "hyper", feature = "rayon"))]
pub mod compat;
mod context;
pub mod coop;
mod dropping;
pub mod dump;
mod embedded;
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
mod run_queue;
mod scope;
mod section;
mod signal;
pub mod sim;
mod slab;
mod spawn;
pub mod strand;
mod successor;
mod task;
mod task_id;
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
pub use task_id::TaskId;
pub use thread_per_task::ThreadPerTask;
pub use time::TimedExt;

/// Spawns `future` on the [global pool](ThreadPool::global) (the simulated
/// pool inside a [simulation](sim)).
///
/// # Examples
///
/// ```
/// assert_eq!(viaduct::block_on(viaduct::spawn(async { 3 })).unwrap(), 3);
/// ```
#[track_caller]
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    match spawn::ambient_executor() {
        Some(ambient) => ambient.spawn(future),
        None => ThreadPool::global().spawn(future),
    }
}

/// Runs `f` on the [global pool](ThreadPool::global) (the simulated pool
/// inside a [simulation](sim)).
///
/// # Examples
///
/// ```
/// assert_eq!(viaduct::block_on(viaduct::run(|| 2 + 2)).unwrap(), 4);
/// ```
#[track_caller]
pub fn run<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    match spawn::ambient_executor() {
        Some(ambient) => ambient.run(f),
        None => ThreadPool::global().run(f),
    }
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
