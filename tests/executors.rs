//! The simple executors (`Inline`, `ManualExecutor`, `ThreadPerTask`), the
//! type-erased `Exec`, a user-written executor, and `futures::task::Spawn`.
//!
//! Everything that could hang runs under [`within`], which fails the test
//! after a generous deadline instead.

mod support;

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use futures::channel::oneshot;
use support::{quiet_test_panics, within, DropFlag, DEADLINE, TEST_PANIC};
use viaduct::pool::WaitError;
use viaduct::{
    block_on, Exec, Executor, ExecutorExt, Inline, ManualExecutor, RejectReason, Runnable,
    TaskError, ThreadPerTask, ThreadPool,
};

fn thread_name() -> String {
    thread::current().name().unwrap_or("<unnamed>").to_owned()
}

/// A log the tasks of one test append to, in the order they run.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, entry: impl Into<String>) {
        self.0.lock().unwrap().push(entry.into());
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Runs `f` on a thread with a deliberately small stack, so that a
/// recursion that should have been a loop overflows it.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    thread::Builder::new()
        .name("small-stack".into())
        .stack_size(256 * 1024)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

// ---- Inline ----

#[test]
fn inline_runs_on_the_calling_thread_before_spawn_returns() {
    let handle = Inline.run(thread_name);
    assert!(handle.is_finished());
    assert_eq!(block_on(handle).unwrap(), thread_name());
}

#[test]
fn inline_nested_schedules_queue_behind_the_running_one() {
    let log = Log::default();
    let l = log.clone();
    let outer = Inline.run(move || {
        l.push("outer starts");
        let inner_log = l.clone();
        let inner = Inline.run(move || inner_log.push("inner"));
        // On the trampoline: queued, not run from inside this call.
        l.push(format!("inner finished: {}", inner.is_finished()));
        inner
    });
    let inner = block_on(outer).unwrap();
    assert!(inner.is_finished());
    assert_eq!(
        log.take(),
        ["outer starts", "inner finished: false", "inner"]
    );
}

/// Wakes itself `left` times before completing; returns how often it was
/// polled.
struct WakeSelf {
    left: usize,
    polls: usize,
}

