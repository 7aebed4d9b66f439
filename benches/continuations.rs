//! Moving work between executors, side by side in one process run.
//!
//! - hop ping-pong: one task alternates between two one-thread executors,
//!   1,000,000 hops. viaduct: `hop_to` between two 1-thread pools. tokio:
//!   two current-thread runtimes, each on its own thread; a task on one
//!   spawns an empty task on the other and awaits it (two hops: there and
//!   back). async-executor: the same on two executors, one thread each.
//! - then chain: 100,000 steps alternating between the two executors, each
//!   adding one to the value before. viaduct: `h.via(&other).then(|x| x + 1)`.
//!   tokio and async-executor: each step a task spawned on the other
//!   executor that awaits the previous step's handle. The first step
//!   returns at once, so the chain runs while it is being built.
//! - chain built ahead: the same, but the first step waits until the
//!   whole chain is built (the way a pipeline is set up before its input
//!   arrives).
//!
//! `cargo bench --bench continuations` prints ns per hop and per step (the
//! median of the timed rounds, interleaved across the runtimes after a
//! short warm-up) and the ratio viaduct / best peer (below 1.0: viaduct is
//! faster). The 1,000,000 hops are split over the rounds; each round of the
//! chain is a whole 100,000-step chain. `BENCH_ROUNDS` sets the number of
//! timed rounds (default 5 for hops, at most 3 for chains); `BENCH_ONLY`
//! runs only the workloads whose name contains it.

use std::future::Future;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use futures::future::Shared;
use futures::FutureExt;
use viaduct::{hop_to, ExecutorExt, ThreadPool};

#[path = "support/rounds.rs"]
mod rounds;
use rounds::median;

const HOPS: u64 = 1_000_000;
const STEPS: u64 = 100_000;
/// Hops or steps in each runtime's warm-up run.
const WARM_UP: u64 = 10_000;

/// Two one-thread executors of one runtime.
trait Pair {
    /// `n` hops of one task between the two (`n` even).
    fn hops(&self, n: u64);
    /// An `n`-step chain alternating between the two; its first step
    /// waits for `gate`, opened once the chain is built.
    fn chain(&self, n: u64, gate: Gate);
}

struct Viaduct {
    a: ThreadPool,
    b: ThreadPool,
}

impl Viaduct {
    fn new() -> Viaduct {
        let pool = |name| ThreadPool::builder().threads(1).name(name).build().unwrap();
        Viaduct {
            a: pool("a"),
            b: pool("b"),
        }
    }
}

impl Pair for Viaduct {
    fn hops(&self, n: u64) {
        let (a, b) = (self.a.clone(), self.b.clone());
        let task = self.a.spawn(async move {
            for _ in 0..n / 2 {
                hop_to(&b).await;
                hop_to(&a).await;
            }
        });
        viaduct::block_on(task).unwrap();
    }

    fn chain(&self, n: u64, gate: Gate) {
        let (open, first) = gate.split();
        let mut h = self.a.spawn(async move {
            first.await;
            0u64
        });
        for i in 0..n {
            h = h
                .via(if i % 2 == 0 { &self.b } else { &self.a })
                .then(|x| x + 1);
        }
        open();
        assert_eq!(viaduct::block_on(h).unwrap(), n);
    }
}

/// A runtime driven by a thread of its own until `stop` fires.
type Stop = Shared<oneshot::Receiver<()>>;

struct Tokio {
    a: tokio::runtime::Handle,
    b: tokio::runtime::Handle,
    _stop: oneshot::Sender<()>,
}

impl Tokio {
    fn new() -> Tokio {
        let (stop_tx, stop_rx) = oneshot::channel();
        let stop = stop_rx.shared();
        let runtime = |stop: Stop| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let handle = rt.handle().clone();
            thread::spawn(move || {
                let _ = rt.block_on(stop);
            });
            handle
        };
        Tokio {
            a: runtime(stop.clone()),
            b: runtime(stop),
            _stop: stop_tx,
        }
    }
}

impl Pair for Tokio {
    fn hops(&self, n: u64) {
        let b = self.b.clone();
        let task = self.a.spawn(async move {
            for _ in 0..n / 2 {
                b.spawn(async {}).await.unwrap();
            }
        });
        futures::executor::block_on(task).unwrap();
    }

    fn chain(&self, n: u64, gate: Gate) {
        let (open, first) = gate.split();
        let mut h = self.a.spawn(async move {
            first.await;
            0u64
        });
        for i in 0..n {
            let on = if i % 2 == 0 { &self.b } else { &self.a };
            h = on.spawn(async move { h.await.unwrap() + 1 });
        }
        open();
        assert_eq!(futures::executor::block_on(h).unwrap(), n);
    }
}

