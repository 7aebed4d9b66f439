//! Work handed from tokio tasks to a pool and recorded under a lock: what
//! the chat example (`examples/chat.rs`) does per message, without the
//! sockets, and with next to no work in the job, so that what is timed is
//! the hand-off.
//!
//! 50 tokio tasks on a 2-worker tokio runtime each post 20,000 messages,
//! one after another, to one of 5 rooms:
//!
//! - viaduct: `pool.run(job).and_then(|d| room.with(record))` on a
//!   2-thread `ThreadPool`, each room a `Guarded`, the handle awaited;
//! - tokio + rayon: `rayon.spawn(job)` answering on a tokio `oneshot`, then
//!   the room's `tokio::sync::Mutex` locked in the task.
//!
//! Each cell is the median round: wall time and process CPU time per
//! message. The ratio is viaduct's wall time over tokio + rayon's.
//!
//! `cargo bench --bench offload`. `BENCH_ROUNDS` sets the rounds (default
//! 5), interleaved between the two.

use std::sync::Arc;
use std::time::{Duration, Instant};

use viaduct::{ExecutorExt, Guarded, ThreadPool};

#[path = "support/rounds.rs"]
mod rounds;
use rounds::median;

const TASKS: u64 = 50;
const MESSAGES: u64 = 20_000;
const ROOMS: usize = 5;

#[derive(Default)]
struct Room {
    messages: u64,
    last: u64,
}

impl Room {
    fn record(&mut self, digest: u64) -> (u64, u64) {
        self.messages += 1;
        self.last = digest;
        (digest, self.messages)
    }
}

/// The job: next to nothing, on a text the task formatted.
fn digest(text: &str) -> u64 {
    text.len() as u64
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
}

/// Runs `post` for every message of every task; returns the wall and CPU
/// time per message.
fn round<F, Fut>(rt: &tokio::runtime::Runtime, post: F) -> (Duration, Option<Duration>)
where
    F: Fn(usize, String) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = (u64, u64)> + Send,
{
    let (cpu, start) = (cpu_time(), Instant::now());
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let post = post.clone();
            rt.spawn(async move {
                let room = task as usize % ROOMS;
                let mut seen = 0;
                for m in 0..MESSAGES {
                    let (_, count) = post(room, format!("message {m} of task {task}")).await;
                    seen += count;
                }
                seen
            })
        })
        .collect();
    for t in tasks {
        std::hint::black_box(rt.block_on(t).unwrap());
    }
    let messages = (TASKS * MESSAGES) as u32;
    let cpu = cpu.zip(cpu_time()).map(|(a, b)| (b - a) / messages);
    (start.elapsed() / messages, cpu)
}

/// This process's CPU time so far, where `/proc` tells it.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // After the command name (in parentheses): utime and stime are the
    // 12th and 13th fields, in clock ticks of 1/100 s on Linux.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn viaduct_round(rt: &tokio::runtime::Runtime) -> (Duration, Option<Duration>) {
    let pool = ThreadPool::builder().threads(2).build().unwrap();
    let rooms: Arc<Vec<Guarded<Room>>> = Arc::new(
        (0..ROOMS)
            .map(|_| Guarded::new(pool.clone(), Room::default()))
            .collect(),
    );
    round(rt, move |room, text| {
        let room = rooms[room].clone();
        let posted = pool
            .run(move || digest(&text))
            .and_then(move |d| room.with(move |r| r.record(d)));
        async move { posted.await.unwrap() }
    })
}

fn rayon_round(rt: &tokio::runtime::Runtime) -> (Duration, Option<Duration>) {
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap(),
    );
    let rooms: Arc<Vec<tokio::sync::Mutex<Room>>> =
        Arc::new((0..ROOMS).map(|_| Default::default()).collect());
    round(rt, move |room, text| {
        let (pool, rooms) = (pool.clone(), rooms.clone());
        async move {
            let (tx, rx) = tokio::sync::oneshot::channel();
            pool.spawn(move || {
                let _ = tx.send(digest(&text));
            });
            let d = rx.await.unwrap();
            rooms[room].lock().await.record(d)
        }
    })
}

fn main() {
    let rounds = rounds::rounds(5);
    let rt = tokio_runtime();
    let (mut viaduct, mut rayon) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        viaduct.push(viaduct_round(&rt));
        rayon.push(rayon_round(&rt));
    }
    println!(
        "offload: {TASKS} tokio tasks x {MESSAGES} messages, a 2-thread pool, median of {rounds} rounds"
    );
    println!("{:<16} {:>12} {:>12}", "per message", "wall", "CPU");
    let show = |name: &str, runs: &[(Duration, Option<Duration>)]| {
        let wall = median(runs.iter().map(|r| r.0).collect());
        let cpu = runs
            .iter()
            .map(|r| r.1)
            .collect::<Option<Vec<_>>>()
            .map(median);
        let cpu = cpu.map_or("-".to_owned(), |c| format!("{} ns", c.as_nanos()));
        println!("{name:<16} {:>9} ns {cpu:>12}", wall.as_nanos());
        wall
    };
    let v = show("viaduct", &viaduct);
    let r = show("tokio + rayon", &rayon);
    println!(
        "viaduct / tokio + rayon (wall): {:.2}",
        v.as_secs_f64() / r.as_secs_f64()
    );
}
