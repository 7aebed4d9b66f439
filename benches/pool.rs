//! The pool side by side with tokio's multi-thread runtime and
//! async-executor (2 worker threads each), and `pool.join` against
//! `rayon::join`, in one process run.
//!
//! `cargo bench --bench pool` prints medians (rounds interleaved across
//! the runtimes) and the ratio viaduct / best
//! peer (below 1.0: viaduct is faster). Set `BENCH_ROUNDS` to change the
//! number of timed rounds per cell (default 15), and `BENCH_ONLY` to a part
//! of a workload's name to run only that one.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use futures::FutureExt;

#[path = "support/rounds.rs"]
mod rounds;
use rounds::median;

const THREADS: usize = 2;

/// What a workload needs from a runtime.
trait Rt: Clone + Send + Sync + 'static {
    type Handle<T: Send + 'static>: Future<Output = T> + Send + 'static;
    fn spawn<T: Send + 'static>(
        &self,
        f: impl Future<Output = T> + Send + 'static,
    ) -> Self::Handle<T>;
    fn block_on<T>(&self, f: impl Future<Output = T>) -> T;
    /// Spawns and lets the task run on unobserved (tokio and viaduct detach
    /// a dropped handle; async-executor cancels it).
    fn spawn_detached(&self, f: impl Future<Output = ()> + Send + 'static) {
        drop(self.spawn(f));
    }
}

#[derive(Clone)]
struct Viaduct(viaduct::ThreadPool);

fn unwrap<T, E: std::fmt::Debug>(r: Result<T, E>) -> T {
    r.unwrap()
}

impl Rt for Viaduct {
    type Handle<T: Send + 'static> =
        futures::future::Map<viaduct::JoinHandle<T>, fn(Result<T, viaduct::TaskError>) -> T>;
    fn spawn<T: Send + 'static>(
        &self,
        f: impl Future<Output = T> + Send + 'static,
    ) -> Self::Handle<T> {
        use viaduct::ExecutorExt;
        self.0.spawn(f).map(unwrap as fn(_) -> T)
    }
    fn block_on<T>(&self, f: impl Future<Output = T>) -> T {
        viaduct::block_on(f)
    }
}

#[derive(Clone)]
struct Tokio(Arc<tokio::runtime::Runtime>);

impl Rt for Tokio {
    type Handle<T: Send + 'static> = futures::future::Map<
        tokio::task::JoinHandle<T>,
        fn(Result<T, tokio::task::JoinError>) -> T,
    >;
    fn spawn<T: Send + 'static>(
        &self,
        f: impl Future<Output = T> + Send + 'static,
    ) -> Self::Handle<T> {
        self.0.spawn(f).map(unwrap as fn(_) -> T)
    }
    fn block_on<T>(&self, f: impl Future<Output = T>) -> T {
        self.0.block_on(f)
    }
}

#[derive(Clone)]
struct AsyncExecutor(Arc<async_executor::Executor<'static>>);

impl Rt for AsyncExecutor {
    type Handle<T: Send + 'static> = async_executor::Task<T>;
    fn spawn<T: Send + 'static>(
        &self,
        f: impl Future<Output = T> + Send + 'static,
    ) -> Self::Handle<T> {
        self.0.spawn(f)
    }
    fn block_on<T>(&self, f: impl Future<Output = T>) -> T {
        futures::executor::block_on(f)
    }
    fn spawn_detached(&self, f: impl Future<Output = ()> + Send + 'static) {
        self.0.spawn(f).detach();
    }
}

/// Yields once: the same future on every runtime, so yield_many measures
/// the schedulers, not their yield helpers.
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

fn spawn_outside<R: Rt>(rt: &R) {
    let handles: Vec<_> = (0..100_000).map(|_| rt.spawn(async {})).collect();
    rt.block_on(async {
        for h in handles {
            h.await;
        }
    });
}

fn spawn_many_local<R: Rt>(rt: &R) {
    let inner = rt.clone();
    let root = rt.spawn(async move {
        let (tx, rx) = oneshot::channel();
        let tx = Arc::new(std::sync::Mutex::new(Some(tx)));
        let left = Arc::new(AtomicUsize::new(10_000));
        for _ in 0..10_000 {
            let (tx, left) = (tx.clone(), left.clone());
            inner.spawn_detached(async move {
                if left.fetch_sub(1, Ordering::Relaxed) == 1 {
                    let _ = tx.lock().unwrap().take().unwrap().send(());
                }
            });
        }
        rx.await.unwrap();
    });
    rt.block_on(root);
}

fn yield_many<R: Rt>(rt: &R) {
    let handles: Vec<_> = (0..200)
        .map(|_| {
            rt.spawn(async {
                for _ in 0..1_000 {
                    YieldNow(false).await;
                }
            })
        })
        .collect();
    rt.block_on(async {
        for h in handles {
            h.await;
        }
    });
}

