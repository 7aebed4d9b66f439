//! Continuations (`then`, `then_try`, `then_async`, `via`) and hops
//! (`hop_to`, `try_hop_to`): where each step runs, how errors travel, what
//! detaching and aborting a chain do, and chains long enough to overflow any
//! stack that recursed.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};

use futures::channel::oneshot;
#[allow(dead_code)] // only `within` is used here
mod support;
use support::within;
use viaduct::{
    block_on, hop_to, try_hop_to, ExecutorExt, Guarded, Inline, JoinHandle, ManualExecutor,
    RejectReason, Strand, TaskError, ThreadPool, ViaExt,
};

fn pool(name: &str) -> ThreadPool {
    ThreadPool::builder().threads(1).name(name).build().unwrap()
}

fn thread_name() -> String {
    thread::current().name().unwrap_or("unnamed").to_owned()
}

/// One counter per step of a chain.
fn counters(n: usize) -> Arc<Vec<AtomicUsize>> {
    Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect())
}

fn counts(c: &[AtomicUsize]) -> Vec<usize> {
    c.iter().map(|c| c.load(SeqCst)).collect()
}

// ---------------------------------------------------------------- placement

#[test]
fn each_step_runs_where_via_said() {
    let a = pool("a");
    let b = pool("b");
    let names = a
        .run(|| vec![thread_name()])
        .then(|mut v| {
            v.push(thread_name());
            v
        })
        .via(&b)
        .then(|mut v| {
            v.push(thread_name());
            v
        })
        .then_async(|mut v| async move {
            v.push(thread_name());
            v
        })
        .via(&a)
        .then_try(|r| {
            let mut v = r.unwrap();
            v.push(thread_name());
            v
        });
    assert_eq!(
        block_on(names).unwrap(),
        ["a-0", "a-0", "b-0", "b-0", "a-0"]
    );
}

#[test]
fn a_future_via_an_executor_starts_the_chain_there() {
    let a = pool("a");
    let b = pool("b");
    let names = async { vec![thread_name()] }.via(&a).via(&b).then(|mut v| {
        v.push(thread_name());
        v
    });
    assert_eq!(block_on(names).unwrap(), ["a-0", "b-0"]);
}

/// A mixed chain: step 2 on `Inline` runs on the thread that finished
/// step 1; step 3 goes back to the pool. Step 1 is held until the whole
/// chain is attached, so it really does finish after `then` (a step that
/// is already finished runs inside `then`, on the caller's thread: see
/// `inline_step_after_a_finished_step_runs_inside_then`).
#[test]
fn inline_step_runs_on_the_thread_that_completed_the_step_before() {
    let a = ThreadPool::builder().threads(2).name("a").build().unwrap();
    let here = thread::current().id();
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let ids = a
        .run(move || {
            wait.recv().unwrap();
            (thread::current().id(), thread_name())
        })
        .via(&Inline)
        .then(|first| (first, thread::current().id()))
        .via(&a)
        .then(|(first, second)| (first, second, thread::current().id()));
    go.send(()).unwrap();
    let ((id1, name1), id2, id3) = block_on(ids).unwrap();
    assert!(name1.starts_with("a-"));
    assert_eq!(id1, id2);
    assert_ne!(id1, here);
    assert_ne!(id3, here);
}

/// folly's rule for a finished future: an `Inline` step attached after the
/// step before finished runs inside `then`, on the thread that calls it.
#[test]
fn inline_step_after_a_finished_step_runs_inside_then() {
    let a = pool("a");
    let first = a.run(|| thread::current().id());
    while !first.is_finished() {
        thread::yield_now();
    }
    let second = first.via(&Inline).then(|id1| (id1, thread::current().id()));
    assert!(second.is_finished());
    let (id1, id2) = block_on(second).unwrap();
    assert_ne!(id1, thread::current().id());
    assert_eq!(id2, thread::current().id());
}

