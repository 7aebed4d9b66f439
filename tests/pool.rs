//! `ThreadPool`: worker names, exactly-once under load, fork-join and
//! helping waits, closing and shutting down, panics, bounded mode, fairness,
//! `current`, `metrics`, and the builder's bad input.
//!
//! Everything that could hang runs under [`within`], which fails the test
//! after a generous deadline instead.

mod support;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use futures::channel::{mpsc as async_mpsc, oneshot};
use futures::StreamExt;
use support::{fib, quiet_test_panics, within, DEADLINE, TEST_PANIC};
use viaduct::pool::{BuildError, WaitError};
use viaduct::{block_on, ExecutorExt, Inline, PanicPayload, RejectReason, TaskError, ThreadPool};

fn named_pool(threads: usize, name: &str) -> ThreadPool {
    ThreadPool::builder()
        .threads(threads)
        .name(name)
        .build()
        .unwrap()
}

fn thread_name() -> String {
    thread::current().name().unwrap_or("<unnamed>").to_owned()
}

fn message(payload: &PanicPayload) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<not a string>".into())
}

/// The sorted names of the threads that ran one task each, with every
/// worker of `pool` holding one at the same time: proof that all of them
/// are alive and serving.
fn names_of_all_workers(pool: &ThreadPool) -> Vec<String> {
    let n = pool.threads();
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let barrier = barrier.clone();
            pool.run(move || {
                barrier.wait();
                thread_name()
            })
        })
        .collect();
    let mut names: Vec<String> = handles.into_iter().map(|h| block_on(h).unwrap()).collect();
    names.sort();
    names
}

/// Blocks the threads that wait on it (pool workers, here) until opened.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }

    fn wait(&self) {
        let mut open = self.0 .0.lock().unwrap();
        while !*open {
            open = self.0 .1.wait(open).unwrap();
        }
    }
}

/// Occupies the only worker of `pool` until `gate` opens; returns once the
/// worker is inside, so later spawns stay queued.
fn occupy_worker(pool: &ThreadPool, gate: &Gate) -> viaduct::JoinHandle<&'static str> {
    let (started_tx, started) = mpsc::channel();
    let gate = gate.clone();
    let handle = pool.run(move || {
        started_tx.send(()).unwrap();
        gate.wait();
        "occupied"
    });
    started.recv_timeout(DEADLINE).unwrap();
    handle
}

/// Returns `Pending` once, waking itself: a yield.
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[test]
fn workers_are_named_after_the_pool() {
    within("names", || {
        let (started_tx, started) = mpsc::channel();
        let pool = ThreadPool::builder()
            .threads(2)
            .name("cpu")
            .on_thread_start(move || started_tx.send(thread_name()).unwrap())
            .build()
            .unwrap();
        let mut hooked: Vec<String> = (0..2)
            .map(|_| started.recv_timeout(DEADLINE).unwrap())
            .collect();
        hooked.sort();
        assert_eq!(hooked, ["cpu-0", "cpu-1"]);
        assert_eq!(names_of_all_workers(&pool), ["cpu-0", "cpu-1"]);
        pool.shutdown().unwrap();
    });
}

#[test]
fn a_million_tasks_from_four_threads_each_run_exactly_once() {
    const SPAWNERS: usize = 4;
    const PER_SPAWNER: usize = 250_000;
    const TOTAL: usize = SPAWNERS * PER_SPAWNER;
    within("million", || {
        let pool = named_pool(2, "million");
        // Leaked so that a million tasks share it without a million
        // reference-count updates.
        let runs: &'static [AtomicU8] = Vec::leak((0..TOTAL).map(|_| AtomicU8::new(0)).collect());
        let spawners: Vec<_> = (0..SPAWNERS)
            .map(|s| {
                let pool = pool.clone();
                thread::spawn(move || {
                    let range = s * PER_SPAWNER..(s + 1) * PER_SPAWNER;
                    let handles: Vec<_> = range
                        .clone()
                        .map(|i| {
                            pool.spawn(async move {
                                runs[i].fetch_add(1, SeqCst);
                                i
                            })
                        })
                        .collect();
                    for (handle, i) in handles.into_iter().zip(range) {
                        assert_eq!(block_on(handle).unwrap(), i);
                    }
                })
            })
            .collect();
        for s in spawners {
            s.join().unwrap();
        }
        pool.shutdown().unwrap();
        let wrong: Vec<(usize, u8)> = runs
            .iter()
            .map(|r| r.load(SeqCst))
            .enumerate()
            .filter(|&(_, n)| n != 1)
            .take(10)
            .collect();
        assert!(wrong.is_empty(), "(task, times run), first few: {wrong:?}");
        let m = pool.metrics();
        assert_eq!((m.spawned, m.completed), (TOTAL as u64, TOTAL as u64));
    });
}