impl Future for WakeSelf {
    type Output = usize;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        self.polls += 1;
        if self.left == 0 {
            return Poll::Ready(self.polls);
        }
        self.left -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[test]
fn inline_task_waking_itself_a_million_times_does_not_overflow_the_stack() {
    let polls = within("inline self-wake", || {
        on_small_stack(|| {
            let handle = Inline.spawn(WakeSelf {
                left: 1_000_000,
                polls: 0,
            });
            assert!(handle.is_finished());
            block_on(handle).unwrap()
        })
    });
    assert_eq!(polls, 1_000_001);
}

fn chain(left: usize, steps: Arc<AtomicUsize>) {
    steps.fetch_add(1, SeqCst);
    if left > 0 {
        Inline.execute(move || chain(left - 1, steps));
    }
}

#[test]
fn inline_million_deep_chain_of_schedules_does_not_overflow_the_stack() {
    let steps = within("inline chain", || {
        on_small_stack(|| {
            let steps = Arc::new(AtomicUsize::new(0));
            let s = steps.clone();
            Inline.execute(move || chain(1_000_000, s));
            steps.load(SeqCst)
        })
    });
    assert_eq!(
        steps, 1_000_001,
        "the whole chain ran before execute returned"
    );
}

#[test]
fn inline_panics_reach_the_handle_and_the_trampoline_goes_on() {
    quiet_test_panics();
    let after = Arc::new(AtomicBool::new(false));
    let a = after.clone();
    let outer = Inline.run(move || {
        let failed = Inline.run(|| panic!("{TEST_PANIC}: inline"));
        Inline.execute(move || a.store(true, SeqCst));
        failed
    });
    let failed = block_on(outer).unwrap();
    assert_eq!(
        block_on(failed).unwrap_err().panic_message(),
        Some("test panic: inline")
    );
    assert!(after.load(SeqCst), "work queued after the panic still ran");
    assert_eq!(block_on(Inline.run(|| 5)).unwrap(), 5);
}

// ---- ManualExecutor ----

fn queue_logged(ex: &ManualExecutor, log: &Log, names: &[&'static str]) {
    for &name in names {
        let log = log.clone();
        ex.execute(move || log.push(name));
    }
}

#[test]
fn manual_run_at_most_one_runs_exactly_the_first() {
    let ex = ManualExecutor::new();
    let log = Log::default();
    queue_logged(&ex, &log, &["a", "b", "c"]);
    assert_eq!(ex.len(), 3);
    assert!(log.take().is_empty(), "nothing runs until asked");
    assert!(ex.run_at_most_one());
    assert_eq!(log.take(), ["a"]);
    assert_eq!(ex.len(), 2);
    assert_eq!(ex.run_at_most(5), 2);
    assert_eq!(log.take(), ["b", "c"]);
    assert!(!ex.run_at_most_one());
    assert!(ex.is_empty());
}

/// Queues `n` tasks on `ex` that each queue a follow-up when they run.
fn queue_with_follow_ups(ex: &ManualExecutor, log: &Log, n: usize) {
    for i in 0..n {
        let (ex2, log) = (ex.clone(), log.clone());
        ex.execute(move || {
            log.push(format!("first {i}"));
            let log = log.clone();
            ex2.execute(move || log.push(format!("follow-up {i}")));
        });
    }
}

#[test]
fn manual_run_queued_leaves_what_tasks_queue_meanwhile() {
    let ex = ManualExecutor::new();
    let log = Log::default();
    queue_with_follow_ups(&ex, &log, 3);
    assert_eq!(ex.run_queued(), 3);
    assert_eq!(log.take(), ["first 0", "first 1", "first 2"]);
    assert_eq!(ex.len(), 3, "the follow-ups wait for the next call");
    assert_eq!(ex.run_queued(), 3);
    assert_eq!(log.take(), ["follow-up 0", "follow-up 1", "follow-up 2"]);
    assert_eq!(ex.run_queued(), 0);
}

#[test]
fn manual_run_until_idle_includes_what_tasks_queue_meanwhile() {
    let ex = ManualExecutor::new();
    let log = Log::default();
    queue_with_follow_ups(&ex, &log, 3);
    assert_eq!(ex.run_until_idle(), 6);
    assert_eq!(log.take().len(), 6);
    assert!(ex.is_empty());
}

#[test]
fn manual_run_until_drives_tasks_and_waits_for_other_threads() {
    within("run_until", || {
        let ex = ManualExecutor::new();
        let a = ex.spawn(async { 20 });
        let b = ex.run(|| 22);
        assert_eq!(
            ex.run_until(async move { a.await.unwrap() + b.await.unwrap() }),
            42
        );

        // A task woken from another thread is scheduled from there; the
        // waiting run_until must notice and run it.
        let (tx, rx) = oneshot::channel::<&str>();
        let task = ex.spawn(async move { (rx.await.unwrap(), thread_name()) });
        let sender = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            tx.send("from afar").unwrap();
        });
        let (msg, ran_on) = ex.run_until(task).unwrap();
        assert_eq!((msg, ran_on), ("from afar", thread_name()));
        sender.join().unwrap();
    });
}

#[test]
fn manual_run_until_closed_donates_a_thread_until_closed_and_drained() {
    within("run_until_closed", || {
        let ex = ManualExecutor::new();
        let looper = {
            let ex = ex.clone();
            thread::Builder::new()
                .name("looper".into())
                .spawn(move || ex.run_until_closed())
                .unwrap()
        };
        let feeders: Vec<_> = (0..2)
            .map(|_| {
                let ex = ex.clone();
                thread::spawn(move || {
                    let handles: Vec<_> = (0..100).map(|_| ex.run(thread_name)).collect();
                    handles
                        .into_iter()
                        .map(|h| block_on(h).unwrap())
                        .collect::<BTreeSet<_>>()
                })
            })
            .collect();
        for f in feeders {
            assert_eq!(f.join().unwrap(), BTreeSet::from(["looper".to_owned()]));
        }
        ex.close();
        assert_eq!(looper.join().unwrap(), 200);
        assert!(matches!(
            block_on(ex.spawn(async {})),
            Err(TaskError::Rejected(RejectReason::Closed))
        ));

        // Closed with work queued: the donated thread drains it, then returns.
        let ex = ManualExecutor::new();
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..10 {
            let ran = ran.clone();
            ex.execute(move || {
                ran.fetch_add(1, SeqCst);
            });
        }
        ex.close();
        assert_eq!(ex.run_until_closed(), 10);
        assert_eq!(ran.load(SeqCst), 10);
    });
}

