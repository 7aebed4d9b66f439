//! The cooperative budget: a task that keeps finding viaduct's futures
//! ready yields after a budget, so another task on the same worker gets a
//! turn; `unconstrained` opts out; nothing spins when the budget is spent
//! under a foreign `block_on`.

#[allow(dead_code)] // only `pool` and `within` are used here
mod support;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use support::{pool, within};
use viaduct::time::Timer;
use viaduct::{block_on, coop, ExecutorExt, Guarded, Inline, JoinHandle};

const ROUNDS: usize = 200_000;

/// Spawns `busy` on a one-thread pool, then (while `busy` holds the worker,
/// before its loop) another task; returns how many rounds `busy` had done
/// when the other task ran, and its total.
fn rounds_before_another_task_ran<F, Fut>(busy: F) -> (usize, usize)
where
    F: FnOnce(Arc<AtomicUsize>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    within("coop", move || {
        let pool = pool("coop", 1);
        let rounds = Arc::new(AtomicUsize::new(0));
        let (go, wait) = mpsc::channel::<()>();
        let body = busy(rounds.clone());
        let busy = pool.spawn(async move {
            wait.recv().unwrap(); // the other task is queued meanwhile
            body.await;
        });
        let r = rounds.clone();
        let other = pool.run(move || r.load(SeqCst));
        go.send(()).unwrap();
        block_on(busy).unwrap();
        (block_on(other).unwrap(), rounds.load(SeqCst))
    })
}

fn finished_handles(n: usize) -> Vec<JoinHandle<usize>> {
    (0..n).map(|i| Inline.run(move || i)).collect()
}

#[test]
fn a_task_awaiting_finished_handles_lets_another_task_run_after_a_budget() {
    let (seen, total) = rounds_before_another_task_ran(|rounds| async move {
        for handle in finished_handles(ROUNDS) {
            handle.await.unwrap();
            rounds.fetch_add(1, SeqCst);
        }
    });
    assert_eq!(total, ROUNDS);
    assert!(
        (1..=2 * coop::BUDGET as usize).contains(&seen),
        "the other task ran after {seen} of {ROUNDS} ready handles; the budget is {}",
        coop::BUDGET
    );
}

#[test]
fn free_locks_fired_timers_and_consume_budget_spend_the_budget_too() {
    let guarded = Guarded::new(Inline, 0u64);
    let (seen, _) = rounds_before_another_task_ran(move |rounds| async move {
        for _ in 0..ROUNDS {
            *guarded.lock().await += 1;
            rounds.fetch_add(1, SeqCst);
        }
    });
    assert!(seen <= 2 * coop::BUDGET as usize, "locks: {seen}");

    let timer = Timer::manual();
    let (seen, _) = rounds_before_another_task_ran(move |rounds| async move {
        for _ in 0..ROUNDS {
            timer.sleep(Duration::ZERO).await;
            rounds.fetch_add(1, SeqCst);
        }
    });
    assert!(seen <= 2 * coop::BUDGET as usize, "timers: {seen}");

    let (seen, _) = rounds_before_another_task_ran(|rounds| async move {
        for _ in 0..ROUNDS {
            coop::consume_budget().await;
            rounds.fetch_add(1, SeqCst);
        }
    });
    assert!(seen <= 2 * coop::BUDGET as usize, "consume_budget: {seen}");
}

#[test]
fn a_loop_on_consume_budget_alone_cannot_hold_the_only_worker() {
    // Without the budget this loop would wait forever for a task queued
    // behind it.
    within("spin", || {
        let pool = pool("spin", 1);
        let flag = Arc::new(AtomicBool::new(false));
        let (f, p) = (flag.clone(), pool.clone());
        let spinner = pool.spawn(async move {
            let setter = p.run(move || f.store(true, SeqCst));
            let mut rounds = 0u64;
            while !flag.load(SeqCst) {
                coop::consume_budget().await;
                rounds += 1;
            }
            setter.await.unwrap();
            rounds
        });
        let rounds = block_on(spinner).unwrap();
        assert!(rounds >= u64::from(coop::BUDGET), "{rounds}");
    });
}

