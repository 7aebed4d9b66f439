//! Panics everywhere: in tasks, continuations, strand sections, `Guarded`
//! sections and guards, keyed strands, timer callbacks and wakers,
//! periodic jobs, a future's `Drop` while it is being cancelled, the
//! unobserved-panic handler itself and `on_thread_start`. Each is reported
//! where the docs say (the handle, the pool's `on_unobserved_panic` hook,
//! `Timer::advance`, the caller of `dispatch`); no worker thread dies
//! (every worker is shown serving afterwards), and no executor wedges (each
//! runs more work, in order, afterwards).

mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use futures::channel::oneshot;
use support::{quiet_test_panics, within, DEADLINE, TEST_PANIC};
use viaduct::time::{self, Timer};
use viaduct::{
    block_on, Exec, ExecutorExt, Guarded, Inline, KeyedStrands, ManualExecutor, PanicPayload,
    PriorityExecutor, Strand, TaskError, ThreadPerTask, ThreadPool, TimedExt, ViaExt,
};

fn message(payload: &PanicPayload) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<not a string>".into())
}

/// A pool whose unobserved panics land in the returned receiver.
fn pool_with_hook(name: &str, threads: usize) -> (ThreadPool, mpsc::Receiver<String>) {
    hooked(ThreadPool::builder().threads(threads).name(name))
}

/// The pool `builder` makes, with a hook that sends each unobserved
/// panic's message to the receiver.
fn hooked(builder: viaduct::pool::Builder) -> (ThreadPool, mpsc::Receiver<String>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let pool = builder
        .on_unobserved_panic(move |p| tx.lock().unwrap().send(message(&p)).unwrap())
        .build()
        .unwrap();
    (pool, rx)
}

/// The sorted names of the threads that ran one task each, with every
/// worker holding one at the same time: all of them are alive and serving.
fn all_workers_serve(pool: &ThreadPool) -> Vec<String> {
    let n = pool.threads();
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let barrier = barrier.clone();
            pool.run(move || {
                barrier.wait();
                thread::current().name().unwrap().to_owned()
            })
        })
        .collect();
    let mut names: Vec<_> = handles.into_iter().map(|h| block_on(h).unwrap()).collect();
    names.sort();
    names
}

fn expect_panic<T: std::fmt::Debug>(outcome: Result<T, TaskError>, msg: &str) {
    match outcome {
        Err(e) => assert_eq!(e.panic_message(), Some(msg), "{e:?}"),
        Ok(v) => panic!("expected a panic {msg:?}, got {v:?}"),
    }
}

/// Panics on drop: a future's or closure's `Drop` that fails while it is
/// being cancelled.
struct PanicOnDrop(&'static str);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !thread::panicking() {
            panic!("{}", self.0);
        }
    }
}

