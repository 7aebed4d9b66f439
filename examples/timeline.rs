//! Strands against a mutex, on a timeline you can open in a profiler
//! (Perfetto, chrome://tracing): 4 workers serve 8 connections whose tasks
//! (5 to 15 ms each) must never run two at a time, first with a
//! `std::sync::Mutex` per connection, then with a `Strand` per connection.
//!
//! The `tracing` feature gives a `poll` span per task poll and events for
//! parks, steals and strand batches; this example adds a `conn N` span
//! around each task's work and a `blocked` span around each wait for a
//! connection's mutex. `tracing-chrome` writes them all to a Chrome trace:
//! open the file in Perfetto (ui.perfetto.dev) or chrome://tracing, one row
//! per worker. With mutexes the rows show `blocked` gaps; with strands each
//! worker runs one connection's batch after another.
//!
//! It also prints each worker's utilisation: time spent working over the
//! run's wall time.
//!
//! Run with `cargo run --release --features tracing --example timeline [PATH]`;
//! the trace goes to PATH, by default `target/timeline.json`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tracing_chrome::{ChromeLayerBuilder, EventOrSpan};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Registry;
use viaduct::prelude::*;
use viaduct::{block_on, JoinHandle, Strand, ThreadPool};

const WORKERS: usize = 4;
const CONNECTIONS: usize = 8;
const TASKS: u64 = 320;

/// A span per connection, each with its own name, so that the trace viewer
/// colours the connections apart (a span's name is fixed at its call site).
const CONN_SPANS: [fn() -> tracing::Span; CONNECTIONS] = [
    || tracing::info_span!("conn 0"),
    || tracing::info_span!("conn 1"),
    || tracing::info_span!("conn 2"),
    || tracing::info_span!("conn 3"),
    || tracing::info_span!("conn 4"),
    || tracing::info_span!("conn 5"),
    || tracing::info_span!("conn 6"),
    || tracing::info_span!("conn 7"),
];

/// The tasks in submission order, as (connection, duration): scattered by a
/// multiplicative hash, the same on every run and for both variants.
fn workload() -> Vec<(usize, Duration)> {
    (1..=TASKS)
        .map(|i| {
            let r = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
            let conn = (r % CONNECTIONS as u64) as usize;
            (conn, Duration::from_millis(5 + (r >> 8) % 11))
        })
        .collect()
}

/// Nanoseconds each worker spent working and blocked.
#[derive(Default)]
struct Usage {
    work: [AtomicU64; WORKERS],
    blocked: [AtomicU64; WORKERS],
}

impl Usage {
    /// Charges `since.elapsed()` to the calling worker (`worker-N`).
    fn charge(counters: &[AtomicU64; WORKERS], since: Instant) {
        let worker = thread::current()
            .name()
            .and_then(|n| n.strip_prefix("worker-"))
            .and_then(|i| i.parse::<usize>().ok())
            .expect("tasks run on the pool's workers");
        counters[worker].fetch_add(since.elapsed().as_nanos() as u64, Relaxed);
    }

    fn report(&self, what: &str, wall: Duration) {
        println!("{what}: wall {:.0} ms", wall.as_secs_f64() * 1e3);
        let wall_ns = wall.as_nanos() as f64;
        let mut total = 0.0;
        for w in 0..WORKERS {
            let work = self.work[w].load(Relaxed) as f64 / wall_ns;
            let blocked = self.blocked[w].load(Relaxed) as f64 / wall_ns;
            total += work;
            println!(
                "  worker-{w}: utilisation {:>3.0}%  (blocked on a mutex {:>3.0}%)",
                work * 100.0,
                blocked * 100.0
            );
        }
        println!(
            "  all workers: utilisation {:>3.0}%",
            total / WORKERS as f64 * 100.0
        );
    }
}

/// A task's work: `d` of it, inside its connection's span.
fn serve(conn: usize, d: Duration, usage: &Usage) {
    let _span = CONN_SPANS[conn]().entered();
    let start = Instant::now();
    thread::sleep(d);
    Usage::charge(&usage.work, start);
}

/// Runs the workload with `submit` and waits for it; returns the wall time.
fn measure(what: &'static str, submit: impl FnOnce() -> Vec<JoinHandle<()>>) -> Duration {
    let _span = tracing::info_span!("variant", what).entered();
    let start = Instant::now();
    for h in submit() {
        block_on(h).unwrap();
    }
    start.elapsed()
}

fn with_mutexes(pool: &ThreadPool, work: &[(usize, Duration)]) -> (Duration, Usage) {
    let conns: Vec<Arc<Mutex<()>>> = (0..CONNECTIONS).map(|_| Arc::default()).collect();
    let usage = Arc::new(Usage::default());
    let wall = measure("a mutex per connection", || {
        work.iter()
            .map(|&(conn, d)| {
                let (lock, usage) = (conns[conn].clone(), usage.clone());
                pool.run(move || {
                    let start = Instant::now();
                    let guard = {
                        let _span = tracing::info_span!("blocked", conn).entered();
                        lock.lock().unwrap()
                    };
                    Usage::charge(&usage.blocked, start);
                    serve(conn, d, &usage);
                    drop(guard);
                })
            })
            .collect()
    });
    (wall, Arc::into_inner(usage).unwrap())
}

fn with_strands(pool: &ThreadPool, work: &[(usize, Duration)]) -> (Duration, Usage, u64) {
    let conns: Vec<Strand> = (0..CONNECTIONS)
        .map(|_| Strand::new(pool.clone()))
        .collect();
    let usage = Arc::new(Usage::default());
    let wall = measure("a strand per connection", || {
        work.iter()
            .map(|&(conn, d)| {
                let usage = usage.clone();
                conns[conn].run(move || serve(conn, d, &usage))
            })
            .collect()
    });
    let batches = conns.iter().map(|s| s.metrics().batches).sum();
    (wall, Arc::into_inner(usage).unwrap(), batches)
}

/// Names an event after its message (`park`, `strand batch`, ...) rather
/// than its source line; a span keeps its own name.
fn name(item: &EventOrSpan<'_, '_, Registry>) -> String {
    struct Message(String);
    impl tracing::field::Visit for Message {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                self.0 = format!("{value:?}");
            }
        }
    }
    match item {
        EventOrSpan::Event(event) => {
            let mut message = Message(event.metadata().name().to_owned());
            event.record(&mut message);
            message.0
        }
        EventOrSpan::Span(span) => span.name().to_owned(),
    }
}

fn main() {
    let path = std::env::args_os().nth(1).map_or_else(
        || PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/timeline.json")),
        PathBuf::from,
    );
    let (chrome, flush) = ChromeLayerBuilder::new()
        .file(&path)
        .include_args(true)
        .name_fn(Box::new(name))
        .build();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(chrome))
        .expect("no other subscriber is set");

    let pool = ThreadPool::builder()
        .threads(WORKERS)
        .name("worker")
        .build()
        .unwrap();
    let work = workload();
    let total: Duration = work.iter().map(|&(_, d)| d).sum();
    println!(
        "{WORKERS} workers, {CONNECTIONS} connections, {TASKS} tasks of 5-15 ms ({} ms of work)",
        total.as_millis()
    );

    let (wall, usage) = with_mutexes(&pool, &work);
    usage.report("a mutex per connection", wall);
    let (wall, usage, batches) = with_strands(&pool, &work);
    usage.report("a strand per connection", wall);
    println!("  (the strands took their {TASKS} tasks in {batches} batches)");

    pool.shutdown().unwrap();
    // The guard writes the rest of the trace and closes the file.
    drop(flush);
    println!("trace written to {}", path.display());
}
