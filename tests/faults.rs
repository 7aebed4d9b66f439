//! Regressions for the faults an outside attack found in 0.1, one group
//! per fault (numbered as in the 0.2 issue): hangs, leaks, dying workers,
//! process aborts and work slipping past close and bounds. Every test here
//! failed (hung, aborted or asserted) on 0.1; a hang fails the test within
//! `support::DEADLINE` instead of stalling CI.

mod support;

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::task::Poll;
use std::thread;
use std::time::Duration;

use support::{pool, quiet_test_panics, within, DEADLINE, TEST_PANIC};
use viaduct::future::HopError;
use viaduct::pool::{BuildError, WaitError};
use viaduct::{
    block_on, hop_to, try_hop_to, Executor, ExecutorExt, Guarded, Inline, KeyedStrands,
    ManualExecutor, RejectReason, Runnable, Strand, TaskError, ThreadPerTask, ThreadPool,
};

// 1. Lost wake-up in `block_on` off the pool.

/// The handle finishes (and wakes `block_on`'s waker) while the second
/// future's poll is parked inside `pool.join`, whose park loop takes the
/// thread's park token; `block_on` must still see the wake-up.
#[test]
fn block_on_off_the_pool_keeps_a_wake_up_taken_by_a_join_parking_in_the_poll() {
    within("join parks in the poll", || {
        let cpu = pool("lost", 2);
        let handle = cpu.run(|| {
            thread::sleep(Duration::from_millis(5));
            1
        });
        let p = cpu.clone();
        let (a, (b, c)) = block_on(async move {
            futures::join!(handle, async {
                p.join(|| thread::sleep(Duration::from_millis(200)), || 2)
            })
        });
        assert_eq!((a.unwrap(), b, c), (1, (), 2));
    });
}

/// The same with a std channel's `recv`, which parks the thread too.
#[test]
fn block_on_off_the_pool_keeps_a_wake_up_taken_by_a_recv_in_the_poll() {
    within("recv parks in the poll", || {
        let cpu = pool("lost-recv", 1);
        let handle = cpu.run(|| {
            thread::sleep(Duration::from_millis(5));
            1
        });
        let (tx, rx) = mpsc::channel();
        let sender = thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            tx.send(2).unwrap();
        });
        let (a, b) = block_on(async move { futures::join!(handle, async { rx.recv().unwrap() }) });
        assert_eq!((a.unwrap(), b), (1, 2));
        sender.join().unwrap();
    });
}

// 5. `block_on` inside an `Inline` task.

#[test]
fn block_on_inside_an_inline_task_runs_the_inline_work_it_waits_for() {
    within("inline block_on", || {
        let outer = Inline.spawn(async { block_on(Inline.spawn(async { 1 })).unwrap() + 1 });
        assert!(outer.is_finished());
        assert_eq!(block_on(outer).unwrap(), 2);
    });
}

#[test]
fn block_on_inside_an_inline_continuation_on_a_pool_worker_runs_the_inline_work() {
    within("inline block_on on a worker", || {
        let cpu = pool("inline-worker", 1);
        // The continuation runs inline on the worker that finished the step
        // before; its `block_on` must run the Inline task queued behind it.
        let chain = cpu
            .run(|| 20)
            .via(&Inline)
            .then(|v| block_on(Inline.spawn(async move { v + 1 })).unwrap() + 1);
        assert_eq!(block_on(chain).unwrap(), 22);
    });
}

// 8. Waiting on your own strand.

fn own_strand_panic(err: TaskError) {
    let msg = err.panic_message().unwrap_or_default().to_owned();
    assert!(msg.contains("that same strand"), "{msg}");
}

#[test]
fn a_section_blocking_on_its_own_strand_panics_at_once() {
    quiet_test_panics();
    within("own strand", || {
        let s = Strand::new(pool("own", 2));
        let s2 = s.clone();
        let err = block_on(s.run(move || block_on(s2.run(|| 1)).unwrap())).unwrap_err();
        own_strand_panic(err);
        // The strand goes on, and the section it refused to wait for ran.
        assert_eq!(block_on(s.run(|| 3)).unwrap(), 3);
    });
}