#[test]
fn task_panics_on_every_executor_reach_their_handles_and_nothing_dies() {
    quiet_test_panics();
    within("task panics", || {
        let pool = ThreadPool::builder().threads(2).name("tp").build().unwrap();
        let manual = ManualExecutor::new();
        let keyed = KeyedStrands::new(pool.clone());
        let executors: Vec<(&str, Exec)> = vec![
            ("pool", Exec::new(pool.clone())),
            ("manual", Exec::new(manual.clone())),
            ("inline", Exec::new(Inline)),
            ("thread-per-task", Exec::new(ThreadPerTask::new("tp-tpt"))),
            ("strand", Exec::new(Strand::new(pool.clone()))),
            ("priority", Exec::new(PriorityExecutor::new(pool.clone()))),
        ];
        for (name, ex) in &executors {
            let handles: Vec<_> = (0..40)
                .map(|i| {
                    if i % 2 == 0 {
                        ex.spawn(async move {
                            if i % 4 == 0 {
                                panic!("{TEST_PANIC} {i}");
                            }
                            i
                        })
                    } else {
                        ex.run(move || {
                            if i % 4 == 1 {
                                panic!("{TEST_PANIC} {i}")
                            } else {
                                i
                            }
                        })
                    }
                })
                .collect();
            manual.run_until_idle();
            for (i, h) in handles.into_iter().enumerate() {
                let outcome = block_on(h);
                if i % 4 <= 1 {
                    expect_panic(outcome, &format!("{TEST_PANIC} {i}"));
                } else {
                    assert_eq!(outcome.unwrap(), i, "{name}");
                }
            }
            // Still serving, in order where order is promised.
            let log = Arc::new(Mutex::new(Vec::new()));
            let after: Vec<_> = (0..5)
                .map(|i| {
                    let log = log.clone();
                    ex.run(move || log.lock().unwrap().push(i))
                })
                .collect();
            manual.run_until_idle();
            after.into_iter().for_each(|h| block_on(h).unwrap());
            // Two threads may run the pool's and the priority decorator's
            // tasks side by side; the others promise their order.
            if !["pool", "thread-per-task", "priority"].contains(name) {
                assert_eq!(*log.lock().unwrap(), [0, 1, 2, 3, 4], "{name}");
            }
        }
        // A keyed task's panic frees its key; the key serves on.
        let h = keyed.spawn(7, async { panic!("{TEST_PANIC} keyed") });
        expect_panic(block_on(h), &format!("{TEST_PANIC} keyed"));
        assert_eq!(block_on(keyed.spawn(7, async { 7 })).unwrap(), 7);
        assert!(keyed.is_empty(), "the panicking key was freed");
        assert_eq!(all_workers_serve(&pool), ["tp-0", "tp-1"]);
    });
}

/// A detached task's panic goes to the pool's hook, once, wherever the
/// task was spawned: directly, through a strand, a priority decorator, a
/// keyed strand, a timer or as the last step of a chain.
#[test]
fn detached_panics_reach_the_pool_hook_once() {
    quiet_test_panics();
    within("hook", || {
        let (pool, reported) = pool_with_hook("hook", 2);
        let strand = Strand::new(pool.clone());
        let pq = PriorityExecutor::new(pool.clone());
        let keyed = KeyedStrands::new(pool.clone());
        drop(pool.spawn(async { panic!("{TEST_PANIC}: pool") }));
        drop(strand.spawn(async { panic!("{TEST_PANIC}: strand") }));
        drop(pq.spawn_with(3, async { panic!("{TEST_PANIC}: priority") }));
        drop(keyed.spawn(1, async { panic!("{TEST_PANIC}: keyed") }));
        drop(pool.execute_after(Duration::from_millis(1), || panic!("{TEST_PANIC}: timer")));
        drop(
            pool.run(|| 1)
                .then(|_| -> u8 { panic!("{TEST_PANIC}: chain") })
                .then(|n| n + 1),
        );
        drop((strand, pq, keyed));
        pool.shutdown().unwrap();
        let mut got: Vec<String> = reported.try_iter().collect();
        got.sort();
        let mut want: Vec<String> = ["chain", "keyed", "pool", "priority", "strand", "timer"]
            .map(|w| format!("{TEST_PANIC}: {w}"))
            .into();
        want.sort();
        assert_eq!(got, want);
    });
}

/// A detached `Guarded::with` section is a task whose handle was dropped:
/// by `on_unobserved_panic`'s docs ("every task that panicked with nobody
/// to hear it") its panic reaches the hook of the pool it runs on.
#[test]
fn a_detached_guarded_section_panic_reaches_the_pool_hook() {
    quiet_test_panics();
    within("with hook", || {
        let (pool, reported) = pool_with_hook("with-hook", 1);
        let guarded = Guarded::new(pool.clone(), 0u32);
        drop(guarded.with(|_| panic!("{TEST_PANIC}: with")));
        assert_eq!(
            block_on(guarded.with(|n| *n)).unwrap(),
            0,
            "the strand goes on"
        );
        drop(guarded);
        pool.shutdown().unwrap();
        let got: Vec<String> = reported.try_iter().collect();
        assert_eq!(got, [format!("{TEST_PANIC}: with")]);
    });
}

