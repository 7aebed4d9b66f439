//! Exact accounting under close and shutdown races: eight threads offer
//! work every way the crate takes it (spawns and `try_spawn`s, strand posts
//! and tasks, `Guarded` sections and locks, keyed strands, priorities,
//! continuation chains across executors, timers) while another thread
//! closes or shuts the executors down.
//!
//! Every piece of work carries a [`Piece`] that counts whether its body ran
//! and when it is dropped. Each piece either ran exactly once, or its
//! handle (or the handle of the chain it belongs to) says `Cancelled`, or it
//! was refused: handed back by a `try_` method or reported `Rejected`.
//! Posted closures have no handle; a post the strand dropped unrun is
//! counted on its own line. At the end, to the unit:
//!
//! ```text
//! offered = ran + cancelled + rejected + posts dropped
//! dropped = offered, and dropped unrun = cancelled + rejected + posts dropped
//! ```
//!
//! Every test runs under [`within`], so a hang fails it instead of stalling.

// This file raises no panics on purpose, so the panic helpers go unused.
#[allow(dead_code)]
mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use support::{pool, within};
use viaduct::time::Scheduled;
use viaduct::{
    block_on, Exec, Executor, ExecutorExt, Guarded, JoinHandle, KeyedStrands, ManualExecutor,
    PriorityExecutor, Strand, TaskError, ThreadPerTask, ThreadPool, TimedExt, ViaExt,
};

const SUBMITTERS: usize = 8;
/// Offers each submitter makes after it has seen the close, so that every
/// run has refusals to count.
const AFTER_CLOSE: usize = 64;
/// Offers each submitter makes at full speed; after that, one a
/// millisecond until it sees the close. A submitter that stopped here
/// could finish before the closer came (within 200 ms, see `race`),
/// leaving a run with no refusals, as fast submitters did.
const FULL_SPEED_OFFERS: usize = 20_000;

/// The books.
#[derive(Default)]
struct Ledger {
    offered: AtomicU64,
    ran: AtomicU64,
    dropped: AtomicU64,
    dropped_unrun: AtomicU64,
    cancelled: AtomicU64,
    rejected: AtomicU64,
    posts: AtomicU64,
    posts_ran: AtomicU64,
}

impl Ledger {
    fn get(c: &AtomicU64) -> u64 {
        c.load(SeqCst)
    }
}

/// One piece of work's body, carried inside its future or closure.
struct Piece {
    ledger: Arc<Ledger>,
    /// Counts the pieces of one handle that ran.
    group: Arc<AtomicUsize>,
    ran: bool,
}

impl Piece {
    fn new(ledger: &Arc<Ledger>, group: &Arc<AtomicUsize>) -> Piece {
        ledger.offered.fetch_add(1, SeqCst);
        Piece {
            ledger: ledger.clone(),
            group: group.clone(),
            ran: false,
        }
    }

    /// The body: runs once, by construction (it consumes the piece).
    fn run(mut self) {
        self.ran = true;
        self.group.fetch_add(1, SeqCst);
        self.ledger.ran.fetch_add(1, SeqCst);
    }
}

impl Drop for Piece {
    fn drop(&mut self) {
        self.ledger.dropped.fetch_add(1, SeqCst);
        if !self.ran {
            self.ledger.dropped_unrun.fetch_add(1, SeqCst);
        }
    }
}

/// A handle to settle once every executor has stopped: `pieces` pieces
/// of work, of which `group` counts those that ran.
struct Owed {
    pieces: usize,
    group: Arc<AtomicUsize>,
    handle: Handle,
}

enum Handle {
    Join(JoinHandle<()>),
    Timed(Scheduled<()>),
}

/// The executors the submitters offer work to.
#[derive(Clone)]
struct Rig {
    main: Exec,
    other: Exec,
    strand: Strand,
    guarded: Guarded<u64>,
    keyed: KeyedStrands<u8>,
    pq: PriorityExecutor,
    /// Lock sections only where the strand cannot die under them (a dead
    /// strand's `lock` panics, as documented).
    locks: bool,
}

