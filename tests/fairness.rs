//! Fairness inside `join`: a worker busy in a long parallel `join` still
//! runs the pool's other queued work (periodic jobs, strand sections,
//! tasks) at bounded intervals.

#[allow(dead_code)] // only `pool`, `fib` and `within` are used here
mod support;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{fib, pool, within};
use viaduct::{block_on, ExecutorExt, Guarded, ThreadPool, TimedExt};

/// Spins for `d`: a leaf of work that takes the same wall time on a
/// loaded machine (where it may take longer, never shorter).
fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// A parallel map over `leaves` leaves of `leaf` each, split in halves
/// with `join` down to single leaves, as `par_iter` would.
fn parallel_map(pool: &ThreadPool, leaves: u64, leaf: Duration) -> u64 {
    if leaves == 1 {
        spin(leaf);
        return 1;
    }
    let half = leaves / 2;
    let (a, b) = pool.join(
        || parallel_map(pool, half, leaf),
        || parallel_map(pool, leaves - half, leaf),
    );
    a + b
}

/// How many times a 25 ms periodic job on `pool` ran while `work` ran on
/// it (called from outside the pool, or from inside a task).
fn periodic_runs_during(pool: &ThreadPool, work: impl FnOnce() + Send + 'static) -> u64 {
    let runs = Arc::new(AtomicU64::new(0));
    let r = runs.clone();
    let job = pool.execute_every(Duration::from_millis(25), move || {
        r.fetch_add(1, SeqCst);
    });
    let before = runs.load(SeqCst);
    work();
    let during = runs.load(SeqCst) - before;
    job.cancel();
    during
}

#[test]
fn a_periodic_job_runs_during_a_long_parallel_join_of_fine_leaves() {
    within("fine", || {
        let pool = pool("fine", 2);
        let p = pool.clone();
        // 20,000 leaves of 100 us: 2 s of work, about 1 s on two workers.
        let runs = periodic_runs_during(&pool, move || {
            assert_eq!(parallel_map(&p, 20_000, Duration::from_micros(100)), 20_000);
        });
        assert!(
            runs >= 20,
            "the 25 ms job ran {runs} times during a 1 s join"
        );
    });
}

#[test]
fn a_periodic_job_runs_during_a_parallel_join_of_coarse_leaves_inside_a_task() {
    within("coarse", || {
        let pool = pool("coarse", 2);
        let p = pool.clone();
        // 500 leaves of 4 ms, called from a task of the pool itself.
        let runs = periodic_runs_during(&pool, move || {
            let inner = p.clone();
            let total =
                block_on(p.run(move || parallel_map(&inner, 500, Duration::from_millis(4))));
            assert_eq!(total.unwrap(), 500);
        });
        assert!(
            runs >= 20,
            "the 25 ms job ran {runs} times during a 1 s join"
        );
    });
}

#[test]
fn strand_sections_and_tasks_queued_on_the_pool_run_early_in_a_long_join() {
    within("sections", || {
        let pool = pool("sections", 2);
        let p = pool.clone();
        let counter = Guarded::new(pool.clone(), Vec::new());
        let c = counter.clone();
        // How many leaves were done when each section and task ran.
        let leaves_done = Arc::new(AtomicU64::new(0));
        let done = leaves_done.clone();
        let ran = pool.run(move || {
            let sections: Vec<_> = (0..10)
                .map(|_| {
                    let done = done.clone();
                    c.with(move |seen: &mut Vec<u64>| seen.push(done.load(SeqCst)))
                })
                .collect();
            let tasks: Vec<_> = (0..10)
                .map(|_| {
                    let done = done.clone();
                    p.run(move || done.load(SeqCst))
                })
                .collect();
            counted_map(&p, 20_000, &done);
            drop(sections);
            tasks
        });
        let tasks = block_on(ran).unwrap();
        let mut seen: Vec<u64> = tasks.into_iter().map(|h| block_on(h).unwrap()).collect();
        seen.extend(block_on(counter.with(|v| v.clone())).unwrap());
        assert_eq!(seen.len(), 20);
        let latest = seen.into_iter().max().unwrap();
        assert!(
            latest < 10_000,
            "the last section or task ran when {latest} of 20,000 leaves were done"
        );
    });
}

/// [`parallel_map`] with 50 us leaves, counting finished leaves in `done`.
fn counted_map(pool: &ThreadPool, leaves: u64, done: &AtomicU64) {
    if leaves == 1 {
        spin(Duration::from_micros(50));
        done.fetch_add(1, SeqCst);
        return;
    }
    let half = leaves / 2;
    pool.join(
        || counted_map(pool, half, done),
        || counted_map(pool, leaves - half, done),
    );
}

#[test]
fn fork_join_results_are_unchanged() {
    within("fib", || {
        let pool = pool("fib", 2);
        assert_eq!(fib(&pool, 25), 75_025);
        let p = pool.clone();
        assert_eq!(block_on(pool.run(move || fib(&p, 20))).unwrap(), 6_765);
    });
}

#[test]
fn a_task_run_inside_a_join_does_not_run_more_tasks_inside_its_own_joins() {
    thread_local! {
        static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    within("nesting", || {
        let pool = pool("nesting", 1);
        let deepest = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let (pool, deepest) = (pool.clone(), deepest.clone());
                pool.clone().run(move || {
                    let depth = DEPTH.with(|d| d.get() + 1);
                    DEPTH.with(|d| d.set(depth));
                    deepest.fetch_max(depth, SeqCst);
                    // 20 ms of joins (fib), which share the worker now and then.
                    let until = Instant::now() + Duration::from_millis(20);
                    while Instant::now() < until {
                        std::hint::black_box(fib(&pool, 12));
                    }
                    DEPTH.with(|d| d.set(depth - 1));
                })
            })
            .collect();
        for t in tasks {
            block_on(t).unwrap();
        }
        // A join shares the worker with one task, which does not share it
        // again: at most two of these tasks on the stack at once.
        assert_eq!(deepest.load(SeqCst), 2);
    });
}
