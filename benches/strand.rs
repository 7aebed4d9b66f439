//! Strands as mutexes, side by side in one process run.
//!
//! - Contention: N tasks share 400,000 critical sections on one counter
//!   (512 tasks: 409,600): viaduct's `Guarded::with` (awaited) and
//!   `Guarded::lock` on a viaduct pool, against `tokio::sync::Mutex` and
//!   `async_lock::Mutex` on tokio's multi-thread runtime, and a
//!   `std::sync::Mutex` taken in viaduct tasks. 2 worker threads each.
//! - Threads: 2 and 8 OS threads outside any pool share the sections,
//!   waiting for each with `block_on`: `with`, `lock`, and a
//!   `std::sync::Mutex`.
//! - Fire-and-forget: 8 threads post 100,000 increments each to one
//!   `Strand` (over a 2-thread pool), against 8 threads taking a
//!   `std::sync::Mutex` for each increment.
//!
//! `cargo bench --bench strand` prints medians (rounds interleaved across
//! the contenders) in ns per section, the strand's mean batch size, and
//! ratios viaduct / best peer (below 1.0: viaduct is faster).
//! - Queued sections: 200,000 `with` sections from a thread outside the
//!   pool (so none runs on the spot), awaited after.
//!
//! `BENCH_ROUNDS` sets the number of timed rounds (default 9); `BENCH_ONLY`
//! runs only the contenders it names, comma-separated (`with`, `lock`,
//! `tokio`, `async-lock`, `std mutex`, `threads with`, `threads lock`,
//! `threads std mutex`, `post`, `posts std mutex`, `queued with`); `BENCH_N` the task counts
//! of the contention table (default `2,8,64,512`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use viaduct::{block_on, ExecutorExt, Guarded, Strand, ThreadPool};

#[path = "support/rounds.rs"]
mod rounds;
use rounds::median;

const THREADS: usize = 2;
/// Sections per task with `n` tasks: the workloads of the performance
/// targets (8 x 50,000 and 512 x 800), 400,000 in all for the others.
fn per_task(n: usize) -> usize {
    match n {
        512 => 800,
        n => 400_000 / n,
    }
}
const POSTERS: usize = 8;
const POSTS: usize = 100_000;

/// Warms each contender up once, then runs `rounds` rounds in which each
/// runs once, interleaved so that drift in the machine's load hits all of
/// them alike; the median per contender. Contenders not named in
/// `BENCH_ONLY` (when it is set) are skipped (`None`).
fn measure_interleaved<const N: usize>(
    rounds: usize,
    mut fs: [(&str, &mut dyn FnMut()); N],
) -> [Option<Duration>; N] {
    let only = std::env::var("BENCH_ONLY").ok();
    let on: [bool; N] = std::array::from_fn(|i| {
        only.as_deref()
            .is_none_or(|only| only.split(',').any(|name| name.trim() == fs[i].0))
    });
    let mut times: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(rounds));
    for round in 0..=rounds {
        for ((_, f), (t, on)) in fs.iter_mut().zip(times.iter_mut().zip(on)) {
            if !on {
                continue;
            }
            let start = Instant::now();
            f();
            // Round 0 is the warm-up.
            if round > 0 {
                t.push(start.elapsed());
            }
        }
    }
    let mut i = 0;
    times.map(|t| {
        i += 1;
        on[i - 1].then(|| median(t))
    })
}

fn ns_per(d: Option<Duration>, n: usize) -> String {
    d.map_or("-".into(), |d| {
        format!("{:.1}", d.as_secs_f64() * 1e9 / n as f64)
    })
}

/// The faster of two contenders that ran (either may have been skipped).
fn fastest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn ratio(a: Option<Duration>, b: Option<Duration>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:.2}", a.as_secs_f64() / b.as_secs_f64()),
        _ => "-".into(),
    }
}

/// How a contender takes its sections.
#[derive(Clone, Copy, PartialEq)]
enum How {
    /// `Guarded::with`, awaited.
    With,
    /// `Guarded::lock`.
    Lock,
    /// A `std::sync::Mutex`.
    Std,
}

