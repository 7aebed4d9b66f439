//! A tour of viaduct: every capability in one run, with the thread each
//! piece ran on. `cargo run --release --example tour`.
//!
//! Every outcome printed is also checked: a wrong count, order or thread
//! makes the tour panic and exit non-zero. Thread names are recorded where
//! each piece of work ran, never written in by hand.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use viaduct::cancel::CancellationToken;
use viaduct::prelude::*;
use viaduct::sim::Simulation;
use viaduct::time::{self, Elapsed};
use viaduct::{
    block_on, hop_to, Guarded, Inline, JoinSet, KeyedStrands, ManualExecutor, PriorityExecutor,
    Strand, ThreadPerTask, ThreadPool,
};

/// The name of the thread this runs on.
fn here() -> String {
    std::thread::current()
        .name()
        .unwrap_or("<unnamed>")
        .to_owned()
}

/// A set of thread names as a sorted, deduplicated list: `cpu-0, cpu-1`.
fn names<I, S>(threads: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let set: BTreeSet<String> = threads.into_iter().map(|s| s.as_ref().to_owned()).collect();
    set.into_iter().collect::<Vec<_>>().join(", ")
}

/// Panics unless every name is a thread of the pool named `prefix`.
fn assert_all_on<I, S>(threads: I, prefix: &str, what: &str)
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let threads: Vec<String> = threads.into_iter().map(|s| s.as_ref().to_owned()).collect();
    assert!(!threads.is_empty(), "{what}: no thread recorded");
    for t in &threads {
        assert!(
            t.starts_with(&format!("{prefix}-")),
            "{what}: ran on {t}, expected a {prefix}-N thread (all: {threads:?})"
        );
    }
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
    for (expected, h) in handles.into_iter().enumerate() {
        let (i, name) = block_on(h).unwrap();
        println!("  task {i} ran on {name}");
        assert_eq!(i, expected, "handle {expected} returned task {i}'s value");
        seen.push(name);
    }
    assert_eq!(seen.len(), 4, "4 tasks spawned, {} ran", seen.len());
    assert_all_on(&seen, "cpu", "thread pool tasks");
    assert!(
        seen.iter().all(|n| n == "cpu-0" || n == "cpu-1"),
        "a 2-thread pool ran a task on {seen:?}"
    );
    let panicked = block_on(cpu.run(|| -> u32 { panic!("boom") })).unwrap_err();
    println!("  a panicking task reports: {panicked}; the pool lives on");
    assert_eq!(
        panicked.panic_message(),
        Some("boom"),
        "the panic's payload should reach the handle: {panicked}"
    );
    let alive = block_on(cpu.run(here)).unwrap();
    println!("  after the panic the pool still runs tasks: one ran on {alive}");
    assert_all_on([&alive], "cpu", "task after a panic");
    let m = cpu.metrics();
    assert_eq!(m.threads, 2, "pool threads: {m:?}");
    assert_eq!(m.spawned, 6, "5 tasks + 1 after the panic spawned: {m:?}");
    assert_eq!(m.completed, 6, "every spawned task is over: {m:?}");
    assert_eq!(m.queued, 0, "nothing left queued: {m:?}");
    seen.push(alive);
    rows.push(Row {
        capability: "thread pool",
        ran_on: names(&seen),
        outcome: format!("{m:?}"),
    });
    cpu
}

fn inline(rows: &mut Vec<Row>) {
    section("inline: runs on the thread that schedules");
    let h = Inline.run(here);
    let finished_on_return = h.is_finished();
    let name = block_on(h).unwrap();
    println!("  Inline.run ran on {name}, finished when run() returned: {finished_on_return}");
    assert_eq!(name, here(), "Inline ran off the scheduling thread");
    assert!(
        finished_on_return,
        "Inline.run returned before the work ran"
    );
    rows.push(Row {
        capability: "inline",
        ran_on: name,
        outcome: "ran inside run(), before it returned".into(),
    });
}

