//! What one poll costs: a single task yielding 2,000,000 times on a
//! one-thread runtime (viaduct's pool, tokio's multi-thread runtime with
//! one worker, async-executor run on one thread), and 100,000 chained
//! spawns (each task spawns the next) on the same. Prints nanoseconds per
//! poll and per spawn, medians of rounds interleaved across the runtimes.
//!
//! `cargo bench --bench poll`; `BENCH_ROUNDS` sets the rounds (default 11).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

#[path = "support/rounds.rs"]
mod rounds;

const YIELDS: u32 = 2_000_000;
const CHAIN: u32 = 100_000;

/// Yields `0` more times, waking itself each time.
struct YieldTimes(u32);

impl Future for YieldTimes {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            return Poll::Ready(());
        }
        self.0 -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

fn viaduct_chain(pool: viaduct::ThreadPool, left: u32, done: std::sync::mpsc::Sender<()>) {
    use viaduct::ExecutorExt;
    if left == 0 {
        done.send(()).unwrap();
        return;
    }
    let p = pool.clone();
    drop(pool.spawn(async move { viaduct_chain(p, left - 1, done) }));
}

fn tokio_chain(rt: tokio::runtime::Handle, left: u32, done: std::sync::mpsc::Sender<()>) {
    if left == 0 {
        done.send(()).unwrap();
        return;
    }
    let h = rt.clone();
    drop(rt.spawn(async move { tokio_chain(h, left - 1, done) }));
}

fn async_executor_chain(
    ex: Arc<async_executor::Executor<'static>>,
    left: u32,
    done: std::sync::mpsc::Sender<()>,
) {
    if left == 0 {
        done.send(()).unwrap();
        return;
    }
    let e = ex.clone();
    ex.spawn(async move { async_executor_chain(e, left - 1, done) })
        .detach();
}

fn per(d: Duration, n: u32) -> f64 {
    d.as_nanos() as f64 / f64::from(n)
}

fn main() {
    use viaduct::ExecutorExt;
    let rounds = rounds::rounds(11);
    let pool = viaduct::ThreadPool::builder().threads(1).build().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let ex: Arc<async_executor::Executor<'static>> = Arc::new(async_executor::Executor::new());
    let (stop, stopped) = async_channel_stop();
    let runner = {
        let ex = ex.clone();
        std::thread::spawn(move || futures::executor::block_on(ex.run(stopped)))
    };
    let mut polls = [Vec::new(), Vec::new(), Vec::new()];
    let mut spawns = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..=rounds {
        let t = Instant::now();
        viaduct::block_on(pool.spawn(YieldTimes(YIELDS))).unwrap();
        let v = t.elapsed();
        let t = Instant::now();
        rt.block_on(rt.spawn(YieldTimes(YIELDS))).unwrap();
        let k = t.elapsed();
        let t = Instant::now();
        futures::executor::block_on(ex.spawn(YieldTimes(YIELDS)));
        let a = t.elapsed();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = Instant::now();
        viaduct_chain(pool.clone(), CHAIN, tx.clone());
        rx.recv().unwrap();
        let vs = t.elapsed();
        let t = Instant::now();
        tokio_chain(rt.handle().clone(), CHAIN, tx.clone());
        rx.recv().unwrap();
        let ks = t.elapsed();
        let t = Instant::now();
        async_executor_chain(ex.clone(), CHAIN, tx);
        rx.recv().unwrap();
        let as_ = t.elapsed();
        if round > 0 {
            for (i, d) in [v, k, a].into_iter().enumerate() {
                polls[i].push(d);
            }
            for (i, d) in [vs, ks, as_].into_iter().enumerate() {
                spawns[i].push(d);
            }
        }
    }
    drop(stop);
    runner.join().unwrap();
    println!("one worker thread each, median of {rounds} rounds (ns)");
    println!(
        "{:<28} {:>8} {:>8} {:>15}",
        "workload", "viaduct", "tokio", "async-executor"
    );
    let row = |what: &str, xs: &mut [Vec<Duration>; 3], n: u32| {
        let m: Vec<f64> = xs
            .iter_mut()
            .map(|x| per(rounds::median(std::mem::take(x)), n))
            .collect();
        println!("{what:<28} {:>8.1} {:>8.1} {:>15.1}", m[0], m[1], m[2]);
    };
    row("poll (one task yielding)", &mut polls, YIELDS);
    row("spawn + run (chained)", &mut spawns, CHAIN);
}

/// A future that ends when its sender is dropped, to stop the
/// async-executor's runner thread.
fn async_channel_stop() -> (
    futures::channel::oneshot::Sender<()>,
    impl Future<Output = ()> + Send,
) {
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    (tx, async move {
        let _ = rx.await;
    })
}