/// A `with` called from a task of the pool while the strand is free runs
/// on the spot and returns a finished handle; dropped unread, its panic
/// goes to the pool's hook all the same, even when the pool is full (the
/// calling task holds its only slot), and no task is counted for it.
#[test]
fn an_on_the_spot_guarded_section_panic_reaches_the_pool_hook() {
    quiet_test_panics();
    within("with on the spot", || {
        let (pool, reported) = hooked(ThreadPool::builder().threads(1).max_pending(1));
        let guarded = Guarded::new(pool.clone(), 0u32);
        let (g, p) = (guarded.clone(), pool.clone());
        let (on_the_spot, spawned) = block_on(pool.spawn(async move {
            let before = p.metrics().spawned;
            drop(g.with(|_| panic!("{TEST_PANIC}: on the spot")));
            (g.metrics().inline, p.metrics().spawned - before)
        }))
        .unwrap();
        assert_eq!(on_the_spot, 1, "the section ran without queueing");
        assert_eq!(spawned, 0, "no task was counted for it");
        assert_eq!(block_on(guarded.with(|n| *n)).unwrap(), 0);
        drop(guarded);
        pool.shutdown().unwrap();
        let got: Vec<String> = reported.try_iter().collect();
        assert_eq!(got, [format!("{TEST_PANIC}: on the spot")]);
    });
}

/// A posted closure has no handle at all: its panic goes to the hook of
/// the pool under the strand, and the strand goes on.
#[test]
fn a_posted_closure_panic_reaches_the_pool_hook() {
    quiet_test_panics();
    within("post hook", || {
        let (pool, reported) = pool_with_hook("post-hook", 1);
        let strand = Strand::new(pool.clone());
        strand.post(|| panic!("{TEST_PANIC}: post"));
        assert_eq!(block_on(strand.run(|| 7)).unwrap(), 7, "the strand goes on");
        drop(strand);
        pool.shutdown().unwrap();
        let got: Vec<String> = reported.try_iter().collect();
        assert_eq!(got, [format!("{TEST_PANIC}: post")]);
    });
}

/// A panic in any step of a chain across two pools, a strand and
/// `Inline` skips the value steps after it and reaches `then_try` with its
/// message; every pool still has all its workers.
#[test]
fn continuation_panics_skip_to_then_try_and_nothing_dies() {
    quiet_test_panics();
    within("chains", || {
        let cpu = ThreadPool::builder().threads(2).name("cp").build().unwrap();
        let io = ThreadPool::builder().threads(1).name("io").build().unwrap();
        let strand = Strand::new(cpu.clone());
        for bad in 0..4 {
            let step = move |k: u32| {
                move |n: u32| {
                    if k == bad {
                        panic!("{TEST_PANIC}: step {k}");
                    }
                    n + 1
                }
            };
            let first = step(0);
            let skipped = Arc::new(AtomicUsize::new(0));
            let s = skipped.clone();
            let report = cpu
                .run(move || first(0))
                .via(&io)
                .then(step(1))
                .via(&strand)
                .then(step(2))
                .via(&Inline)
                .then(step(3))
                .then(move |n| {
                    s.fetch_add(1, SeqCst);
                    n
                })
                .via(&io)
                .then_try(|r| r.map_err(|e| e.panic_message().map(str::to_owned)));
            let outcome = block_on(report).unwrap();
            assert_eq!(outcome, Err(Some(format!("{TEST_PANIC}: step {bad}"))));
            assert_eq!(
                skipped.load(SeqCst),
                0,
                "the value step after it was skipped"
            );
        }
        // `via` on a future that panics, and `then_async` whose future panics.
        let h = async { panic!("{TEST_PANIC}: via") }.via(&io).then(|()| 1);
        expect_panic(block_on(h), &format!("{TEST_PANIC}: via"));
        let h = cpu
            .run(|| 1)
            .then_async(|_| async { panic!("{TEST_PANIC}: async step") });
        expect_panic::<()>(block_on(h), &format!("{TEST_PANIC}: async step"));
        assert_eq!(all_workers_serve(&cpu), ["cp-0", "cp-1"]);
        assert_eq!(all_workers_serve(&io), ["io-0"]);
    });
}