fn manual(rows: &mut Vec<Row>) {
    section("manual executor: a loop driven by a donated thread");
    let ex = ManualExecutor::new();
    let handles: Vec<_> = (0..3).map(|_| ex.run(here)).collect();
    let queued = ex.len();
    let none_ran = handles.iter().all(|h| !h.is_finished());
    println!("  queued {queued} closures, none ran yet: {none_ran}");
    assert_eq!(queued, 3, "3 closures queued on the manual executor");
    assert!(none_ran, "a manual executor ran work before it was driven");
    let looper = {
        let ex = ex.clone();
        std::thread::Builder::new()
            .name("loop".into())
            .spawn(move || ex.run_until_closed())
            .unwrap()
    };
    let ran_on: Vec<String> = handles.into_iter().map(|h| block_on(h).unwrap()).collect();
    ex.close();
    let ran = looper.join().unwrap();
    println!(
        "  the donated thread ran {ran} of them, on {}",
        ran_on.join(", ")
    );
    assert_eq!(ran, 3, "run_until_closed ran {ran} closures, expected 3");
    assert!(
        ran_on.iter().all(|n| n == "loop"),
        "manual work ran off the donated thread: {ran_on:?}"
    );
    rows.push(Row {
        capability: "manual",
        ran_on: names(&ran_on),
        outcome: format!("{ran} run by run_until_closed"),
    });
}

fn thread_per_task(rows: &mut Vec<Row>) {
    section("thread-per-task: a fresh thread for blocking work");
    let blocking = ThreadPerTask::new("blocking");
    let handles: Vec<_> = (0..2).map(|_| blocking.run(here)).collect();
    let ran_on: Vec<String> = handles.into_iter().map(|h| block_on(h).unwrap()).collect();
    blocking.join_threads().unwrap();
    println!("  ran on {}", ran_on.join(" and "));
    assert_all_on(&ran_on, "blocking", "thread-per-task");
    assert_eq!(
        ran_on.iter().collect::<BTreeSet<_>>().len(),
        2,
        "2 tasks should get 2 distinct threads: {ran_on:?}"
    );
    rows.push(Row {
        capability: "thread-per-task",
        ran_on: names(&ran_on),
        outcome: format!("{} tasks on {} threads, joined", ran_on.len(), ran_on.len()),
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
                        pool.run(move || {
                            children.fetch_add(1, Ordering::Relaxed);
                            here()
                        })
                    })
                    .collect();
                let mut kid_threads = BTreeSet::new();
                let mut joined = 0;
                for k in kids {
                    kid_threads.insert(block_on(k).unwrap());
                    joined += 1;
                }
                (here(), kid_threads, joined)
            })
        })
        .collect();
    let mut parent_threads = BTreeSet::new();
    let mut child_threads = BTreeSet::new();
    let mut joined = 0;
    for p in parents {
        let (parent, kids, n) = block_on(p).unwrap();
        parent_threads.insert(parent);
        child_threads.extend(kids);
        joined += n;
    }
    let elapsed = start.elapsed();
    let ran = children.load(Ordering::Relaxed);
    println!(
        "  block_on: 100 parents on {} x 100 children on {}: {ran} children ran, {joined} joined, in {elapsed:?}",
        names(&parent_threads),
        names(&child_threads),
    );
    assert_eq!(ran, 10_000, "100 x 100 children should run");
    assert_eq!(joined, 10_000, "100 x 100 children should be joined");
    assert_eq!(
        names(&parent_threads),
        "solo-0",
        "parents ran off the one-thread pool"
    );
    assert_eq!(
        names(&child_threads),
        "solo-0",
        "children ran off the one-thread pool"
    );
    one.shutdown().unwrap();

    fn fib(pool: &ThreadPool, n: u64) -> u64 {
        if n < 2 {
            return n;
        }
        let (a, b) = pool.join(|| fib(pool, n - 1), || fib(pool, n - 2));
        a + b
    }
    let start = Instant::now();
    // The top-level halves report where they ran; below them, plain fib.
    let ((a, a_on), (b, b_on)) = cpu.join(|| (fib(cpu, 24), here()), || (fib(cpu, 23), here()));
    let f = a + b;
    println!(
        "  fork-join: pool.join fib(25) = fib(24) on {a_on} + fib(23) on {b_on} = {f} in {:?}, borrowing nothing from the heap",
        start.elapsed()
    );
    assert_eq!(
        (a, b, f),
        (46368, 28657, 75025),
        "fib(24) + fib(23) = fib(25)"
    );
    let local = [1u64, 2, 3, 4, 5, 6];
    let ((l, l_on), (r, r_on)) = cpu.join(
        || (local[..3].iter().sum::<u64>(), here()),
        || (local[3..].iter().sum::<u64>(), here()),
    );
    println!("  fork-join: two halves of a stack array summed: {l} on {l_on} + {r} on {r_on}");
    assert_eq!((l, r), (6, 15), "halves of [1..=6]");
    let halves = [a_on, b_on, l_on, r_on];
    assert_all_on(&halves, "cpu", "join halves called from outside the pool");
    rows.push(Row {
        capability: "block_on",
        ran_on: names(parent_threads.iter().chain(&child_threads)),
        outcome: format!("{ran} children, no deadlock"),
    });
    rows.push(Row {
        capability: "fork-join",
        ran_on: names(&halves),
        outcome: format!("fib(25) = {f}, halves {l} + {r}"),
    });
}