#[test]
fn manual_is_safe_to_feed_from_many_threads() {
    within("manual feeders", || {
        let ex = ManualExecutor::new();
        let ran = Arc::new(AtomicUsize::new(0));
        let feeders: Vec<_> = (0..4)
            .map(|_| {
                let (ex, ran) = (ex.clone(), ran.clone());
                thread::spawn(move || {
                    for _ in 0..10_000 {
                        let ran = ran.clone();
                        ex.execute(move || {
                            ran.fetch_add(1, SeqCst);
                        });
                    }
                })
            })
            .collect();
        for f in feeders {
            f.join().unwrap();
        }
        assert_eq!(ex.len(), 40_000);
        assert_eq!(ex.run_until_idle(), 40_000);
        assert_eq!(ran.load(SeqCst), 40_000);
    });
}

#[test]
fn manual_closed_hands_work_back_but_runs_what_it_accepted() {
    let ex = ManualExecutor::new();
    let accepted = ex.run(|| "accepted");
    ex.close();
    assert!(ex.is_closed());
    let rejected = ex.try_spawn(async { 7 }).unwrap_err();
    assert_eq!(rejected.reason(), RejectReason::Closed);
    assert_eq!(block_on(Inline.spawn(rejected.into_inner())).unwrap(), 7);
    assert!(matches!(
        block_on(ex.run(|| ())),
        Err(TaskError::Rejected(RejectReason::Closed))
    ));
    assert_eq!(ex.run_until_idle(), 1);
    assert_eq!(block_on(accepted).unwrap(), "accepted");
}

#[test]
fn abort_cancels_a_queued_task_and_drops_its_future() {
    let ex = ManualExecutor::new();
    let (polled, dropped) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (p, flag) = (polled.clone(), DropFlag(dropped.clone()));
    let handle = ex.spawn(async move {
        let _flag = flag;
        p.store(true, SeqCst);
    });
    handle.abort();
    assert!(!handle.is_finished(), "its future is not dropped yet");
    ex.run_until_idle();
    assert!(handle.is_finished());
    assert!(!polled.load(SeqCst), "an aborted task is not polled");
    assert!(dropped.load(SeqCst), "its future is dropped");
    assert!(matches!(block_on(handle), Err(TaskError::Cancelled)));

    // Aborting a finished task keeps its result.
    let done = ex.run(|| 3);
    ex.run_until_idle();
    done.abort();
    assert_eq!(block_on(done).unwrap(), 3);
}

#[test]
fn dropping_every_manual_handle_cancels_its_tasks() {
    let ex = ManualExecutor::new();
    // Polled once, then woken after the last handle is gone.
    let (tx, rx) = oneshot::channel::<()>();
    let waiting = ex.spawn(rx);
    assert_eq!(ex.run_until_idle(), 1);
    // Still queued when the last handle goes.
    let (polled, dropped) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (p, flag) = (polled.clone(), DropFlag(dropped.clone()));
    let queued = ex.spawn(async move {
        let _flag = flag;
        p.store(true, SeqCst);
    });

    let erased = Exec::new(ex.clone());
    drop(ex);
    assert!(
        !erased.is_closed(),
        "an Exec made by Exec::new is a handle too"
    );
    assert!(!dropped.load(SeqCst));
    drop(erased);
    assert!(
        dropped.load(SeqCst),
        "the queued future is dropped with the last handle"
    );
    assert!(!polled.load(SeqCst));
    // Nobody can run the tasks any more: they end, rather than wait forever.
    let outcome = within("orphaned manual task", move || block_on(queued));
    assert!(matches!(outcome, Err(TaskError::Cancelled)), "{outcome:?}");
    tx.send(()).unwrap();
    let outcome = within("orphaned manual task, woken", move || block_on(waiting));
    assert!(matches!(outcome, Err(TaskError::Cancelled)), "{outcome:?}");
}

