//! Continuations across executors, and hopping in and out of a strand.
//!
//! Boost's `async(ser, f).then(iex, g).then(pool, h)`: step 1 runs on a
//! strand over a pool, step 2 on `Inline` (on the thread that finished
//! step 1), step 3 back on the pool. Without executors boost runs each
//! step on a new thread; `ThreadPerTask` does that on purpose. Last, tasks
//! hop into a strand for a critical section and back out (folly's
//! `TeleportGuard`).
//!
//! Run with `cargo run --example continuations`.

use std::thread;

use viaduct::prelude::*;
use viaduct::{block_on, hop_to, Inline, Strand, ThreadPerTask, ThreadPool};

/// "name (thread id)" of the calling thread.
fn here() -> String {
    let t = thread::current();
    format!("{} ({:?})", t.name().unwrap_or("unnamed"), t.id())
}

fn main() {
    let pool = ThreadPool::builder()
        .threads(4)
        .name("pool")
        .build()
        .unwrap();
    let strand = Strand::new(pool.clone());

    println!("-- strand, then Inline, then the pool");
    // Step 1 waits until the chain is attached: an `Inline` step attached
    // to a step that has already finished runs at once, inside `then`.
    let (attached, wait) = std::sync::mpsc::channel::<()>();
    let scene = strand
        .run(move || {
            wait.recv().unwrap();
            println!("step 1 on the strand over the pool: {}", here());
            thread::current().id()
        })
        .via(&Inline)
        .then(|first| {
            println!("step 2 on Inline:                   {}", here());
            (first, thread::current().id())
        })
        .via(&pool)
        .then(|(first, second)| {
            println!("step 3 on the pool:                 {}", here());
            assert!(thread::current().name().unwrap().starts_with("pool-"));
            (first, second)
        });
    attached.send(()).unwrap();
    let (first, second) = block_on(scene).unwrap();
    assert_eq!(first, second, "Inline runs where the step before finished");
    println!("step 2 ran on the thread that finished step 1");
    println!("(step 3 often lands there too: a pool runs the task a worker wakes on that worker)");

    println!("-- no executor to speak of: a new thread for every step");
    let fresh = ThreadPerTask::new("fresh");
    let names = fresh
        .run(|| vec![here()])
        .then(|mut v| {
            v.push(here());
            v
        })
        .then(|mut v| {
            v.push(here());
            v
        });
    for (i, name) in block_on(names).unwrap().iter().enumerate() {
        println!("step {}: {name}", i + 1);
    }
    fresh.join_threads().unwrap();

    println!("-- hop into the strand and back out: one task at a time inside");
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let (strand, pool) = (strand.clone(), pool.clone());
            pool.clone().spawn(async move {
                println!("task {i} starts on          {}", here());
                hop_to(&strand).await;
                println!("task {i} in the strand, on  {}", here());
                hop_to(&pool).await;
                println!("task {i} back on the pool,  {}", here());
            })
        })
        .collect();
    for t in tasks {
        block_on(t).unwrap();
    }
    pool.shutdown().unwrap();
}
