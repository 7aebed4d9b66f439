//! A service that gets stuck twice, and what viaduct says about it.
//!
//! - Two handlers lock the same two `Guarded` values in opposite orders:
//!   `transfer` takes the accounts, then the audit log; `report` takes the
//!   audit log, then the accounts. Each ends up waiting for the other.
//! - A third handler compresses a file with a blocking call on a worker,
//!   holding that worker for 600 ms.
//!
//! The pool reports the long poll while it still runs (stall detection),
//! and a task dump lists every task, what it waits on, and the cycle of
//! the deadlock, with the line each task was spawned from. The example
//! then cancels the deadlocked handlers and exits; it fails (exit code 1)
//! if the report or the cycle does not come.
//!
//! Run with `cargo run --release --example stuck`.

use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use async_lock::Barrier;
use viaduct::prelude::*;
use viaduct::time::sleep;
use viaduct::{block_on, Guarded, ThreadPool};

#[derive(Debug, Default)]
struct Accounts {
    balance: i64,
}

#[derive(Debug, Default)]
struct AuditLog {
    entries: Vec<String>,
}

/// How long the example waits for each thing it expects.
const PATIENCE: Duration = Duration::from_secs(10);

fn main() {
    let (stalls, stall_reports) = mpsc::channel();
    let stalls = std::sync::Mutex::new(stalls);
    let pool = ThreadPool::builder()
        .name("service")
        .threads(3)
        .stall_threshold(Duration::from_millis(100))
        .on_stall(move |stall| {
            let _ = stalls.lock().unwrap().send(stall.to_string());
        })
        .build()
        .expect("a valid configuration");
    let accounts = Guarded::new(pool.clone(), Accounts::default());
    let audit = Guarded::new(pool.clone(), AuditLog::default());

    // A healthy task, for contrast: it waits on a timer.
    let ticker = pool.spawn(async {
        loop {
            sleep(Duration::from_secs(1)).await;
        }
    });

    // The deadlock. The barrier makes sure both hold their first value
    // before asking for the second, so the example gets stuck every time.
    let both_hold_one = Arc::new(Barrier::new(2));
    let transfer = pool.spawn({
        let (accounts, audit, barrier) = (accounts.clone(), audit.clone(), both_hold_one.clone());
        async move {
            let mut accounts = accounts.lock().await;
            barrier.wait().await;
            let mut audit = audit.lock().await;
            accounts.balance -= 10;
            audit.entries.push("transfer 10".into());
        }
    });
    let report = pool.spawn({
        let (accounts, audit, barrier) = (accounts.clone(), audit.clone(), both_hold_one);
        async move {
            let audit = audit.lock().await;
            barrier.wait().await;
            let accounts = accounts.lock().await;
            println!(
                "{} entries, balance {}",
                audit.entries.len(),
                accounts.balance
            );
        }
    });

    // The stall: a blocking call inside a task.
    let compress = pool.run(|| thread::sleep(Duration::from_millis(600)));

    let stall = stall_reports
        .recv_timeout(PATIENCE)
        .expect("the 600 ms poll is reported while it runs");
    println!("stall report:\n  {stall}\n");

    let dump = dump_with_a_deadlock(&pool);
    // The dump's table ends with its deadlocks, each with its tasks' spawn
    // lines and the values they wait for.
    println!("task dump:\n{dump}");
    let deadlocks = dump.deadlocks();
    if deadlocks.len() != 1 {
        eprintln!("expected exactly one deadlock, found {}", deadlocks.len());
        std::process::exit(1);
    }

    // Recovery: cancelling one side of the cycle lets the other finish.
    transfer.abort();
    assert!(block_on(transfer).unwrap_err().is_cancelled());
    block_on(report).expect("report runs once transfer is gone");
    block_on(compress).unwrap();
    ticker.abort();
    pool.shutdown().unwrap();
    println!("cancelled transfer; report finished; the pool shut down cleanly");
}

/// The pool's dump, once it shows the deadlock (each handler has to reach
/// its second lock first).
fn dump_with_a_deadlock(pool: &ThreadPool) -> viaduct::dump::TaskDump {
    let give_up = std::time::Instant::now() + PATIENCE;
    loop {
        let dump = pool.dump();
        if !dump.deadlocks().is_empty() {
            return dump;
        }
        if std::time::Instant::now() > give_up {
            eprintln!("no deadlock after {PATIENCE:?}:\n{dump}");
            std::process::exit(1);
        }
        thread::sleep(Duration::from_millis(5));
    }
}