/// Panicking sections of every kind: `run` on a strand (its handle),
/// `post` (caught, the strand goes on), `dispatch` inline (unwinds into the
/// section that called it), `Guarded::with` (its handle; no poisoning: the
/// value is as the panic left it), a task holding a guard (the guard's drop
/// releases the strand). Afterwards each strand runs more work, in order.
#[test]
fn section_panics_leave_strands_and_guarded_serving_in_order() {
    quiet_test_panics();
    within("sections", || {
        let pool = ThreadPool::builder()
            .threads(2)
            .name("sec")
            .build()
            .unwrap();
        let strand = Strand::new(pool.clone());
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        let mut handles = Vec::new();
        for i in 0..30 {
            let l = l.clone();
            match i % 3 {
                0 => strand.post(move || {
                    l.lock().unwrap().push(i);
                    panic!("{TEST_PANIC}: post {i}");
                }),
                1 => handles.push((
                    i,
                    strand.run(move || {
                        l.lock().unwrap().push(i);
                        panic!("{TEST_PANIC}: run {i}");
                    }),
                )),
                _ => {
                    let s = strand.clone();
                    handles.push((
                        i,
                        strand.run(move || {
                            l.lock().unwrap().push(i);
                            s.dispatch(move || panic!("{TEST_PANIC}: dispatch {i}"));
                            unreachable!("dispatch ran inline and unwound");
                        }),
                    ));
                }
            }
        }
        for (i, h) in handles {
            let what = if i % 3 == 1 { "run" } else { "dispatch" };
            expect_panic(block_on(h), &format!("{TEST_PANIC}: {what} {i}"));
        }
        assert_eq!(
            *log.lock().unwrap(),
            (0..30).collect::<Vec<_>>(),
            "in order, all ran"
        );

        let guarded = Guarded::new(pool.clone(), Vec::new());
        let h = guarded.with(|v| {
            v.push(1);
            panic!("{TEST_PANIC}: with");
        });
        expect_panic::<()>(block_on(h), &format!("{TEST_PANIC}: with"));
        let g = guarded.clone();
        let holder = pool.spawn(async move {
            let mut guard = g.lock().await;
            guard.push(2);
            panic!("{TEST_PANIC}: holding the guard");
        });
        expect_panic::<()>(
            block_on(holder),
            &format!("{TEST_PANIC}: holding the guard"),
        );
        let after: Vec<_> = (3..6).map(|i| guarded.with(move |v| v.push(i))).collect();
        after.into_iter().for_each(|h| block_on(h).unwrap());
        assert_eq!(
            *block_on(guarded.lock()),
            [1, 2, 3, 4, 5],
            "no poisoning, no wedge"
        );
        assert_eq!(all_workers_serve(&pool), ["sec-0", "sec-1"]);
    });
}