#[test]
fn seed_fork_join_completes_on_one_thread() {
    within("seed fork-join", || {
        let pool = named_pool(1, "seed");
        let children_ran = Arc::new(AtomicUsize::new(0));
        let parents: Vec<_> = (0..100)
            .map(|p| {
                let inner = pool.clone();
                let ran = children_ran.clone();
                pool.spawn(async move {
                    let children: Vec<_> = (0..100)
                        .map(|c| {
                            let ran = ran.clone();
                            inner.spawn(async move {
                                ran.fetch_add(1, SeqCst);
                                p * 100 + c
                            })
                        })
                        .collect();
                    // Blocking on a worker of a one-thread pool: the only
                    // way on is for block_on to run the children here.
                    children
                        .into_iter()
                        .map(|c| block_on(c).unwrap())
                        .sum::<usize>()
                })
            })
            .collect();
        let total: usize = parents.into_iter().map(|h| block_on(h).unwrap()).sum();
        assert_eq!(total, (0..10_000).sum::<usize>());
        assert_eq!(children_ran.load(SeqCst), 10_000);
        pool.shutdown().unwrap();
    });
}

#[test]
fn join_computes_fib_20_on_one_thread() {
    within("fib", || {
        let pool = named_pool(1, "fib");
        assert_eq!(fib(&pool, 20), 6765, "from outside the pool");
        let p = pool.clone();
        assert_eq!(
            block_on(pool.run(move || fib(&p, 20))).unwrap(),
            6765,
            "from a worker"
        );
        assert_eq!(
            pool.join(thread_name, thread_name),
            ("fib-0".to_owned(), "fib-0".to_owned())
        );
        // The halves borrow from this stack frame.
        let data: Vec<u64> = (1..=100).collect();
        let (left, right) = pool.join(
            || data[..50].iter().sum::<u64>(),
            || data[50..].iter().sum::<u64>(),
        );
        assert_eq!((left, right), (1275, 3775));
        pool.shutdown().unwrap();
    });
}

#[test]
fn a_panic_in_join_reaches_the_caller_after_both_halves_ran() {
    quiet_test_panics();
    within("join panic", || {
        let pool = named_pool(2, "join-panic");
        for panicking_half in ["a", "b"] {
            let other_ran = AtomicBool::new(false);
            let caught = catch_unwind(AssertUnwindSafe(|| {
                let half = |name: &str| {
                    if name == panicking_half {
                        panic!("{TEST_PANIC}: {name}");
                    }
                    other_ran.store(true, SeqCst);
                };
                pool.join(|| half("a"), || half("b"))
            }))
            .unwrap_err();
            assert_eq!(message(&caught), format!("{TEST_PANIC}: {panicking_half}"));
            assert!(other_ran.load(SeqCst), "the other half of {panicking_half}");
        }
        // After a join, on the pool's side; after a shutdown, on the caller.
        assert_eq!(pool.join(|| 1, || 2), (1, 2));
        pool.shutdown().unwrap();
        let here = thread_name();
        assert_eq!(pool.join(thread_name, thread_name), (here.clone(), here));
    });
}