fn continuations(cpu: &ThreadPool, rows: &mut Vec<Row>) {
    section("continuations: then / via across executors");
    let io = ThreadPool::builder().threads(1).name("io").build().unwrap();
    let steps = Arc::new(Mutex::new(Vec::new()));
    let log = |step: &'static str| {
        let steps = steps.clone();
        move || steps.lock().unwrap().push((step, here()))
    };
    let (parse, index, store, report) = (log("parse"), log("index"), log("store"), log("report"));
    // The first step waits until the whole chain is built, so each step
    // is attached before the one before it finishes.
    let (go, gate) = std::sync::mpsc::channel::<()>();
    let total = cpu
        .run(move || {
            gate.recv().unwrap();
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
    go.send(()).unwrap();
    let total = block_on(total).unwrap();
    let steps = steps.lock().unwrap().clone();
    for (step, thread) in &steps {
        println!("  {step} on {thread}");
    }
    println!("  result {total}: each step ran where its via said; the Inline step ran on the thread that finished the one before");
    assert_eq!(total, 31, "(3 words * 10) + 1");
    let order: Vec<&str> = steps.iter().map(|(s, _)| *s).collect();
    assert_eq!(order, ["parse", "index", "store", "report"], "step order");
    assert_all_on(
        steps[..2].iter().map(|(_, t)| t),
        "cpu",
        "steps before via(&io)",
    );
    assert_eq!(steps[2].1, "io-0", "the step after via(&io)");
    assert_eq!(
        steps[3].1, steps[2].1,
        "the Inline step should run on the thread that finished the step before"
    );

    let skipped = Arc::new(AtomicBool::new(true));
    let s = skipped.clone();
    let failed = block_on(
        cpu.run(|| -> u32 { panic!("bad input") })
            .then(move |v| {
                s.store(false, Ordering::SeqCst);
                v + 1
            })
            .then_try(|r| r.map_err(|e| e.to_string())),
    )
    .unwrap();
    let skipped = skipped.load(Ordering::SeqCst);
    println!(
        "  a panic skips the then steps (skipped: {skipped}) and reaches then_try: {failed:?}"
    );
    assert!(skipped, "a then step ran after a panic");
    assert_eq!(
        failed,
        Err("task panicked: bad input".to_owned()),
        "then_try should see the panic"
    );
    let (via, via_on) = block_on(async { (40 + 2, here()) }.via(&io)).unwrap();
    println!("  any future .via(&io): {via} on {via_on}");
    assert_eq!(
        (via, via_on.as_str()),
        (42, "io-0"),
        "async block .via(&io)"
    );
    rows.push(Row {
        capability: "continuations",
        ran_on: names(steps.iter().map(|(_, t)| t).chain([&via_on])),
        outcome: format!("chain = {total}, any future .via(&io) = {via}"),
    });

    section("hop_to: a task moves between executors");
    let strand = Strand::new(cpu.clone());
    let (io2, st) = (io.clone(), strand.clone());
    let trail = block_on(cpu.spawn(async move {
        let mut trail = vec![(here(), st.running_in_this_thread())];
        hop_to(&io2).await;
        trail.push((here(), st.running_in_this_thread()));
        hop_to(&st).await;
        trail.push((here(), st.running_in_this_thread()));
        hop_to(&io2).await;
        trail.push((here(), st.running_in_this_thread()));
        trail
    }))
    .unwrap();
    let path: Vec<&str> = trail.iter().map(|(t, _)| t.as_str()).collect();
    let in_strand: Vec<bool> = trail.iter().map(|&(_, s)| s).collect();
    println!(
        "  one task, hopping cpu -> io -> strand(cpu) -> io: {} (inside the strand: {in_strand:?})",
        path.join(" -> ")
    );
    assert_eq!(trail.len(), 4, "four stops");
    assert_all_on(
        [path[0], path[2]],
        "cpu",
        "hop_to stops on cpu and the strand",
    );
    assert_eq!(
        [path[1], path[3]],
        ["io-0", "io-0"],
        "hop_to(&io) stops: {path:?}"
    );
    assert_eq!(
        in_strand,
        [false, false, true, false],
        "only the stop after hop_to(&strand) is inside the strand"
    );
    rows.push(Row {
        capability: "hop_to",
        ran_on: path.join(" -> "),
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
    let threads = Arc::new(Mutex::new(BTreeSet::new()));
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
    let (dispatched_inline, last_on) = block_on(strand.run(move || {
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        st.dispatch(move || r.store(true, Ordering::SeqCst));
        (ran.load(Ordering::SeqCst), here())
    }))
    .unwrap();
    let order = order.lock().unwrap().clone();
    let in_order = order.iter().copied().eq(0..1_000);
    let overlaps = overlaps.load(Ordering::SeqCst);
    let mut threads = threads.lock().unwrap().clone();
    threads.insert(last_on);
    let outside = strand.running_in_this_thread();
    println!(
        "  {} of 1000 sections ran: in order {in_order}, overlaps {overlaps}, on {} (the strand owns no thread)",
        order.len(),
        names(&threads)
    );
    println!(
        "  dispatch from inside the strand ran inline: {dispatched_inline}; running_in_this_thread outside: {outside}"
    );
    assert_eq!(order.len(), 1_000, "every posted section runs once");
    assert!(in_order, "strand sections ran out of submission order");
    assert_eq!(overlaps, 0, "strand sections overlapped");
    assert_all_on(&threads, "cpu", "strand sections");
    assert!(
        dispatched_inline,
        "dispatch inside the strand should run inline"
    );
    assert!(!outside, "main is not inside the strand");
    rows.push(Row {
        capability: "strand",
        ran_on: names(&threads),
        outcome: format!("{} in order, {overlaps} overlaps", order.len()),
    });

    section("Guarded: a strand as an async mutex");
    #[derive(Default)]
    struct Tally {
        count: u64,
        lock_on: BTreeSet<String>,
        with_on: BTreeSet<String>,
    }
    let counter = Guarded::new(cpu.clone(), Tally::default());
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let counter = counter.clone();
            cpu.spawn(async move {
                for _ in 0..1_000 {
                    let mut guard = counter.lock().await;
                    guard.count += 1;
                    guard.lock_on.insert(here());
                }
                counter
                    .with(|t| {
                        t.count += 1000;
                        t.with_on.insert(here());
                    })
                    .await
                    .unwrap();
            })
        })
        .collect();
    for t in tasks {
        block_on(t).unwrap();
    }
    let (total, lock_on, with_on) = block_on(counter.with(|t| {
        (
            t.count,
            std::mem::take(&mut t.lock_on),
            std::mem::take(&mut t.with_on),
        )
    }))
    .unwrap();
    println!("  8 tasks x (1000 lock().await increments + one with(+1000)) = {total}");
    println!(
        "  lock().await sections ran on {}; with() sections ran on {}",
        names(&lock_on),
        names(&with_on)
    );
    assert_eq!(total, 16_000, "Guarded counter: 8 x (1000 + 1000)");
    assert_all_on(&lock_on, "cpu", "lock().await sections");
    assert_all_on(&with_on, "cpu", "with() sections");
    rows.push(Row {
        capability: "Guarded",
        ran_on: names(lock_on.iter().chain(&with_on)),
        outcome: format!("counter = {total} (expected 16000)"),
    });

    section("serial tags: same key serial, different keys parallel");
    let keyed = KeyedStrands::new(cpu.clone());
    // The first task of each key waits (up to 5 s) for the other key's
    // first task to start: meeting proves the two keys ran at once.
    let started = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    let start = Instant::now();
    let handles: Vec<_> = ["A", "B", "A", "B", "A", "B"]
        .into_iter()
        .enumerate()
        .map(|(i, key)| {
            let started = started.clone();
            keyed.spawn(key, async move {
                let t0 = start.elapsed();
                let met = (i < 2).then(|| {
                    started[i].store(true, Ordering::SeqCst);
                    let deadline = Instant::now() + Duration::from_secs(5);
                    while !started[1 - i].load(Ordering::SeqCst) && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    started[1 - i].load(Ordering::SeqCst)
                });
                std::thread::sleep(Duration::from_millis(20));
                (key, i, t0, start.elapsed(), here(), met)
            })
        })
        .collect();
    let mut runs: Vec<_> = handles.into_iter().map(|h| block_on(h).unwrap()).collect();
    let total_ms = start.elapsed().as_millis();
    runs.sort_by_key(|r| r.3);
    for (key, i, t0, t1, on, _) in &runs {
        println!(
            "  {key}{i} {:>3}-{:>3} ms on {on}",
            t0.as_millis(),
            t1.as_millis()
        );
    }
    let met = runs.iter().filter(|r| r.5 == Some(true)).count();
    let left = keyed.len();
    let mut serial = true;
    let mut per_key = Vec::new();
    for key in ["A", "B"] {
        let mut mine: Vec<_> = runs.iter().filter(|r| r.0 == key).collect();
        mine.sort_by_key(|r| r.2);
        serial &= mine.windows(2).all(|w| w[0].3 <= w[1].2);
        per_key.push(mine.iter().map(|r| r.1).collect::<Vec<_>>());
    }
    println!(
        "  A's and B's first tasks met while both running: {}; each key's tasks one after another: {serial}, in order {per_key:?}; idle keys freed: {left} left",
        met == 2
    );
    assert_eq!(runs.len(), 6, "6 keyed tasks");
    assert_eq!(
        met, 2,
        "keys A and B never ran at the same time (met {met} of 2)"
    );
    assert!(serial, "a key's tasks overlapped");
    assert_eq!(
        per_key,
        [vec![0, 2, 4], vec![1, 3, 5]],
        "each key's tasks in submission order"
    );
    assert_eq!(left, 0, "idle keys should be freed");
    let keyed_on: Vec<&String> = runs.iter().map(|r| &r.4).collect();
    assert_all_on(&keyed_on, "cpu", "keyed tasks");
    rows.push(Row {
        capability: "serial tags",
        ran_on: names(&keyed_on),
        outcome: format!("6 tasks on 2 keys in {total_ms} ms"),
    });
}

fn structured(cpu: &ThreadPool, rows: &mut Vec<Row>) {
    section("structured work: a borrowing scope, a JoinSet, a cancellation token");
    // A scope: tasks borrow the caller's data, and all have ended when it
    // returns.
    let mut scores = vec![3u32, 1, 4, 1, 5, 9, 2, 6];
    let (left, right) = scores.split_at_mut(4);
    let scoped_on = Mutex::new(Vec::new());
    cpu.scope(|s| {
        for half in [left, right] {
            let scoped_on = &scoped_on;
            s.run(move || {
                half.sort_unstable();
                scoped_on.lock().unwrap().push(here());
            });
        }
    });
    let scoped_on = scoped_on.into_inner().unwrap();
    assert_eq!(
        scores,
        [1, 1, 3, 4, 2, 5, 6, 9],
        "each half sorted in place"
    );
    assert_all_on(&scoped_on, "cpu", "scoped tasks");
    println!(
        "  scope: sorted both halves of a borrowed Vec in place on {}",
        names(&scoped_on)
    );

    // A JoinSet: results in the order the tasks end.
    let mut set = JoinSet::new();
    for ms in [90u64, 10, 50] {
        set.spawn_on(
            async move {
                time::sleep(Duration::from_millis(ms)).await;
                ms
            },
            cpu,
        );
    }
    let order: Vec<u64> = std::iter::from_fn(|| block_on(set.join_next()))
        .map(Result::unwrap)
        .collect();
    assert_eq!(order, [10, 50, 90], "JoinSet yields in completion order");
    println!("  JoinSet: sleeps of 90, 10, 50 ms came back as {order:?}");

    // A token: one cancel stops a parked task and its child token's waiter.
    let token = CancellationToken::new();
    let child = token.child_token();
    let parked = cpu.spawn_cancellable(&token, std::future::pending::<()>());
    let waiter = cpu.spawn(async move {
        child.cancelled().await;
        here()
    });
    token.cancel();
    assert!(block_on(parked).unwrap_err().is_cancelled());
    let woken_on = block_on(waiter).unwrap();
    println!("  token: cancel() dropped a parked task and woke a child's waiter on {woken_on}");
    rows.push(Row {
        capability: "structured work",
        ran_on: names(scoped_on.iter().chain([&woken_on])),
        outcome: "scope joined 2 borrowers, JoinSet in end order, token cancelled 2".into(),
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
            prio.spawn_with(p, async move { order.lock().unwrap().push((name, here())) })
        })
        .collect();
    release.send(()).unwrap();
    block_on(blocker).unwrap();
    for h in handles {
        block_on(h).unwrap();
    }
    let ran = order.lock().unwrap().clone();
    let order: Vec<&str> = ran.iter().map(|(n, _)| *n).collect();
    let threads = names(ran.iter().map(|(_, t)| t));
    println!(
        "  queued low(1), high(10), mid(5), high(10); ran: {} on {threads}",
        order.join(", ")
    );
    assert_eq!(
        order,
        ["high", "high#2", "mid", "low"],
        "highest first, oldest first among equals"
    );
    assert_eq!(threads, "prio-0", "priority tasks ran off the inner pool");
    rows.push(Row {
        capability: "priorities",
        ran_on: threads,
        outcome: order.join(", "),
    });
    one.shutdown().unwrap();
}

fn timers(cpu: &ThreadPool, rows: &mut Vec<Row>) {
    section("timers: sleep, timeout, delayed and periodic jobs");
    let start = Instant::now();
    let (slept, slept_on) = block_on(cpu.spawn(async move {
        time::sleep(Duration::from_millis(30)).await;
        (start.elapsed(), here())
    }))
    .unwrap();
    println!("  sleep(30 ms) resumed after {slept:?} on {slept_on}");
    assert!(
        slept >= Duration::from_millis(30),
        "sleep(30 ms) woke early: {slept:?}"
    );
    assert_all_on([&slept_on], "cpu", "task after sleep");

    let start = Instant::now();
    let timed_out: Result<(), Elapsed> = block_on(time::timeout(
        Duration::from_millis(10),
        futures::future::pending(),
    ));
    let waited = start.elapsed();
    let timeout_on = here();
    println!("  timeout(10 ms, pending) = {timed_out:?} after {waited:?}, awaited on {timeout_on}");
    assert!(timed_out.is_err(), "a pending future cannot finish");
    assert!(
        waited >= Duration::from_millis(10),
        "timeout fired early: {waited:?}"
    );

    let order = Arc::new(Mutex::new(Vec::new()));
    let (a, b) = (order.clone(), order.clone());
    let start = Instant::now();
    let ha = cpu.execute_after(Duration::from_millis(60), move || {
        a.lock().unwrap().push(("A", start.elapsed(), here()))
    });
    let hb = cpu.execute_after(Duration::from_millis(20), move || {
        b.lock().unwrap().push(("B", start.elapsed(), here()))
    });
    block_on(ha).unwrap();
    block_on(hb).unwrap();
    let ran = order.lock().unwrap().clone();
    let lines: Vec<String> = ran
        .iter()
        .map(|(n, at, on)| format!("{n} at {} ms on {on}", at.as_millis()))
        .collect();
    println!(
        "  execute_after: A (60 ms) and B (20 ms) ran as {}",
        lines.join(", then ")
    );
    let ran_order: Vec<&str> = ran.iter().map(|r| r.0).collect();
    assert_eq!(
        ran_order,
        ["B", "A"],
        "B (20 ms) should run before A (60 ms)"
    );
    assert!(
        ran[0].1 >= Duration::from_millis(20),
        "B ran early: {:?}",
        ran[0].1
    );
    assert!(
        ran[1].1 >= Duration::from_millis(60),
        "A ran early: {:?}",
        ran[1].1
    );
    assert_all_on(ran.iter().map(|r| &r.2), "cpu", "execute_after jobs");

    let ticks = Arc::new(AtomicUsize::new(0));
    let tick_on = Arc::new(Mutex::new(BTreeSet::new()));
    let (t, on) = (ticks.clone(), tick_on.clone());
    let mut job = cpu.execute_every(Duration::from_millis(25), move || {
        on.lock().unwrap().insert(here());
        t.fetch_add(1, Ordering::SeqCst);
    });
    while ticks.load(Ordering::SeqCst) < 3 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let stopped = job.cancel();
    let why = block_on(&mut job);
    let runs = job.runs();
    let at_stop = ticks.load(Ordering::SeqCst);
    // Three more periods: no run may start after cancel.
    std::thread::sleep(Duration::from_millis(75));
    let later = ticks.load(Ordering::SeqCst);
    let tick_on = tick_on.lock().unwrap().clone();
    println!(
        "  periodic job execute_every(25 ms): cancelled ({stopped}, ended with {why}) after {runs} runs on {}; runs 75 ms later: {later}",
        names(&tick_on)
    );
    assert!(stopped, "cancel should stop a running periodic job");
    assert!(why.is_cancelled(), "periodic job ended with {why}");
    assert!(runs >= 3, "periodic job ran {runs} times, waited for 3");
    assert_eq!(runs as usize, at_stop, "runs() vs runs counted by the job");
    assert_eq!(later, at_stop, "a periodic job ran after cancel");
    assert_all_on(&tick_on, "cpu", "periodic runs");

    let all_on = [&slept_on, &timeout_on]
        .into_iter()
        .chain(ran.iter().map(|r| &r.2))
        .chain(&tick_on);
    rows.push(Row {
        capability: "timers",
        ran_on: names(all_on),
        outcome: format!("sleep {slept:?}; B before A; periodic ran {runs}x"),
    });
}

fn task_dump(rows: &mut Vec<Row>) {
    section("task dump: every task, where it was spawned, what it waits on");
    let pool = ThreadPool::builder()
        .name("inspect")
        .threads(1)
        .build()
        .unwrap();
    let config = Guarded::new(pool.clone(), 0u32);
    let (held, holding) = std::sync::mpsc::channel();
    let holder = pool.spawn({
        let config = config.clone();
        async move {
            let _guard = config.lock().await;
            held.send(here()).unwrap();
            time::sleep(Duration::from_secs(60)).await;
        }
    });
    let held_on = holding.recv().unwrap();
    let waiter = pool.spawn({
        let config = config.clone();
        async move { *config.lock().await += 1 }
    });
    let (holder_id, waiter_id) = (holder.id().unwrap(), waiter.id().unwrap());
    // The waiter is listed once its first poll has found the lock taken.
    let dump = loop {
        let dump = pool.dump();
        if dump
            .task(waiter_id)
            .is_some_and(|t| !t.waits_on().is_empty())
        {
            break dump;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    for line in dump.to_string().lines() {
        println!("  {line}");
    }
    let held_by = match dump.task(waiter_id).unwrap().waits_on() {
        [viaduct::dump::WaitsOn::Lock(lock)] => lock.holder(),
        other => panic!("the waiter should wait on the lock, not {other:?}"),
    };
    assert_eq!(held_by, Some(holder_id), "the dump names the lock's holder");
    assert!(dump.deadlocks().is_empty(), "no cycle here:\n{dump}");
    holder.abort();
    block_on(waiter).unwrap();
    assert_eq!(block_on(config.with(|n| *n)).unwrap(), 1);
    pool.shutdown().unwrap();
    rows.push(Row {
        capability: "task dump",
        ran_on: held_on,
        outcome: format!("task {waiter_id} waits on the lock task {holder_id} holds"),
    });
}

fn simulation(rows: &mut Vec<Row>) {
    section("simulation: a race found by seed, replayed exactly");
    // Two withdrawals of 80 from 100. The racy one checks the balance in
    // one section and writes it in another; the fixed one does both in one.
    fn bank(sim: &Simulation, racy: bool) -> impl std::future::Future<Output = i64> + Send {
        let ex = sim.executor();
        async move {
            let account = Guarded::new(ex.clone(), 100i64);
            let withdraw = |account: Guarded<i64>| async move {
                if racy {
                    let balance = account.with(|b| *b).await.unwrap();
                    if balance >= 80 {
                        account.with(move |b| *b = balance - 80).await.unwrap();
                        return 80;
                    }
                    return 0;
                }
                let ok = account
                    .with(|b| (*b >= 80).then(|| *b -= 80).is_some())
                    .await
                    .unwrap();
                if ok {
                    80
                } else {
                    0
                }
            };
            let a = ex.spawn(withdraw(account.clone()));
            let b = ex.spawn(withdraw(account.clone()));
            let paid = a.await.unwrap() + b.await.unwrap();
            paid + account.with(|b| *b).await.unwrap() // 100 if no money was made
        }
    }
    let run = |seed, racy| {
        let sim = Simulation::new(seed);
        let total = sim.block_on(bank(&sim, racy)).unwrap();
        (total, sim.trace_hash())
    };
    let seed = (0..).find(|&seed| run(seed, true).0 != 100).unwrap();
    let (total, trace) = run(seed, true);
    println!("  racy bank, seed {seed}: paid plus left is {total}, not 100 (trace {trace:#x})");
    assert_eq!(run(seed, true), (total, trace), "the seed replays exactly");
    println!("  replayed seed {seed}: the same total and the same trace");
    viaduct::sim::check(0..1000, |sim| {
        let fixed = bank(sim, false);
        async move { assert_eq!(fixed.await, 100) }
    });
    println!("  fixed bank: 1000 seeds keep the money");
    rows.push(Row {
        capability: "simulation",
        ran_on: here(),
        outcome: format!("race found at seed {seed}, replayed; fix passes 1000 seeds"),
    });
}

fn main() {
    // Panics in tasks are part of the tour; keep their report to one line.
    // A panic on the main thread is a failed check: say where, and exit 101.
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<&str>()
            .copied()
            .or(payload.downcast_ref::<String>().map(|s| &**s))
            .unwrap_or("?");
        let thread = here();
        if thread == "main" {
            let at = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()))
                .unwrap_or_default();
            eprintln!("\ntour FAILED at {at}: {msg}");
        } else {
            println!("  (panic on {thread}: {msg})");
        }
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
    structured(&cpu, &mut rows);
    priorities(&mut rows);
    timers(&cpu, &mut rows);
    task_dump(&mut rows);
    simulation(&mut rows);
    cpu.shutdown().unwrap();

    section("summary");
    let width = rows
        .iter()
        .map(|r| r.ran_on.len())
        .chain(["ran on".len()])
        .max()
        .unwrap_or(0);
    println!("  {:<16} {:<width$} outcome", "capability", "ran on");
    for r in &rows {
        println!("  {:<16} {:<width$} {}", r.capability, r.ran_on, r.outcome);
    }
    println!("  all {} capabilities checked", rows.len());
}