/// The step before completes on whatever thread drives a manual executor;
/// an `Inline` step runs right there, inside that run, before it returns.
#[test]
fn inline_step_runs_inside_the_run_that_completes_the_step_before() {
    let manual = ManualExecutor::new();
    let ran_on = Arc::new(Mutex::new(None::<ThreadId>));
    let r = ran_on.clone();
    let chain = manual.run(|| 1).via(&Inline).then(move |x| {
        *r.lock().unwrap() = Some(thread::current().id());
        x + 1
    });
    assert!(!chain.is_finished());
    let driver = thread::spawn(move || {
        assert_eq!(manual.run_until_idle(), 1);
        thread::current().id()
    });
    let driver_id = driver.join().unwrap();
    // Finished by the time `run_until_idle` returned on the driver thread.
    assert!(chain.is_finished());
    assert_eq!(*ran_on.lock().unwrap(), Some(driver_id));
    assert_eq!(block_on(chain).unwrap(), 2);
}

#[test]
fn a_step_on_a_manual_executor_waits_for_it() {
    let manual = ManualExecutor::new();
    let chain = Inline.run(|| 20).via(&manual).then(|x| x * 2);
    assert!(!chain.is_finished());
    assert_eq!(manual.run_until(chain).unwrap(), 40);
}

// ---------------------------------------------------------------- errors

/// A panic in step 2 of 5 skips steps 3 and 4 and reaches step 5, a
/// `then_try`, as `Panicked` with its message.
#[test]
fn a_panic_skips_the_value_steps_and_reaches_then_try() {
    let a = pool("a");
    let b = pool("b");
    let ran = counters(5);
    let r = ran.clone();
    let step = move |i: usize| {
        let r = r.clone();
        move || r[i].fetch_add(1, SeqCst)
    };
    let (s1, s2, s3, s4, s5) = (step(0), step(1), step(2), step(3), step(4));
    let end = a
        .run(move || {
            s1();
            1
        })
        .then(move |_| -> u32 {
            s2();
            panic!("step 2 failed")
        })
        .via(&b)
        .then(move |x| {
            s3();
            x + 1
        })
        .then_async(move |x| async move {
            s4();
            x + 1
        })
        .via(&a)
        .then_try(move |r| {
            s5();
            r.map_err(|e| (e.is_panic(), e.panic_message().map(str::to_owned)))
        });
    let seen = block_on(end).unwrap();
    assert_eq!(seen, Err((true, Some("step 2 failed".to_owned()))));
    assert_eq!(counts(&ran), [1, 1, 0, 0, 1]);
}

#[test]
fn a_cancelled_step_travels_to_then_try() {
    let manual = ManualExecutor::new();
    let ran = counters(3);
    let r = ran.clone();
    let first = manual.run(|| 1);
    first.abort();
    // The aborted task's handle resolves once its future is dropped.
    manual.run_until_idle();
    let r2 = r.clone();
    let end = first
        .via(&Inline)
        .then(move |x| {
            r[0].fetch_add(1, SeqCst);
            x
        })
        .then(move |x| {
            r2[1].fetch_add(1, SeqCst);
            x
        })
        .then_try(|r| r.unwrap_err().is_cancelled());
    assert!(block_on(end).unwrap());
    assert_eq!(counts(&ran), [0, 0, 0]);
}

/// A step on a closed executor is rejected; the steps after it are
/// skipped, and the step before still runs, detached.
#[test]
fn a_rejected_step_travels_to_then_try() {
    let a = pool("a");
    let closed = pool("closed");
    closed.close();
    let ran = counters(3);
    let (r0, r1, r2) = (ran.clone(), ran.clone(), ran.clone());
    let (done_tx, done_rx) = oneshot::channel();
    let end = a
        .run(move || {
            r0[0].fetch_add(1, SeqCst);
            done_tx.send(()).unwrap();
            1
        })
        .via(&closed)
        .then(move |x| {
            r1[1].fetch_add(1, SeqCst);
            x
        })
        .via(&a)
        .then(move |x| {
            r2[2].fetch_add(1, SeqCst);
            x
        })
        .then_try(|r| match r.unwrap_err() {
            TaskError::Rejected(reason) => reason,
            other => panic!("expected Rejected, got {other}"),
        });
    assert_eq!(block_on(end).unwrap(), RejectReason::Closed);
    block_on(done_rx).unwrap();
    assert_eq!(counts(&ran), [1, 0, 0]);
}

#[test]
fn an_error_reaches_the_awaiter_of_the_last_then() {
    let a = pool("a");
    let end = a
        .run(|| -> u32 { panic!("boom") })
        .then(|x| x + 1)
        .then(|x| x + 1);
    let err = block_on(end).unwrap_err();
    assert_eq!(err.panic_message(), Some("boom"));
}