#[test]
fn a_closed_pool_hands_work_back_and_rejects_spawns() {
    within("closed", || {
        let pool = named_pool(2, "closed");
        pool.close();
        assert!(pool.is_closed());

        let rejected = pool.try_spawn(async { thread_name() }).unwrap_err();
        assert_eq!(rejected.reason(), RejectReason::Closed);
        // The future comes back unpolled: it runs elsewhere, here.
        let ran_on = block_on(Inline.spawn(rejected.into_inner())).unwrap();
        assert_eq!(ran_on, thread_name());

        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let rejected = pool
            .try_execute(move || flag.store(true, SeqCst))
            .unwrap_err();
        assert_eq!(rejected.reason(), RejectReason::Closed);
        rejected.into_inner()();
        assert!(ran.load(SeqCst), "the closure came back and ran");

        let polled = Arc::new(AtomicBool::new(false));
        let flag = polled.clone();
        let handle = pool.spawn(async move { flag.store(true, SeqCst) });
        assert!(handle.is_finished());
        match block_on(handle) {
            Err(TaskError::Rejected(RejectReason::Closed)) => {}
            other => panic!("expected Rejected(Closed), got {other:?}"),
        }
        let flag = polled.clone();
        pool.execute(move || flag.store(true, SeqCst));
        pool.shutdown().unwrap();
        assert!(!polled.load(SeqCst), "rejected work never runs");
        assert_eq!(pool.metrics().spawned, 0);
    });
}

#[test]
fn close_lets_accepted_tasks_finish() {
    within("close drains", || {
        let pool = named_pool(2, "draining");
        let (tx, rx) = oneshot::channel::<u32>();
        let waiting = pool.spawn(async move { rx.await.unwrap() + 1 });
        let queued: Vec<_> = (0..100u32).map(|i| pool.run(move || i)).collect();
        pool.close();
        let joiner = {
            let pool = pool.clone();
            thread::spawn(move || pool.join_workers())
        };
        // A wake-up after close is still scheduled and run.
        tx.send(41).unwrap();
        assert_eq!(block_on(waiting).unwrap(), 42);
        let sum: u32 = queued.into_iter().map(|h| block_on(h).unwrap()).sum();
        assert_eq!(sum, 4950);
        joiner.join().unwrap().unwrap();
        let m = pool.metrics();
        assert_eq!((m.spawned, m.completed, m.queued), (101, 101, 0));
    });
}

#[test]
fn shutdown_now_cancels_queued_and_waiting_tasks() {
    within("shutdown_now", || {
        let pool = named_pool(1, "stop");
        // A task parked on a channel, not in any queue.
        let (polled_tx, polled) = mpsc::channel();
        let (wake_tx, wake_rx) = oneshot::channel::<()>();
        let waiting = pool.spawn(async move {
            polled_tx.send(()).unwrap();
            wake_rx.await
        });
        polled.recv_timeout(DEADLINE).unwrap();
        // The worker busy in a task, and a hundred tasks queued behind it.
        let gate = Gate::default();
        let running = occupy_worker(&pool, &gate);
        let ran = Arc::new(AtomicUsize::new(0));
        let queued: Vec<_> = (0..100)
            .map(|_| {
                let ran = ran.clone();
                pool.run(move || ran.fetch_add(1, SeqCst))
            })
            .collect();

        let stopper = {
            let pool = pool.clone();
            thread::spawn(move || pool.shutdown_now())
        };
        while !pool.is_closed() {
            thread::sleep(Duration::from_millis(1));
        }
        gate.open();
        stopper.join().unwrap().unwrap();

        assert_eq!(
            block_on(running).unwrap(),
            "occupied",
            "the running task finishes"
        );
        for h in queued {
            assert!(matches!(block_on(h), Err(TaskError::Cancelled)));
        }
        assert_eq!(ran.load(SeqCst), 0, "no queued task ran");
        // Woken after the pool stopped: cancelled, not run, not stranded.
        let _ = wake_tx.send(());
        assert!(matches!(block_on(waiting), Err(TaskError::Cancelled)));
        assert!(matches!(
            block_on(pool.spawn(async {})),
            Err(TaskError::Rejected(RejectReason::Closed))
        ));
        let m = pool.metrics();
        assert_eq!((m.spawned, m.completed), (102, 102));
    });
}

#[test]
fn join_workers_from_its_own_worker_is_an_error_not_a_deadlock() {
    within("self-join", || {
        let pool = named_pool(1, "self-join");
        let other = named_pool(1, "other");
        other.close();
        let (p, o) = (pool.clone(), other.clone());
        let (joined, shut, stopped, joined_other) = block_on(pool.run(move || {
            (
                p.join_workers(),
                p.shutdown(),
                p.shutdown_now(),
                o.join_workers(),
            )
        }))
        .unwrap();
        assert_eq!(joined, Err(WaitError::OwnThread));
        assert_eq!(shut, Err(WaitError::OwnThread));
        assert_eq!(stopped, Err(WaitError::OwnThread));
        assert_eq!(joined_other, Ok(()), "another pool's worker may join it");
        assert!(
            pool.is_closed(),
            "shutdown closes even where it cannot join"
        );
        pool.join_workers().unwrap();
    });
}