fn ping_pong<R: Rt>(rt: &R) {
    let inner = rt.clone();
    let root = rt.spawn(async move {
        let (done_tx, done_rx) = oneshot::channel();
        let done_tx = Arc::new(std::sync::Mutex::new(Some(done_tx)));
        let left = Arc::new(AtomicUsize::new(1_000));
        for _ in 0..1_000 {
            let (done_tx, left, rt) = (done_tx.clone(), left.clone(), inner.clone());
            inner.spawn_detached(async move {
                let (tx1, rx1) = oneshot::channel::<()>();
                let (tx2, rx2) = oneshot::channel::<()>();
                rt.spawn_detached(async move {
                    rx1.await.unwrap();
                    tx2.send(()).unwrap();
                });
                tx1.send(()).unwrap();
                rx2.await.unwrap();
                if left.fetch_sub(1, Ordering::Relaxed) == 1 {
                    let _ = done_tx.lock().unwrap().take().unwrap().send(());
                }
            });
        }
        done_rx.await.unwrap();
    });
    rt.block_on(root);
}

fn chained_spawn<R: Rt>(rt: &R) {
    fn link<R: Rt>(rt: R, n: usize, done: oneshot::Sender<()>) {
        if n == 0 {
            done.send(()).unwrap();
        } else {
            let next = rt.clone();
            rt.spawn_detached(async move { link(next, n - 1, done) });
        }
    }
    let (tx, rx) = oneshot::channel();
    link(rt.clone(), 1_000, tx);
    rt.block_on(rx).unwrap();
}

fn fib_viaduct(pool: &viaduct::ThreadPool, n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = pool.join(|| fib_viaduct(pool, n - 1), || fib_viaduct(pool, n - 2));
    a + b
}

fn fib_rayon(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1), || fib_rayon(n - 2));
    a + b
}

/// Runs each contender once to warm up, then `rounds` rounds in which
/// each runs once, interleaved so that drift in the machine's load hits all
/// of them alike; the median per contender.
fn measure_interleaved<const N: usize>(
    rounds: usize,
    mut fs: [&mut dyn FnMut(); N],
) -> [Duration; N] {
    fs.iter_mut().for_each(|f| f());
    let mut times: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(rounds));
    for _ in 0..rounds {
        for (f, t) in fs.iter_mut().zip(times.iter_mut()) {
            let start = Instant::now();
            f();
            t.push(start.elapsed());
        }
    }
    times.map(median)
}

fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.0} us")
    }
}

fn main() {
    let rounds = rounds::rounds(15);
    let viaduct = Viaduct(
        viaduct::ThreadPool::builder()
            .threads(THREADS)
            .name("bench")
            .build()
            .unwrap(),
    );
    let tokio = Tokio(Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(THREADS)
            .build()
            .unwrap(),
    ));
    let ae = AsyncExecutor(Arc::new(async_executor::Executor::new()));
    let (stop_tx, stop_rx) = async_channel_stop();
    for _ in 0..THREADS {
        let (ex, stop) = (ae.0.clone(), stop_rx.clone());
        std::thread::spawn(move || futures::executor::block_on(ex.run(stop)));
    }

    println!("pool benchmarks: {THREADS} worker threads each, median of {rounds} rounds");
    println!(
        "{:<22} {:>12} {:>12} {:>15} {:>10}",
        "workload", "viaduct", "tokio", "async-executor", "ratio"
    );
    type Workload = (&'static str, fn(&Viaduct), fn(&Tokio), fn(&AsyncExecutor));
    let workloads: [Workload; 5] = [
        (
            "spawn 100k outside",
            spawn_outside,
            spawn_outside,
            spawn_outside,
        ),
        (
            "spawn_many_local 10k",
            spawn_many_local,
            spawn_many_local,
            spawn_many_local,
        ),
        ("yield_many 200x1000", yield_many, yield_many, yield_many),
        ("ping_pong 1000", ping_pong, ping_pong, ping_pong),
        (
            "chained_spawn 1000",
            chained_spawn,
            chained_spawn,
            chained_spawn,
        ),
    ];
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    for (name, v, t, a) in workloads.into_iter().filter(|w| w.0.contains(&*only)) {
        let [dv, dt, da] = measure_interleaved(
            rounds,
            [&mut || v(&viaduct), &mut || t(&tokio), &mut || a(&ae)],
        );
        let best = dt.min(da);
        println!(
            "{name:<22} {:>12} {:>12} {:>15} {:>10.2}",
            fmt(dv),
            fmt(dt),
            fmt(da),
            dv.as_secs_f64() / best.as_secs_f64()
        );
    }

    if !"fib(30) join".contains(&*only) {
        return;
    }
    let rayon = rayon::ThreadPoolBuilder::new()
        .num_threads(THREADS)
        .build()
        .unwrap();
    let [dv, dr] = measure_interleaved(
        rounds.min(9),
        [
            &mut || assert_eq!(fib_viaduct(&viaduct.0, 30), 832_040),
            &mut || assert_eq!(rayon.install(|| fib_rayon(30)), 832_040),
        ],
    );
    println!(
        "{:<22} {:>12} {:>12} {:>15} {:>10.2}",
        "fib(30) join",
        fmt(dv),
        "-",
        format!("rayon {}", fmt(dr)),
        dv.as_secs_f64() / dr.as_secs_f64()
    );
    drop(stop_tx);
}

/// A future that completes when the returned sender is dropped: stops the
/// async-executor threads at the end.
fn async_channel_stop() -> (
    oneshot::Sender<()>,
    futures::future::Shared<oneshot::Receiver<()>>,
) {
    let (tx, rx) = oneshot::channel();
    (tx, rx.shared())
}