/// A future whose `Drop` panics while it is being cancelled (aborted,
/// dropped by `shutdown_now`, by a dying strand, by a cancelled timer, by
/// the last handle of a manual executor, or inline by `abort` itself)
/// unwinds into nothing: a pool reports it to its hook and its workers
/// live on; the other executors carry on.
#[test]
fn a_panicking_drop_while_cancelled_unwinds_nowhere() {
    quiet_test_panics();
    within("drop panics", || {
        let (pool, reported) = pool_with_hook("dp", 1);
        let strand = Strand::new(pool.clone());
        // Occupy the only worker so that what follows stays queued.
        let (gate_tx, gate) = mpsc::channel::<()>();
        let (started_tx, started) = mpsc::channel();
        let blocker = pool.run(move || {
            started_tx.send(()).unwrap();
            gate.recv().unwrap();
        });
        started.recv_timeout(DEADLINE).unwrap();
        // Each `PanicOnDrop` is made outside its future and moved in: the
        // futures are dropped without ever being polled.
        let d = PanicOnDrop("test panic: drop after abort");
        let aborted = pool.spawn(async move { drop(d) });
        aborted.abort();
        let queued: Vec<_> = (0..5)
            .map(|_| {
                let d = PanicOnDrop("test panic: drop on shutdown_now");
                pool.spawn(async move { drop(d) })
            })
            .collect();
        let in_strand = {
            let d = PanicOnDrop("test panic: drop in a dying strand");
            strand.spawn(async move { drop(d) })
        };
        let stopper = {
            let pool = pool.clone();
            thread::spawn(move || pool.shutdown_now())
        };
        while !pool.is_closed() {
            thread::yield_now();
        }
        gate_tx.send(()).unwrap();
        stopper.join().unwrap().unwrap();
        block_on(blocker).unwrap();
        assert!(block_on(aborted).unwrap_err().is_cancelled());
        for h in queued {
            assert!(block_on(h).unwrap_err().is_cancelled());
        }
        assert!(block_on(in_strand).unwrap_err().is_cancelled());
        let mut got: Vec<String> = reported.try_iter().collect();
        got.sort();
        let mut want = vec!["test panic: drop after abort".to_owned()];
        want.extend(std::iter::repeat_n(
            "test panic: drop on shutdown_now".to_owned(),
            5,
        ));
        want.push("test panic: drop in a dying strand".to_owned());
        want.sort();
        assert_eq!(got, want, "each reported once, to the pool's hook");

        // Inline: `abort` of a parked task drops it right there.
        let (tx, rx) = oneshot::channel::<()>();
        let d = PanicOnDrop("test panic: inline drop");
        let parked = Inline.spawn(async move {
            let _ = rx.await;
            drop(d);
        });
        parked.abort();
        assert!(block_on(parked).unwrap_err().is_cancelled());
        drop(tx);

        // Manual: an abort, then the last handle drops with work queued.
        let manual = ManualExecutor::new();
        let d = PanicOnDrop("test panic: manual abort");
        let h = manual.spawn(async move { drop(d) });
        h.abort();
        assert_eq!(manual.run_until_idle(), 1);
        let d = PanicOnDrop("test panic: manual drop");
        let left = manual.spawn(async move { drop(d) });
        drop(manual);
        assert!(block_on(left).unwrap_err().is_cancelled());

        // A timed future cancelled while it waits in the timer.
        let timer = Timer::manual();
        let ex = ManualExecutor::new();
        let d = PanicOnDrop("test panic: cancelled timer");
        let job = timer.spawn_after(&ex, Duration::from_secs(1), async move { drop(d) });
        assert!(job.cancel());
        timer.advance(Duration::from_secs(2));
        assert_eq!(ex.run_until_idle(), 0);
        assert!(block_on(job).unwrap_err().is_cancelled());
    });
}

struct PanickyWaker;

impl Wake for PanickyWaker {
    fn wake(self: Arc<Self>) {
        panic!("{TEST_PANIC}: waker");
    }
}

