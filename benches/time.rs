//! viaduct's timer side by side with tokio's, in one process run.
//!
//! viaduct's futures run on a viaduct `ThreadPool`, tokio's on a tokio
//! multi-thread runtime; both have 2 worker threads. Workloads:
//!
//! - insert + cancel: 1,000,000 `timeout(10 s, pending())` polled once and
//!   dropped, by 1 task, then by 2 tasks in parallel (500,000 each); ns per
//!   operation is wall time over all operations;
//! - 100,000 sleeps of uniform 1-50 ms spawned at once: wall time, and
//!   lateness (resumed minus deadline) p50 / p99;
//! - light load: 1,000 sleeps of uniform 1-2 ms one after another;
//!   lateness p50 / p99;
//! - bytes per pending timer: the timer future's own size plus the heap it
//!   allocates, measured with a counting allocator.
//!
//! `cargo bench --bench time`. `BENCH_ROUNDS` sets the rounds per cell
//! (default 7; medians are printed), `BENCH_ONLY` a part of a workload's
//! name to run only that one.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures::future::{pending, poll_fn};
use viaduct::ExecutorExt;

#[path = "support/rounds.rs"]
mod rounds;
use rounds::median;

#[path = "support/counting.rs"]
mod counting;

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

const THREADS: usize = 2;
const INSERT_CANCEL_OPS: usize = 1_000_000;
const CONCURRENT: usize = 100_000;
const LIGHT: usize = 1_000;

/// Both timers behind one face, so every workload is written once.
trait Rt: Clone + Send + Sync + 'static {
    /// Runs `f` as `tasks` tasks in parallel on the runtime; waits for all.
    fn run_tasks<F, Fut>(&self, tasks: usize, f: F)
    where
        F: Fn() -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + Send + 'static;
    /// `count` timeouts of 10 s around `pending()`, each polled once and
    /// dropped, in the calling task.
    fn insert_cancel(count: usize) -> impl Future<Output = ()> + Send;
    /// Sleeps `d`; returns how late it resumed.
    fn sleep(d: Duration) -> impl Future<Output = Duration> + Send;
    /// Spawns all `futs` at once and collects their outputs.
    fn spawn_all(
        &self,
        futs: Vec<impl Future<Output = Duration> + Send + 'static>,
    ) -> Vec<Duration>;
}

#[derive(Clone)]
struct Viaduct(viaduct::ThreadPool);

impl Rt for Viaduct {
    fn run_tasks<F, Fut>(&self, tasks: usize, f: F)
    where
        F: Fn() -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let hs: Vec<_> = (0..tasks).map(|_| self.0.spawn(f())).collect();
        for h in hs {
            viaduct::block_on(h).unwrap();
        }
    }
    fn insert_cancel(count: usize) -> impl Future<Output = ()> + Send {
        poll_fn(move |cx| {
            for _ in 0..count {
                let mut t = pin!(viaduct::time::timeout(
                    Duration::from_secs(10),
                    pending::<()>()
                ));
                assert!(t.as_mut().poll(cx).is_pending());
            }
            Poll::Ready(())
        })
    }
    async fn sleep(d: Duration) -> Duration {
        let s = viaduct::time::sleep(d);
        let deadline = s.deadline();
        s.await;
        Instant::now() - deadline
    }
    fn spawn_all(
        &self,
        futs: Vec<impl Future<Output = Duration> + Send + 'static>,
    ) -> Vec<Duration> {
        let hs: Vec<_> = futs.into_iter().map(|f| self.0.spawn(f)).collect();
        hs.into_iter()
            .map(|h| viaduct::block_on(h).unwrap())
            .collect()
    }
}

#[derive(Clone)]
struct Tokio(Arc<tokio::runtime::Runtime>);