#[test]
fn a_with_section_blocking_on_its_own_guarded_panics_at_once() {
    quiet_test_panics();
    within("own guarded", || {
        let cpu = pool("own-g", 1);
        let g = Guarded::new(cpu.clone(), 5);
        // From outside the pool: the section is queued and run by the runner.
        let g2 = g.clone();
        let err = block_on(g.with(move |_| block_on(g2.with(|v| *v)).unwrap())).unwrap_err();
        own_strand_panic(err);
        // From a task of the pool: the section runs on the spot.
        let g3 = g.clone();
        let on_the_spot = cpu.spawn(async move {
            let g4 = g3.clone();
            g3.with(move |_| block_on(g4.with(|v| *v)).unwrap()).await
        });
        own_strand_panic(block_on(on_the_spot).unwrap().unwrap_err());
        // Waiting for the lock of the value it is inside of, likewise.
        let g5 = g.clone();
        let err = block_on(g.with(move |_| *block_on(g5.lock()))).unwrap_err();
        own_strand_panic(err);
        assert_eq!(block_on(g.with(|v| *v)).unwrap(), 5);
    });
}

#[test]
fn waiting_on_another_strand_or_awaiting_your_own_does_not_panic() {
    within("not own strand", || {
        let cpu = pool("other", 2);
        let (a, b) = (Strand::new(cpu.clone()), Strand::new(cpu.clone()));
        let b2 = b.clone();
        assert_eq!(
            block_on(a.run(move || block_on(b2.run(|| 1)).unwrap())).unwrap(),
            1
        );
        // A task of the strand awaiting another task of it yields the
        // strand while it waits, so that is no deadlock.
        let a2 = a.clone();
        let awaited = a.spawn(async move { a2.run(|| 2).await.unwrap() });
        assert_eq!(block_on(awaited).unwrap(), 2);
    });
}

// 9. Nested `block_on` on a worker.

fn nest(pool: &ThreadPool, depth: u32) -> Result<u32, TaskError> {
    if depth == 0 {
        return Ok(0);
    }
    let p = pool.clone();
    block_on(pool.spawn(async move { nest(&p, depth - 1) }))?.map(|d| d + 1)
}

#[test]
fn block_on_nested_past_the_stack_panics_instead_of_overflowing() {
    quiet_test_panics();
    within("deep block_on", || {
        let cpu = ThreadPool::builder()
            .threads(1)
            .name("deep")
            .stack_size(256 << 10)
            .build()
            .unwrap();
        let p = cpu.clone();
        let err = block_on(cpu.spawn(async move { nest(&p, 20_000) }))
            .unwrap()
            .unwrap_err();
        let msg = err.panic_message().unwrap_or_default().to_owned();
        assert!(msg.contains("nested too deep on deep-0"), "{msg}");
        // The child spawned just before the panicking `block_on` is
        // detached and carries the recursion on, so that worker stays deep
        // for a while; a shallow nest on a stack like it works.
        let shallow = ThreadPool::builder()
            .threads(1)
            .stack_size(256 << 10)
            .build()
            .unwrap();
        let p = shallow.clone();
        let nested = shallow.spawn(async move { nest(&p, 20) });
        assert_eq!(block_on(nested).unwrap().unwrap(), 20);
    });
}

// 3. A panicking `Executor::schedule`.

/// An executor whose `schedule` always panics (and drops the runnable as
/// it unwinds).
#[derive(Clone)]
struct Panicking;

impl Executor for Panicking {
    fn schedule(&self, _runnable: Runnable) {
        panic!("{TEST_PANIC}: schedule");
    }
}

/// Forwards to a pool, but panics when a task yields.
#[derive(Clone)]
struct PanicsOnYield(ThreadPool);

impl Executor for PanicsOnYield {
    fn schedule(&self, runnable: Runnable) {
        if runnable.metadata().woken_while_running() {
            panic!("{TEST_PANIC}: schedule of a yield");
        }
        self.0.schedule(runnable)
    }
}

fn assert_schedule_panic(result: Result<impl std::fmt::Debug, TaskError>) {
    let err = result.unwrap_err();
    let msg = err.panic_message().unwrap_or_default();
    assert!(
        msg.starts_with(TEST_PANIC) && msg.contains("schedule"),
        "{err:?}"
    );
}