/// Timer callbacks that panic: a timed closure reports on its handle, on
/// a pool and inline on the thread that advances the clock; a panicking
/// waker does not stop the other due timers, and `advance` resumes it
/// after they fired; on the global timer the `viaduct-timer` thread
/// survives one and fires later timers.
#[test]
fn panicking_timer_callbacks_and_wakers_leave_the_timer_firing() {
    quiet_test_panics();
    within("timer panics", || {
        let pool = ThreadPool::builder().threads(1).name("tm").build().unwrap();
        let h = pool.execute_after(Duration::from_millis(1), || -> u8 {
            panic!("{TEST_PANIC}: pool job")
        });
        expect_panic(block_on(h), &format!("{TEST_PANIC}: pool job"));

        let timer = Timer::manual();
        let inline = timer.execute_after(&Inline, Duration::from_secs(1), || -> u8 {
            panic!("{TEST_PANIC}: inline job")
        });
        let ok = timer.execute_after(&Inline, Duration::from_secs(1), || 5);
        timer.advance(Duration::from_secs(1)); // does not unwind
        expect_panic(block_on(inline), &format!("{TEST_PANIC}: inline job"));
        assert_eq!(block_on(ok).unwrap(), 5);

        // Three sleeps due at once, the middle one with a panicking waker.
        let bad = Waker::from(Arc::new(PanickyWaker));
        let noop = futures::task::noop_waker();
        let mut sleeps: Vec<_> = (0..3)
            .map(|_| Box::pin(timer.sleep(Duration::from_secs(1))))
            .collect();
        for (i, s) in sleeps.iter_mut().enumerate() {
            let w = if i == 1 { &bad } else { &noop };
            assert!(s.as_mut().poll(&mut Context::from_waker(w)).is_pending());
        }
        let job = timer.execute_after(&Inline, Duration::from_secs(1), || "after the bad waker");
        let t = timer.clone();
        let unwound = std::panic::catch_unwind(move || t.advance(Duration::from_secs(1)));
        assert_eq!(
            message(&unwound.unwrap_err()),
            format!("{TEST_PANIC}: waker"),
            "advance resumes the waker's panic"
        );
        for s in &mut sleeps {
            assert!(
                s.as_mut().poll(&mut Context::from_waker(&noop)).is_ready(),
                "all fired"
            );
        }
        assert_eq!(block_on(job).unwrap(), "after the bad waker");
        assert_eq!(timer.pending(), 0);

        // The global timer's thread meets a panicking waker and goes on.
        let mut bad_sleep = Box::pin(time::sleep(Duration::from_millis(1)));
        assert!(bad_sleep
            .as_mut()
            .poll(&mut Context::from_waker(&bad))
            .is_pending());
        thread::sleep(Duration::from_millis(5));
        block_on(time::sleep(Duration::from_millis(2)));
        assert_eq!(
            block_on(pool.execute_after(Duration::from_millis(1), || 9)).unwrap(),
            9
        );
        assert_eq!(all_workers_serve(&pool), ["tm-0"]);
    });
}

/// A periodic job that panics stops, alone, and says why; another job on
/// the same executor keeps its rhythm; the pool's worker lives.
#[test]
fn a_panicking_periodic_job_stops_alone() {
    quiet_test_panics();
    within("periodic", || {
        let timer = Timer::manual();
        let ex = ManualExecutor::new();
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        let bad = timer.execute_every(&ex, Duration::from_secs(1), move || {
            if r.fetch_add(1, SeqCst) == 2 {
                panic!("{TEST_PANIC}: third run");
            }
        });
        let good = timer.execute_every(&ex, Duration::from_secs(1), || ());
        for _ in 0..6 {
            timer.advance(Duration::from_secs(1));
            ex.run_until_idle();
        }
        assert_eq!(runs.load(SeqCst), 3, "no run after the panic");
        assert_eq!(bad.runs(), 2, "the panicking run does not count");
        assert!(bad.is_finished());
        let why = block_on(bad);
        assert_eq!(
            why.panic_message(),
            Some(format!("{TEST_PANIC}: third run").as_str())
        );
        assert_eq!(good.runs(), 6);
        assert!(!good.is_finished());

        // On a pool, on the global timer.
        let (pool, reported) = pool_with_hook("per", 1);
        let job = pool.execute_every(Duration::from_millis(1), || {
            panic!("{TEST_PANIC}: pool periodic")
        });
        assert_eq!(
            block_on(job).panic_message(),
            Some(format!("{TEST_PANIC}: pool periodic").as_str())
        );
        assert_eq!(all_workers_serve(&pool), ["per-0"]);
        assert_eq!(
            reported.try_iter().count(),
            0,
            "observed through its handle, not the hook"
        );
    });
}