#[test]
fn a_thousand_panicking_tasks_leave_the_pool_serving() {
    quiet_test_panics();
    within("panics", || {
        let pool = named_pool(2, "panics");
        let handles: Vec<_> = (0..1000)
            .map(|i| match i % 3 {
                0 => pool.spawn(async move { panic!("{TEST_PANIC} {i}") }),
                1 => pool.run(move || panic!("{TEST_PANIC} {i}")),
                // A `&'static str` payload rather than a `String`.
                _ => pool.run(|| std::panic::panic_any(TEST_PANIC)),
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            let expected = match i % 3 {
                0 | 1 => format!("{TEST_PANIC} {i}"),
                _ => TEST_PANIC.to_owned(),
            };
            let err = block_on(h).unwrap_err();
            assert!(err.is_panic(), "{i}: {err:?}");
            assert_eq!(err.panic_message(), Some(expected.as_str()));
            assert_eq!(err.to_string(), format!("task panicked: {expected}"));
        }
        assert_eq!(names_of_all_workers(&pool), ["panics-0", "panics-1"]);
        pool.shutdown().unwrap();
        let m = pool.metrics();
        assert_eq!((m.spawned, m.completed), (1002, 1002));
    });
}

#[test]
fn on_unobserved_panic_receives_the_panics_of_detached_tasks_only() {
    quiet_test_panics();
    within("unobserved", || {
        let (tx, reported) = mpsc::channel();
        let pool = ThreadPool::builder()
            .threads(2)
            .name("unobserved")
            .on_unobserved_panic(move |p| tx.send(message(&p)).unwrap())
            .build()
            .unwrap();
        for i in 0..10 {
            drop(pool.spawn(async move { panic!("{TEST_PANIC} detached {i}") }));
            pool.execute(move || panic!("{TEST_PANIC} executed {i}"));
        }
        let observed = pool.spawn(async { panic!("{TEST_PANIC} observed") });
        assert_eq!(
            block_on(observed).unwrap_err().panic_message(),
            Some("test panic observed")
        );
        pool.shutdown().unwrap();
        let mut got: Vec<String> = reported.try_iter().collect();
        got.sort();
        let mut expected: Vec<String> = (0..10)
            .flat_map(|i| {
                [
                    format!("{TEST_PANIC} detached {i}"),
                    format!("{TEST_PANIC} executed {i}"),
                ]
            })
            .collect();
        expected.sort();
        assert_eq!(got, expected);
    });
}

#[test]
fn a_saturated_bounded_pool_hands_work_back_and_spawn_waits_for_room() {
    within("bounded", || {
        let pool = ThreadPool::builder()
            .threads(1)
            .name("bounded")
            .max_pending(10)
            .build()
            .unwrap();
        let gate = Gate::default();
        let first = occupy_worker(&pool, &gate);
        let queued: Vec<_> = (0..9).map(|i| pool.run(move || i)).collect();

        let rejected = pool.try_spawn(async { 99 }).unwrap_err();
        assert_eq!(rejected.reason(), RejectReason::Full);
        assert_eq!(block_on(Inline.spawn(rejected.into_inner())).unwrap(), 99);
        let rejected = pool.try_execute(|| ()).unwrap_err();
        assert_eq!(rejected.reason(), RejectReason::Full);

        let (returned_tx, returned) = mpsc::channel();
        let waiter = {
            let pool = pool.clone();
            thread::spawn(move || {
                let handle = pool.spawn(async { thread_name() });
                returned_tx.send(()).unwrap();
                block_on(handle)
            })
        };
        // Holds however slow the machine: nothing frees a slot until the
        // gate opens.
        assert_eq!(
            returned.recv_timeout(Duration::from_millis(100)),
            Err(RecvTimeoutError::Timeout),
            "spawn returned while the pool was full"
        );
        gate.open();
        returned.recv_timeout(DEADLINE).unwrap();
        assert_eq!(waiter.join().unwrap().unwrap(), "bounded-0");
        assert_eq!(block_on(first).unwrap(), "occupied");
        let sum: i32 = queued.into_iter().map(|h| block_on(h).unwrap()).sum();
        assert_eq!(sum, 36);
        pool.shutdown().unwrap();
        let m = pool.metrics();
        assert_eq!(
            (m.spawned, m.completed),
            (11, 11),
            "refusals are not counted"
        );
    });
}

#[test]
fn a_spawn_waiting_for_room_is_rejected_when_the_pool_closes() {
    within("bounded close", || {
        let pool = ThreadPool::builder()
            .threads(1)
            .name("bounded-close")
            .max_pending(1)
            .build()
            .unwrap();
        let gate = Gate::default();
        let first = occupy_worker(&pool, &gate);
        let waiter = {
            let pool = pool.clone();
            thread::spawn(move || block_on(pool.spawn(async { "ran" })))
        };
        // Give the waiter time to start waiting; either way it must end
        // up rejected, so the sleep only makes the test cover more.
        thread::sleep(Duration::from_millis(50));
        pool.close();
        match waiter.join().unwrap() {
            Err(TaskError::Rejected(RejectReason::Closed)) => {}
            other => panic!("expected Rejected(Closed), got {other:?}"),
        }
        gate.open();
        assert_eq!(block_on(first).unwrap(), "occupied");
        pool.join_workers().unwrap();
    });
}

#[test]
fn spawn_inside_a_saturated_one_thread_pool_does_not_deadlock() {
    within("bounded inside", || {
        const MAX: u64 = 10;
        let pool = ThreadPool::builder()
            .threads(1)
            .name("bounded-inside")
            .max_pending(MAX as usize)
            .build()
            .unwrap();
        let most_live = Arc::new(AtomicU64::new(0));
        let (inner, most) = (pool.clone(), most_live.clone());
        let parent = pool.spawn(async move {
            let children: Vec<_> = (0..100)
                .map(|i| {
                    let (pool, most) = (inner.clone(), most.clone());
                    inner.spawn(async move {
                        let m = pool.metrics();
                        most.fetch_max(m.spawned - m.completed, SeqCst);
                        i
                    })
                })
                .collect();
            children
                .into_iter()
                .map(|c| block_on(c).unwrap())
                .sum::<usize>()
        });
        assert_eq!(block_on(parent).unwrap(), 4950);
        let most = most_live.load(SeqCst);
        assert!(
            (2..=MAX).contains(&most),
            "at most {MAX} tasks live, saw {most}"
        );
        pool.shutdown().unwrap();
        assert_eq!(pool.metrics().spawned, 101);
    });
}

#[test]
fn a_panicking_thread_hook_is_reported_and_the_pool_serves() {
    quiet_test_panics();
    within("bad hook", || {
        let (tx, reported) = mpsc::channel();
        let pool = ThreadPool::builder()
            .threads(2)
            .name("bad-hook")
            .on_thread_start(|| panic!("{TEST_PANIC}: on_thread_start"))
            .on_thread_stop(|| panic!("{TEST_PANIC}: on_thread_stop"))
            .on_unobserved_panic(move |p| tx.send(message(&p)).unwrap())
            .build()
            .unwrap();
        assert_eq!(names_of_all_workers(&pool), ["bad-hook-0", "bad-hook-1"]);
        pool.shutdown().unwrap();
        let mut got: Vec<String> = reported.try_iter().collect();
        got.sort();
        assert_eq!(
            got,
            [
                "test panic: on_thread_start",
                "test panic: on_thread_start",
                "test panic: on_thread_stop",
                "test panic: on_thread_stop"
            ]
        );
    });
}

#[test]
fn dropping_the_last_handle_inside_a_worker_closes_the_pool_and_loses_nothing() {
    within("orphan", || {
        let (stopped_tx, stopped) = mpsc::channel();
        let pool = ThreadPool::builder()
            .threads(2)
            .name("orphan")
            .on_thread_stop(move || stopped_tx.send(thread_name()).unwrap())
            .build()
            .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let (go_tx, go) = oneshot::channel::<()>();
        let (last, counter) = (pool.clone(), ran.clone());
        let task = pool.spawn(async move {
            go.await.unwrap();
            for _ in 0..100 {
                let counter = counter.clone();
                last.execute(move || {
                    counter.fetch_add(1, SeqCst);
                });
            }
            drop(last);
            "dropped the last handle"
        });
        drop(pool);
        go_tx.send(()).unwrap();
        assert_eq!(block_on(task).unwrap(), "dropped the last handle");
        let mut exited: Vec<String> = (0..2)
            .map(|_| stopped.recv_timeout(DEADLINE).unwrap())
            .collect();
        exited.sort();
        assert_eq!(exited, ["orphan-0", "orphan-1"], "both workers exit");
        assert_eq!(
            ran.load(SeqCst),
            100,
            "work spawned before the drop all ran"
        );
    });
}

#[test]
fn dropping_the_last_handle_outside_runs_what_was_queued() {
    within("dropped", || {
        let (stopped_tx, stopped) = mpsc::channel();
        let pool = ThreadPool::builder()
            .threads(1)
            .name("dropped")
            .on_thread_stop(move || stopped_tx.send(()).unwrap())
            .build()
            .unwrap();
        let handles: Vec<_> = (0..1000u32).map(|i| pool.run(move || i)).collect();
        drop(pool);
        stopped.recv_timeout(DEADLINE).unwrap();
        let sum: u32 = handles.into_iter().map(|h| block_on(h).unwrap()).sum();
        assert_eq!(sum, 499_500);
    });
}

#[test]
fn zero_threads_and_zero_max_pending_are_build_errors() {
    let err = ThreadPool::builder().threads(0).build().unwrap_err();
    assert!(matches!(err, BuildError::ZeroThreads), "{err:?}");
    assert!(err.to_string().contains("at least one thread"), "{err}");
    let err = ThreadPool::builder()
        .threads(1)
        .max_pending(0)
        .build()
        .unwrap_err();
    assert!(matches!(err, BuildError::ZeroMaxPending), "{err:?}");
    assert!(err.to_string().contains("max_pending(0)"), "{err}");
}

#[test]
fn metrics_count_tasks_exactly_once_the_pool_is_shut_down() {
    within("metrics", || {
        let pool = named_pool(2, "metrics");
        assert_eq!(pool.metrics().spawned, 0);
        let handles: Vec<_> = (0..1000).map(|i| pool.spawn(async move { i })).collect();
        for h in handles {
            block_on(h).unwrap();
        }
        // Fork-join halves are not tasks.
        assert_eq!(fib(&pool, 10), 55);
        pool.shutdown().unwrap();
        let m = pool.metrics();
        assert_eq!(
            (m.threads, m.spawned, m.completed, m.queued),
            (2, 1000, 1000, 0)
        );
    });
}

#[test]
fn current_names_the_pool_whose_worker_is_calling() {
    within("current", || {
        assert!(ThreadPool::current().is_none(), "not on a worker");
        assert!(
            block_on(Inline.run(ThreadPool::current)).unwrap().is_none(),
            "Inline runs here, not on a worker"
        );
        let a = named_pool(1, "current-a");
        let b = named_pool(1, "current-b");
        let (a2, b2) = (a.clone(), b.clone());
        let on_a = a.run(move || {
            let cur = ThreadPool::current().unwrap();
            let on_b = b2.run(|| ThreadPool::current().unwrap().threads());
            (cur.same_pool(&a2), cur.same_pool(&b2), block_on(on_b))
        });
        let (is_a, is_b, on_b) = block_on(on_a).unwrap();
        assert!(is_a && !is_b);
        assert_eq!(on_b.unwrap(), 1);
        let b3 = b.clone();
        assert!(block_on(b.run(move || ThreadPool::current().unwrap().same_pool(&b3))).unwrap());
    });
}

#[test]
fn try_run_one_and_reschedule_until_run_tasks_on_the_caller() {
    within("helper", || {
        let pool = named_pool(1, "help");
        let gate = Gate::default();
        let occupied = occupy_worker(&pool, &gate);
        let done = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..5)
            .map(|_| {
                let done = done.clone();
                pool.run(move || {
                    done.fetch_add(1, SeqCst);
                    thread_name()
                })
            })
            .collect();
        assert!(pool.reschedule_until(|| done.load(SeqCst) == 3));
        assert_eq!(done.load(SeqCst), 3, "stops as soon as the condition holds");
        assert!(pool.try_run_one());
        assert_eq!(done.load(SeqCst), 4);
        assert!(!pool.reschedule_until(|| false), "the queues ran dry");
        assert_eq!(done.load(SeqCst), 5);
        assert!(!pool.try_run_one());
        let here = thread_name();
        for h in handles {
            assert_eq!(block_on(h).unwrap(), here, "ran on the calling thread");
        }
        gate.open();
        block_on(occupied).unwrap();
        pool.shutdown().unwrap();
    });
}