/// The pool's only worker is alive and serving, and shutdown returns.
fn still_serves_and_shuts_down(cpu: ThreadPool) {
    assert_eq!(
        block_on(cpu.run(thread_name)).unwrap(),
        format!("{}-0", Executor::name(&cpu))
    );
    cpu.shutdown().unwrap();
}

fn thread_name() -> String {
    thread::current().name().unwrap_or_default().to_owned()
}

#[test]
fn a_hop_into_a_panicking_schedule_reaches_the_handle_and_the_worker_lives() {
    quiet_test_panics();
    within("hop into panicking", || {
        let cpu = pool("hop-panic", 1);
        let hopped = cpu.spawn(async {
            hop_to(&Panicking).await;
            unreachable!("the task cannot run on an executor that refuses it")
        });
        assert_schedule_panic(block_on(hopped));
        still_serves_and_shuts_down(cpu);
    });
}

#[test]
fn a_yield_into_a_panicking_schedule_reaches_the_handle_and_the_worker_lives() {
    quiet_test_panics();
    within("yield into panicking", || {
        let cpu = pool("yield-panic", 1);
        let yielding = PanicsOnYield(cpu.clone()).spawn(async {
            let mut first = true;
            std::future::poll_fn(|cx| {
                if std::mem::take(&mut first) {
                    cx.waker().wake_by_ref(); // a yield
                    return Poll::Pending;
                }
                Poll::Ready(())
            })
            .await
        });
        assert_schedule_panic(block_on(yielding));
        still_serves_and_shuts_down(cpu);
    });
}

#[test]
fn a_spawn_on_a_panicking_schedule_does_not_panic_and_its_handle_says_why() {
    quiet_test_panics();
    within("spawn on panicking", || {
        let handle = Panicking.spawn(async { 1 });
        assert_schedule_panic(block_on(handle));
        // Detached: nothing unwinds into the caller.
        Panicking.execute(|| ());
    });
}

#[test]
fn a_hop_into_a_thread_per_task_executor_with_a_nul_in_its_name_runs() {
    within("hop into NUL name", || {
        let cpu = pool("nul-hop", 1);
        let odd = ThreadPerTask::new("a\0b");
        let task = cpu.spawn(async move {
            hop_to(&odd).await;
            thread_name()
        });
        assert_eq!(block_on(task).unwrap(), "a\\0b-0");
        still_serves_and_shuts_down(cpu);
    });
}

// 4. Process aborts.

/// A value whose `Drop` panics.
struct PanicsOnDrop(&'static str);

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("{TEST_PANIC}: {}", self.0);
    }
}

fn hooked(name: &str) -> (ThreadPool, mpsc::Receiver<String>) {
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let pool = ThreadPool::builder()
        .threads(1)
        .name(name)
        .on_unobserved_panic(move |p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "<not a string>".into());
            let _ = tx.lock().unwrap().send(msg);
        })
        .build()
        .unwrap();
    (pool, rx)
}

#[test]
fn a_detached_task_whose_output_panics_in_drop_is_reported_not_aborted() {
    quiet_test_panics();
    within("output drop", || {
        let (cpu, panics) = hooked("out-drop");
        cpu.execute(|| drop(PanicsOnDrop("ignored"))); // a panic in the task itself
        assert!(panics.recv_timeout(DEADLINE).unwrap().contains("ignored"));
        drop(cpu.spawn(async { PanicsOnDrop("output") }));
        assert_eq!(
            panics.recv_timeout(DEADLINE).unwrap(),
            format!("{TEST_PANIC}: output")
        );
        still_serves_and_shuts_down(cpu);
    });
}

#[test]
fn a_detached_panic_whose_payload_panics_in_drop_is_dropped_not_aborted() {
    quiet_test_panics();
    within("payload drop", || {
        let cpu = pool("payload-drop", 1);
        cpu.execute(|| std::panic::panic_any(PanicsOnDrop("payload")));
        // The same through a hook that drops the payload it is handed.
        let (hooked_pool, _panics) = hooked("payload-drop-hook");
        hooked_pool.execute(|| std::panic::panic_any(PanicsOnDrop("payload")));
        still_serves_and_shuts_down(cpu);
        still_serves_and_shuts_down(hooked_pool);
    });
}