/// Offers one piece (or a chain of three) of kind `i % 12`.
fn offer(rig: &Rig, ledger: &Arc<Ledger>, i: usize, owed: &mut Vec<Owed>) {
    let group = Arc::new(AtomicUsize::new(0));
    let piece = || Piece::new(ledger, &group);
    let delay = Duration::from_micros((i % 7) as u64 * 300);
    let mut owe = |pieces, handle| {
        owed.push(Owed {
            pieces,
            group: group.clone(),
            handle,
        })
    };
    match i % 12 {
        0 => {
            let p = piece();
            match rig.main.try_spawn(async move { p.run() }) {
                Ok(h) => owe(1, Handle::Join(h)),
                Err(refused) => {
                    ledger.rejected.fetch_add(1, SeqCst);
                    drop(refused.into_inner());
                }
            }
        }
        1 => {
            let p = piece();
            owe(1, Handle::Join(rig.main.run(move || p.run())));
        }
        2 => {
            ledger.posts.fetch_add(1, SeqCst);
            let (p, l) = (piece(), ledger.clone());
            rig.strand.post(move || {
                p.run();
                l.posts_ran.fetch_add(1, SeqCst);
            });
        }
        3 => {
            let p = piece();
            match rig.strand.try_spawn(async move { p.run() }) {
                Ok(h) => owe(1, Handle::Join(h)),
                Err(refused) => {
                    ledger.rejected.fetch_add(1, SeqCst);
                    drop(refused.into_inner());
                }
            }
        }
        4 => {
            let p = piece();
            owe(
                1,
                Handle::Join(rig.guarded.with(move |n| {
                    *n += 1;
                    p.run()
                })),
            );
        }
        5 if rig.locks => {
            let (p, g) = (piece(), rig.guarded.clone());
            owe(
                1,
                Handle::Join(rig.main.spawn(async move {
                    *g.lock().await += 1;
                    p.run()
                })),
            );
        }
        5 | 6 => {
            let p = piece();
            owe(
                1,
                Handle::Join(rig.keyed.spawn((i % 5) as u8, async move { p.run() })),
            );
        }
        7 => {
            let p = piece();
            owe(
                1,
                Handle::Join(
                    rig.pq
                        .spawn_with((i % 5) as i32 - 2, async move { p.run() }),
                ),
            );
        }
        8 => {
            // A chain across executors: main, then other, then the strand.
            let (a, b, c) = (piece(), piece(), piece());
            let chain = rig
                .main
                .run(move || a.run())
                .via(&rig.other)
                .then(move |()| b.run())
                .via(&rig.strand)
                .then(move |()| c.run());
            owe(3, Handle::Join(chain));
        }
        9 => {
            let (a, b) = (piece(), piece());
            let chain = async move { a.run() }.via(&rig.other).then_try(move |r| {
                if r.is_ok() {
                    b.run()
                }
            });
            owe(2, Handle::Join(chain));
        }
        10 => {
            let p = piece();
            owe(
                1,
                Handle::Timed(rig.main.execute_after(delay, move || p.run())),
            );
        }
        _ => {
            let p = piece();
            let timed = if i % 2 == 0 {
                rig.strand.execute_after(delay, move || p.run())
            } else {
                rig.pq.fixed(1).execute_after(delay, move || p.run())
            };
            owe(1, Handle::Timed(timed));
        }
    }
}

