//! An idle pool burns no CPU: its workers sleep instead of spinning.
//!
//! A test binary of its own, with a single test, so that the process's CPU
//! time is the pool's plus two threads that sleep (the harness's main
//! thread and the test's).

use std::fs;
use std::thread;
use std::time::Duration;

use viaduct::{block_on, ExecutorExt, ThreadPool};

/// The CPU time of every live thread of this process, in nanoseconds, and
/// the threads' ids. From the first field of each
/// `/proc/self/task/*/schedstat`, which is nanosecond-exact where
/// `/proc/self/stat` counts 10 ms ticks.
fn process_cpu() -> (Duration, Vec<String>) {
    let mut total = 0u64;
    let mut tids = Vec::new();
    for entry in fs::read_dir("/proc/self/task").expect("Linux /proc") {
        let entry = entry.unwrap();
        let stat = fs::read_to_string(entry.path().join("schedstat")).unwrap();
        let on_cpu: u64 = stat.split_whitespace().next().unwrap().parse().unwrap();
        total += on_cpu;
        tids.push(entry.file_name().to_string_lossy().into_owned());
    }
    tids.sort();
    (Duration::from_nanos(total), tids)
}

#[test]
fn an_idle_two_thread_pool_uses_under_20_ms_of_cpu_per_second() {
    let pool = ThreadPool::builder()
        .threads(2)
        .name("idle")
        .build()
        .unwrap();
    // Work first, so both workers have been through a search and a park.
    let handles: Vec<_> = (0..1000).map(|i| pool.spawn(async move { i })).collect();
    for h in handles {
        block_on(h).unwrap();
    }
    thread::sleep(Duration::from_millis(100));

    let (before, threads_before) = process_cpu();
    thread::sleep(Duration::from_secs(1));
    let (after, threads_after) = process_cpu();

    assert_eq!(
        threads_before, threads_after,
        "a thread came or went: the sums would not be the process's CPU time"
    );
    let used = after - before;
    println!("idle two-thread pool, CPU over one second: {used:?}");
    assert!(
        used < Duration::from_millis(20),
        "an idle pool used {used:?} of CPU in one second"
    );
    pool.shutdown().unwrap();
}
