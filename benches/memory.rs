//! Bytes per task, per strand and per `Guarded`, next to the peers'
//! nearest equivalents, in one process run. (Bytes per pending timer:
//! `cargo bench --bench time`, which measures timers.)
//!
//! Each figure is the live heap that `n` of the things keep (counted by a
//! global allocator, single-threaded), divided by `n`; the things are held
//! in a `Vec`, so the handle the user holds (a `JoinHandle`, a `Strand`, a
//! `Guarded`) is counted too. Tasks are spawned and not yet run (a
//! `ManualExecutor`, a current-thread tokio runtime that is not driven, an
//! `async_executor::Executor` that is not run), so the figure includes the
//! executor's queue slot. `cargo bench --bench memory`.

use viaduct::prelude::*;
use viaduct::{Guarded, ManualExecutor, Strand, ThreadPool};

#[path = "support/counting.rs"]
mod counting;

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

const N: usize = 100_000;

fn row(what: &str, viaduct: f64, peers: &[(&str, f64)]) {
    let peers: Vec<String> = peers.iter().map(|(p, b)| format!("{p} {b:.0}")).collect();
    println!("{what:<28} {viaduct:>8.0}   {}", peers.join(", "));
}

fn main() {
    println!("bytes per item: live heap / {N}, the handle the user holds included");
    println!("{:<28} {:>8}   peers", "item", "viaduct");

    // A task of an empty future, spawned and waiting to run.
    let manual = ManualExecutor::new();
    let v = counting::heap_per_item(N, |n| {
        (0..n).map(|_| manual.spawn(async {})).collect::<Vec<_>>()
    });
    drop(manual);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let t = counting::heap_per_item(N, |n| {
        (0..n).map(|_| rt.spawn(async {})).collect::<Vec<_>>()
    });
    let ex = async_executor::Executor::new();
    let a = counting::heap_per_item(N, |n| {
        (0..n).map(|_| ex.spawn(async {})).collect::<Vec<_>>()
    });
    row(
        "task (empty future)",
        v,
        &[("tokio", t), ("async-executor", a)],
    );

    let pool = ThreadPool::builder().threads(2).build().unwrap();
    let s = counting::heap_per_item(N, |n| {
        (0..n)
            .map(|_| Strand::new(pool.clone()))
            .collect::<Vec<_>>()
    });
    row("strand (idle)", s, &[]);

    let g = counting::heap_per_item(N, |n| {
        (0..n)
            .map(|_| Guarded::new(pool.clone(), 0u64))
            .collect::<Vec<_>>()
    });
    let tm = counting::heap_per_item(N, |n| {
        (0..n)
            .map(|_| std::sync::Arc::new(tokio::sync::Mutex::new(0u64)))
            .collect::<Vec<_>>()
    });
    let am = counting::heap_per_item(N, |n| {
        (0..n)
            .map(|_| std::sync::Arc::new(async_lock::Mutex::new(0u64)))
            .collect::<Vec<_>>()
    });
    row(
        "Guarded<u64> (idle)",
        g,
        &[("Arc<tokio Mutex>", tm), ("Arc<async-lock Mutex>", am)],
    );
}