// ---- ThreadPerTask ----

#[test]
fn thread_per_task_names_its_threads_and_join_waits_for_them() {
    within("thread per task", || {
        let ex = ThreadPerTask::new("io");
        let finished = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let finished = finished.clone();
                ex.run(move || {
                    thread::sleep(Duration::from_millis(30));
                    finished.fetch_add(1, SeqCst);
                    (thread_name(), thread::current().id())
                })
            })
            .collect();
        ex.join_threads().unwrap();
        assert_eq!(finished.load(SeqCst), 3, "join returned before its threads");
        let ran: Vec<_> = handles.into_iter().map(|h| block_on(h).unwrap()).collect();
        let names: BTreeSet<_> = ran.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, BTreeSet::from(["io-0", "io-1", "io-2"]));
        let ids: BTreeSet<_> = ran.iter().map(|(_, id)| format!("{id:?}")).collect();
        assert_eq!(ids.len(), 3, "one thread each");
    });
}

#[test]
fn thread_per_task_join_from_its_own_thread_is_an_error() {
    within("thread per task self-join", || {
        let ex = ThreadPerTask::new("self");
        let me = ex.clone();
        assert_eq!(
            block_on(ex.run(move || me.join_threads())).unwrap(),
            Err(WaitError::OwnThread)
        );
        ex.join_threads().unwrap();
    });
}

#[test]
fn thread_per_task_runs_each_wake_up_on_a_new_thread() {
    within("thread per task wake", || {
        let ex = ThreadPerTask::new("wake");
        let (tx, rx) = oneshot::channel::<()>();
        let (waiting_tx, waiting) = std::sync::mpsc::channel();
        let task = ex.spawn(async move {
            let before = thread_name();
            let (mut rx, mut waiting_tx) = (rx, Some(waiting_tx));
            futures::future::poll_fn(|cx| {
                let polled = Pin::new(&mut rx).poll(cx);
                if polled.is_pending() {
                    // Its waker is registered now: the send below wakes it.
                    if let Some(w) = waiting_tx.take() {
                        w.send(()).unwrap();
                    }
                }
                polled
            })
            .await
            .unwrap();
            (before, thread_name())
        });
        waiting.recv_timeout(DEADLINE).unwrap();
        tx.send(()).unwrap();
        assert_eq!(
            block_on(task).unwrap(),
            ("wake-0".to_owned(), "wake-1".to_owned())
        );
        ex.join_threads().unwrap();
    });
}

#[test]
fn thread_per_task_closed_hands_work_back() {
    let ex = ThreadPerTask::new("closed-tpt");
    ex.close();
    assert!(ex.is_closed());
    let rejected = ex.try_execute(|| ()).unwrap_err();
    assert_eq!(rejected.reason(), RejectReason::Closed);
    assert!(matches!(
        block_on(ex.spawn(async {})),
        Err(TaskError::Rejected(RejectReason::Closed))
    ));
    ex.join_threads().unwrap();
}

// ---- Exec and user executors ----

#[test]
fn exec_erases_any_executor_and_forwards_everything() {
    within("exec", || {
        let pool = ThreadPool::builder()
            .threads(1)
            .name("exec-pool")
            .build()
            .unwrap();
        let manual = ManualExecutor::new();
        let by_name = [
            ("pool", Exec::new(pool.clone())),
            ("manual", Exec::new(manual.clone())),
            ("inline", Exec::new(Inline)),
            ("thread-per-task", Exec::new(ThreadPerTask::new("exec-tpt"))),
        ];
        for (name, ex) in &by_name {
            let h = ex.run(thread_name);
            manual.run_until_idle();
            let ran_on = block_on(h).unwrap();
            let expected = match *name {
                "pool" => "exec-pool-0".to_owned(),
                "thread-per-task" => "exec-tpt-0".to_owned(),
                _ => thread_name(),
            };
            assert_eq!(ran_on, expected, "{name}");
        }

        let erased = Exec::new(manual.clone());
        assert!(
            Exec::new(erased.clone()).same_as(&erased),
            "not wrapped twice"
        );
        assert!(!Exec::new(manual.clone()).same_as(&erased));
        erased.close();
        assert!(manual.is_closed(), "close goes through to the executor");
        let rejected = erased.try_spawn(async { 1 }).unwrap_err();
        assert_eq!(rejected.reason(), RejectReason::Closed);

        // An Exec keeps a pool open after the last ThreadPool handle goes.
        let keeper = Exec::new(pool.clone());
        drop(by_name);
        drop(pool);
        assert!(!keeper.is_closed());
        assert_eq!(block_on(keeper.run(|| 2)).unwrap(), 2);
    });
}

