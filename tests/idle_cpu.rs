//! An idle pool burns no CPU: its workers sleep instead of spinning,
//! however many there are.
//!
//! A test binary of its own, its tests one at a time (`ONE_AT_A_TIME`), so
//! that the process's CPU time is the pool's plus threads that sleep (the
//! harness's main thread and the tests').

use std::fs;
use std::sync::Mutex;
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

/// Held by each test: another test's pool would count in its CPU time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// CPU time the process uses over one second while a pool of `threads`
/// workers is idle, after a burst of work so that every worker has been
/// through a search and a park.
fn idle_cpu_of_a_pool(threads: usize) -> Duration {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let pool = ThreadPool::builder()
        .threads(threads)
        .name("idle")
        .build()
        .unwrap();
    let handles: Vec<_> = (0..1000.max(4 * threads))
        .map(|i| pool.spawn(async move { i }))
        .collect();
    for h in handles {
        block_on(h).unwrap();
    }
    thread::sleep(Duration::from_millis(200));

    let (before, threads_before) = process_cpu();
    thread::sleep(Duration::from_secs(1));
    let (after, threads_after) = process_cpu();

    assert_eq!(
        threads_before, threads_after,
        "a thread came or went: the sums would not be the process's CPU time"
    );
    pool.shutdown().unwrap();
    let used = after - before;
    println!("idle pool of {threads} workers, CPU over one second: {used:?}");
    used
}

#[test]
fn an_idle_two_thread_pool_uses_under_20_ms_of_cpu_per_second() {
    let used = idle_cpu_of_a_pool(2);
    assert!(
        used < Duration::from_millis(20),
        "an idle pool used {used:?} of CPU in one second"
    );
}

/// Every idle worker used to search all the others 64 times, yielding in
/// between, before it slept: N² work, and 512 idle workers on two cores
/// still burned half a second of CPU a second after their work was done.
/// Now only as many search again as there are cores; the bound leaves
/// room for reading 512 threads' CPU times, which the sum counts.
#[test]
fn an_idle_pool_of_512_workers_uses_under_50_ms_of_cpu_per_second() {
    let used = idle_cpu_of_a_pool(512);
    assert!(
        used < Duration::from_millis(50),
        "an idle pool of 512 workers used {used:?} of CPU in one second"
    );
}
