//! Small end-to-end runs through every path that has `unsafe` code (task
//! metadata and projection, the pool's worker context and stack jobs, the
//! strand's intrusive queue and lock hand-off, the timer wheel, the
//! simulation's world and its end), sized so
//! that `cargo +nightly miri test --test miri_smoke` finishes in minutes.
//! Run by `cargo test` too, as ordinary tests.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use viaduct::time::Timer;
use viaduct::{
    block_on, hop_to, ExecutorExt, Guarded, Inline, KeyedStrands, ManualExecutor, PriorityExecutor,
    Strand, TaskError, ThreadPool, TimedExt,
};

fn pool(threads: usize) -> ThreadPool {
    ThreadPool::builder()
        .threads(threads)
        .name("miri")
        .build()
        .unwrap()
}

#[test]
fn tasks_handles_and_panics() {
    let p = pool(2);
    let handles: Vec<_> = (0..8).map(|i| p.spawn(async move { i * 2 })).collect();
    let sum: i32 = handles.into_iter().map(|h| block_on(h).unwrap()).sum();
    assert_eq!(sum, 56);
    let err = block_on(p.run(|| -> u8 { panic!("miri panic") })).unwrap_err();
    assert_eq!(err.panic_message(), Some("miri panic"));
    let aborted = p.spawn(futures::future::pending::<()>());
    aborted.abort();
    assert!(matches!(block_on(aborted), Err(TaskError::Cancelled)));
    assert_eq!(block_on(Inline.run(|| 5)).unwrap(), 5);
    p.shutdown().unwrap();
}

/// A task that nothing can wake after its first poll, freed by
/// async-task, leaves its worker's book (which a dump reads) first.
#[test]
fn a_freed_unwakeable_task_leaves_the_dump() {
    let p = pool(1);
    let polled = Arc::new(AtomicUsize::new(0));
    for _ in 0..3 {
        let polled = polled.clone();
        drop(p.spawn(futures::future::poll_fn(move |_| {
            polled.fetch_add(1, Ordering::SeqCst);
            std::task::Poll::<()>::Pending
        })));
    }
    while polled.load(Ordering::SeqCst) < 3 || !p.dump().tasks().is_empty() {
        std::thread::yield_now();
    }
    p.shutdown().unwrap();
}

#[test]
fn fork_join_and_block_on_inside_the_pool() {
    fn fib(p: &ThreadPool, n: u64) -> u64 {
        if n < 2 {
            return n;
        }
        let (a, b) = p.join(|| fib(p, n - 1), || fib(p, n - 2));
        a + b
    }
    let p = pool(2);
    assert_eq!(fib(&p, 8), 21);
    let inner = p.clone();
    let parent = p.spawn(async move {
        let kids: Vec<_> = (0..4).map(|i| inner.run(move || i)).collect();
        kids.into_iter().map(|k| block_on(k).unwrap()).sum::<i32>()
    });
    assert_eq!(block_on(parent).unwrap(), 6);
    p.shutdown().unwrap();
}

#[test]
fn continuations_and_hops() {
    let (a, b) = (pool(1), pool(1));
    let chain = a
        .run(|| 1)
        .then(|x| x + 1)
        .via(&b)
        .then(|x| x * 10)
        .via(&Inline)
        .then(|x| x + 1);
    assert_eq!(block_on(chain).unwrap(), 21);
    let target = b.clone();
    let hopped = a.spawn(async move {
        hop_to(&target).await;
        ThreadPool::current().unwrap().same_pool(&target)
    });
    assert!(block_on(hopped).unwrap());
    // Steps in line behind a task's first poll (the chain above has one),
    // behind tasks queued behind a busy worker: one let go by an abort of
    // the task ahead, one as the task's poll ends.
    let (go, gate) = std::sync::mpsc::channel::<()>();
    let busy = a.run(move || gate.recv().unwrap());
    let aborted = a.run(|| 1u8);
    let aborted_abort = aborted.abort_handle();
    let after_abort = aborted.then_try(|r| r.is_err());
    aborted_abort.abort();
    let dropped = a.run(|| 1u8).then(|x| x + 1);
    go.send(()).unwrap();
    block_on(busy).unwrap();
    assert!(block_on(after_abort).unwrap());
    assert_eq!(block_on(dropped).unwrap(), 2);
    a.shutdown().unwrap();
    b.shutdown().unwrap();
}

