//! A tour of viaduct: every capability in one run, with the thread each
//! piece ran on. `cargo run --release --example tour`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use viaduct::time::{self, Elapsed};
use viaduct::{
    block_on, hop_to, ExecutorExt, Guarded, Inline, KeyedStrands, ManualExecutor, PriorityExecutor,
    Strand, ThreadPerTask, ThreadPool, TimedExt, ViaExt,
};

fn here() -> String {
    std::thread::current()
        .name()
        .unwrap_or("<unnamed>")
        .to_owned()
}

/// One line of the closing summary.
struct Row {
    capability: &'static str,
    ran_on: String,
    outcome: String,
}

fn section(title: &str) {
    println!("\n== {title}");
}

fn thread_pool(rows: &mut Vec<Row>) -> ThreadPool {
    section("thread pool: work stealing, named threads");
    let cpu = ThreadPool::builder()
        .threads(2)
        .name("cpu")
        .build()
        .unwrap();
    // Each task holds its worker a moment, so the other worker takes some.
    let handles: Vec<_> = (0..4)
        .map(|i| {
            cpu.run(move || {
                std::thread::sleep(Duration::from_millis(5));
                (i, here())
            })
        })
        .collect();
    let mut seen = Vec::new();
    for h in handles {
        let (i, name) = block_on(h).unwrap();
        println!("  task {i} ran on {name}");
        seen.push(name);
    }
    seen.sort();
    seen.dedup();
    let panicked = block_on(cpu.run(|| -> u32 { panic!("boom") })).unwrap_err();
    println!("  a panicking task reports: {panicked}; the pool lives on");
    rows.push(Row {
        capability: "thread pool",
        ran_on: seen.join(", "),
        outcome: format!("{:?}", cpu.metrics()),
    });
    cpu
}

fn inline(rows: &mut Vec<Row>) {
    section("inline: runs on the thread that schedules");
    let h = Inline.run(here);
    let name = block_on(h).unwrap();
    println!("  Inline.run ran on {name}");
    rows.push(Row {
        capability: "inline",
        ran_on: name,
        outcome: "ran inside run(), before it returned".into(),
    });
}

fn manual(rows: &mut Vec<Row>) {
    section("manual executor: a loop driven by a donated thread");
    let ex = ManualExecutor::new();
    let names: Vec<_> = (0..3).map(|_| ex.run(here)).collect();
    println!("  queued {} closures, none ran yet", ex.len());
    let looper = {
        let ex = ex.clone();
        std::thread::Builder::new()
            .name("loop".into())
            .spawn(move || ex.run_until_closed())
            .unwrap()
    };
    let names: Vec<String> = names.into_iter().map(|h| block_on(h).unwrap()).collect();
    ex.close();
    let ran = looper.join().unwrap();
    println!(
        "  the donated thread ran {ran} of them, on {}",
        names.join(", ")
    );
    rows.push(Row {
        capability: "manual",
        ran_on: names[0].clone(),
        outcome: format!("{ran} run by run_until_closed"),
    });
}

fn thread_per_task(rows: &mut Vec<Row>) {
    section("thread-per-task: a fresh thread for blocking work");
    let blocking = ThreadPerTask::new("blocking");
    let names: Vec<_> = (0..2).map(|_| blocking.run(here)).collect();
    let names: Vec<String> = names.into_iter().map(|h| block_on(h).unwrap()).collect();
    blocking.join().unwrap();
    println!("  ran on {}", names.join(" and "));
    rows.push(Row {
        capability: "thread-per-task",
        ran_on: names.join(", "),
        outcome: "joined".into(),
    });
}