struct AsyncExecutor {
    a: Arc<async_executor::Executor<'static>>,
    b: Arc<async_executor::Executor<'static>>,
    _stop: oneshot::Sender<()>,
}

impl AsyncExecutor {
    fn new() -> AsyncExecutor {
        let (stop_tx, stop_rx) = oneshot::channel();
        let stop = stop_rx.shared();
        let executor = |stop: Stop| {
            let ex = Arc::new(async_executor::Executor::new());
            let runner = ex.clone();
            thread::spawn(move || {
                let _ = futures::executor::block_on(runner.run(stop));
            });
            ex
        };
        AsyncExecutor {
            a: executor(stop.clone()),
            b: executor(stop),
            _stop: stop_tx,
        }
    }
}

impl Pair for AsyncExecutor {
    fn hops(&self, n: u64) {
        let b = self.b.clone();
        let task = self.a.spawn(async move {
            for _ in 0..n / 2 {
                b.spawn(async {}).await;
            }
        });
        futures::executor::block_on(task);
    }

    fn chain(&self, n: u64, gate: Gate) {
        let (open, first) = gate.split();
        let mut h = self.a.spawn(async move {
            first.await;
            0u64
        });
        for i in 0..n {
            let on = if i % 2 == 0 { &self.b } else { &self.a };
            h = on.spawn(async move { h.await + 1 });
        }
        open();
        assert_eq!(futures::executor::block_on(h), n);
    }
}

/// Whether a chain's first step waits until the chain is built.
#[derive(Clone, Copy)]
enum Gate {
    Open,
    Ahead,
}

impl Gate {
    /// What opens the gate, and what the first step awaits.
    fn split(self) -> (impl FnOnce(), impl Future<Output = ()> + Send + 'static) {
        let (tx, rx) = oneshot::channel::<()>();
        let tx = match self {
            Gate::Open => {
                let _ = tx.send(());
                None
            }
            Gate::Ahead => Some(tx),
        };
        let open = move || {
            if let Some(tx) = tx {
                let _ = tx.send(());
            }
        };
        (open, async move {
            let _ = rx.await;
        })
    }
}

/// Warms each runtime up with a small run, then runs `rounds` rounds of
/// `n` units each, the runtimes interleaved so that drift in the machine's
/// load hits all alike. Returns the median time per unit, per runtime.
fn measure(runtimes: [&dyn Pair; 3], work: fn(&dyn Pair, u64), n: u64, rounds: usize) -> [f64; 3] {
    for rt in runtimes {
        work(rt, WARM_UP);
    }
    let mut times: [Vec<Duration>; 3] = Default::default();
    for _ in 0..rounds {
        for (rt, t) in runtimes.iter().zip(times.iter_mut()) {
            let start = Instant::now();
            work(*rt, n);
            t.push(start.elapsed());
        }
    }
    times.map(|t| median(t).as_secs_f64() * 1e9 / n as f64)
}

fn main() {
    let rounds = rounds::rounds(5);
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let (v, t, a) = (Viaduct::new(), Tokio::new(), AsyncExecutor::new());

    println!("continuations: two one-thread executors per runtime, median per round");
    println!(
        "{:<36} {:>10} {:>10} {:>15} {:>8}",
        "workload", "viaduct", "tokio", "async-executor", "ratio"
    );
    // The hops are split over the rounds; the chains are whole each round.
    let hop_rounds = rounds;
    let chain_rounds = rounds.min(3);
    type Workload = (String, fn(&dyn Pair, u64), u64, usize);
    let workloads: [Workload; 3] = [
        (
            format!(
                "hop ping-pong, {hop_rounds} x {} hops",
                HOPS / hop_rounds as u64
            ),
            |p, n| p.hops(n),
            HOPS / hop_rounds as u64 / 2 * 2,
            hop_rounds,
        ),
        (
            format!("then chain, {chain_rounds} x {STEPS} steps"),
            |p, n| p.chain(n, Gate::Open),
            STEPS,
            chain_rounds,
        ),
        (
            format!("chain built ahead, {chain_rounds} x {STEPS} steps"),
            |p, n| p.chain(n, Gate::Ahead),
            STEPS,
            chain_rounds,
        ),
    ];
    for (name, work, n, rounds) in workloads.into_iter().filter(|w| w.0.contains(&*only)) {
        let [nv, nt, na] = measure([&v, &t, &a], work, n, rounds);
        println!(
            "{name:<36} {:>7.0} ns {:>7.0} ns {:>12.0} ns {:>8.2}",
            nv,
            nt,
            na,
            nv / nt.min(na)
        );
    }
}