#[test]
fn strands_guarded_keyed_and_priorities() {
    let p = pool(2);
    let strand = Strand::new(p.clone());
    let count = Arc::new(AtomicUsize::new(0));
    for _ in 0..16 {
        let count = count.clone();
        strand.post(move || {
            count.fetch_add(1, Ordering::Relaxed);
        });
    }
    let c = count.clone();
    assert_eq!(
        block_on(strand.run(move || c.load(Ordering::Relaxed))).unwrap(),
        16
    );

    let guarded = Guarded::new(p.clone(), 0u32);
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let g = guarded.clone();
            p.spawn(async move {
                for _ in 0..4 {
                    *g.lock().await += 1;
                }
                g.with(|v| *v += 1).await.unwrap();
            })
        })
        .collect();
    for t in tasks {
        block_on(t).unwrap();
    }
    assert_eq!(block_on(guarded.with(|v| *v)).unwrap(), 20);

    let keyed = KeyedStrands::new(p.clone());
    let hs: Vec<_> = (0..6)
        .map(|i| keyed.spawn(i % 2, async move { i }))
        .collect();
    assert_eq!(
        hs.into_iter().map(|h| block_on(h).unwrap()).sum::<i32>(),
        15
    );

    let manual = ManualExecutor::new();
    let prio = PriorityExecutor::new(manual.clone());
    let low = prio.spawn_with(1, async { "low" });
    let high = prio.spawn_with(9, async { "high" });
    manual.run_at_most_one();
    assert!(high.is_finished() && !low.is_finished());
    manual.run_until_idle();
    p.shutdown().unwrap();
}

#[test]
fn timers_fire_and_cancel() {
    let timer = Timer::manual();
    let ex = ManualExecutor::new();
    let fired = timer.execute_after(&ex, Duration::from_millis(5), || 1);
    let cancelled = timer.execute_after(&ex, Duration::from_millis(5), || 2);
    assert!(cancelled.cancel());
    timer.advance(Duration::from_millis(5));
    ex.run_until_idle();
    assert_eq!(block_on(fired).unwrap(), 1);
    assert!(block_on(cancelled).unwrap_err().is_cancelled());
    assert_eq!(timer.pending(), 0);
    let p = pool(1);
    assert_eq!(
        block_on(p.execute_after(Duration::from_millis(1), || 3)).unwrap(),
        3
    );
    p.shutdown().unwrap();
}

