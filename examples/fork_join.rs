//! Fork-join inside a pool: 100 tasks on a pool, each submits
//! 100 children to the same pool and waits for all of them.
//!
//! Waiting by blocking the worker thread (boost's `wait_for_all`) deadlocks
//! once every worker is a waiting parent: nobody is left to run the
//! children. Here that version runs on a one-thread pool with a 1 s
//! timeout so that it reports the deadlock instead of hanging. Then the same
//! scene with viaduct's `block_on` (and with boost's `reschedule_until`),
//! which run the pool's tasks while they wait, completes.
//!
//! `cargo run --release --example fork_join`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use viaduct::prelude::*;
use viaduct::{block_on, ThreadPool};

const PARENTS: usize = 100;
const CHILDREN: usize = 100;

fn pool() -> ThreadPool {
    ThreadPool::builder()
        .threads(1)
        .name("solo")
        .build()
        .unwrap()
}

/// Parents wait by blocking their thread on a channel: boost's
/// `wait_for_all`.
fn blocking_wait() {
    let pool = pool();
    let (done_tx, done_rx) = mpsc::channel();
    for _ in 0..PARENTS {
        let (p, done_tx) = (pool.clone(), done_tx.clone());
        pool.execute(move || {
            let (tx, rx) = mpsc::channel();
            for _ in 0..CHILDREN {
                let tx = tx.clone();
                p.execute(move || {
                    let _ = tx.send(42);
                });
            }
            // Blocks the only worker: the children queued behind this task
            // can never run.
            let deadline = Instant::now() + Duration::from_secs(1);
            let got = (0..CHILDREN)
                .take_while(|_| {
                    rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                        .is_ok()
                })
                .count();
            let _ = done_tx.send(got);
        });
    }
    let first = done_rx.recv().unwrap();
    println!("blocking wait:     the first parent got {first} of {CHILDREN} children within 1 s: deadlock (a real pool would hang forever)");
    // Let the stuck parents give up, so the process can exit.
    pool.shutdown_now().unwrap();
}

/// Parents wait with `block_on`, which runs the pool's tasks meanwhile.
fn helping_wait() {
    let pool = pool();
    let ran = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let parents: Vec<_> = (0..PARENTS)
        .map(|_| {
            let (p, ran) = (pool.clone(), ran.clone());
            pool.spawn(async move {
                let kids: Vec<_> = (0..CHILDREN)
                    .map(|_| {
                        let ran = ran.clone();
                        p.run(move || {
                            ran.fetch_add(1, Ordering::Relaxed);
                            42
                        })
                    })
                    .collect();
                kids.into_iter()
                    .map(|k| block_on(k).unwrap())
                    .sum::<usize>()
            })
        })
        .collect();
    let total: usize = parents.into_iter().map(|p| block_on(p).unwrap()).sum();
    println!(
        "block_on:          {} children ran on 1 thread, sum {total}, in {:?}",
        ran.load(Ordering::Relaxed),
        start.elapsed()
    );
}

/// Parents wait with `reschedule_until`, boost's manual fork-join.
fn reschedule_until() {
    let pool = pool();
    let start = Instant::now();
    let (done_tx, done_rx) = mpsc::channel();
    for _ in 0..PARENTS {
        let (p, done_tx) = (pool.clone(), done_tx.clone());
        pool.execute(move || {
            let finished = Arc::new(AtomicUsize::new(0));
            for _ in 0..CHILDREN {
                let finished = finished.clone();
                p.execute(move || {
                    finished.fetch_add(1, Ordering::Release);
                });
            }
            let all_done = p.reschedule_until(|| finished.load(Ordering::Acquire) == CHILDREN);
            done_tx.send(all_done).unwrap();
        });
    }
    let all = (0..PARENTS).filter(|_| done_rx.recv().unwrap()).count();
    println!(
        "reschedule_until:  {all} of {PARENTS} parents saw all their children finish, in {:?}",
        start.elapsed()
    );
}

fn main() {
    blocking_wait();
    helping_wait();
    reschedule_until();
}