#[test]
fn reschedule_until_on_a_worker_runs_the_task_it_waits_for() {
    within("reschedule on worker", || {
        let pool = named_pool(1, "reschedule");
        // Both queued before either runs, or the waiter could find the
        // queues dry before the setter arrives.
        let gate = Gate::default();
        let occupied = occupy_worker(&pool, &gate);
        let flag = Arc::new(AtomicBool::new(false));
        let (p, f) = (pool.clone(), flag.clone());
        let waiter = pool.run(move || p.reschedule_until(|| f.load(SeqCst)));
        let setter = pool.run(move || flag.store(true, SeqCst));
        gate.open();
        block_on(occupied).unwrap();
        assert!(block_on(waiter).unwrap());
        block_on(setter).unwrap();
        pool.shutdown().unwrap();
    });
}

/// Enough yields to be sure the others were starved, if they were; far
/// fewer than would take long.
const YIELD_LIMIT: usize = 5_000_000;

#[test]
fn a_task_that_keeps_yielding_cannot_starve_the_others() {
    within("yield fairness", || {
        let pool = named_pool(1, "fair");
        let spin = |flag: Arc<AtomicBool>| async move {
            for yields in 0..YIELD_LIMIT {
                if flag.load(SeqCst) {
                    return Some(yields);
                }
                YieldNow(false).await;
            }
            None
        };

        // The other task arrives from outside, through the injector, while
        // the spinner runs.
        let flag = Arc::new(AtomicBool::new(false));
        let (started_tx, started) = mpsc::channel();
        let spinner = {
            let spin = spin(flag.clone());
            pool.spawn(async move {
                started_tx.send(()).unwrap();
                spin.await
            })
        };
        started.recv_timeout(DEADLINE).unwrap();
        block_on(pool.run(move || flag.store(true, SeqCst))).unwrap();
        assert!(block_on(spinner).unwrap().is_some());

        // The other task is spawned by the spinner, onto the same worker.
        let flag = Arc::new(AtomicBool::new(false));
        let inner = pool.clone();
        let spinner = pool.spawn(async move {
            let f = flag.clone();
            inner.execute(move || f.store(true, SeqCst));
            spin(flag).await
        });
        assert!(block_on(spinner).unwrap().is_some());
        pool.shutdown().unwrap();
    });
}

#[test]
fn two_tasks_waking_each_other_cannot_starve_a_third() {
    within("ping-pong fairness", || {
        let pool = named_pool(1, "pingpong");
        let inner = pool.clone();
        let pinger = pool.spawn(async move {
            let flag = Arc::new(AtomicBool::new(false));
            // Queued first, so it sits behind the pair in this worker's
            // queue: only the LIFO slot's streak limit lets it through.
            let f = flag.clone();
            inner.execute(move || f.store(true, SeqCst));
            let (to_ponger, mut ponger_rx) = async_mpsc::unbounded::<usize>();
            let (to_pinger, mut pinger_rx) = async_mpsc::unbounded::<usize>();
            let ponger = inner.spawn(async move {
                while let Some(n) = ponger_rx.next().await {
                    if to_pinger.unbounded_send(n).is_err() {
                        break;
                    }
                }
            });
            drop(ponger);
            for round in 0..YIELD_LIMIT {
                if flag.load(SeqCst) {
                    return Some(round);
                }
                to_ponger.unbounded_send(round).unwrap();
                pinger_rx.next().await.unwrap();
            }
            None
        });
        assert!(block_on(pinger).unwrap().is_some());
        pool.shutdown().unwrap();
    });
}