/// A detached chain that fails still reports its panic once, to the panic
/// hook of the executor its last step ran on.
#[test]
fn a_detached_chain_reports_its_panic_once() {
    let reported = Arc::new(Mutex::new(Vec::new()));
    let r = reported.clone();
    let a = ThreadPool::builder()
        .threads(1)
        .on_unobserved_panic(move |p| {
            let msg = p.downcast_ref::<&str>().copied().unwrap_or("?");
            r.lock().unwrap().push(msg.to_owned());
        })
        .build()
        .unwrap();
    drop(
        a.run(|| -> u32 { panic!("lost") })
            .then(|x| x + 1)
            .then(|x| x + 1),
    );
    a.shutdown().unwrap();
    assert_eq!(*reported.lock().unwrap(), ["lost"]);
}

// ---------------------------------------------------------------- long chains

const LONG: u64 = 1_000_000;

/// Each step finds the one before already finished and runs inside `then`.
#[test]
fn a_million_inline_steps_built_after_the_fact() {
    let mut h = Inline.run(|| 0u64);
    for _ in 0..LONG {
        h = h.then(|x| x + 1);
    }
    assert!(h.is_finished());
    assert_eq!(block_on(h).unwrap(), LONG);
}

/// The whole chain is waiting when its first step completes: each step
/// completes the next one through the `Inline` trampoline, on the thread
/// that ran the first step, in constant stack.
#[test]
fn a_million_inline_steps_run_in_one_go() {
    let manual = ManualExecutor::new();
    let mut h = manual.run(|| 0u64).via(&Inline);
    for _ in 0..LONG {
        h = h.then(|x| x + 1);
    }
    assert!(!h.is_finished());
    // A small stack: no recursion per step.
    let driver = thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || manual.run_until_idle())
        .unwrap();
    assert_eq!(driver.join().unwrap(), 1);
    assert!(h.is_finished());
    assert_eq!(block_on(h).unwrap(), LONG);
}

#[test]
fn a_million_steps_alternating_two_pools() {
    let a = pool("a");
    let b = pool("b");
    let on_a = Arc::new(AtomicUsize::new(0));
    let mut h = a.run(|| 0u64);
    for i in 0..LONG {
        let on_a = on_a.clone();
        h = h.via(if i % 2 == 0 { &b } else { &a }).then(move |x| {
            if thread_name() == "a-0" {
                on_a.fetch_add(1, SeqCst);
            }
            x + 1
        });
    }
    assert_eq!(block_on(h).unwrap(), LONG);
    assert_eq!(on_a.load(SeqCst) as u64, LONG / 2);
}

// ---------------------------------------------------------------- detach, abort

/// Builds a five-step chain on `ex` that counts its steps; step 1 waits for
/// `gate`.
fn five_steps(
    ex: &impl ExecutorExt,
    gate: oneshot::Receiver<()>,
    ran: &Arc<Vec<AtomicUsize>>,
) -> JoinHandle<usize> {
    let r = ran.clone();
    let mut h = ex.spawn(async move {
        gate.await.unwrap();
        r[0].fetch_add(1, SeqCst);
        1
    });
    for i in 1..5 {
        let r = ran.clone();
        h = h.then(move |x| {
            r[i].fetch_add(1, SeqCst);
            x + 1
        });
    }
    h
}

#[test]
fn dropping_the_last_handle_detaches_the_chain() {
    let manual = ManualExecutor::new();
    let ran = counters(5);
    let (gate, rx) = oneshot::channel();
    drop(five_steps(&manual, rx, &ran));
    manual.run_until_idle();
    assert_eq!(counts(&ran), [0, 0, 0, 0, 0]);
    gate.send(()).unwrap();
    manual.run_until_idle();
    assert_eq!(counts(&ran), [1, 1, 1, 1, 1]);
}

#[test]
fn a_detached_chain_runs_to_its_end_on_a_pool() {
    let a = pool("a");
    let ran = counters(5);
    let (gate, rx) = oneshot::channel();
    drop(five_steps(&a, rx, &ran));
    gate.send(()).unwrap();
    a.shutdown().unwrap(); // waits for every accepted task
    assert_eq!(counts(&ran), [1, 1, 1, 1, 1]);
}

