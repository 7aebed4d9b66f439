//! Timed tasks on a pool, in about three seconds.
//!
//! A pool runs task A two seconds from now and task B one second
//! from now, so B starts first; and a periodic task prints every second.
//! Here the times are halved: A after 1 s, B after 0.5 s, each working for
//! 0.5 s; the periodic task ticks every 0.5 s and is cancelled after five
//! runs. Timers are taken off the global timer (its thread is
//! `viaduct-timer`); the work runs on the pool's threads.
//!
//! ```text
//! cargo run --example timers
//! ```

use std::thread;
use std::time::{Duration, Instant};

use viaduct::prelude::*;
use viaduct::time::{self, Elapsed};
use viaduct::{block_on, ThreadPool};

fn main() {
    let pool = ThreadPool::builder()
        .threads(2)
        .name("pool")
        .build()
        .unwrap();
    let start = Instant::now();
    let stamp = move |what: &str| {
        println!(
            "{:>6.3} s  {:<8} {what}",
            start.elapsed().as_secs_f64(),
            thread::current().name().unwrap_or("?"),
        );
    };

    let a = pool.execute_after(Duration::from_millis(1_000), move || {
        stamp("task A running...");
        thread::sleep(Duration::from_millis(500));
        stamp("task A done!");
    });
    let b = pool.execute_after(Duration::from_millis(500), move || {
        stamp("task B running...");
        thread::sleep(Duration::from_millis(500));
        stamp("task B done!");
    });
    let periodic = pool.execute_every(Duration::from_millis(500), move || {
        stamp("periodic task running...");
    });
    stamp("main thread done.");

    block_on(b).unwrap();
    block_on(a).unwrap();
    while periodic.runs() < 5 {
        block_on(time::sleep(Duration::from_millis(10)));
    }
    periodic.cancel();
    let runs = periodic.runs();
    let why = block_on(periodic);
    stamp(&format!("periodic task stopped after {runs} runs: {why}"));

    // The same timer bounds a future's wait.
    let late = block_on(time::timeout(
        Duration::from_millis(100),
        futures::future::pending::<()>(),
    ));
    assert_eq!(late, Err(Elapsed::new()));
    stamp(&format!("timeout: {}", late.unwrap_err()));
}
