//! Bytes per task, per strand, per `Guarded` and per pending timer, next
//! to the peers' nearest equivalents, in one process run.
//!
//! Each figure is the live heap that `n` of the things keep (counted by a
//! global allocator, single-threaded), divided by `n`; the things are held
//! in a `Vec`, so the handle the user holds (a `JoinHandle`, a `Strand`, a
//! `Guarded`) is counted too. A sleep is boxed to be polled: its box is
//! left out and its size counted instead. Tasks are spawned and not yet run (a
//! `ManualExecutor`, a current-thread tokio runtime that is not driven, an
//! `async_executor::Executor` that is not run), so the figure includes the
//! executor's queue slot. `cargo bench --bench memory`.

use std::future::Future;
use std::mem::size_of;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

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

/// Polls `fut` once with a waker that does nothing.
fn poll_once<F: Future>(fut: Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(futures::task::noop_waker_ref()))
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

    // A sleep registered with its timer: the future (boxed here, the box
    // left out) plus what it made the timer allocate.
    let vt = counting::heap_per_item(N, |n| {
        let held: Vec<_> = (0..n)
            .map(|_| {
                let mut s = Box::pin(viaduct::time::sleep(Duration::from_secs(60)));
                assert!(poll_once(s.as_mut()).is_pending());
                s
            })
            .collect();
        counting::uncount(size_of::<viaduct::time::Sleep>() * n);
        held
    }) - size_of::<usize>() as f64
        + size_of::<viaduct::time::Sleep>() as f64;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let _in_rt = rt.enter();
    let tt = counting::heap_per_item(N, |n| {
        let held: Vec<_> = (0..n)
            .map(|_| {
                let mut s = Box::pin(tokio::time::sleep(Duration::from_secs(60)));
                assert!(poll_once(s.as_mut()).is_pending());
                s
            })
            .collect();
        counting::uncount(size_of::<tokio::time::Sleep>() * n);
        held
    }) - size_of::<usize>() as f64
        + size_of::<tokio::time::Sleep>() as f64;
    row("pending sleep", vt, &[("tokio", tt)]);
}