/// Eight submitters race `stop` (run once `ran` reaches `warmup`, or after
/// 200 ms). Returns what they are owed.
fn race(
    rig: &Rig,
    ledger: &Arc<Ledger>,
    warmup: u64,
    stop: impl FnOnce() + Send + 'static,
) -> Vec<Owed> {
    let closed = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(SUBMITTERS + 1));
    let submitters: Vec<_> = (0..SUBMITTERS)
        .map(|t| {
            let (rig, ledger, closed, start) =
                (rig.clone(), ledger.clone(), closed.clone(), start.clone());
            thread::spawn(move || {
                let mut owed = Vec::new();
                let mut after = 0;
                start.wait();
                for i in 0.. {
                    offer(&rig, &ledger, i * SUBMITTERS + t, &mut owed);
                    if closed.load(SeqCst) {
                        after += 1;
                        if after == AFTER_CLOSE {
                            break;
                        }
                    } else if i >= FULL_SPEED_OFFERS {
                        thread::sleep(Duration::from_millis(1));
                    }
                }
                owed
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    while Ledger::get(&ledger.ran) < warmup && t0.elapsed() < Duration::from_millis(200) {
        thread::yield_now();
    }
    stop();
    closed.store(true, SeqCst);
    submitters
        .into_iter()
        .flat_map(|s| s.join().unwrap())
        .collect()
}

/// Settles every handle (after the executors stopped, so no body runs
/// any more) and checks the books. Returns (ran, cancelled, rejected,
/// posts dropped).
fn settle(ledger: &Ledger, owed: Vec<Owed>) -> [u64; 4] {
    for o in owed {
        let result = match o.handle {
            Handle::Join(h) => block_on(h),
            Handle::Timed(h) => block_on(h),
        };
        let ran = o.group.load(SeqCst);
        assert!(ran <= o.pieces);
        let unrun = (o.pieces - ran) as u64;
        match result {
            Ok(()) => assert_eq!(ran, o.pieces, "a handle says Ok, so all its pieces ran"),
            Err(TaskError::Cancelled) => {
                ledger.cancelled.fetch_add(unrun, SeqCst);
            }
            Err(TaskError::Rejected(_)) => {
                ledger.rejected.fetch_add(unrun, SeqCst);
            }
            Err(e) => panic!("no piece panics: {e}"),
        }
    }
    let posts_dropped = Ledger::get(&ledger.posts) - Ledger::get(&ledger.posts_ran);
    [
        Ledger::get(&ledger.ran),
        Ledger::get(&ledger.cancelled),
        Ledger::get(&ledger.rejected),
        posts_dropped,
    ]
}

/// The books balance to the unit, and every piece was dropped once.
fn balance(what: &str, ledger: &Ledger, [ran, cancelled, rejected, posts_dropped]: [u64; 4]) {
    let offered = Ledger::get(&ledger.offered);
    println!(
        "{what}: offered {offered} = ran {ran} + cancelled {cancelled} + rejected {rejected} + posts dropped {posts_dropped}"
    );
    assert_eq!(
        offered,
        ran + cancelled + rejected + posts_dropped,
        "{what}: the books"
    );
    assert_eq!(
        Ledger::get(&ledger.dropped),
        offered,
        "{what}: every piece dropped once"
    );
    assert_eq!(
        Ledger::get(&ledger.dropped_unrun),
        cancelled + rejected + posts_dropped,
        "{what}: what did not run is what was refused or cancelled"
    );
    assert!(ran > 0 && rejected > 0, "{what}: the race had both sides");
}

fn rig_over(main: Exec, other: Exec, locks: bool) -> Rig {
    Rig {
        strand: Strand::new(main.clone()),
        guarded: Guarded::new(other.clone(), 0),
        keyed: KeyedStrands::new(main.clone()),
        pq: PriorityExecutor::new(main.clone()),
        main,
        other,
        locks,
    }
}

/// `close` lets accepted work finish: nothing is cancelled, everything
/// accepted runs, what came after is refused.
#[test]
fn pools_closed_under_eight_submitters_run_or_refuse_everything() {
    within("close", || {
        let cpu = pool("acct-cpu", 2);
        // Bounded: `try_spawn` also meets `Full` here.
        let io = ThreadPool::builder()
            .threads(1)
            .name("acct-io")
            .max_pending(64)
            .build()
            .unwrap();
        let rig = rig_over(Exec::new(cpu.clone()), Exec::new(io.clone()), true);
        let ledger = Arc::new(Ledger::default());
        let (c, i) = (cpu.clone(), io.clone());
        let owed = race(&rig, &ledger, 5_000, move || {
            c.close();
            i.close();
        });
        cpu.join_workers().unwrap();
        io.join_workers().unwrap();
        let books = settle(&ledger, owed);
        drop(rig);
        balance("close", &ledger, books);
        assert_eq!(books[1], 0, "close cancels nothing");
        for p in [&cpu, &io] {
            let m = p.metrics();
            assert_eq!(m.spawned, m.completed, "every admitted task is over");
        }
    });
}

/// `shutdown_now` cancels what waits; the books still balance, and
/// every handle resolves.
#[test]
fn pools_shut_down_now_under_eight_submitters_account_for_everything() {
    within("shutdown_now", || {
        let cpu = pool("acct-cpu", 2);
        let io = pool("acct-io", 1);
        let rig = rig_over(Exec::new(cpu.clone()), Exec::new(io.clone()), false);
        let ledger = Arc::new(Ledger::default());
        let (c, i) = (cpu.clone(), io.clone());
        let owed = race(&rig, &ledger, 5_000, move || {
            // One pool stops while the other still feeds it chain steps.
            c.shutdown_now().unwrap();
            i.shutdown_now().unwrap();
        });
        let books = settle(&ledger, owed);
        drop(rig);
        balance("shutdown_now", &ledger, books);
        for p in [&cpu, &io] {
            let m = p.metrics();
            assert_eq!(m.spawned, m.completed, "every admitted task is over");
        }
    });
}

/// A manual executor driven by a donated thread, closed under load, and
/// then dropped with work still arriving (timers firing, chain steps
/// woken): what is left is cancelled, nothing hangs.
#[test]
fn a_manual_executor_closed_then_dropped_under_eight_submitters_accounts_for_everything() {
    within("manual", || {
        let manual = ManualExecutor::new();
        let io = pool("acct-io", 1);
        let driver = {
            let m = manual.clone();
            thread::spawn(move || m.run_until_closed())
        };
        let rig = rig_over(Exec::new(manual.clone()), Exec::new(io.clone()), false);
        let ledger = Arc::new(Ledger::default());
        let m = manual.clone();
        let owed = race(&rig, &ledger, 2_000, move || m.close());
        driver.join().unwrap();
        // The last handles go: the queue and every later wake-up are
        // cancelled.
        drop((rig, manual));
        io.shutdown().unwrap();
        let books = settle(&ledger, owed);
        balance("manual", &ledger, books);
    });
}

/// A thread-per-task executor closed under load: as for a pool's `close`,
/// everything accepted runs (wake-ups still get their threads) and nothing
/// is cancelled.
#[test]
fn a_thread_per_task_executor_closed_under_eight_submitters_runs_or_refuses_everything() {
    within("thread-per-task", || {
        let tpt = ThreadPerTask::new("acct-tpt");
        let io = pool("acct-io", 1);
        let rig = rig_over(Exec::new(tpt.clone()), Exec::new(io.clone()), true);
        let ledger = Arc::new(Ledger::default());
        let t = tpt.clone();
        // A thread per task: keep the warm-up small.
        let owed = race(&rig, &ledger, 300, move || t.close());
        io.close();
        // Timers and chain steps accepted before the close still run.
        let books = loop {
            let ended = owed.iter().all(|o| match &o.handle {
                Handle::Join(h) => h.is_finished(),
                Handle::Timed(h) => h.is_finished(),
            });
            if ended {
                tpt.join_threads().unwrap();
                io.join_workers().unwrap();
                break settle(&ledger, owed);
            }
            thread::sleep(Duration::from_millis(1));
        };
        drop(rig);
        balance("thread-per-task", &ledger, books);
        assert_eq!(books[1], 0, "close cancels nothing");
    });
}

/// The race the submitters above hit now and then, made deterministic: a
/// `with` section and a lock request accepted before the close wait behind
/// a guard held outside the pool. `close` lets accepted work finish, so
/// `join_workers` waits for them, and they run once the guard drops.
#[test]
fn sections_queued_behind_a_guard_held_elsewhere_run_after_their_pool_closes() {
    within("guard across close", || {
        let io = pool("acct-guard", 1);
        let guarded = Guarded::new(io.clone(), 0u32);
        let guard = block_on(guarded.lock());
        let section = guarded.with(|n| {
            *n += 1;
            *n
        });
        let waiter = guarded.lock();
        io.close();
        let (section, value) = thread::scope(|s| {
            s.spawn(move || {
                thread::sleep(Duration::from_millis(50));
                drop(guard);
            });
            io.join_workers().unwrap();
            (block_on(section), *block_on(waiter))
        });
        assert_eq!(
            section.unwrap(),
            1,
            "the section accepted before the close ran"
        );
        assert_eq!(
            value, 1,
            "the lock request accepted before the close was granted"
        );
    });
}