fn fork_join(cpu: &ThreadPool, rows: &mut Vec<Row>) {
    section("block_on and fork-join: waiting inside a pool never deadlocks");
    // The boost fork-join scene on ONE thread: 100 tasks each spawn 100
    // children and block on them. block_on runs the pool's tasks while it
    // waits, so the lone worker is never stuck.
    let one = ThreadPool::builder()
        .threads(1)
        .name("solo")
        .build()
        .unwrap();
    let children = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let parents: Vec<_> = (0..100)
        .map(|_| {
            let (pool, children) = (one.clone(), children.clone());
            one.spawn(async move {
                let kids: Vec<_> = (0..100)
                    .map(|_| {
                        let children = children.clone();
                        pool.run(move || children.fetch_add(1, Ordering::Relaxed))
                    })
                    .collect();
                for k in kids {
                    block_on(k).unwrap();
                }
                here()
            })
        })
        .collect();
    let parent_thread = parents
        .into_iter()
        .map(|p| block_on(p).unwrap())
        .next_back()
        .unwrap();
    println!(
        "  block_on: 100 parents x 100 children on 1 thread ({parent_thread}): {} children ran in {:?}",
        children.load(Ordering::Relaxed),
        start.elapsed()
    );

    fn fib(pool: &ThreadPool, n: u64) -> u64 {
        if n < 2 {
            return n;
        }
        let (a, b) = pool.join(|| fib(pool, n - 1), || fib(pool, n - 2));
        a + b
    }
    let start = Instant::now();
    let f = fib(cpu, 25);
    println!(
        "  fork-join: pool.join fib(25) = {f} in {:?}, borrowing nothing from the heap",
        start.elapsed()
    );
    let local = [1u64, 2, 3, 4, 5, 6];
    let (l, r) = cpu.join(
        || local[..3].iter().sum::<u64>(),
        || local[3..].iter().sum::<u64>(),
    );
    println!("  fork-join: two halves of a stack array summed in parallel: {l} + {r}");
    rows.push(Row {
        capability: "block_on",
        ran_on: parent_thread,
        outcome: format!("{} children, no deadlock", children.load(Ordering::Relaxed)),
    });
    rows.push(Row {
        capability: "fork-join",
        ran_on: "cpu-*".into(),
        outcome: format!("fib(25) = {f}"),
    });
}

fn continuations(cpu: &ThreadPool, rows: &mut Vec<Row>) {
    section("continuations: then / via across executors");
    let io = ThreadPool::builder().threads(1).name("io").build().unwrap();
    let steps = Arc::new(Mutex::new(Vec::new()));
    let log = |step: &'static str| {
        let steps = steps.clone();
        move || steps.lock().unwrap().push(format!("{step} on {}", here()))
    };
    let (parse, index, store, report) = (log("parse"), log("index"), log("store"), log("report"));
    let total = cpu
        .run(move || {
            parse();
            "a b c".split(' ').count()
        })
        .then(move |words| {
            index();
            words * 10
        })
        .via(&io)
        .then(move |ix| {
            store();
            ix + 1
        })
        .via(&Inline)
        .then_try(move |r| {
            report();
            r.unwrap_or(0)
        });
    let total = block_on(total).unwrap();
    for line in steps.lock().unwrap().iter() {
        println!("  {line}");
    }
    println!("  result {total}: each step ran where its via said; the Inline step ran on the thread that finished the one before");
    let failed = block_on(
        cpu.run(|| -> u32 { panic!("bad input") })
            .then(|v| v + 1)
            .then_try(|r| r.map_err(|e| e.to_string())),
    )
    .unwrap();
    println!("  a panic skips the then steps and reaches then_try: {failed:?}");
    let via = block_on(async { 40 + 2 }.via(&io)).unwrap();
    rows.push(Row {
        capability: "continuations",
        ran_on: "cpu-*, io-0, inline".into(),
        outcome: format!("chain = {total}, any future .via(&io) = {via}"),
    });

    section("hop_to: a task moves between executors");
    let strand = Strand::new(cpu.clone());
    let (io2, st) = (io.clone(), strand.clone());
    let trail = block_on(cpu.spawn(async move {
        let mut trail = vec![here()];
        hop_to(&io2).await;
        trail.push(here());
        hop_to(&st).await;
        trail.push(format!(
            "{} (inside the strand: {})",
            here(),
            st.running_in_this_thread()
        ));
        hop_to(&io2).await;
        trail.push(here());
        trail
    }))
    .unwrap();
    println!("  one task, hopping: {}", trail.join(" -> "));
    rows.push(Row {
        capability: "hop_to",
        ran_on: "cpu -> io -> strand -> io".into(),
        outcome: "moved between pools and into a strand".into(),
    });
    io.shutdown().unwrap();
}

