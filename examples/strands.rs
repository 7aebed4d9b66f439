//! Strands against a mutex: 4 worker threads serve 8
//! connections; each connection submits tasks of 5 to 15 ms that must not
//! run two at a time.
//!
//! First each connection guards itself with a `std::sync::Mutex`: a worker
//! that picks up a task of a busy connection blocks on the mutex, and the
//! other tasks queued behind it wait too. Then each connection gets a
//! `Strand`: a busy connection's tasks wait in its strand, and the workers
//! run other connections' tasks meanwhile. The example prints how much of
//! the workers' time went into blocking in each case.
//!
//! Run with `cargo run --release --example strands`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use viaduct::prelude::*;
use viaduct::{block_on, Strand, ThreadPool};

const WORKERS: usize = 4;
const CONNECTIONS: usize = 8;
const TASKS: usize = 200;

/// The tasks, in submission order: (connection, duration). Deterministic,
/// so both runs get the same work.
fn workload() -> Vec<(usize, Duration)> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..TASKS)
        .map(|_| {
            let conn = (next() % CONNECTIONS as u64) as usize;
            let ms = 5 + next() % 11;
            (conn, Duration::from_millis(ms))
        })
        .collect()
}

/// What a run measured.
#[derive(Default)]
struct Times {
    /// Time spent inside tasks (the simulated work).
    busy_ns: AtomicU64,
    /// Time workers spent blocked on a connection's mutex.
    blocked_ns: AtomicU64,
}

fn add(counter: &AtomicU64, d: Duration) {
    counter.fetch_add(d.as_nanos() as u64, Relaxed);
}

fn report(what: &str, wall: Duration, times: &Times) {
    let capacity = wall.as_secs_f64() * WORKERS as f64;
    let busy = times.busy_ns.load(Relaxed) as f64 / 1e9;
    let blocked = times.blocked_ns.load(Relaxed) as f64 / 1e9;
    println!(
        "{what:<24} wall {:>5.0} ms | worker time {:>5.0} ms: working {:>3.0}%, blocked {:>3.0}%, idle or overhead {:>3.0}%",
        wall.as_secs_f64() * 1e3,
        capacity * 1e3,
        busy / capacity * 100.0,
        blocked / capacity * 100.0,
        (capacity - busy - blocked).max(0.0) / capacity * 100.0,
    );
}

fn with_mutexes(pool: &ThreadPool, work: &[(usize, Duration)]) -> (Duration, Times) {
    let conns: Vec<Arc<Mutex<u64>>> = (0..CONNECTIONS).map(|_| Arc::default()).collect();
    let times = Arc::new(Times::default());
    let start = Instant::now();
    let handles: Vec<_> = work
        .iter()
        .map(|&(conn, d)| {
            let (conn, times) = (conns[conn].clone(), times.clone());
            pool.run(move || {
                let t0 = Instant::now();
                let mut served = conn.lock().unwrap();
                add(&times.blocked_ns, t0.elapsed());
                thread::sleep(d);
                *served += 1;
                add(&times.busy_ns, d);
            })
        })
        .collect();
    for h in handles {
        block_on(h).unwrap();
    }
    let wall = start.elapsed();
    let served: u64 = conns.iter().map(|c| *c.lock().unwrap()).sum();
    assert_eq!(served, TASKS as u64);
    (wall, Arc::try_unwrap(times).ok().unwrap())
}

fn with_strands(pool: &ThreadPool, work: &[(usize, Duration)]) -> (Duration, Times) {
    let conns: Vec<Strand> = (0..CONNECTIONS)
        .map(|_| Strand::new(pool.clone()))
        .collect();
    let served = Arc::new(AtomicU64::new(0));
    let times = Arc::new(Times::default());
    let start = Instant::now();
    let handles: Vec<_> = work
        .iter()
        .map(|&(conn, d)| {
            let (times, served) = (times.clone(), served.clone());
            conns[conn].run(move || {
                thread::sleep(d);
                served.fetch_add(1, Relaxed);
                add(&times.busy_ns, d);
            })
        })
        .collect();
    for h in handles {
        block_on(h).unwrap();
    }
    let wall = start.elapsed();
    assert_eq!(served.load(Relaxed), TASKS as u64);
    let batches: u64 = conns.iter().map(|s| s.metrics().batches).sum();
    println!("  (strands took their {TASKS} tasks in {batches} batches)");
    (wall, Arc::try_unwrap(times).ok().unwrap())
}

fn main() {
    let pool = ThreadPool::builder()
        .threads(WORKERS)
        .name("worker")
        .build()
        .unwrap();
    let work = workload();
    let total: Duration = work.iter().map(|w| w.1).sum();
    println!(
        "{WORKERS} workers, {CONNECTIONS} connections, {TASKS} tasks of 5-15 ms ({} ms of work in all)",
        total.as_millis()
    );

    // Which worker runs a connection's task is up to the pool: show a few.
    let strand = Strand::new(pool.clone());
    let names: Vec<String> = (0..4)
        .map(|_| strand.run(|| thread::current().name().unwrap().to_owned()))
        .map(|h| block_on(h).unwrap())
        .collect();
    println!("one connection's strand ran on: {}", names.join(", "));

    let (wall, times) = with_mutexes(&pool, &work);
    report("a mutex per connection", wall, &times);
    let (wall, times) = with_strands(&pool, &work);
    report("a strand per connection", wall, &times);
}