impl Rt for Tokio {
    fn run_tasks<F, Fut>(&self, tasks: usize, f: F)
    where
        F: Fn() -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let hs: Vec<_> = (0..tasks).map(|_| self.0.spawn(f())).collect();
        for h in hs {
            self.0.block_on(h).unwrap();
        }
    }
    fn insert_cancel(count: usize) -> impl Future<Output = ()> + Send {
        poll_fn(move |cx| {
            for _ in 0..count {
                let mut t = pin!(tokio::time::timeout(
                    Duration::from_secs(10),
                    pending::<()>()
                ));
                assert!(t.as_mut().poll(cx).is_pending());
            }
            Poll::Ready(())
        })
    }
    async fn sleep(d: Duration) -> Duration {
        let s = tokio::time::sleep(d);
        let deadline = s.deadline().into_std();
        s.await;
        Instant::now() - deadline
    }
    fn spawn_all(
        &self,
        futs: Vec<impl Future<Output = Duration> + Send + 'static>,
    ) -> Vec<Duration> {
        let hs: Vec<_> = futs.into_iter().map(|f| self.0.spawn(f)).collect();
        hs.into_iter()
            .map(|h| self.0.block_on(h).unwrap())
            .collect()
    }
}

/// xorshift64*: the same "random" durations for both timers.
fn durations(n: usize, from: Duration, to: Duration, seed: u64) -> Vec<Duration> {
    let mut x = seed;
    let span = (to - from).as_nanos() as u64;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            from + Duration::from_nanos(x.wrapping_mul(0x2545_f491_4f6c_dd1d) % span)
        })
        .collect()
}

fn insert_cancel<R: Rt>(rt: &R, tasks: usize) {
    rt.run_tasks(tasks, move || R::insert_cancel(INSERT_CANCEL_OPS / tasks));
}

/// Wall time and every sleep's lateness.
fn concurrent_sleeps<R: Rt>(rt: &R) -> (Duration, Vec<Duration>) {
    let ds = durations(
        CONCURRENT,
        Duration::from_millis(1),
        Duration::from_millis(50),
        7,
    );
    let start = Instant::now();
    let late = rt.spawn_all(ds.into_iter().map(R::sleep).collect());
    (start.elapsed(), late)
}

fn light_load<R: Rt>(rt: &R) -> Vec<Duration> {
    let ds = Arc::new(durations(
        LIGHT,
        Duration::from_millis(1),
        Duration::from_millis(2),
        11,
    ));
    let (tx, rx) = std::sync::mpsc::channel();
    rt.run_tasks(1, move || {
        let (ds, tx) = (ds.clone(), tx.clone());
        async move {
            let mut late = Vec::with_capacity(ds.len());
            for &d in ds.iter() {
                late.push(R::sleep(d).await);
            }
            tx.send(late).unwrap();
        }
    });
    rx.recv().unwrap()
}

/// Heap bytes per pending timer: `n` timeouts polled once and held.
fn heap_per_timer(make_and_poll: impl FnOnce(usize) -> Box<dyn std::any::Any>) -> f64 {
    counting::heap_per_item(100_000, make_and_poll)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.0} us")
    }
}

fn row(name: &str, v: String, t: String, ratio: f64) {
    println!("{name:<34} {v:>12} {t:>12} {ratio:>8.2}");
}