/// Nothing has run: aborting the last handle cancels all five steps.
#[test]
fn abort_cancels_every_step_not_started() {
    let manual = ManualExecutor::new();
    let ran = counters(5);
    let (gate, rx) = oneshot::channel();
    let end = five_steps(&manual, rx, &ran);
    end.abort();
    let _ = gate.send(());
    manual.run_until_idle();
    assert_eq!(counts(&ran), [0, 0, 0, 0, 0]);
    assert!(block_on(end).unwrap_err().is_cancelled());
}

/// Step 1 has started and waits for the gate; the gate opens right after
/// the abort, and its wake-up is queued before the cancellation of any
/// step would be if cancelling were left to the queue. Still, nothing runs:
/// `abort` cancelled every step before it returned.
#[test]
fn abort_cancels_a_waiting_first_step_before_its_wakeup() {
    let manual = ManualExecutor::new();
    let ran = counters(5);
    let (gate, rx) = oneshot::channel();
    let end = five_steps(&manual, rx, &ran);
    manual.run_until_idle(); // step 1 waits for the gate, 2..5 for their input
    end.abort();
    gate.send(()).unwrap();
    manual.run_until_idle();
    assert_eq!(counts(&ran), [0, 0, 0, 0, 0]);
    assert!(block_on(end).unwrap_err().is_cancelled());
}

/// Steps 1 and 2 finished, step 3 is running on the pool when the chain is
/// aborted: step 3 completes, 4 and 5 never run.
#[test]
fn abort_keeps_what_ran_and_stops_the_rest() {
    let a = pool("a");
    let ran = counters(5);
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let r = ran.clone();
    let (r1, r2, r3, r4) = (ran.clone(), ran.clone(), ran.clone(), ran.clone());
    let end = a
        .run(move || r[0].fetch_add(1, SeqCst))
        .then(move |_| r1[1].fetch_add(1, SeqCst))
        .then(move |_| {
            started_tx.send(()).unwrap();
            release_rx.lock().unwrap().recv().unwrap();
            r2[2].fetch_add(1, SeqCst)
        })
        .then(move |_| r3[3].fetch_add(1, SeqCst))
        .then(move |_| r4[4].fetch_add(1, SeqCst));
    started_rx.recv().unwrap();
    end.abort();
    release_tx.send(()).unwrap();
    a.shutdown().unwrap();
    assert_eq!(counts(&ran), [1, 1, 1, 0, 0]);
    assert!(block_on(end).unwrap_err().is_cancelled());
}

/// Aborting a million-step chain that has not started walks it back in
/// constant stack.
#[test]
fn aborting_a_long_waiting_chain_cancels_all_of_it() {
    let manual = ManualExecutor::new();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let mut h = manual.run(move || r.fetch_add(1, SeqCst) as u64);
    for _ in 0..LONG {
        let r = ran.clone();
        h = h.then(move |x| {
            r.fetch_add(1, SeqCst);
            x + 1
        });
    }
    let aborter = thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            h.abort();
            h
        })
        .unwrap();
    let h = aborter.join().unwrap();
    manual.run_until_idle();
    assert_eq!(ran.load(SeqCst), 0);
    assert!(block_on(h).unwrap_err().is_cancelled());
}

// ---------------------------------------------------------------- racing the step before

/// The step before often ends while its step is being chained or first
/// polled: every value still arrives once, in its own step, and every
/// value is dropped once.
#[test]
fn a_step_gets_its_input_when_the_step_before_ends_while_it_is_chained() {
    within("chained while ending", || {
        struct Counted(u64, Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.1.fetch_add(1, SeqCst);
            }
        }
        let pool = ThreadPool::builder().threads(2).build().unwrap();
        let dropped = Arc::new(AtomicUsize::new(0));
        const N: u64 = 20_000;
        let steps: Vec<_> = (0..N)
            .map(|i| {
                let d = dropped.clone();
                pool.run(move || Counted(i, d)).then(|c| c.0 * 2)
            })
            .collect();
        for (i, step) in steps.into_iter().enumerate() {
            assert_eq!(block_on(step).unwrap(), i as u64 * 2);
        }
        assert_eq!(dropped.load(SeqCst), N as usize);
    });
}

