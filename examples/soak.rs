//! Soak: a mixed workload for a given time, checking invariants as it goes.
//!
//! Round after round, the main thread offers a batch of every kind of
//! work and waits for all of it: spawns (some spawning and awaiting
//! children), strand posts, `Guarded` sections and locks, continuation
//! chains across two pools, a strand and `Inline`, timers (some
//! cancelled), a periodic job running the whole time, keyed strands,
//! priorities, `hop_to` round trips, aborts, and fork-join. Each invariant
//! is counted as it is checked; at the end the program prints throughput,
//! memory and every invariant with its count, and exits non-zero if any
//! was violated or if resident memory at the end is more than 20 % above
//! what it was at the 10 % mark (a leak).
//!
//! ```sh
//! cargo run --release --example soak                 # 60 s
//! cargo run --release --example soak -- --secs 10    # or VIADUCT_SOAK_SECS=10
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use viaduct::prelude::*;
use viaduct::time::Periodic;
use viaduct::{
    block_on, hop_to, Guarded, Inline, KeyedStrands, PriorityExecutor, Strand, ThreadPool,
};

/// Invariants, by name: how often each held and how often it failed.
#[derive(Default)]
struct Checks(Mutex<BTreeMap<&'static str, (u64, u64)>>);

impl Checks {
    fn check(&self, name: &'static str, held: bool) {
        self.count(name, u64::from(held), u64::from(!held));
    }

    fn count(&self, name: &'static str, held: u64, failed: u64) {
        let mut map = self.0.lock().unwrap();
        let e = map.entry(name).or_default();
        e.0 += held;
        e.1 += failed;
        if failed > 0 {
            eprintln!("VIOLATED: {name} ({failed} times)");
        }
    }

    fn failures(&self) -> u64 {
        self.0.lock().unwrap().values().map(|v| v.1).sum()
    }
}

/// Aborted tasks whose poll was under way and saw their message anyway.
static ABORTED_MID_POLL: AtomicU64 = AtomicU64::new(0);

/// Work done, by kind, for throughput.
#[derive(Default)]
struct Done(Mutex<BTreeMap<&'static str, u64>>);

impl Done {
    fn add(&self, kind: &'static str, n: u64) {
        *self.0.lock().unwrap().entry(kind).or_default() += n;
    }
}

/// A counter that sees overlapping sections: a section reads it, checks it
/// holds what the previous one left, and writes the next value; two
/// sections at once, or out of order, break the sequence.
#[derive(Default)]
struct Sequence(AtomicU64);

impl Sequence {
    fn step(&self, expected: u64) -> bool {
        let seen = self.0.load(Relaxed);
        std::hint::spin_loop();
        self.0.store(seen + 1, Relaxed);
        seen == expected
    }
}

struct Rig {
    cpu: ThreadPool,
    io: ThreadPool,
    strands: Vec<Strand>,
    guarded: Guarded<u64>,
    keyed: KeyedStrands<u32>,
    pq: PriorityExecutor,
}

fn fib(pool: &ThreadPool, n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = pool.join(|| fib(pool, n - 1), || fib(pool, n - 2));
    a + b
}

/// The kilobytes of a `VmRSS:`/`VmHWM:` line of /proc/self/status.
fn memory_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn round(rig: &Rig, r: u64, checks: &Checks, done: &Done) {
    let Rig {
        cpu,
        io,
        strands,
        guarded,
        keyed,
        pq,
    } = rig;

    // Spawns; every 100th spawns ten children and waits for them inside
    // the pool (block_on helps instead of blocking the worker).
    let handles: Vec<_> = (0..2_000u64)
        .map(|i| {
            let cpu2 = cpu.clone();
            cpu.spawn(async move {
                if i % 100 == 0 {
                    let kids: Vec<_> = (0..10u64).map(|k| cpu2.run(move || k)).collect();
                    kids.into_iter().map(|k| block_on(k).unwrap()).sum::<u64>() + i
                } else {
                    i
                }
            })
        })
        .collect();
    let sum: u64 = handles.into_iter().map(|h| block_on(h).unwrap()).sum();
    checks.check(
        "every spawned task ran once (sum of results)",
        sum == 1_999_000 + 20 * 45,
    );
    done.add("spawns", 2_200);

    // Strand posts: one at a time and in order, per strand.
    let mut tails = Vec::new();
    let seqs: Vec<Arc<Sequence>> = strands.iter().map(|_| Arc::default()).collect();
    let broken = Arc::new(AtomicU64::new(0));
    for (strand, seq) in strands.iter().zip(&seqs) {
        for k in 0..500 {
            let (seq, broken) = (seq.clone(), broken.clone());
            strand.post(move || {
                if !seq.step(k) {
                    broken.fetch_add(1, Relaxed);
                }
            });
        }
        tails.push(strand.run(|| ()));
    }
    tails.into_iter().for_each(|h| block_on(h).unwrap());
    checks.count(
        "strand sections exclusive and in submission order",
        2_000,
        broken.load(Relaxed),
    );
    checks.check(
        "every post ran once",
        seqs.iter().all(|s| s.0.load(Relaxed) == 500),
    );
    done.add("strand posts", 2_000);

    // Guarded: sections on the strand and guards held across an await.
    let before = block_on(guarded.with(|n| *n)).unwrap();
    let withs: Vec<_> = (0..300).map(|_| guarded.with(|n| *n += 1)).collect();
    let lockers: Vec<_> = (0..50)
        .map(|_| {
            let g = guarded.clone();
            cpu.spawn(async move {
                let mut guard = g.lock().await;
                let v = *guard;
                futures::future::ready(()).await;
                *guard = v + 1;
            })
        })
        .collect();
    withs
        .into_iter()
        .chain(lockers)
        .for_each(|h| block_on(h).unwrap());
    let after = block_on(guarded.with(|n| *n)).unwrap();
    checks.check("Guarded lost no update", after == before + 350);
    done.add("guarded sections", 350);

    // Continuation chains across two pools, a strand and Inline.
    let chains: Vec<_> = (0..300u64)
        .map(|i| {
            cpu.run(move || i)
                .then(|n| n + 1)
                .via(io)
                .then(|n| n * 2)
                .via(&strands[0])
                .then(|n| n - 1)
                .via(&Inline)
                .then_try(|r| r.map(|n| n + 10))
        })
        .collect();
    let good = chains
        .into_iter()
        .enumerate()
        .map(|(i, h)| (i as u64, block_on(h)))
        .filter(|(i, r)| matches!(r, Ok(Ok(v)) if *v == (i + 1) * 2 - 1 + 10))
        .count();
    checks.count(
        "every chain step ran once, in order",
        good as u64,
        300 - good as u64,
    );
    done.add("chain steps", 1_500);

    // Timers: never early; `cancel` wins exactly when the job never runs.
    let start = Instant::now();
    let early = Arc::new(AtomicU64::new(0));
    let ran: Arc<Vec<AtomicBool>> = Arc::new((0..200).map(|_| AtomicBool::new(false)).collect());
    let mut timed: Vec<_> = (0..200u64)
        .map(|i| {
            let due = Duration::from_micros(i * 13 % 3_000);
            let (early, ran) = (early.clone(), ran.clone());
            cpu.execute_after(due, move || {
                if start.elapsed() < due {
                    early.fetch_add(1, Relaxed);
                }
                ran[i as usize].store(true, Relaxed);
            })
        })
        .collect();
    // Every fourth is cancelled; those due at once may have run already.
    let won: Vec<bool> = timed
        .iter_mut()
        .enumerate()
        .map(|(i, t)| i % 4 == 0 && t.cancel())
        .collect();
    let outcomes: Vec<_> = timed.into_iter().map(block_on).collect();
    let consistent = (0..200)
        .filter(|&i| match &outcomes[i] {
            Ok(()) => !won[i] && ran[i].load(Relaxed),
            Err(e) => won[i] && e.is_cancelled() && !ran[i].load(Relaxed),
        })
        .count() as u64;
    checks.count(
        "a timer runs, or its cancel won and it never runs",
        consistent,
        200 - consistent,
    );
    let fired = 200 - won.iter().filter(|&&w| w).count() as u64;
    checks.count(
        "no timer fires early",
        fired - early.load(Relaxed).min(fired),
        early.load(Relaxed),
    );
    done.add("timers", 200);

    // Keyed strands: per-key order.
    let per_key: Vec<Arc<Sequence>> = (0..16).map(|_| Arc::default()).collect();
    let bad = Arc::new(AtomicU64::new(0));
    let keyed_handles: Vec<_> = (0..800u64)
        .map(|i| {
            let key = (i % 16) as u32;
            let (seq, bad) = (per_key[key as usize].clone(), bad.clone());
            keyed.spawn(key + 16 * (r % 4) as u32, async move {
                if !seq.step(i / 16) {
                    bad.fetch_add(1, Relaxed);
                }
            })
        })
        .collect();
    keyed_handles.into_iter().for_each(|h| block_on(h).unwrap());
    checks.count(
        "keyed tasks serial and in order per key",
        800,
        bad.load(Relaxed),
    );
    done.add("keyed tasks", 800);

    // Priorities: everything runs.
    let prio: Vec<_> = (0..300i32)
        .map(|i| pq.spawn_with(i % 7 - 3, async move { i }))
        .collect();
    let total: i32 = prio.into_iter().map(|h| block_on(h).unwrap()).sum();
    checks.check("every prioritised task ran once", total == 299 * 300 / 2);
    done.add("priority tasks", 300);

    // hop_to: out to io and back.
    let hops: Vec<_> = (0..100)
        .map(|_| {
            let (cpu2, io2) = (cpu.clone(), io.clone());
            cpu.spawn(async move {
                hop_to(&io2).await;
                let on_io = ThreadPool::current().is_some_and(|p| p.same_pool(&io2));
                hop_to(&cpu2).await;
                on_io && ThreadPool::current().is_some_and(|p| p.same_pool(&cpu2))
            })
        })
        .collect();
    let hopped = hops
        .into_iter()
        .map(block_on)
        .filter(|r| matches!(r, Ok(true)))
        .count();
    checks.count(
        "hop_to lands where asked",
        hopped as u64,
        100 - hopped as u64,
    );
    done.add("hops", 200);

    // Aborts: an aborted task says Cancelled and is not polled again,
    // unless a poll already under way on a worker finished it: then, as in
    // tokio, its value stands (counted); the others run once.
    let ran = Arc::new(AtomicU64::new(0));
    let finished: Vec<_> = (0..100).map(|_| Arc::new(AtomicBool::new(false))).collect();
    let (mut waiting, senders): (Vec<_>, Vec<_>) = (0..100)
        .map(|i| {
            let (tx, rx) = oneshot::channel::<()>();
            let (ran, finished) = (ran.clone(), finished[i].clone());
            let h = cpu.spawn(async move {
                if rx.await.is_ok() {
                    if i % 2 == 1 {
                        ran.fetch_add(1, Relaxed);
                    }
                    finished.store(true, Relaxed);
                }
            });
            (h, tx)
        })
        .unzip();
    for h in waiting.iter_mut().step_by(2) {
        h.abort();
    }
    for tx in senders {
        let _ = tx.send(());
    }
    let outcomes: Vec<_> = waiting.into_iter().map(block_on).collect();
    let ok = outcomes
        .iter()
        .enumerate()
        .filter(|(i, o)| match (i % 2 == 0, finished[*i].load(Relaxed)) {
            (true, false) => o.as_ref().is_err_and(|e| e.is_cancelled()),
            (_, true) => o.is_ok(),
            (false, false) => false,
        })
        .count();
    checks.count(
        "an aborted task says Cancelled unless a poll under way finished it; the others say Ok",
        ok as u64,
        100 - ok as u64,
    );
    checks.check("every task not aborted ran once", ran.load(Relaxed) == 50);
    done.add("aborts", 100);
    let kept = (0..100).step_by(2).filter(|&i| finished[i].load(Relaxed));
    ABORTED_MID_POLL.fetch_add(kept.count() as u64, Relaxed);

    // Fork-join, from outside and inside the pool.
    checks.check("fork-join from outside", fib(cpu, 18) == 2_584);
    let cpu2 = cpu.clone();
    let inside = block_on(cpu.run(move || fib(&cpu2, 16))).unwrap();
    checks.check("fork-join inside a task", inside == 987);
    done.add("fork-join halves", 2 * 4_180 + 2 * 1_596);
}

fn seconds() -> u64 {
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--secs" {
            return args.next().and_then(|s| s.parse().ok()).expect("--secs N");
        }
    }
    std::env::var("VIADUCT_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60)
}

fn main() {
    let secs = seconds();
    let total = Duration::from_secs(secs);
    let cpu = ThreadPool::builder().name("soak-cpu").build().unwrap();
    let io = ThreadPool::builder()
        .threads(1)
        .name("soak-io")
        .max_pending(1_024)
        .build()
        .unwrap();
    let rig = Rig {
        strands: (0..4).map(|_| Strand::new(cpu.clone())).collect(),
        guarded: Guarded::new(cpu.clone(), 0),
        keyed: KeyedStrands::new(cpu.clone()),
        pq: PriorityExecutor::new(cpu.clone()),
        cpu: cpu.clone(),
        io: io.clone(),
    };
    let checks = Checks::default();
    let done = Done::default();

    // A periodic job for the whole run: its runs never overlap.
    let busy = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicU64::new(0));
    let (b, o) = (busy.clone(), overlaps.clone());
    let mut ticker: Periodic = io.execute_every(Duration::from_millis(1), move || {
        if b.swap(true, Acquire) {
            o.fetch_add(1, Relaxed);
        }
        std::hint::black_box((0..100u64).sum::<u64>());
        b.store(false, Release);
    });

    println!(
        "soak: {secs} s on {} + {} threads",
        cpu.threads(),
        io.threads()
    );
    let start = Instant::now();
    let mut rounds = 0;
    let mut mark = None;
    while start.elapsed() < total {
        round(&rig, rounds, &checks, &done);
        rounds += 1;
        if mark.is_none() && start.elapsed() >= total / 10 {
            mark = Some(memory_kib("VmRSS:"));
        }
    }
    let elapsed = start.elapsed();

    let ticks = ticker.runs();
    checks.check("the periodic job kept running", ticks > 0);
    checks.check("periodic runs never overlap", overlaps.load(Relaxed) == 0);
    checks.check("a cancelled periodic job reports Cancelled", {
        ticker.cancel();
        block_on(&mut ticker).is_cancelled()
    });
    drop(rig);
    cpu.shutdown().unwrap();
    io.shutdown().unwrap();
    for p in [&cpu, &io] {
        let m = p.metrics();
        checks.check(
            "every admitted task is over after shutdown",
            m.spawned == m.completed,
        );
    }

    let end = memory_kib("VmRSS:");
    let peak = memory_kib("VmHWM:");
    let mark = mark.unwrap_or(end);
    let growth = end as f64 / mark.max(1) as f64;
    checks.check(
        "resident memory at the end within 20 % above the 10 % mark",
        growth <= 1.2,
    );

    let secs_f = elapsed.as_secs_f64();
    println!("rounds: {rounds} in {secs_f:.1} s");
    println!("throughput (per second):");
    let mut all = 0;
    for (kind, n) in done.0.lock().unwrap().iter() {
        all += n;
        println!("  {kind:<18} {:>12.0}", *n as f64 / secs_f);
    }
    println!("  {:<18} {:>12.0}", "all work items", all as f64 / secs_f);
    println!("  {:<18} {:>12.0}", "periodic runs", ticks as f64 / secs_f);
    println!(
        "memory: peak (VmHWM) {peak} KiB; resident (VmRSS) {mark} KiB at the 10 % mark, {end} KiB at the end ({:+.1} %)",
        (growth - 1.0) * 100.0
    );
    println!(
        "aborted tasks that a poll already under way finished (their value kept): {}",
        ABORTED_MID_POLL.load(Relaxed)
    );
    println!("invariants (held / violated):");
    for (name, (held, failed)) in checks.0.lock().unwrap().iter() {
        println!("  {held:>10} / {failed:<3} {name}");
    }
    let failures = checks.failures();
    if failures > 0 {
        eprintln!("soak: {failures} invariant violations");
        std::process::exit(1);
    }
    println!("soak: all invariants held");
}