#[test]
fn scopes_borrow_and_end_before_returning() {
    let p = pool(2);
    let mut data = vec![1u32, 2, 3, 4];
    let shared = String::from("borrowed");
    let shared_after = String::from("still borrowed");
    let saved = Arc::new(std::sync::Mutex::new(None::<std::task::Waker>));
    let (left, right) = data.split_at_mut(2);
    let len = p.scope(|s| {
        s.run(|| left.iter_mut().for_each(|x| *x *= 10));
        let saved = saved.clone();
        let shared = &shared;
        // Keeps its waker past the scope; the handle is dropped unjoined.
        drop(s.spawn(std::future::poll_fn(move |cx| {
            *saved.lock().unwrap() = Some(cx.waker().clone());
            std::task::Poll::Ready(shared.len())
        })));
        let r = s.spawn(async { right.iter_mut().for_each(|x| *x += 1) });
        std::mem::forget(r); // leaked: the scope still waits
        s.run(|| shared.len()).join().unwrap()
    });
    drop(shared);
    assert_eq!(len, 8);
    assert_eq!(data, [10, 20, 4, 5]);
    // Woken after the scope, and after what the task borrowed is gone.
    saved.lock().unwrap().take().unwrap().wake();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        p.scope(|s| {
            s.run(|| panic!("miri scoped panic"));
        })
    }));
    assert!(panicked.is_err());

    // An aborted parked task, and a future whose `Drop` panics.
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("miri drop panic");
        }
    }
    let local = 3u8;
    let started = AtomicBool::new(false);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        p.scope(|s| {
            let (local, started) = (&local, &started);
            let parked = s.spawn(async move {
                let _bomb = PanicsOnDrop;
                started.store(true, SeqCst);
                futures::future::pending::<u8>().await + *local
            });
            // Aborted before its first poll, it would have no bomb to
            // drop: wait until it is parked (two workers: a task run
            // after it may end first).
            while !started.load(SeqCst) {
                std::thread::yield_now();
            }
            parked.abort();
            assert!(block_on(parked).unwrap_err().is_cancelled());
        })
    }));
    assert!(dropped.is_err());

    // Tasks thrown away by a pool shut down under the scope.
    p.scope(|s| {
        let (wake, parked) = futures::channel::oneshot::channel::<()>();
        let shared = &shared_after;
        let h = s.spawn(async move {
            let _ = parked.await;
            shared.len()
        });
        block_on(p.run(|| ())).unwrap();
        p.shutdown_now().unwrap();
        drop(wake);
        assert!(block_on(h).unwrap_err().is_cancelled());
    });
}

#[test]
fn a_simulation_run_and_ended_with_tasks_waiting() {
    use viaduct::sim::Simulation;
    for seed in 0..2 {
        let sim = Simulation::new(seed).workers(2);
        let ex = sim.executor();
        let strand = Strand::new(ex.clone());
        let got = sim.block_on(async move {
            let a = ex.spawn(async {
                viaduct::time::sleep(Duration::from_millis(1)).await;
                1
            });
            let g = Guarded::new(ex.clone(), 0);
            let g2 = g.clone();
            let c = strand.spawn(async move { g2.with(|v| *v += 1).await.unwrap() });
            // Detached: parked, then finished.
            drop(ex.spawn(viaduct::time::sleep(Duration::from_millis(2))));
            c.await.unwrap();
            a.await.unwrap() + g.with(|v| *v).await.unwrap()
        });
        assert_eq!(got.unwrap(), 2);
        // Ended with tasks waiting on nothing, on the clock, on a strand.
        let ex = sim.executor();
        let strand = Strand::new(ex.clone());
        let h = ex.spawn(futures::future::pending::<()>());
        let on_strand = strand.spawn(futures::future::pending::<()>());
        let asleep = ex.spawn(async { viaduct::time::sleep(Duration::MAX).await });
        assert!(sim.block_on(futures::future::pending::<()>()).is_err());
        // A future that borrows, ended by a deadlock and by the step
        // limit: dropped before `block_on` returns, while what it
        // borrows is alive.
        let local = vec![1u8, 2, 3];
        let borrowed = sim.block_on(async { futures::future::pending::<u8>().await + local[0] });
        assert!(borrowed.is_err());
        let spin = Simulation::new(seed).max_steps(20);
        let spun = spin.block_on(async {
            loop {
                viaduct::coop::consume_budget().await;
                std::hint::black_box(&local);
            }
        });
        assert!(spun.is_err());
        // `join` and a scope of a real pool, simulated: their halves and
        // tasks borrow, and run as the simulation's tasks.
        let p = pool(1);
        let (sum, scaled) = Simulation::new(seed)
            .block_on(async {
                let (a, b) = p.join(|| local[0], || local[1] + local[2]);
                let mut copy = local.clone();
                p.scope(|s| {
                    for x in copy.iter_mut() {
                        s.run(move || *x *= 2);
                    }
                });
                (a + b, copy)
            })
            .unwrap();
        assert_eq!((sum, scaled), (6, vec![2, 4, 6]));
        p.shutdown().unwrap();
        drop(local);
        drop(sim);
        for h in [h, on_strand, asleep] {
            assert!(block_on(h).unwrap_err().is_cancelled());
        }
    }
}