/// Runs its first runnable on a new thread; panics on every later one.
#[derive(Clone, Default)]
struct OnceThenPanic(Arc<AtomicBool>);

impl Executor for OnceThenPanic {
    fn schedule(&self, runnable: Runnable) {
        if self.0.swap(true, SeqCst) {
            panic!("{TEST_PANIC}: schedule after the first");
        }
        thread::spawn(move || runnable.run());
    }
}

#[test]
fn an_awaiter_whose_executor_panics_in_schedule_is_reported_not_aborted() {
    quiet_test_panics();
    within("awaiter schedule", || {
        let cpu = pool("awaiter", 1);
        let (go, wait) = mpsc::channel::<()>();
        let pool_task = cpu.run(move || wait.recv().unwrap());
        let ex = OnceThenPanic::default();
        let awaiter = ex.spawn(async move { pool_task.await.unwrap() });
        // Let the awaiter park on the pool task, then finish that task: its
        // completion wakes the awaiter, whose schedule panics on the worker.
        while !ex.0.load(SeqCst) {
            thread::yield_now();
        }
        thread::sleep(Duration::from_millis(20));
        go.send(()).unwrap();
        assert_schedule_panic(block_on(awaiter));
        still_serves_and_shuts_down(cpu);
    });
}

// 7. NUL bytes in names.

#[test]
fn a_nul_in_a_pool_name_is_a_build_error() {
    let err = ThreadPool::builder().name("a\0b").build().unwrap_err();
    assert!(
        matches!(&err, BuildError::InvalidName(n) if n == "a\0b"),
        "{err:?}"
    );
    assert!(err.to_string().contains("NUL"));
}

#[test]
fn a_nul_in_a_thread_per_task_name_never_panics_in_spawn() {
    within("thread-per-task NUL", || {
        let ex = ThreadPerTask::new("x\0y");
        assert_eq!(block_on(ex.run(thread_name)).unwrap(), "x\\0y-0");
    });
}

// 10. Smaller faults.

/// Shuts its pool down when dropped and says how that went.
struct ShutsDownOnDrop(ThreadPool, mpsc::Sender<Result<(), WaitError>>);

impl Drop for ShutsDownOnDrop {
    fn drop(&mut self) {
        let _ = self.1.send(self.0.shutdown());
    }
}

#[test]
fn a_shutdown_from_a_drop_while_the_worker_drains_is_an_own_thread_error() {
    within("shutdown while draining", || {
        let cpu = pool("drain", 1);
        let (started_tx, started) = mpsc::channel();
        let (go, wait) = mpsc::channel::<()>();
        let busy = cpu.run(move || {
            started_tx.send(()).unwrap();
            wait.recv().unwrap()
        });
        started.recv().unwrap();
        // Queued behind the busy task; dropped unrun when the pool stops.
        let (tx, results) = mpsc::channel();
        let probe = ShutsDownOnDrop(cpu.clone(), tx);
        drop(cpu.spawn(async move {
            let _probe = probe;
        }));
        let stopper = {
            let cpu = cpu.clone();
            thread::spawn(move || cpu.shutdown_now())
        };
        thread::sleep(Duration::from_millis(20));
        go.send(()).unwrap();
        assert_eq!(
            results.recv_timeout(DEADLINE).unwrap(),
            Err(WaitError::OwnThread)
        );
        assert_eq!(stopper.join().unwrap(), Ok(()));
        block_on(busy).unwrap();
    });
}

static ARMED: AtomicBool = AtomicBool::new(false);

/// A key whose `Hash` panics once armed.
#[derive(Clone, PartialEq, Eq)]
struct TouchyKey(u32);

impl std::hash::Hash for TouchyKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        if ARMED.load(SeqCst) {
            panic!("{TEST_PANIC}: hash");
        }
        self.0.hash(state);
    }
}