#[test]
fn unconstrained_never_yields() {
    let (seen, total) = rounds_before_another_task_ran(|rounds| {
        coop::unconstrained(async move {
            for handle in finished_handles(ROUNDS) {
                handle.await.unwrap();
                rounds.fetch_add(1, SeqCst);
            }
        })
    });
    assert_eq!((seen, total), (ROUNDS, ROUNDS));
}

#[test]
fn a_spent_budget_does_not_spin_a_foreign_block_on_or_a_viaduct_one() {
    within("nested", || {
        let pool = pool("nested", 1);
        let done = pool.spawn(async {
            for handle in finished_handles(10 * coop::BUDGET as usize) {
                handle.await.unwrap();
            }
            // The budget is spent; waits that poll in place must still end.
            let foreign = futures::executor::block_on(Inline.run(|| 1)).unwrap();
            let ours = block_on(Inline.run(|| 2)).unwrap();
            foreign + ours
        });
        assert_eq!(block_on(done).unwrap(), 3);
    });
}

#[test]
fn outside_any_task_nothing_is_held_back() {
    // A plain thread has no budget: a poll of a ready handle is ready.
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    for mut handle in finished_handles(10 * coop::BUDGET as usize) {
        assert!(std::pin::Pin::new(&mut handle).poll(&mut cx).is_ready());
    }
}

#[test]
fn a_timeout_fires_even_when_its_future_spends_the_budget_every_poll() {
    within("timeout", || {
        let pool = pool("timeout", 1);
        let busy = pool.spawn(viaduct::time::timeout(Duration::from_millis(20), async {
            loop {
                // A finished handle: ready at once, one unit of budget.
                Inline.run(|| ()).await.unwrap();
            }
        }));
        assert!(block_on(busy).unwrap().is_err(), "the deadline must win");
    });
}

#[test]
fn a_task_made_to_yield_at_a_free_lock_does_not_hold_it_while_it_waits() {
    within("lock-yield", || {
        let pool = pool("lock-yield", 1);
        let value = Guarded::new(pool.clone(), 0u32);
        let v = value.clone();
        let locker = pool.spawn(async move {
            for _ in 0..1_000 {
                *v.lock().await += 1;
            }
        });
        let v = value.clone();
        // Runs when the locker's budget runs out: the value must be free.
        let other = pool.spawn(async move { v.try_lock().map(|g| *g) });
        let seen = block_on(other).unwrap();
        block_on(locker).unwrap();
        let seen = seen.expect("the lock was held across the locker's forced yield");
        assert!(seen < 1_000, "ran only after the locker: {seen}");
    });
}

#[test]
fn sections_run_on_the_spot_spend_the_budget_too() {
    within("coop with", || {
        let pool = pool("coop", 1);
        let value = Guarded::new(pool.clone(), 0usize);
        let rounds = Arc::new(AtomicUsize::new(0));
        let (go, wait) = mpsc::channel::<()>();
        let (v, r) = (value.clone(), rounds.clone());
        // On the strand's own pool, with the strand idle, every section runs
        // right in the task and its handle is finished from the start.
        let busy = pool.spawn(async move {
            wait.recv().unwrap();
            for _ in 0..ROUNDS {
                v.with(|n| *n += 1).await.unwrap();
                r.fetch_add(1, SeqCst);
            }
        });
        let r = rounds.clone();
        let other = pool.run(move || r.load(SeqCst));
        go.send(()).unwrap();
        block_on(busy).unwrap();
        let seen = block_on(other).unwrap();
        assert!(
            (1..=2 * coop::BUDGET as usize).contains(&seen),
            "the other task ran after {seen} of {ROUNDS} sections"
        );
        assert_eq!(block_on(value.with(|n| *n)).unwrap(), ROUNDS);
    });
}
