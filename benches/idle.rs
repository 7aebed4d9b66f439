//! What a pool costs before it does anything: the time `build` takes, and
//! the CPU its workers burn while idle, at 2, 64, 512 and 3,000 workers,
//! beside as many plain std threads parked on a channel.
//!
//! `cargo bench --bench idle`. `BENCH_WORKERS` (comma-separated) replaces
//! the worker counts. Each pool first runs a burst of tasks, so every worker
//! has been through a search and a park, then sits idle for one second.
//! The CPU is the whole process's, read from `/proc/self/task/*/schedstat`
//! (Linux only).

use std::fs;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use viaduct::{block_on, ExecutorExt, ThreadPool};

/// CPU time of every live thread of this process.
fn process_cpu() -> Duration {
    let mut total = 0u64;
    for entry in fs::read_dir("/proc/self/task").expect("Linux /proc") {
        let Ok(stat) = fs::read_to_string(entry.unwrap().path().join("schedstat")) else {
            continue; // the thread ended meanwhile
        };
        total += stat
            .split_whitespace()
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap();
    }
    Duration::from_nanos(total)
}

/// Build time and CPU over one idle second of a pool of `n` workers.
fn pool(n: usize) -> (Duration, Duration) {
    let start = Instant::now();
    let pool = ThreadPool::builder()
        .threads(n)
        .name("idle")
        .build()
        .unwrap();
    let built = start.elapsed();
    let handles: Vec<_> = (0..4 * n).map(|i| pool.spawn(async move { i })).collect();
    for h in handles {
        block_on(h).unwrap();
    }
    thread::sleep(Duration::from_millis(200));
    let before = process_cpu();
    thread::sleep(Duration::from_secs(1));
    let idle = process_cpu() - before;
    pool.shutdown().unwrap();
    (built, idle)
}

/// The same for `n` std threads that block on a channel.
fn std_threads(n: usize) -> (Duration, Duration) {
    let start = Instant::now();
    let (senders, threads): (Vec<_>, Vec<_>) = (0..n)
        .map(|_| {
            let (tx, rx) = mpsc::channel::<()>();
            (tx, thread::spawn(move || while rx.recv().is_ok() {}))
        })
        .unzip();
    let built = start.elapsed();
    thread::sleep(Duration::from_millis(200));
    let before = process_cpu();
    thread::sleep(Duration::from_secs(1));
    let idle = process_cpu() - before;
    drop(senders);
    threads.into_iter().for_each(|t| t.join().unwrap());
    (built, idle)
}

fn main() {
    let counts: Vec<usize> = std::env::var("BENCH_WORKERS")
        .ok()
        .map(|s| {
            s.split(',')
                .map(|n| n.trim().parse().expect("a count"))
                .collect()
        })
        .unwrap_or_else(|| vec![2, 64, 512, 3000]);
    println!(
        "{:>8} {:>14} {:>14} {:>16} {:>16}",
        "workers", "build (ms)", "std spawn (ms)", "idle CPU (ms/s)", "std idle (ms/s)"
    );
    for n in counts {
        let (built, idle) = pool(n);
        let (spawned, std_idle) = std_threads(n);
        println!(
            "{:>8} {:>14.2} {:>14.2} {:>16.2} {:>16.2}",
            n,
            built.as_secs_f64() * 1e3,
            spawned.as_secs_f64() * 1e3,
            idle.as_secs_f64() * 1e3,
            std_idle.as_secs_f64() * 1e3,
        );
    }
}