fn main() {
    let rounds = rounds::rounds(7);
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let v = Viaduct(
        viaduct::ThreadPool::builder()
            .threads(THREADS)
            .name("bench")
            .build()
            .unwrap(),
    );
    let t = Tokio(Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(THREADS)
            .enable_time()
            .build()
            .unwrap(),
    ));

    println!("timer benchmarks: {THREADS} worker threads each, median of {rounds} rounds");
    println!(
        "{:<34} {:>12} {:>12} {:>8}",
        "workload", "viaduct", "tokio", "ratio"
    );

    for tasks in [1, 2] {
        let name = format!("insert+cancel 1M, {tasks} task(s), ns/op");
        if !name.contains(&*only) {
            continue;
        }
        let (mut dv, mut dt) = (Vec::new(), Vec::new());
        insert_cancel(&v, tasks);
        insert_cancel(&t, tasks);
        for _ in 0..rounds {
            let s = Instant::now();
            insert_cancel(&v, tasks);
            dv.push(s.elapsed());
            let s = Instant::now();
            insert_cancel(&t, tasks);
            dt.push(s.elapsed());
        }
        let ns = |d: Duration| d.as_nanos() as f64 / INSERT_CANCEL_OPS as f64;
        let (nv, nt) = (ns(median(dv)), ns(median(dt)));
        row(&name, format!("{nv:.0}"), format!("{nt:.0}"), nv / nt);
    }

    if "sleeps 100k".contains(&*only) {
        let rounds = rounds.min(5);
        let (mut wv, mut wt, mut lv, mut lt) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        concurrent_sleeps(&v);
        concurrent_sleeps(&t);
        for _ in 0..rounds {
            let (w, l) = concurrent_sleeps(&v);
            wv.push(w);
            lv.extend(l);
            let (w, l) = concurrent_sleeps(&t);
            wt.push(w);
            lt.extend(l);
        }
        lv.sort();
        lt.sort();
        let (wv, wt) = (median(wv), median(wt));
        row(
            "sleeps 100k 1-50ms: wall",
            fmt(wv),
            fmt(wt),
            wv.as_secs_f64() / wt.as_secs_f64(),
        );
        for (p, label) in [(0.5, "p50"), (0.99, "p99")] {
            let (a, b) = (percentile(&lv, p), percentile(&lt, p));
            row(
                &format!("sleeps 100k 1-50ms: lateness {label}"),
                fmt(a),
                fmt(b),
                a.as_secs_f64() / b.as_secs_f64(),
            );
        }
    }

    if "light load 1000 sleeps".contains(&*only) {
        let (mut lv, mut lt) = (light_load(&v), light_load(&t));
        lv.sort();
        lt.sort();
        for (p, label) in [(0.5, "p50"), (0.99, "p99")] {
            let (a, b) = (percentile(&lv, p), percentile(&lt, p));
            row(
                &format!("light load 1000 sleeps: late {label}"),
                fmt(a),
                fmt(b),
                a.as_secs_f64() / b.as_secs_f64(),
            );
        }
    }

    if "bytes per pending timer".contains(&*only) {
        // Poll each timeout once, from a task of its own runtime, and keep it.
        let vh = {
            let v = v.clone();
            heap_per_timer(move |n| {
                let held = viaduct::block_on(v.0.spawn(poll_fn(move |cx| {
                    let mut all = Vec::with_capacity(n);
                    for _ in 0..n {
                        let mut t = Box::pin(viaduct::time::timeout(
                            Duration::from_secs(60),
                            pending::<()>(),
                        ));
                        assert!(t.as_mut().poll(cx).is_pending());
                        all.push(t);
                    }
                    Poll::Ready(all)
                })))
                .unwrap();
                // Leave out the boxes that hold the futures: the future's
                // size is counted below.
                let boxes = std::mem::size_of_val(&*held[0]) * held.len();
                counting::uncount(boxes);
                Box::new(held)
            })
        };
        let th = {
            let rt = t.0.clone();
            heap_per_timer(move |n| {
                let held = rt
                    .block_on(rt.spawn(poll_fn(move |cx| {
                        let mut all = Vec::with_capacity(n);
                        for _ in 0..n {
                            let mut t = Box::pin(tokio::time::timeout(
                                Duration::from_secs(60),
                                pending::<()>(),
                            ));
                            assert!(t.as_mut().poll(cx).is_pending());
                            all.push(t);
                        }
                        Poll::Ready(all)
                    })))
                    .unwrap();
                let boxes = std::mem::size_of_val(&*held[0]) * held.len();
                counting::uncount(boxes);
                Box::new(held)
            })
        };
        // The timer's share of a `timeout(d, f)`: the future minus `f`,
        // plus the heap it allocated (the `Vec` of boxes is not counted:
        // it is the same size for both, `n` pointers, and subtracted).
        let vec_bytes = std::mem::size_of::<usize>() as f64;
        let vs = std::mem::size_of::<viaduct::time::Timeout<futures::future::Pending<()>>>() as f64;
        let ts = std::mem::size_of::<tokio::time::Timeout<futures::future::Pending<()>>>() as f64;
        let (vb, tb) = (vs + vh - vec_bytes, ts + th - vec_bytes);
        row(
            "bytes per pending timer",
            format!("{vb:.0}"),
            format!("{tb:.0}"),
            vb / tb,
        );
        println!(
            "  (viaduct: {vs} in the future + {:.0} heap; tokio: {ts} + {:.0})",
            vh - vec_bytes,
            th - vec_bytes
        );
    }
}