/// A user's executor: a queue drained by hand, and a close flag.
#[derive(Clone, Default)]
struct Queue {
    runnables: Arc<Mutex<Vec<Runnable>>>,
    closed: Arc<AtomicBool>,
}

impl Executor for Queue {
    fn schedule(&self, runnable: Runnable) {
        self.runnables.lock().unwrap().push(runnable);
    }
    fn close(&self) {
        self.closed.store(true, SeqCst);
    }
    fn is_closed(&self) -> bool {
        self.closed.load(SeqCst)
    }
}

#[test]
fn a_user_executor_gets_spawn_and_rejection_from_the_defaults() {
    let q = Queue::default();
    let h = q.spawn(async { "mine" });
    let queued = std::mem::take(&mut *q.runnables.lock().unwrap());
    assert_eq!(queued.len(), 1);
    queued.into_iter().for_each(|r| {
        r.run();
    });
    assert_eq!(block_on(h).unwrap(), "mine");

    q.close();
    let rejected = q.try_spawn(async { 1 }).unwrap_err();
    assert_eq!(rejected.reason(), RejectReason::Closed);
    assert!(matches!(
        block_on(Exec::new(q.clone()).spawn(async {})),
        Err(TaskError::Rejected(RejectReason::Closed))
    ));
    assert!(q.runnables.lock().unwrap().is_empty(), "nothing scheduled");
}

// ---- futures::task::Spawn ----

#[test]
fn futures_spawn_runs_detached_work_and_reports_closed_or_full_as_shutdown() {
    // Imported here only: its `spawn` and `ExecutorExt::spawn` would be
    // ambiguous everywhere else.
    use futures::task::{Spawn, SpawnExt};
    within("futures Spawn", || {
        let ran = Arc::new(AtomicUsize::new(0));
        let job = || {
            let ran = ran.clone();
            async move {
                ran.fetch_add(1, SeqCst);
            }
        };
        let manual = ManualExecutor::new();
        let tpt = ThreadPerTask::new("spawn-trait");
        SpawnExt::spawn(&Inline, job()).unwrap();
        SpawnExt::spawn(&manual, job()).unwrap();
        SpawnExt::spawn(&Exec::new(manual.clone()), job()).unwrap();
        SpawnExt::spawn(&tpt, job()).unwrap();
        assert_eq!(manual.run_until_idle(), 2);
        tpt.join_threads().unwrap();
        assert_eq!(ran.load(SeqCst), 4);

        assert!(manual.status().is_ok() && tpt.status().is_ok());
        let closed_manual = ManualExecutor::new();
        let closed_tpt = ThreadPerTask::new("closed-spawn");
        let closed_exec = Exec::new(ManualExecutor::new());
        let closed: [(&dyn Spawn, &str); 3] = [
            (&closed_manual, "manual"),
            (&closed_tpt, "thread-per-task"),
            (&closed_exec, "exec"),
        ];
        closed_manual.close();
        closed_tpt.close();
        closed_exec.close();
        for (ex, name) in closed {
            assert!(ex.status().unwrap_err().is_shutdown(), "{name}");
            assert!(ex.spawn(job()).unwrap_err().is_shutdown(), "{name}");
        }
        assert!(Inline.status().is_ok(), "Inline never closes");

        let bounded = ThreadPool::builder()
            .threads(1)
            .name("spawn-full")
            .max_pending(1)
            .build()
            .unwrap();
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let busy = bounded.run(move || wait.recv_timeout(DEADLINE).unwrap());
        assert!(SpawnExt::spawn(&bounded, job()).unwrap_err().is_shutdown());
        release.send(()).unwrap();
        block_on(busy).unwrap();
        bounded.shutdown().unwrap();
        assert_eq!(ran.load(SeqCst), 4, "refused work never ran");
    });
}
