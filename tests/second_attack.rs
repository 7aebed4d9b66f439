//! Regressions for the faults a second outside attack found in 0.2, one
//! group per fault (numbered as in the issue): false deadlocks in live
//! dumps, scopes that hang inside strand sections and simulations, pools
//! that abort or crawl when built, and finished values lost to an abort.
//! Every test here failed (hung, aborted or asserted) before the fix; a
//! hang fails the test within `support::DEADLINE` instead of stalling CI.

#[allow(dead_code)] // not every helper is used here
mod support;

use std::future::Future;
use std::panic::catch_unwind;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{pool, within};
use viaduct::cancel::CancellationToken;
use viaduct::dump::WaitsOn;
use viaduct::pool::{BuildError, MAX_THREADS, MIN_STACK_SIZE};
use viaduct::sim::Simulation;
use viaduct::{block_on, ExecutorExt, Guarded, JoinHandle, TaskError, ThreadPool};

/// The message of a caught panic.
fn message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

// 1. Live task dumps report deadlocks that cannot exist.

/// 64 tasks on a 2-thread pool lock two `Guarded` values, always in the
/// same order, so no cycle can exist; about 6 % of the dumps taken while
/// they ran reported one (a task waiting on a lock "held" by itself, or
/// two tasks each shown holding the lock both wait on), because a dump
/// read the waits first and each lock's holder later, once per wait.
/// Thousands of dumps under that churn now report none.
#[test]
fn dumps_under_churn_never_report_a_deadlock_that_cannot_exist() {
    within("dumps under churn", || {
        let pool = pool("churn", 2);
        let (a, b) = (
            Guarded::new(pool.clone(), 0u64),
            Guarded::new(pool.clone(), 0u64),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..64)
            .map(|_| {
                let (a, b, stop) = (a.clone(), b.clone(), stop.clone());
                pool.spawn(async move {
                    let mut rounds = 0u64;
                    while !stop.load(SeqCst) {
                        let mut first = a.lock().await;
                        let mut second = b.lock().await;
                        *first += 1;
                        *second += 1;
                        rounds += 1;
                    }
                    rounds
                })
            })
            .collect();
        let (mut dumps, mut waits) = (0, 0);
        let started = Instant::now();
        while dumps < 20_000 || started.elapsed() < Duration::from_secs(1) {
            let dump = pool.dump();
            let deadlocks = dump.deadlocks();
            assert!(
                deadlocks.is_empty(),
                "dump {dumps} found an impossible cycle:\n{dump}"
            );
            waits += dump
                .tasks()
                .iter()
                .filter(|t| !t.waits_on().is_empty())
                .count();
            dumps += 1;
        }
        stop.store(true, SeqCst);
        let rounds: u64 = workers.into_iter().map(|w| block_on(w).unwrap()).sum();
        assert_eq!(*block_on(a.lock()), rounds);
        assert!(waits > 0, "the dumps saw no task waiting: no churn to test");
        println!("{dumps} dumps, {waits} waits seen, {rounds} rounds");
    });
}