#[test]
fn a_key_whose_hash_panics_in_cleanup_leaves_no_entry_and_the_task_succeeds() {
    quiet_test_panics();
    within("keyed hash", || {
        let manual = ManualExecutor::new();
        let keyed = KeyedStrands::new(manual.clone());
        let handle = keyed.spawn(TouchyKey(1), async {
            ARMED.store(true, SeqCst);
            7
        });
        assert_eq!(keyed.len(), 1);
        manual.run_until_idle();
        ARMED.store(false, SeqCst);
        assert_eq!(block_on(handle).unwrap(), 7);
        assert!(keyed.is_empty());
        // The key works again afterwards, on a fresh strand.
        let again = keyed.spawn(TouchyKey(1), async { 8 });
        manual.run_until_idle();
        assert_eq!(block_on(again).unwrap(), 8);
        assert!(keyed.is_empty());
    });
}

// 6. Admission: hops and decorators.

#[test]
fn a_hop_into_a_closed_pool_is_refused_and_the_task_stays() {
    quiet_test_panics();
    within("hop into closed", || {
        let cpu = pool("stay", 1);
        let closed = pool("closed", 1);
        closed.close();
        let target = closed.clone();
        let stayed = cpu.spawn(async move {
            let refused = try_hop_to(&target).await;
            (refused, thread_name())
        });
        let (refused, name) = block_on(stayed).unwrap();
        assert_eq!(refused, Err(HopError::Rejected(RejectReason::Closed)));
        assert_eq!(name, "stay-0");
        // `hop_to` panics instead; the panic reaches the handle.
        let target = closed.clone();
        let err = block_on(cpu.spawn(async move { hop_to(&target).await })).unwrap_err();
        assert!(
            err.panic_message().unwrap_or_default().contains("refused"),
            "{err:?}"
        );
        closed.join_workers().unwrap();
    });
}

#[test]
fn a_hop_into_a_bounded_pool_respects_its_bound() {
    within("hop into bounded", || {
        let cpu = pool("from", 1);
        let bounded = ThreadPool::builder()
            .threads(1)
            .name("bounded")
            .max_pending(1)
            .build()
            .unwrap();
        let (go, wait) = mpsc::channel::<()>();
        let busy = bounded.run(move || wait.recv().unwrap()); // the only slot
        let target = bounded.clone();
        let refused = cpu.spawn(async move { try_hop_to(&target).await });
        assert_eq!(
            block_on(refused).unwrap(),
            Err(HopError::Rejected(RejectReason::Full))
        );
        // `hop_to` waits for room, then the task counts toward the bound.
        let (arrived_tx, arrived) = mpsc::channel();
        let (leave, stay) = mpsc::channel::<()>();
        let target = bounded.clone();
        let hopper = cpu.spawn(async move {
            hop_to(&target).await;
            arrived_tx.send(thread_name()).unwrap();
            stay.recv().unwrap();
        });
        thread::sleep(Duration::from_millis(20));
        assert!(arrived.try_recv().is_err(), "hopped in past the bound");
        go.send(()).unwrap();
        block_on(busy).unwrap();
        assert_eq!(arrived.recv_timeout(DEADLINE).unwrap(), "bounded-0");
        let full = bounded.try_spawn(async {}).unwrap_err();
        assert_eq!(full.reason(), RejectReason::Full);
        leave.send(()).unwrap();
        block_on(hopper).unwrap();
        assert!(bounded.try_spawn(async {}).is_ok());
    });
}

/// The obvious decorator: forwards `schedule`, `close` and `is_closed`.
#[derive(Clone)]
struct Logged(ThreadPool, Arc<std::sync::atomic::AtomicUsize>);