#[test]
fn dumps_read_timer_wheels_and_a_forgotten_lock_requests_wait() {
    use std::future::Future;
    let p = pool(1);
    let timer = Timer::manual();
    let value = Guarded::new(p.clone(), 0u8);
    let guard = block_on(value.lock());
    let (v, t) = (value.clone(), timer.clone());
    let (asked, wait) = std::sync::mpsc::channel();
    let task = p.spawn(async move {
        let mut request = Box::pin(v.lock());
        let pending = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(request.as_mut().poll(cx).is_pending())
        })
        .await;
        // Its wait stays noted for good, with the lock's book kept alive.
        std::mem::forget(request);
        drop(v);
        asked.send(pending).unwrap();
        t.sleep(Duration::from_secs(1)).await;
    });
    assert!(wait.recv().unwrap(), "the lock was held");
    drop(guard);
    drop(value);
    let id = task.id().unwrap();
    let deadline = timer.now() + Duration::from_secs(1);
    let listed = loop {
        let dump = p.dump();
        match dump.task(id).map(|t| t.waits_on().to_vec()) {
            Some(waits) if waits.len() == 2 => break waits,
            _ => std::thread::yield_now(),
        }
    };
    assert!(matches!(
        &listed[..],
        [viaduct::dump::WaitsOn::Lock(_), viaduct::dump::WaitsOn::Timer { deadline: d, .. }] if *d == deadline
    ));
    timer.advance(Duration::from_secs(1));
    block_on(task).unwrap();
}

#[test]
fn dumps_read_a_section_wait_and_a_scope_inside_a_section() {
    let p = pool(2);
    let value = Guarded::new(p.clone(), 0u8);
    let guard = block_on(value.lock());
    // A task waits on a section queued behind the guard: the dump reads,
    // through the wait, whether that section has ended.
    let v = value.clone();
    let waiter = p.spawn(async move { v.with(|n| *n).await.unwrap() });
    let id = waiter.id().unwrap();
    while p.dump().task(id).is_none_or(|t| t.waits_on().is_empty()) {
        std::thread::yield_now();
    }
    drop(guard);
    assert_eq!(block_on(waiter).unwrap(), 0);
    // A scope inside a section: a task of it that runs is waited for (the
    // section's task listed while it blocks); one that waits on the
    // section's own strand panics through the scope-task frame.
    let (p2, v2) = (p.clone(), value.clone());
    let section = value.with(move |n| {
        *n += 1;
        let five = p2.scope(|s| s.run(|| 5).join().unwrap());
        p2.scope(|s| {
            s.spawn(async move { *v2.lock().await += 1 });
        });
        five
    });
    assert!(block_on(section).unwrap_err().is_panic());
    assert_eq!(*block_on(value.lock()), 1);
}

/// Queued `with` sections as nodes: one whose handle drops before it runs
/// (the runner frees it), one aborted (dropped unrun), one read, and an
/// abort handle that outlives its section's handle.
#[test]
fn queued_sections_completed_in_place() {
    let manual = ManualExecutor::new();
    let value = Guarded::new(manual.clone(), String::from("a"));
    let guard = block_on(value.lock());
    drop(value.with(|s| s.push('b')));
    let aborted = value.with(|s| s.push('x'));
    let abort = aborted.abort_handle();
    aborted.abort();
    let read = value.with(|s| s.clone());
    drop(guard);
    manual.run_until_idle();
    assert!(block_on(aborted).unwrap_err().is_cancelled());
    assert!(abort.is_finished());
    assert_eq!(block_on(read).unwrap(), "ab");
}