/// Aborting a step whose step before never runs ends it on its own pool:
/// it does not wait for the step before to end.
#[test]
fn an_aborted_step_ends_without_waiting_for_the_step_before() {
    within("abort unstarted", || {
        let manual = ManualExecutor::new();
        let pool = pool("abort-unstarted");
        let first = manual.spawn(std::future::pending::<u8>());
        let first_abort = first.abort_handle();
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let step = first.via(&pool).then(move |x| {
            r.store(true, SeqCst);
            x
        });
        let step_abort = step.abort_handle();
        step.abort();
        // The step's future is dropped on the pool.
        while !step_abort.is_finished() {
            thread::yield_now();
        }
        manual.run_until_idle();
        assert!(first_abort.is_finished());
        assert!(!ran.load(SeqCst));
        assert!(block_on(step).unwrap_err().is_cancelled());
    });
}

/// A step chained on a task of a pool before the task's first poll has
/// ended waits in line behind that poll, not in the pool's queue: it goes
/// there when the poll ends, and then finds its input ready. (Scheduled at
/// once, it sat in the queue beside the task, and could be polled first
/// to find its input not ready.)
#[test]
fn a_step_chained_before_the_step_before_ran_waits_in_line_behind_it() {
    within("in line", || {
        let pool = ThreadPool::builder().threads(1).build().unwrap();
        let (go, gate) = std::sync::mpsc::channel::<()>();
        let (started, running) = std::sync::mpsc::channel::<()>();
        let busy = pool.run(move || {
            started.send(()).unwrap();
            gate.recv().unwrap();
        });
        running.recv().unwrap();
        let step = pool.run(|| 20u8).then(|x| x + 1);
        assert_eq!(pool.metrics().queued, 1, "only the task before the step");
        // Behind a step in line, nothing waits in line: the next step is
        // queued at once.
        let next = step.then(|x| x * 2);
        assert_eq!(pool.metrics().queued, 2);
        go.send(()).unwrap();
        assert_eq!(block_on(next).unwrap(), 42);
        block_on(busy).unwrap();
    });
}

/// Aborting the task a step waits in line behind does not let the step
/// go while the task's poll runs: the task's handle resolves only once its
/// future is dropped, after that poll, and the poll, which finishes the
/// task, wins over the abort (as in tokio).
#[test]
fn aborting_the_task_ahead_mid_poll_keeps_its_value_for_the_step_in_line() {
    within("abort ahead", || {
        let pool = ThreadPool::builder().threads(2).build().unwrap();
        let (go, gate) = std::sync::mpsc::channel::<()>();
        let (started, running) = std::sync::mpsc::channel::<()>();
        let first = pool.run(move || {
            started.send(()).unwrap();
            gate.recv().unwrap();
            1u8
        });
        running.recv().unwrap();
        let first_abort = first.abort_handle();
        let step = first.then_try(|r| r.unwrap());
        first_abort.abort();
        assert!(!step.is_finished(), "the first task's poll still runs");
        go.send(()).unwrap();
        assert_eq!(block_on(step).unwrap(), 1);
        assert!(first_abort.is_finished());
    });
}

/// A step chained onto a handle that is already over (a refusal, an
/// aborted task) runs at once.
#[test]
fn a_step_after_a_handle_already_over_starts_at_once() {
    within("over already", || {
        let manual = ManualExecutor::new();
        let closed = ManualExecutor::new();
        closed.close();
        let refused = closed.run(|| 1u8).via(&manual).then_try(|r| r.is_err());
        let aborted = manual.spawn(std::future::pending::<u8>());
        aborted.abort();
        let after_abort = aborted.then_try(|r| r.unwrap_err().is_cancelled());
        // The aborted task's future is dropped, and the two steps run.
        assert_eq!(manual.run_until_idle(), 3);
        assert!(block_on(refused).unwrap());
        assert!(block_on(after_abort).unwrap());
    });
}

// ---------------------------------------------------------------- hop_to

#[test]
fn after_a_hop_the_task_runs_on_the_target_pool() {
    let a = pool("a");
    let b = pool("b");
    let (a2, b2) = (a.clone(), b.clone());
    let seen = a.spawn(async move {
        let mut seen = vec![(thread_name(), ThreadPool::current().unwrap().same_pool(&a2))];
        hop_to(&b2).await;
        seen.push((thread_name(), ThreadPool::current().unwrap().same_pool(&b2)));
        hop_to(&a2).await;
        seen.push((thread_name(), ThreadPool::current().unwrap().same_pool(&a2)));
        seen
    });
    let seen = block_on(seen).unwrap();
    let expected = [("a-0", true), ("b-0", true), ("a-0", true)];
    assert_eq!(seen, expected.map(|(n, same)| (n.to_owned(), same)));
}

