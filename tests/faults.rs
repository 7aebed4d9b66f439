//! Regressions for the faults an outside attack found in 0.1, one group
//! per fault (numbered as in the 0.2 issue): hangs, leaks, dying workers,
//! process aborts and work slipping past close and bounds. Every test here
//! failed (hung, aborted or asserted) on 0.1; a hang fails the test within
//! `support::DEADLINE` instead of stalling CI.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use support::{quiet_test_panics, within};
use viaduct::{block_on, ExecutorExt, Guarded, Inline, Strand, TaskError, ThreadPool};

fn pool(name: &str, threads: usize) -> ThreadPool {
    ThreadPool::builder()
        .threads(threads)
        .name(name)
        .build()
        .unwrap()
}

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
        let err = block_on(cpu.spawn(async move { nest(&p, 1_000_000) }))
            .unwrap()
            .unwrap_err();
        let msg = err.panic_message().unwrap_or_default().to_owned();
        assert!(msg.contains("nested too deep on deep-0"), "{msg}");
        // A shallow nest still works, on the same worker.
        let p = cpu.clone();
        assert_eq!(
            block_on(cpu.spawn(async move { nest(&p, 20) }))
                .unwrap()
                .unwrap(),
            20
        );
    });
}
