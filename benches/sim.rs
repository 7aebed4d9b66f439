//! The simulation's speed: simulated task polls per second, side by side
//! with tokio's single-threaded runtime with its clock paused (tokio's
//! closest equivalent: one thread, virtual time, but a fixed schedule and
//! none of the pool's queues or choices).
//!
//! Workloads, each run to completion in one `block_on`:
//!
//! - yield_many: 100 tasks yielding 1,000 times each;
//! - spawn_many: 100,000 tasks spawned by one and awaited;
//! - lock 8x5000: 8 tasks taking one async lock 5,000 times each
//!   (`Guarded::lock` against tokio's `Mutex`), yielding inside;
//! - sleeps 1000x100: 1,000 tasks sleeping 1 ms 100 times each, on the
//!   virtual clock;
//! - an hour of ticks: an interval of 1 s ticking 3,600 times.
//!
//! `cargo bench --bench sim`. `BENCH_ROUNDS` sets the rounds (default 7;
//! medians are printed); `SIM_STRATEGY=random` measures
//! `Strategy::Random` instead of the default. The polls column counts the simulation's task
//! polls (`Simulation::steps`); polls/s is that over the simulation's
//! median wall time.

use std::future::Future;
use std::task::Poll;
use std::time::{Duration, Instant};

use viaduct::sim::{Simulation, Strategy};
use viaduct::{ExecutorExt, Guarded};

#[path = "support/rounds.rs"]
mod rounds;
use rounds::median;

/// Returns `Pending` once, waking itself: a yield on any executor.
fn yield_now() -> impl Future<Output = ()> {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
}

/// Awaits every handle; each must succeed.
async fn await_all<T, E: std::fmt::Debug>(handles: Vec<impl Future<Output = Result<T, E>>>) {
    for h in handles {
        h.await.unwrap();
    }
}

fn rounds() -> usize {
    rounds::rounds(7)
}

/// The simulation's median wall time and its polls, then tokio's median.
fn measure<S, T, SF, TF>(sim_program: S, tokio_program: T) -> (Duration, u64, Duration)
where
    S: Fn(&Simulation) -> SF,
    SF: Future<Output = ()> + Send + 'static,
    T: Fn() -> TF,
    TF: Future<Output = ()>,
{
    let mut sim_times = Vec::new();
    let mut tokio_times = Vec::new();
    let mut polls = 0;
    for seed in 0..rounds() as u64 {
        let sim = match strategy() {
            Some(strategy) => Simulation::new(seed).strategy(strategy),
            None => Simulation::new(seed),
        };
        let program = sim_program(&sim);
        let start = Instant::now();
        sim.block_on(program).expect("the workload finishes");
        sim_times.push(start.elapsed());
        polls = sim.steps();

        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let start = Instant::now();
        rt.block_on(tokio_program());
        tokio_times.push(start.elapsed());
    }
    (median(sim_times), polls, median(tokio_times))
}

/// `SIM_STRATEGY=random` measures `Strategy::Random`; the default
/// strategy otherwise.
fn strategy() -> Option<Strategy> {
    match std::env::var("SIM_STRATEGY").as_deref() {
        Ok("random") => Some(Strategy::Random),
        Ok("") | Err(_) => None,
        Ok(other) => panic!("SIM_STRATEGY takes `random`, not {other:?}"),
    }
}

fn main() {
    println!(
        "simulation ({}): 4 virtual workers, one thread; tokio current_thread with a paused clock; median of {} rounds",
        if strategy().is_some() { "Strategy::Random" } else { "the default strategy, PCT" },
        rounds()
    );
    println!(
        "{:<22} {:>10} {:>12} {:>12} {:>12} {:>8}",
        "workload", "polls", "polls/s", "simulation", "tokio", "ratio"
    );
    let row = |name: &str, (sim, polls, tokio): (Duration, u64, Duration)| {
        println!(
            "{:<22} {:>10} {:>10.2} M {:>12.2?} {:>12.2?} {:>8.2}",
            name,
            polls,
            polls as f64 / sim.as_secs_f64() / 1e6,
            sim,
            tokio,
            sim.as_secs_f64() / tokio.as_secs_f64()
        );
    };

    row(
        "yield_many 100x1000",
        measure(
            |sim| {
                let ex = sim.executor();
                async move {
                    let tasks: Vec<_> = (0..100)
                        .map(|_| {
                            ex.spawn(async {
                                for _ in 0..1000 {
                                    yield_now().await;
                                }
                            })
                        })
                        .collect();
                    await_all(tasks).await;
                }
            },
            || async {
                let tasks: Vec<_> = (0..100)
                    .map(|_| {
                        tokio::spawn(async {
                            for _ in 0..1000 {
                                yield_now().await;
                            }
                        })
                    })
                    .collect();
                await_all(tasks).await;
            },
        ),
    );

    row(
        "spawn_many 100000",
        measure(
            |sim| {
                let ex = sim.executor();
                async move {
                    let tasks: Vec<_> = (0..100_000u32)
                        .map(|i| ex.spawn(async move { i }))
                        .collect();
                    await_all(tasks).await;
                }
            },
            || async {
                let tasks: Vec<_> = (0..100_000u32)
                    .map(|i| tokio::spawn(async move { i }))
                    .collect();
                await_all(tasks).await;
            },
        ),
    );

    row(
        "lock 8x5000",
        measure(
            |sim| {
                let ex = sim.executor();
                async move {
                    let counter = Guarded::new(ex.clone(), 0u64);
                    let tasks: Vec<_> = (0..8)
                        .map(|_| {
                            let c = counter.clone();
                            ex.spawn(async move {
                                for _ in 0..5000 {
                                    let mut g = c.lock().await;
                                    yield_now().await;
                                    *g += 1;
                                }
                            })
                        })
                        .collect();
                    await_all(tasks).await;
                    assert_eq!(*counter.lock().await, 40_000);
                }
            },
            || async {
                let counter = std::sync::Arc::new(tokio::sync::Mutex::new(0u64));
                let tasks: Vec<_> = (0..8)
                    .map(|_| {
                        let c = counter.clone();
                        tokio::spawn(async move {
                            for _ in 0..5000 {
                                let mut g = c.lock().await;
                                yield_now().await;
                                *g += 1;
                            }
                        })
                    })
                    .collect();
                await_all(tasks).await;
                assert_eq!(*counter.lock().await, 40_000);
            },
        ),
    );

    row(
        "sleeps 1000x100",
        measure(
            |sim| {
                let ex = sim.executor();
                async move {
                    let tasks: Vec<_> = (0..1000)
                        .map(|_| {
                            ex.spawn(async {
                                for _ in 0..100 {
                                    viaduct::time::sleep(Duration::from_millis(1)).await;
                                }
                            })
                        })
                        .collect();
                    await_all(tasks).await;
                }
            },
            || async {
                let tasks: Vec<_> = (0..1000)
                    .map(|_| {
                        tokio::spawn(async {
                            for _ in 0..100 {
                                tokio::time::sleep(Duration::from_millis(1)).await;
                            }
                        })
                    })
                    .collect();
                await_all(tasks).await;
            },
        ),
    );

    row(
        "an hour of 1 s ticks",
        measure(
            |_| async {
                let mut every = viaduct::time::interval(Duration::from_secs(1));
                for _ in 0..=3600 {
                    every.tick().await;
                }
            },
            || async {
                let mut every = tokio::time::interval(Duration::from_secs(1));
                for _ in 0..=3600 {
                    every.tick().await;
                }
            },
        ),
    );
}