/// A task that hopped stays where it went: its continuations, chained
/// without `via`, run there too.
#[test]
fn a_hopped_task_keeps_its_new_executor_for_continuations() {
    let a = pool("a");
    let b = pool("b");
    let b2 = b.clone();
    let (hopped_tx, hopped_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let task = a.spawn(async move {
        hop_to(&b2).await;
        hopped_tx.send(()).unwrap();
        go_rx.await.unwrap();
    });
    // A continuation goes where the task is when `then` is called.
    hopped_rx.recv().unwrap();
    let next = task.then(|()| thread_name());
    go_tx.send(()).unwrap();
    assert_eq!(block_on(next).unwrap(), "b-0");
}

/// A hop to a manual executor parks the task until that executor is run.
#[test]
fn a_hop_to_a_manual_executor_waits_for_it() {
    let a = pool("a");
    let manual = ManualExecutor::new();
    let m = manual.clone();
    let task = a.spawn(async move {
        hop_to(&m).await;
        thread::current().id()
    });
    // The first poll on `a` queues the task on `manual`.
    while manual.is_empty() {
        thread::yield_now();
    }
    assert!(!task.is_finished());
    assert_eq!(manual.run_until(task).unwrap(), thread::current().id());
}

#[test]
fn try_hop_to_in_a_tokio_task_returns_the_error() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let a = pool("a");
    let result = rt.block_on(async move {
        tokio::spawn(async move { try_hop_to(&a).await.map(|()| thread_name()) })
            .await
            .unwrap()
    });
    let err = result.unwrap_err();
    assert!(err.to_string().contains("spawn the future"));
}

#[test]
#[should_panic(expected = "or use `try_hop_to`")]
fn hop_to_outside_a_viaduct_task_panics_saying_what_to_do() {
    let a = pool("a");
    futures::executor::block_on(hop_to(&a));
}

/// A `block_on` inside a viaduct task polls its future with a waker of its
/// own: a hop there has no task to move (moving the outer task would not
/// move the future under `block_on`), so it fails and nothing moves, and
/// the outer task stays where it was. The same for a combinator that wakes
/// its parts separately.
#[test]
fn try_hop_to_under_a_block_on_inside_a_task_fails_and_moves_nothing() {
    let a = pool("a");
    let io = pool("io");
    let io2 = io.clone();
    let names = a.spawn(async move {
        let nested = block_on(try_hop_to(&io2));
        let foreign = futures::executor::block_on(try_hop_to(&io2));
        let mut parts = futures::stream::FuturesUnordered::new();
        parts.push(try_hop_to(&io2));
        let unordered = futures::StreamExt::next(&mut parts).await.unwrap();
        let during = thread_name();
        // Give a wrongly moved task the chance to show it.
        viaduct::time::sleep(std::time::Duration::from_millis(1)).await;
        (
            nested.is_err(),
            foreign.is_err(),
            unordered.is_err(),
            during,
            thread_name(),
        )
    });
    assert_eq!(
        block_on(names).unwrap(),
        (true, true, true, "a-0".to_owned(), "a-0".to_owned())
    );
}

/// Eight tasks hop into one strand, add one to a plain counter (a load and
/// a store, with a yield between them to invite a race) with an overlap
/// check, and hop back out (folly's `TeleportGuard`). The pool has two
/// threads, so only the strand keeps the sections apart.
#[test]
fn eight_tasks_hopping_into_one_strand_never_overlap() {
    let pool = ThreadPool::builder().threads(2).name("w").build().unwrap();
    let strand = Strand::new(pool.clone());
    let counter = Arc::new(AtomicUsize::new(0));
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    const TASKS: usize = 8;
    const ROUNDS: usize = 1000;
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (home, strand) = (pool.clone(), strand.clone());
            let (counter, inside, overlaps) = (counter.clone(), inside.clone(), overlaps.clone());
            pool.spawn(async move {
                for _ in 0..ROUNDS {
                    hop_to(&strand).await;
                    assert!(strand.running_in_this_thread());
                    assert!(thread_name().starts_with("w-"));
                    if inside.swap(true, SeqCst) {
                        overlaps.fetch_add(1, SeqCst);
                    }
                    let n = counter.load(SeqCst);
                    thread::yield_now();
                    counter.store(n + 1, SeqCst);
                    inside.store(false, SeqCst);
                    hop_to(&home).await;
                    assert!(!strand.running_in_this_thread());
                }
            })
        })
        .collect();
    for t in tasks {
        block_on(t).unwrap();
    }
    assert_eq!(overlaps.load(SeqCst), 0);
    assert_eq!(counter.load(SeqCst), TASKS * ROUNDS);
}