fn strands(cpu: &ThreadPool, rows: &mut Vec<Row>) {
    section("strands: one at a time, in order, on any executor");
    let strand = Strand::new(cpu.clone());
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let order = Arc::new(Mutex::new(Vec::new()));
    let threads = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    for i in 0..1_000 {
        let (inside, overlaps, order, threads) = (
            inside.clone(),
            overlaps.clone(),
            order.clone(),
            threads.clone(),
        );
        strand.post(move || {
            if inside.swap(true, Ordering::SeqCst) {
                overlaps.fetch_add(1, Ordering::SeqCst);
            }
            order.lock().unwrap().push(i);
            threads.lock().unwrap().insert(here());
            inside.store(false, Ordering::SeqCst);
        });
    }
    let st = strand.clone();
    let dispatched_inline = block_on(strand.run(move || {
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        st.dispatch(move || r.store(true, Ordering::SeqCst));
        ran.load(Ordering::SeqCst)
    }))
    .unwrap();
    let in_order = order.lock().unwrap().windows(2).all(|w| w[0] < w[1]);
    let threads: Vec<_> = threads.lock().unwrap().iter().cloned().collect();
    println!(
        "  1000 sections posted: in order {in_order}, overlaps {}, on {} (the strand owns no thread)",
        overlaps.load(Ordering::SeqCst),
        threads.join(" and ")
    );
    println!(
        "  dispatch from inside the strand ran inline: {dispatched_inline}; running_in_this_thread outside: {}",
        strand.running_in_this_thread()
    );
    rows.push(Row {
        capability: "strand",
        ran_on: threads.join(", "),
        outcome: format!(
            "1000 in order, {} overlaps",
            overlaps.load(Ordering::SeqCst)
        ),
    });

    section("Guarded: a strand as an async mutex");
    let counter = Guarded::new(cpu.clone(), 0u64);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let counter = counter.clone();
            cpu.spawn(async move {
                for _ in 0..1_000 {
                    let mut guard = counter.lock().await;
                    *guard += 1;
                }
                counter.with(|v| *v += 1000).await.unwrap();
            })
        })
        .collect();
    for t in tasks {
        block_on(t).unwrap();
    }
    let total = block_on(counter.with(|v| *v)).unwrap();
    println!("  8 tasks x (1000 lock().await increments + one with(+1000)) = {total}");
    rows.push(Row {
        capability: "Guarded",
        ran_on: "cpu-*".into(),
        outcome: format!("counter = {total} (expected 16000)"),
    });

    section("serial tags: same key serial, different keys parallel");
    let keyed = KeyedStrands::new(cpu.clone());
    let log = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let handles: Vec<_> = ["A", "B", "A", "B", "A", "B"]
        .into_iter()
        .enumerate()
        .map(|(i, key)| {
            let log = log.clone();
            keyed.spawn(key, async move {
                let t0 = start.elapsed();
                std::thread::sleep(Duration::from_millis(20));
                log.lock().unwrap().push(format!(
                    "{key}{i} {:>3}-{:>3} ms on {}",
                    t0.as_millis(),
                    start.elapsed().as_millis(),
                    here()
                ));
            })
        })
        .collect();
    for h in handles {
        block_on(h).unwrap();
    }
    for line in log.lock().unwrap().iter() {
        println!("  {line}");
    }
    println!("  keys A and B ran side by side, each key's tasks one after another; idle keys freed: {} left", keyed.len());
    rows.push(Row {
        capability: "serial tags",
        ran_on: "cpu-*".into(),
        outcome: format!("6 tasks on 2 keys in {} ms", start.elapsed().as_millis()),
    });
}