/// A panicking `on_thread_start` is reported per worker, and every
/// worker then serves tasks, fork-join, `block_on` inside a task and
/// strands. A panicking unobserved-panic handler kills nobody either.
#[test]
fn panicking_hooks_leave_every_worker_serving() {
    quiet_test_panics();
    within("hooks", || {
        let (tx, reported) = mpsc::channel();
        let tx = Mutex::new(tx);
        let pool = ThreadPool::builder()
            .threads(2)
            .name("hk")
            .on_thread_start(|| panic!("{TEST_PANIC}: on_thread_start"))
            .on_unobserved_panic(move |p| {
                let m = message(&p);
                tx.lock().unwrap().send(m.clone()).unwrap();
                panic!("{TEST_PANIC}: the handler itself");
            })
            .build()
            .unwrap();
        assert_eq!(all_workers_serve(&pool), ["hk-0", "hk-1"]);
        let p = pool.clone();
        let (a, b) = block_on(pool.run(move || p.join(|| 1, || 2))).unwrap();
        assert_eq!(a + b, 3);
        let p = pool.clone();
        let nested = pool.spawn(async move { block_on(p.run(|| 4)).unwrap() });
        assert_eq!(block_on(nested).unwrap(), 4);
        let strand = Strand::new(pool.clone());
        assert_eq!(block_on(strand.run(|| 5)).unwrap(), 5);
        for _ in 0..10 {
            drop(pool.spawn(async { panic!("{TEST_PANIC}: detached") }));
        }
        assert_eq!(all_workers_serve(&pool), ["hk-0", "hk-1"]);
        drop(strand);
        pool.shutdown().unwrap();
        let got: Vec<String> = reported.try_iter().collect();
        let starts = got
            .iter()
            .filter(|m| m.ends_with("on_thread_start"))
            .count();
        let detached = got.iter().filter(|m| m.ends_with("detached")).count();
        assert_eq!((starts, detached, got.len()), (2, 10, 12), "{got:?}");
    });
}

/// A panic under `block_on` inside a pool task (in the awaited task, or in
/// the future `block_on` polls itself) stays in that task.
#[test]
fn a_panic_inside_block_on_inside_a_task_stays_in_that_task() {
    quiet_test_panics();
    within("block_on", || {
        let pool = ThreadPool::builder().threads(1).name("bo").build().unwrap();
        let p = pool.clone();
        let h = pool.spawn(async move {
            block_on(p.run(|| -> u8 { panic!("{TEST_PANIC}: inner") })).map_err(|e| e.to_string())
        });
        assert_eq!(
            block_on(h).unwrap(),
            Err(format!("task panicked: {TEST_PANIC}: inner"))
        );
        let h = pool.spawn(async move { block_on(AlwaysPanics) });
        expect_panic(block_on(h), &format!("{TEST_PANIC}: polled"));
        assert_eq!(all_workers_serve(&pool), ["bo-0"]);
    });
}

/// A future that panics when polled.
struct AlwaysPanics;

impl Future for AlwaysPanics {
    type Output = u8;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u8> {
        panic!("{TEST_PANIC}: polled");
    }
}

#[test]
fn a_refused_spawn_whose_future_panics_in_drop_does_not_panic_the_caller() {
    quiet_test_panics();
    struct Panics;
    impl Drop for Panics {
        fn drop(&mut self) {
            panic!("{TEST_PANIC}: a refused future's drop");
        }
    }
    let closed = ManualExecutor::new();
    closed.close();
    let panics = Panics;
    let refused = closed.spawn(async move {
        let _panics = panics;
    });
    assert!(matches!(
        block_on(refused),
        Err(TaskError::Rejected(viaduct::RejectReason::Closed))
    ));
}