// `and_then`: a step that returns a handle gives a handle, not a handle of
// a handle.

#[test]
fn and_then_flattens_a_step_that_returns_a_handle() {
    let cpu = pool("and-cpu");
    let io = pool("and-io");
    let io2 = io.clone();
    let flat: JoinHandle<String> = cpu
        .run(|| 20)
        .and_then(move |n| io2.run(move || format!("{} on {}", n + 1, thread_name())));
    assert_eq!(block_on(flat).unwrap(), "21 on and-io-0");
}

#[test]
fn and_then_short_circuits_errors_on_both_sides() {
    let ex = ManualExecutor::new();
    let called = Arc::new(AtomicBool::new(false));
    let c = called.clone();
    let skipped = ex
        .run(|| -> u32 { panic!("first step") })
        .and_then(move |n| {
            c.store(true, SeqCst);
            Inline.run(move || n)
        });
    ex.run_until_idle();
    assert_eq!(
        block_on(skipped).unwrap_err().panic_message(),
        Some("first step")
    );
    assert!(!called.load(SeqCst));

    // The returned handle's error travels on.
    let closed = ManualExecutor::new();
    closed.close();
    let refused = ex.run(|| 1).and_then(move |n| closed.run(move || n));
    ex.run_until_idle();
    assert!(matches!(
        block_on(refused),
        Err(TaskError::Rejected(RejectReason::Closed))
    ));

    // A panic in the step itself.
    let panicked = ex
        .run(|| 1)
        .and_then(|_| -> JoinHandle<u32> { panic!("in the step") });
    ex.run_until_idle();
    assert_eq!(
        block_on(panicked).unwrap_err().panic_message(),
        Some("in the step")
    );
}

#[test]
fn aborting_and_then_aborts_the_work_it_stands_for() {
    let ex = ManualExecutor::new();
    let inner = ManualExecutor::new();
    let dropped = Arc::new(AtomicBool::new(false));
    let d = dropped.clone();
    let (inner2, started) = (inner.clone(), Arc::new(AtomicBool::new(false)));
    let s = started.clone();
    let flat = ex.run(|| ()).and_then(move |()| {
        s.store(true, SeqCst);
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, SeqCst);
            }
        }
        let flag = Flag(d);
        inner2.spawn(async move {
            let _flag = flag;
            std::future::pending::<u32>().await
        })
    });
    ex.run_until_idle(); // the step ran and awaits the inner handle
    inner.run_until_idle(); // the inner task is parked
    assert!(started.load(SeqCst));
    flat.abort();
    ex.run_until_idle(); // the step's future goes, aborting the inner handle
    inner.run_until_idle(); // which its executor drops
    assert!(dropped.load(SeqCst));
    assert!(block_on(flat).unwrap_err().is_cancelled());
}

/// A finished step kept beside its continuation (so that both are freed
/// on the awaiting thread) must not keep another executor alive: here
/// the step before ran on a `Guarded`'s strand, whose executor keeps the
/// value alive, and the continuation runs `via` the pool. A handle kept
/// unread, even inside that very value, must not keep the value.
#[test]
fn a_finished_step_kept_with_its_continuation_keeps_no_other_executor_alive() {
    within("kept", || {
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, SeqCst);
            }
        }
        let pool = pool("kept");
        let dropped = Arc::new(AtomicBool::new(false));
        let value = Guarded::new(pool.clone(), (Flag(dropped.clone()), None));
        let last = value.with(|_| 1).via(&pool).then(|n| n + 1);
        let over = last.abort_handle();
        while !over.is_finished() {
            thread::yield_now();
        }
        // The chain's last handle, unread, stored in the value it used.
        block_on(value.lock()).1 = Some(last);
        drop(value);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !dropped.load(SeqCst) {
            assert!(
                std::time::Instant::now() < deadline,
                "the value is kept alive by the handle stored in it"
            );
            thread::yield_now();
        }
    });
}