impl Executor for Logged {
    fn schedule(&self, runnable: Runnable) {
        self.1.fetch_add(1, SeqCst);
        self.0.schedule(runnable)
    }
    fn close(&self) {
        self.0.close()
    }
    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

/// A decorator that forwards nothing but `schedule`.
#[derive(Clone)]
struct OnlySchedule(ThreadPool);

impl Executor for OnlySchedule {
    fn schedule(&self, runnable: Runnable) {
        self.0.schedule(runnable)
    }
}

#[test]
fn a_decorator_inherits_closing_and_its_waiting_tasks_still_finish() {
    within("decorator close", || {
        let cpu = pool("deco", 1);
        let logged = Logged(cpu.clone(), Default::default());
        let (tx, rx) = futures::channel::oneshot::channel::<u32>();
        let waiting = logged.spawn(async move { rx.await.unwrap() + 1 });
        thread::sleep(Duration::from_millis(10)); // let it park on the channel
        cpu.close();
        assert!(logged.is_closed());
        let refused = block_on(logged.spawn(async {})).unwrap_err();
        assert!(
            matches!(refused, TaskError::Rejected(RejectReason::Closed)),
            "{refused:?}"
        );
        // The pool waits for the decorator's task, which a wake-up finishes.
        drop(cpu.clone());
        tx.send(41).unwrap();
        assert_eq!(block_on(waiting).unwrap(), 42);
        cpu.join_workers().unwrap();
        assert!(
            logged.1.load(SeqCst) >= 2,
            "both schedules went through the decorator"
        );
        // One that forwards only `schedule` is refused by the pool itself.
        let only = OnlySchedule(cpu.clone());
        let refused = block_on(only.spawn(async {})).unwrap_err();
        assert!(
            matches!(refused, TaskError::Rejected(RejectReason::Closed)),
            "{refused:?}"
        );
    });
}

#[test]
fn a_bounded_pool_counts_the_tasks_of_a_decorator_over_it() {
    within("decorator bound", || {
        let cpu = ThreadPool::builder()
            .threads(1)
            .name("deco-bound")
            .max_pending(1)
            .build()
            .unwrap();
        let (go, wait) = mpsc::channel::<()>();
        let busy = OnlySchedule(cpu.clone()).run(move || wait.recv().unwrap());
        thread::sleep(Duration::from_millis(10));
        assert_eq!(
            cpu.try_spawn(async {}).unwrap_err().reason(),
            RejectReason::Full
        );
        go.send(()).unwrap();
        block_on(busy).unwrap();
        assert!(cpu.try_spawn(async {}).is_ok());
    });
}

// Found by review of the fixes above.

/// Drops its sender when dropped: a wake-up from inside an unwinding.
struct WakesOnDrop(Option<futures::channel::oneshot::Sender<()>>);

impl Drop for WakesOnDrop {
    fn drop(&mut self) {
        drop(self.0.take());
    }
}

#[test]
fn a_wake_during_an_unrelated_unwinding_onto_a_dead_pool_says_cancelled() {
    quiet_test_panics();
    within("wake while unwinding", || {
        let cpu = pool("dead-wake", 1);
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        let parked = cpu.spawn(async move { rx.await.is_ok() });
        thread::sleep(Duration::from_millis(20)); // let it park on the channel
        cpu.shutdown_now().unwrap();
        // Another thread panics; unwinding drops the sender, which wakes
        // the task onto its terminated pool, which drops it.
        let unwound = thread::spawn(move || {
            let _wakes = WakesOnDrop(Some(tx));
            panic!("{TEST_PANIC}: unrelated");
        })
        .join();
        assert!(unwound.is_err());
        assert!(matches!(block_on(parked), Err(TaskError::Cancelled)));
    });
}

/// Forwards to a pool, then panics.
#[derive(Clone)]
struct ForwardsThenPanics(ThreadPool);

impl Executor for ForwardsThenPanics {
    fn schedule(&self, runnable: Runnable) {
        self.0.schedule(runnable);
        panic!("{TEST_PANIC}: after forwarding");
    }
}

#[test]
fn a_decorator_that_panics_after_a_closed_pool_refused_its_task_reports_the_refusal() {
    quiet_test_panics();
    within("refused then panicked", || {
        let cpu = pool("refuse-panic", 1);
        cpu.close();
        let refused = block_on(ForwardsThenPanics(cpu.clone()).spawn(async { 1 }));
        assert!(
            matches!(refused, Err(TaskError::Rejected(RejectReason::Closed))),
            "{refused:?}"
        );
        // Accepted before the close, forwarded afterwards: the panic is
        // the handle's, and nothing unwinds into the caller.
        let open = pool("forward-panic", 1);
        let h = ForwardsThenPanics(open.clone()).spawn(async { 2 });
        assert_eq!(block_on(h).unwrap(), 2, "the pool kept and ran it");
        still_serves_and_shuts_down(open);
    });
}