/// What makes a dump report a cycle still finds a real one under churn:
/// two tasks that lock two values in opposite orders deadlock while 32
/// others lock and unlock a third value, and the dump names exactly them.
#[test]
fn a_real_deadlock_is_still_found_under_churn() {
    within("a real deadlock under churn", || {
        let pool = pool("real", 2);
        let (a, b) = (
            Guarded::new(pool.clone(), ()),
            Guarded::new(pool.clone(), ()),
        );
        let busy = Guarded::new(pool.clone(), 0u64);
        let stop = Arc::new(AtomicBool::new(false));
        let churn: Vec<_> = (0..32)
            .map(|_| {
                let (busy, stop) = (busy.clone(), stop.clone());
                pool.spawn(async move {
                    while !stop.load(SeqCst) {
                        *busy.lock().await += 1;
                        viaduct::time::sleep(Duration::from_micros(50)).await;
                    }
                })
            })
            .collect();
        let (tx, rx) = std::sync::mpsc::channel();
        let opposite = |x: Guarded<()>, y: Guarded<()>| {
            let tx = tx.clone();
            pool.spawn(async move {
                let _x = x.lock().await;
                tx.send(()).unwrap();
                viaduct::time::sleep(Duration::from_millis(20)).await;
                let _y = y.lock().await;
            })
        };
        let first = opposite(a.clone(), b.clone());
        let second = opposite(b, a);
        rx.recv().unwrap();
        rx.recv().unwrap();
        let mut expected = vec![first.id().unwrap(), second.id().unwrap()];
        expected.sort();
        let cycle = loop {
            let deadlocks = pool.dump().deadlocks();
            if let Some(cycle) = deadlocks.first() {
                assert_eq!(deadlocks.len(), 1);
                break cycle.clone();
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let mut ids: Vec<_> = cycle.steps().iter().map(|s| s.task()).collect();
        ids.sort();
        assert_eq!(ids, expected);
        first.abort();
        second.abort();
        stop.store(true, SeqCst);
        for h in churn {
            block_on(h).unwrap();
        }
        assert!(block_on(first).unwrap_err().is_cancelled());
    });
}

// 2. A scope inside a strand section can hang forever.

/// A section opens a scope whose task awaits a section of that same
/// strand: nothing could ever run that section (the strand is held by the
/// section waiting for the scope). The task's wait panics at once, with
/// what to do instead, and the scope re-raises it in the section.
#[test]
fn a_scope_task_awaiting_its_sections_strand_panics_at_once() {
    within("scope in a section", || {
        let pool = pool("scoped-section", 2);
        let value = Guarded::new(pool.clone(), 1u32);
        let (p, v) = (pool.clone(), value.clone());
        let section = value.with(move |_| {
            p.scope(|s| {
                s.spawn(async { v.with(|n| *n + 1).await.unwrap() });
            })
        });
        let err = block_on(section).unwrap_err();
        let text = err.panic_message().unwrap_or_default().to_owned();
        assert!(
            text.contains("a task of a scope opened inside a section"),
            "{text}"
        );
        assert!(text.contains("Open the scope after the section"), "{text}");
        // The same through a lock of the value, and the value still works.
        let (p, v) = (pool.clone(), value.clone());
        let section = value.with(move |_| {
            p.scope(|s| {
                s.spawn(async {
                    *v.lock().await += 1;
                });
            })
        });
        assert!(block_on(section).unwrap_err().is_panic());
        assert_eq!(block_on(value.with(|n| *n)).unwrap(), 1);
    });
}

/// Where the wait on the strand is one step removed (the scope's task
/// awaits a task that awaits the section), nothing panics, but a dump
/// shows the cycle: the section's task waits on its scope's task, which
/// waits on the task queued behind the section, which waits on the
/// strand the section's task holds. Aborting the last ends it.
#[test]
fn a_dump_shows_the_cycle_through_a_scope_wait() {
    within("cycle through a scope", || {
        let pool = pool("scope-cycle", 2);
        let value = Guarded::new(pool.clone(), 0u32);
        let (tx, rx) = std::sync::mpsc::channel();
        let (p, v) = (pool.clone(), value.clone());
        let section = value.with(move |_| {
            let cancelled = AtomicBool::new(false);
            p.scope(|s| {
                let inner = p.spawn(async move {
                    *v.lock().await += 1;
                });
                tx.send(inner.abort_handle()).unwrap();
                let cancelled = &cancelled;
                s.spawn(async move {
                    cancelled.store(inner.await.unwrap_err().is_cancelled(), SeqCst);
                });
            });
            cancelled.load(SeqCst)
        });
        let inner = rx.recv().unwrap();
        let dump = loop {
            let dump = pool.dump();
            if !dump.deadlocks().is_empty() {
                break dump;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let cycle = &dump.deadlocks()[0];
        assert_eq!(cycle.steps().len(), 3, "{dump}");
        let kinds: Vec<&str> = cycle
            .steps()
            .iter()
            .map(|s| match s.waits_on() {
                WaitsOn::Scope { .. } => "scope",
                WaitsOn::Task(_) => "task",
                WaitsOn::Lock(_) => "lock",
                other => panic!("unexpected wait {other:?} in\n{dump}"),
            })
            .collect();
        let mut sorted = kinds.clone();
        sorted.sort();
        assert_eq!(sorted, ["lock", "scope", "task"], "{dump}");
        assert!(dump.to_string().contains("its scope's tasks"), "{dump}");
        assert!(cycle.steps().iter().any(|s| Some(s.task()) == inner.id()));
        inner.abort();
        assert!(
            block_on(section).unwrap(),
            "the scope's task read Cancelled"
        );
    });
}

// 3. A scope inside a simulated task on a real pool's worker hangs.

/// A simulation runs inside a task of a one-thread pool, and a simulated
/// task opens a scope on that pool without joining: the simulation said
/// nothing would wake, and the scope parked the pool's only worker for
/// good. Since 0.3 the scope's tasks are the simulation's, which its
/// wait runs; the pool's only worker is not needed.
#[test]
fn a_scope_of_the_pool_inside_a_simulation_on_its_only_worker_ends() {
    within("scope in a simulation", || {
        let pool = pool("sim-host", 1);
        let p = pool.clone();
        let outcome = pool.run(move || {
            let sim = Simulation::new(3).workers(2);
            sim.block_on(async move {
                let task = viaduct::spawn(async move {
                    let mut data = [1, 2, 3];
                    p.scope(|s| {
                        s.run(|| data.iter_mut().for_each(|x| *x *= 2));
                    });
                    data.iter().sum::<i32>()
                });
                task.await.unwrap()
            })
        });
        assert_eq!(block_on(outcome).unwrap().unwrap(), 12);
    });
}

/// The same with a simulation inside a task of another simulation: the
/// scope's tasks are the inner simulation's, which its wait runs (once,
/// the wait stepped out of both simulations, and stepping out of the
/// inner one only ran the outer world from inside its own task).
#[test]
fn a_scope_of_the_pool_inside_nested_simulations_ends() {
    within("scope in nested simulations", || {
        let pool = pool("nested-sim-host", 1);
        let p = pool.clone();
        let outcome = pool.run(move || {
            Simulation::new(5).workers(2).block_on(async move {
                let nested = viaduct::spawn(async move {
                    Simulation::new(7).workers(2).block_on(async move {
                        let task = viaduct::spawn(async move {
                            let mut data = [1, 2, 3];
                            p.scope(|s| {
                                s.run(|| data.iter_mut().for_each(|x| *x *= 3));
                            });
                            data.iter().sum::<i32>()
                        });
                        task.await.unwrap()
                    })
                });
                nested.await.unwrap()
            })
        });
        assert_eq!(block_on(outcome).unwrap().unwrap().unwrap(), 18);
    });
}

// 4. Huge thread counts abort the process.

/// `threads(1 << 40)` aborted on a failed allocation and
/// `threads(usize::MAX)` panicked with "capacity overflow": both are a
/// `BuildError` naming the limit now, and the limit itself is accepted as
/// far as the checks before any thread starts go.
#[test]
fn thread_counts_past_the_limit_are_a_build_error_not_an_abort() {
    for n in [1 << 40, usize::MAX, MAX_THREADS + 1] {
        let err = ThreadPool::builder().threads(n).build().unwrap_err();
        assert!(
            matches!(err, BuildError::TooManyThreads(m) if m == n),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&MAX_THREADS.to_string()) && text.contains(&n.to_string()),
            "{text}"
        );
    }
}

/// `Simulation::workers(1 << 40)` aborted the same way: it is a panic that
/// names the limit now, and the limit itself builds a world.
#[test]
fn a_simulation_with_too_many_workers_panics_naming_the_limit() {
    let err = catch_unwind(|| Simulation::new(7).workers(1 << 40)).unwrap_err();
    let text = message(err);
    assert!(text.contains(&MAX_THREADS.to_string()), "{text}");
    assert!(
        text.contains("Simulation::workers(1099511627776)"),
        "{text}"
    );
    let sim = Simulation::new(7).workers(MAX_THREADS);
    assert_eq!(sim.worker_count(), MAX_THREADS);
    assert_eq!(sim.block_on(async { 5 }).unwrap(), 5);
}

// 5. `stack_size(0)` builds.

/// A stack too small to run a task was accepted, and then every
/// `block_on` and `scope` inside a task panicked "nested too deep". It is
/// a `BuildError` at `build` now; the smallest stack accepted runs a task
/// that blocks on a child and opens a scope.
#[test]
fn a_stack_too_small_to_run_a_task_is_a_build_error() {
    for n in [0, 1, 4096, MIN_STACK_SIZE - 1] {
        let err = ThreadPool::builder().stack_size(n).build().unwrap_err();
        assert!(
            matches!(err, BuildError::StackTooSmall(m) if m == n),
            "{err:?}"
        );
        assert!(
            err.to_string().contains(&MIN_STACK_SIZE.to_string()),
            "{err}"
        );
    }
    within("a task on the smallest stack", || {
        let pool = ThreadPool::builder()
            .threads(1)
            .stack_size(MIN_STACK_SIZE)
            .build()
            .unwrap();
        let p = pool.clone();
        let outer = pool.spawn(async move {
            let child = block_on(p.spawn(async { 20 })).unwrap();
            let scoped = p.scope(|s| s.run(|| 2).join().unwrap());
            child + scoped
        });
        assert_eq!(block_on(outer).unwrap(), 22);
    });
}

// 7. An abort that lands during a task's last poll drops the finished value.

/// Busy for about `micros` microseconds: a poll long enough for an abort
/// to land during it.
fn spin(micros: u64) {
    let until = Instant::now() + Duration::from_micros(micros);
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// What a raced task's handle said, against whether its body ran to its
/// end: a value only if it did, `Cancelled` only if it did not. Returns
/// whether it was cancelled.
fn check_outcome(i: u64, ran: &AtomicBool, outcome: Result<u64, TaskError>) -> bool {
    let ran = ran.load(SeqCst);
    match outcome {
        Ok(v) => {
            assert_eq!(v, i);
            assert!(ran, "task {i}: a value from a body that did not finish");
            false
        }
        Err(TaskError::Cancelled) => {
            assert!(
                !ran,
                "task {i}: its body ran to the end, yet its handle says Cancelled"
            );
            true
        }
        Err(e) => panic!("task {i}: {e:?}"),
    }
}

/// One racing task: its body signals its start, spins 20 µs, marks that
/// it ran to its end and returns `i`; `end` cancels it (an abort, a token)
/// `i % 40` µs after its body started (every fourth task: right away,
/// started or not). Returns whether it was cancelled, and whether the
/// cancel waited for the start (so landed during the poll or after it).
fn race(
    i: u64,
    spawn: impl FnOnce(Pin<Box<dyn Future<Output = u64> + Send>>) -> JoinHandle<u64>,
    end: impl FnOnce(u64, &JoinHandle<u64>),
) -> (bool, bool) {
    let (started, ran) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (s, r) = (started.clone(), ran.clone());
    let handle = spawn(Box::pin(async move {
        s.store(true, SeqCst);
        spin(20);
        r.store(true, SeqCst);
        i
    }));
    let waited = i % 4 != 0;
    if waited {
        while !started.load(SeqCst) {
            std::hint::spin_loop();
        }
        spin(i % 40);
    }
    end(i, &handle);
    (check_outcome(i, &ran, block_on(handle)), waited)
}

/// Runs [`race`] 2,000 times: every cancel that waited for the body to
/// start must have kept the value (before the fix, those landing during
/// the poll lost it).
fn races(
    spawn: impl Fn(u64, Pin<Box<dyn Future<Output = u64> + Send>>) -> JoinHandle<u64>,
    end: impl Fn(u64, &JoinHandle<u64>),
) {
    let (mut kept, mut waited) = (0, 0);
    for i in 0..2000 {
        let (cancelled, w) = race(i, |fut| spawn(i, fut), &end);
        kept += usize::from(!cancelled);
        waited += usize::from(w);
        assert!(
            !(cancelled && w),
            "task {i}: cancelled though its poll had started"
        );
    }
    assert!(kept >= waited, "kept {kept} of {waited}");
}

/// A poll that returned `Ready` wins over an abort that landed during
/// it, as in tokio: the attack saw the handle say `Cancelled` after the
/// body had finished (13 in 200k aborts).
#[test]
fn an_abort_during_the_last_poll_keeps_the_finished_value() {
    within("aborts racing last polls", || {
        let pool = pool("abort-race", 2);
        races(|_, fut| pool.spawn(fut), |_, h| h.abort());
    });
}

/// The same with a cancellation token firing (3 in 200k in the attack).
#[test]
fn a_token_cancel_during_the_last_poll_keeps_the_finished_value() {
    within("token cancels racing last polls", || {
        let pool = pool("token-race", 2);
        let tokens: Vec<_> = (0..2000).map(|_| CancellationToken::new()).collect();
        races(
            |i, fut| pool.spawn_cancellable(&tokens[i as usize], fut),
            |i, _| tokens[i as usize].cancel(),
        );
    });
}

/// The same for the last step of a chain, aborted through the chain's
/// handle (31 in 583k chains in the attack).
#[test]
fn a_chain_aborted_during_its_last_step_keeps_the_finished_value() {
    within("chain aborts racing last steps", || {
        let pool = pool("chain-race", 2);
        races(
            |_, fut| pool.run(|| ()).then_async(move |()| fut),
            |_, h| h.abort(),
        );
    });
}
