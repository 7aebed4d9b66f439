//! viaduct and tokio in one program.
//!
//! viaduct ships the adapter, [`TokioExecutor`] (feature `tokio`): a
//! viaduct executor over a `tokio::runtime::Handle`. With it, one task
//! starts on tokio's threads,
//! where tokio's timers and sockets work, hops to a viaduct pool for CPU
//! work that must not stall tokio's workers, and hops back, each step
//! printing the thread it ran on. Then the other way round: a plain tokio
//! task awaits a viaduct handle and a viaduct timer.
//!
//! Run with `cargo run --features tokio --example tokio_interop`.

use std::time::Duration;

use viaduct::compat::tokio::TokioExecutor;
use viaduct::prelude::*;
use viaduct::{block_on, hop_to, ThreadPool};

/// Prints `what` with the name of the thread it ran on.
fn step(what: &str) {
    println!(
        "{what:<34} on {}",
        std::thread::current().name().unwrap_or("?")
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("tokio-worker")
        .enable_all()
        .build()
        .unwrap();
    let tokio_ex = TokioExecutor::new(rt.handle().clone());
    let cpu = ThreadPool::builder()
        .threads(2)
        .name("cpu")
        .build()
        .unwrap();

    // A viaduct task that starts on tokio and travels.
    let (back, pool) = (tokio_ex.clone(), cpu.clone());
    let trip = tokio_ex.spawn(async move {
        step("start: a viaduct task on tokio");
        tokio::time::sleep(Duration::from_millis(5)).await; // tokio's own timer
        step("after tokio::time::sleep");

        hop_to(&pool).await;
        step("hop_to(pool): CPU work");
        let sum: u64 = (1..=1_000_000u64).map(|i| i % 7).sum();

        hop_to(&back).await;
        step("hop_to(tokio): back again");
        tokio::time::sleep(Duration::from_millis(5)).await;
        sum
    });
    println!("the trip computed {}", block_on(trip).unwrap());

    // The other way round: a tokio task awaits viaduct's handles and timers.
    let pool = cpu.clone();
    let answer = rt.block_on(async move {
        tokio::spawn(async move {
            step("a tokio task");
            viaduct::time::sleep(Duration::from_millis(5)).await;
            step("after viaduct::time::sleep");
            pool.run(|| {
                step("its closure, run on the pool");
                6 * 7
            })
            .await
            .unwrap()
        })
        .await
        .unwrap()
    });
    println!("the tokio task got {answer} from the pool");

    cpu.shutdown().unwrap();
}