fn priorities(rows: &mut Vec<Row>) {
    section("priorities: the highest pending runs next");
    let one = ThreadPool::builder()
        .threads(1)
        .name("prio")
        .build()
        .unwrap();
    let prio = PriorityExecutor::new(one.clone());
    let order = Arc::new(Mutex::new(Vec::new()));
    // Hold the only thread so everything below queues up first.
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let blocker = one.run(move || gate.recv().unwrap());
    let handles: Vec<_> = [(1, "low"), (10, "high"), (5, "mid"), (10, "high#2")]
        .into_iter()
        .map(|(p, name)| {
            let order = order.clone();
            prio.spawn_with(p, async move { order.lock().unwrap().push(name) })
        })
        .collect();
    release.send(()).unwrap();
    block_on(blocker).unwrap();
    for h in handles {
        block_on(h).unwrap();
    }
    let order = order.lock().unwrap().join(", ");
    println!("  queued low(1), high(10), mid(5), high(10); ran: {order}");
    rows.push(Row {
        capability: "priorities",
        ran_on: "prio-0".into(),
        outcome: order,
    });
    one.shutdown().unwrap();
}

fn timers(cpu: &ThreadPool, rows: &mut Vec<Row>) {
    section("timers: sleep, timeout, delayed and periodic jobs");
    let start = Instant::now();
    let slept = block_on(cpu.spawn(async move {
        time::sleep(Duration::from_millis(30)).await;
        (start.elapsed(), here())
    }))
    .unwrap();
    println!("  sleep(30 ms) resumed after {:?} on {}", slept.0, slept.1);
    let timed_out: Result<(), Elapsed> = block_on(time::timeout(
        Duration::from_millis(10),
        futures::future::pending(),
    ));
    println!("  timeout(10 ms, pending) = {timed_out:?}");

    let order = Arc::new(Mutex::new(Vec::new()));
    let (a, b) = (order.clone(), order.clone());
    let ha = cpu.execute_after(Duration::from_millis(40), move || {
        a.lock().unwrap().push(format!("A on {}", here()))
    });
    let hb = cpu.execute_after(Duration::from_millis(20), move || {
        b.lock().unwrap().push(format!("B on {}", here()))
    });
    block_on(ha).unwrap();
    block_on(hb).unwrap();
    println!(
        "  execute_after: A (40 ms) and B (20 ms) ran as {}",
        order.lock().unwrap().join(", then ")
    );

    let ticks = Arc::new(AtomicUsize::new(0));
    let t = ticks.clone();
    let mut job = cpu.execute_every(Duration::from_millis(25), move || {
        t.fetch_add(1, Ordering::SeqCst);
    });
    while ticks.load(Ordering::SeqCst) < 3 {
        std::thread::sleep(Duration::from_millis(5));
    }
    job.cancel();
    println!(
        "  execute_every(25 ms): cancelled after {} runs",
        job.runs()
    );
    rows.push(Row {
        capability: "timers",
        ran_on: slept.1,
        outcome: format!(
            "sleep {:?}; B before A; periodic ran {}x",
            slept.0,
            job.runs()
        ),
    });
}

fn main() {
    // Panics are part of the tour; keep their report to one line.
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<&str>()
            .copied()
            .or(payload.downcast_ref::<String>().map(|s| &**s));
        println!("  (panic on {}: {})", here(), msg.unwrap_or("?"));
    }));
    println!("viaduct tour (main thread: {})", here());
    let mut rows = Vec::new();
    let cpu = thread_pool(&mut rows);
    inline(&mut rows);
    manual(&mut rows);
    thread_per_task(&mut rows);
    fork_join(&cpu, &mut rows);
    continuations(&cpu, &mut rows);
    strands(&cpu, &mut rows);
    priorities(&mut rows);
    timers(&cpu, &mut rows);
    cpu.shutdown().unwrap();

    section("summary");
    println!("  {:<16} {:<28} outcome", "capability", "ran on");
    for r in &rows {
        println!("  {:<16} {:<28} {}", r.capability, r.ran_on, r.outcome);
    }
}