/// `n` viaduct tasks, each running its share of the sections on `g`, or
/// on `m` for [`How::Std`].
fn viaduct_contention(
    pool: &ThreadPool,
    g: &Guarded<u64>,
    m: &Arc<Mutex<u64>>,
    n: usize,
    how: How,
) {
    let per_task = per_task(n);
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (g, m) = (g.clone(), m.clone());
            pool.spawn(async move {
                for _ in 0..per_task {
                    match how {
                        How::With => g.with(|v| *v += 1).await.unwrap(),
                        How::Lock => *g.lock().await += 1,
                        How::Std => *m.lock().unwrap() += 1,
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        block_on(t).unwrap();
    }
}

/// Sections per OS thread in the threads table.
const PER_THREAD: usize = 5_000;

/// `t` OS threads outside the pool, each waiting for its sections one at
/// a time: `with` (always queued: the caller is no task of the pool),
/// `lock`, or a `std::sync::Mutex`.
fn thread_contention(g: &Guarded<u64>, m: &Mutex<u64>, t: usize, how: How) {
    thread::scope(|s| {
        for _ in 0..t {
            s.spawn(|| {
                for _ in 0..PER_THREAD {
                    match how {
                        How::With => block_on(g.with(|v| *v += 1)).unwrap(),
                        How::Lock => *block_on(g.lock()) += 1,
                        How::Std => *m.lock().unwrap() += 1,
                    }
                }
            });
        }
    });
}

fn tokio_contention(rt: &tokio::runtime::Runtime, m: &Arc<tokio::sync::Mutex<u64>>, n: usize) {
    let per_task = per_task(n);
    rt.block_on(async {
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let m = m.clone();
                tokio::spawn(async move {
                    for _ in 0..per_task {
                        *m.lock().await += 1;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
}

fn async_lock_contention(rt: &tokio::runtime::Runtime, m: &Arc<async_lock::Mutex<u64>>, n: usize) {
    let per_task = per_task(n);
    rt.block_on(async {
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let m = m.clone();
                tokio::spawn(async move {
                    for _ in 0..per_task {
                        *m.lock().await += 1;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
}

/// The posted increments' counter: a static, so that posting costs what
/// the strand costs, not an `Arc` clone per closure.
static POSTED: AtomicU64 = AtomicU64::new(0);

fn strand_posts(strand: &Strand) {
    thread::scope(|s| {
        for _ in 0..POSTERS {
            s.spawn(|| {
                for _ in 0..POSTS {
                    strand.post(|| {
                        // Sections never overlap: a plain load and store.
                        POSTED.store(POSTED.load(Relaxed) + 1, Relaxed);
                    });
                }
            });
        }
    });
    // The strand is FIFO: this runs after every post above.
    block_on(strand.run(|| ())).unwrap();
}

/// Sections in the queued-`with` row.
const QUEUED: usize = 200_000;

fn queued_with(g: &Guarded<u64>) {
    let handles: Vec<_> = (0..QUEUED).map(|_| g.with(|v| *v += 1)).collect();
    for h in handles {
        block_on(h).unwrap();
    }
}

fn mutex_increments(m: &Mutex<u64>) {
    thread::scope(|s| {
        for _ in 0..POSTERS {
            s.spawn(|| {
                for _ in 0..POSTS {
                    *m.lock().unwrap() += 1;
                }
            });
        }
    });
}

fn main() {
    let rounds = rounds::rounds(9);
    let pool = ThreadPool::builder()
        .threads(THREADS)
        .name("bench")
        .build()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(THREADS)
        .build()
        .unwrap();

    println!(
        "contention: N tasks x sections each on one counter; {THREADS} worker threads each; \
         ns per section, median of {rounds} rounds"
    );
    println!(
        "{:>5} {:>8} {:>8} {:>8} {:>11} {:>10} {:>15} {:>15} {:>10} {:>10} {:>10}",
        "N",
        "with",
        "lock",
        "tokio",
        "async-lock",
        "std mutex",
        "batch with",
        "batch lock",
        "with/best",
        "lock/best",
        "lock/tokio"
    );
    let sizes: Vec<usize> = std::env::var("BENCH_N")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![2, 8, 64, 512]);
    let mut results = Vec::new();
    for n in sizes {
        let (gw, gl) = (
            Guarded::new(pool.clone(), 0u64),
            Guarded::new(pool.clone(), 0u64),
        );
        let tm = Arc::new(tokio::sync::Mutex::new(0u64));
        let am = Arc::new(async_lock::Mutex::new(0u64));
        let sm = Arc::new(Mutex::new(0u64));
        let [dw, dl, dt, da, dm] = measure_interleaved(
            rounds,
            [
                ("with", &mut || {
                    viaduct_contention(&pool, &gw, &sm, n, How::With)
                }),
                ("lock", &mut || {
                    viaduct_contention(&pool, &gl, &sm, n, How::Lock)
                }),
                ("tokio", &mut || tokio_contention(&rt, &tm, n)),
                ("async-lock", &mut || async_lock_contention(&rt, &am, n)),
                ("std mutex", &mut || {
                    viaduct_contention(&pool, &gw, &sm, n, How::Std)
                }),
            ],
        );
        let sections = per_task(n) * n;
        let runs = (rounds + 1) as u64 * sections as u64;
        for (g, d) in [(&gw, dw), (&gl, dl)] {
            assert_eq!(*block_on(g.lock()), if d.is_some() { runs } else { 0 });
        }
        let best = fastest(dt, da);
        let batch = |g: &Guarded<u64>| {
            let m = g.metrics();
            let inline = m.inline as f64 / (m.inline + m.queued).max(1) as f64;
            format!("{:.1} ({:.0}%)", m.mean_batch(), inline * 100.0)
        };
        println!(
            "{n:>5} {:>8} {:>8} {:>8} {:>11} {:>10} {:>15} {:>15} {:>10} {:>10} {:>10}",
            ns_per(dw, sections),
            ns_per(dl, sections),
            ns_per(dt, sections),
            ns_per(da, sections),
            ns_per(dm, sections),
            batch(&gw),
            batch(&gl),
            ratio(dw, best),
            ratio(dl, best),
            ratio(dl, dt),
        );
        results.push((n, [dw, dl, dt, da]));
    }

    println!();
    println!(
        "threads: T OS threads x {PER_THREAD} sections, each waited for with block_on; \
         ns per section, median of {rounds} rounds"
    );
    println!(
        "{:>5} {:>8} {:>8} {:>10} {:>10} {:>10}",
        "T", "with", "lock", "std mutex", "with/std", "lock/std"
    );
    for t in [2, 8] {
        let (gw, gl, m) = (
            Guarded::new(pool.clone(), 0u64),
            Guarded::new(pool.clone(), 0u64),
            Mutex::new(0u64),
        );
        let [dw, dl, dm] = measure_interleaved(
            rounds,
            [
                ("threads with", &mut || {
                    thread_contention(&gw, &m, t, How::With)
                }),
                ("threads lock", &mut || {
                    thread_contention(&gl, &m, t, How::Lock)
                }),
                ("threads std mutex", &mut || {
                    thread_contention(&gl, &m, t, How::Std)
                }),
            ],
        );
        let sections = t * PER_THREAD;
        println!(
            "{t:>5} {:>8} {:>8} {:>10} {:>10} {:>10}",
            ns_per(dw, sections),
            ns_per(dl, sections),
            ns_per(dm, sections),
            ratio(dw, dm),
            ratio(dl, dm),
        );
    }

    println!();
    println!(
        "fire-and-forget: {POSTERS} threads x {POSTS} increments; ns per increment, median of {rounds} rounds"
    );
    println!(
        "{:>14} {:>14} {:>11} {:>10}",
        "strand post", "std mutex", "batch", "ratio"
    );
    let strand = Strand::new(pool.clone());
    let mutex = Mutex::new(0u64);
    let [ds, dm] = measure_interleaved(
        rounds,
        [
            ("post", &mut || strand_posts(&strand)),
            ("posts std mutex", &mut || mutex_increments(&mutex)),
        ],
    );
    let total =
        |d: Option<Duration>| d.map_or(0, |_| (rounds + 1) as u64 * (POSTERS * POSTS) as u64);
    assert_eq!(POSTED.load(Relaxed), total(ds));
    assert_eq!(*mutex.lock().unwrap(), total(dm));
    println!(
        "{:>14} {:>14} {:>11.1} {:>10}",
        ns_per(ds, POSTERS * POSTS),
        ns_per(dm, POSTERS * POSTS),
        strand.metrics().mean_batch(),
        ratio(ds, dm)
    );

    // Every section queued: the caller is not a task of the pool, so none
    // runs on the spot. What a queued section costs, end to end.
    println!();
    println!(
        "queued with: {QUEUED} sections from a thread outside the pool, awaited after; \
         ns per section, median of {rounds} rounds"
    );
    let g = Guarded::new(pool.clone(), 0u64);
    let [dq] = measure_interleaved(rounds, [("queued with", &mut || queued_with(&g))]);
    println!(
        "{:>14} {:>11}",
        ns_per(dq, QUEUED),
        format!("{:.1}", g.metrics().mean_batch())
    );

    // The performance targets of issue 32: viaduct over the peer, and the bound.
    let at = |n: usize| results.iter().find(|r| r.0 == n).map(|r| r.1);
    println!();
    println!("{:<46} {:>7} {:>8}", "targets", "ratio", "bound");
    let target = |what: &str, r: Option<(Option<Duration>, Option<Duration>)>, bound: f64| {
        if let Some((a, b)) = r {
            println!(
                "{what:<46} {:>7} {:>8}",
                ratio(a, b),
                format!("<= {bound:.1}")
            );
        }
    };
    target(
        "with, 2 tasks / async-lock",
        at(2).map(|[w, _, _, a]| (w, a)),
        1.0,
    );
    target(
        "with, 8 x 50,000 / async-lock",
        at(8).map(|[w, _, _, a]| (w, a)),
        1.0,
    );
    target(
        "with, 512 x 800 / best of tokio and async-lock",
        at(512).map(|[w, _, t, a]| (w, fastest(t, a))),
        0.5,
    );
    target(
        "lock, 2 tasks / tokio",
        at(2).map(|[_, l, t, _]| (l, t)),
        1.0,
    );
    target(
        "lock, 8 x 50,000 / tokio",
        at(8).map(|[_, l, t, _]| (l, t)),
        0.5,
    );
    target("post, 8 threads / std mutex", Some((ds, dm)), 1.0);
}
