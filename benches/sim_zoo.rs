//! How quickly the simulation's strategies find eight classic concurrency
//! bugs, side by side with the `shuttle` crate's schedulers.
//!
//! Each bug is written twice with the same logic: once on viaduct
//! (`Guarded`, `JoinHandle`, the virtual clock), run by a
//! [`Simulation`], and once on shuttle's threads, locks, atomics and
//! channels. Every bug is real (some schedule fails it) and none fails
//! in spawn order: before measuring, each version is run once in spawn
//! order (viaduct: a `ManualExecutor` and a manual clock; shuttle: the
//! first, oldest-task-first, schedule of its DFS scheduler), which must
//! pass.
//!
//! A cell is the number of seeds a strategy runs until the first one
//! fails (an assertion, or a deadlock), its median over 20 base seeds.
//! viaduct: run `i` of base `b` uses seed `splitmix(b * 1_000_003 + i)`,
//! a fresh `Simulation` each; shuttle: one `Runner` per base, seeded with
//! `b`, counting its iterations. A base that finds nothing within 1,000
//! runs counts as never, and a cell where some base did so ends with
//! `(k/20)`, the bases that found the bug. The columns: viaduct's
//! `Strategy::Random`, `Strategy::Pct { depth: 3 }` and its default as
//! a user meets it, `viaduct::sim::check` over the same seeds (PCT at
//! depth 3 over the length it learned from the runs before, as shuttle's
//! PCT learns it over its iterations); shuttle's `RandomScheduler` and
//! `PctScheduler` (depth 3).
//!
//! - lost-update: two tasks each read a counter in one section and
//!   write it plus one in the next.
//! - lock-order: two transfers lock two accounts in opposite orders
//!   (deadlock).
//! - missed-wakeup: a waiter checks a flag, then registers for a wake-up
//!   outside the lock that orders it with the notifier (deadlock).
//! - check-then-act: two tasks open a connection if the cache has none,
//!   the check and the insert in separate sections.
//! - init-order: task C reads a config that task A sets, assuming A is
//!   done because C first waits for B, spawned between them.
//! - late-reply: a request times out and its slot is reused; the late
//!   reply, routed by slot index, is taken for the next request's.
//! - aba: an index-based Treiber stack whose pop compares the head index
//!   alone, and succeeds after the node was popped and pushed back.
//! - lock-cycle: four tasks take four locks in a cycle; three of them
//!   must be preempted between their two locks (the fourth then blocks
//!   by itself), a deadlock that needs three preemptions.
//!
//! `cargo bench --bench sim_zoo`. `ZOO_BASES` sets the base seeds (20),
//! `ZOO_MAX` the runs per base (1,000), `ZOO_BUG` keeps the bugs whose
//! names contain it. Runs that hit the step limit (100,000 steps) count
//! as not failing (shuttle gives up the base at the first); how many did
//! is printed under the table, with each column's wall time.
//!
//! shuttle reports each failure with `eprintln!` besides the panic
//! hook, so its columns are measured in a child process of this bench
//! with stderr closed, which prints its results for this one to read.

use std::collections::{HashMap, VecDeque};
use std::panic::{self, AssertUnwindSafe};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use futures::future::BoxFuture;
use shuttle::scheduler::{DfsScheduler, PctScheduler, RandomScheduler};
use shuttle::{FailurePersistence, MaxSteps};
use viaduct::prelude::*;
use viaduct::sim::{SimError, Simulation, Strategy};
use viaduct::time::Timer;
use viaduct::{Exec, Guarded, ManualExecutor};

/// Steps a run may take, in either tool: every bug here finishes in a
/// few hundred, so a run that reaches it is stuck in a loop.
const MAX_STEPS: usize = 100_000;

/// Set in the child process that measures shuttle's columns.
const CHILD: &str = "ZOO_SHUTTLE_CHILD";

struct Bug {
    name: &'static str,
    viaduct: fn(Exec, Timer) -> BoxFuture<'static, ()>,
    shuttle: fn(),
}

fn bugs() -> [Bug; 8] {
    let bug = |name, viaduct, shuttle| Bug {
        name,
        viaduct,
        shuttle,
    };
    [
        bug(
            "lost-update",
            |ex, _| Box::pin(lost_update(ex)),
            lost_update_shuttle,
        ),
        bug(
            "lock-order",
            |ex, _| Box::pin(lock_order(ex)),
            lock_order_shuttle,
        ),
        bug(
            "missed-wakeup",
            |ex, _| Box::pin(missed_wakeup(ex)),
            missed_wakeup_shuttle,
        ),
        bug(
            "check-then-act",
            |ex, _| Box::pin(check_then_act(ex)),
            check_then_act_shuttle,
        ),
        bug(
            "init-order",
            |ex, _| Box::pin(init_order(ex)),
            init_order_shuttle,
        ),
        bug(
            "late-reply",
            |ex, timer| Box::pin(late_reply(ex, timer)),
            late_reply_shuttle,
        ),
        bug("aba", |ex, _| Box::pin(aba(ex)), aba_shuttle),
        bug(
            "lock-cycle",
            |ex, _| Box::pin(lock_cycle(ex)),
            lock_cycle_shuttle,
        ),
    ]
}

// ---- 1. lost update ----

async fn lost_update(ex: Exec) {
    let hits = Guarded::new(ex.clone(), 0u32);
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let hits = hits.clone();
            ex.spawn(async move {
                let seen = hits.with(|n| *n).await.unwrap();
                // `seen` may be stale by now: the other task's write is lost.
                hits.with(move |n| *n = seen + 1).await.unwrap();
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(hits.with(|n| *n).await.unwrap(), 2, "an update was lost");
}

fn lost_update_shuttle() {
    let hits = Arc::new(shuttle::sync::Mutex::new(0u32));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let hits = hits.clone();
            shuttle::thread::spawn(move || {
                let seen = *hits.lock().unwrap();
                *hits.lock().unwrap() = seen + 1;
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*hits.lock().unwrap(), 2, "an update was lost");
}

// ---- 2. lock-order inversion ----

async fn lock_order(ex: Exec) {
    async fn transfer(from: Guarded<i64>, to: Guarded<i64>) {
        let mut from = from.lock().await;
        let mut to = to.lock().await;
        *from -= 10;
        *to += 10;
    }
    let (a, b) = (Guarded::new(ex.clone(), 100), Guarded::new(ex.clone(), 100));
    let one = ex.spawn(transfer(a.clone(), b.clone()));
    let two = ex.spawn(transfer(b, a));
    one.await.unwrap();
    two.await.unwrap();
}

fn lock_order_shuttle() {
    type Account = Arc<shuttle::sync::Mutex<i64>>;
    fn transfer(from: Account, to: Account) {
        let mut from = from.lock().unwrap();
        let mut to = to.lock().unwrap();
        *from -= 10;
        *to += 10;
    }
    let a = Arc::new(shuttle::sync::Mutex::new(100));
    let b = Arc::new(shuttle::sync::Mutex::new(100));
    let (a2, b2) = (a.clone(), b.clone());
    let one = shuttle::thread::spawn(move || transfer(a, b));
    let two = shuttle::thread::spawn(move || transfer(b2, a2));
    one.join().unwrap();
    two.join().unwrap();
}

// ---- 3. missed wake-up ----

async fn missed_wakeup(ex: Exec) {
    let ready = Arc::new(AtomicBool::new(false));
    let waiters = Guarded::new(ex.clone(), Vec::<oneshot::Sender<()>>::new());
    let (r, w) = (ready.clone(), waiters.clone());
    let waiter = ex.spawn(async move {
        if !r.load(SeqCst) {
            let (tx, rx) = oneshot::channel();
            // The flag was read outside this lock: the notifier may have
            // set it and found nobody to wake since.
            w.lock().await.push(tx);
            rx.await.unwrap();
        }
    });
    let notifier = ex.spawn(async move {
        ready.store(true, SeqCst);
        for tx in waiters.lock().await.drain(..) {
            let _ = tx.send(());
        }
    });
    waiter.await.unwrap();
    notifier.await.unwrap();
}

fn missed_wakeup_shuttle() {
    use shuttle::sync::mpsc;
    let ready = Arc::new(shuttle::sync::atomic::AtomicBool::new(false));
    let waiters = Arc::new(shuttle::sync::Mutex::new(Vec::<mpsc::Sender<()>>::new()));
    let (r, w) = (ready.clone(), waiters.clone());
    let waiter = shuttle::thread::spawn(move || {
        if !r.load(SeqCst) {
            let (tx, rx) = mpsc::channel();
            w.lock().unwrap().push(tx);
            rx.recv().unwrap();
        }
    });
    let notifier = shuttle::thread::spawn(move || {
        ready.store(true, SeqCst);
        for tx in waiters.lock().unwrap().drain(..) {
            let _ = tx.send(());
        }
    });
    waiter.join().unwrap();
    notifier.join().unwrap();
}

// ---- 4. check-then-act ----

async fn check_then_act(ex: Exec) {
    let cache = Guarded::new(ex.clone(), HashMap::<&str, u32>::new());
    // The test's own count, not part of the code under test.
    let opened = Arc::new(AtomicU32::new(0));
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let (cache, opened) = (cache.clone(), opened.clone());
            ex.spawn(async move {
                let cached = cache.with(|c| c.get("db").copied()).await.unwrap();
                if cached.is_none() {
                    let conn = opened.fetch_add(1, SeqCst);
                    cache.with(move |c| c.insert("db", conn)).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(opened.load(SeqCst), 1, "two connections were opened");
}

fn check_then_act_shuttle() {
    let cache = Arc::new(shuttle::sync::Mutex::new(HashMap::<&str, u32>::new()));
    // std's, not shuttle's: the test's count adds no scheduling point.
    let opened = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (cache, opened) = (cache.clone(), opened.clone());
            shuttle::thread::spawn(move || {
                let cached = cache.lock().unwrap().get("db").copied();
                if cached.is_none() {
                    let conn = opened.fetch_add(1, SeqCst);
                    cache.lock().unwrap().insert("db", conn);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(opened.load(SeqCst), 1, "two connections were opened");
}

// ---- 5. ordering violation over three tasks ----

async fn init_order(ex: Exec) {
    let defaults = Guarded::new(ex.clone(), 7u32);
    let config = Guarded::new(ex.clone(), None::<u32>);
    let work = Guarded::new(ex.clone(), 0u32);
    let c = config.clone();
    let a = ex.spawn(async move {
        let v = defaults.with(|d| *d).await.unwrap();
        c.with(move |c| *c = Some(v)).await.unwrap();
    });
    let b = ex.spawn(async move {
        for _ in 0..3 {
            work.with(|w| *w += 1).await.unwrap();
        }
    });
    let c = ex.spawn(async move {
        b.await.unwrap();
        let v = config.with(|c| *c).await.unwrap();
        assert!(v.is_some(), "C read the config before A set it");
    });
    a.await.unwrap();
    c.await.unwrap();
}

fn init_order_shuttle() {
    use shuttle::sync::Mutex;
    let defaults = Arc::new(Mutex::new(7u32));
    let config = Arc::new(Mutex::new(None::<u32>));
    let work = Arc::new(Mutex::new(0u32));
    let c = config.clone();
    let a = shuttle::thread::spawn(move || {
        let v = *defaults.lock().unwrap();
        *c.lock().unwrap() = Some(v);
    });
    let b = shuttle::thread::spawn(move || {
        for _ in 0..3 {
            *work.lock().unwrap() += 1;
        }
    });
    let c = shuttle::thread::spawn(move || {
        b.join().unwrap();
        let v = *config.lock().unwrap();
        assert!(v.is_some(), "C read the config before A set it");
    });
    a.join().unwrap();
    c.join().unwrap();
}

// ---- 6. a timeout racing a reply ----

/// The server's tick, and the client's patience: a reply can come just
/// as the client gives up.
const TICK: Duration = Duration::from_millis(100);

/// The one request slot. A reply goes to whoever waits on the slot now:
/// nothing tells one request's reply from another's.
struct Slot<W> {
    waiter: Option<W>,
    reply: Option<u32>,
}

impl<W> Slot<W> {
    fn free() -> Slot<W> {
        Slot {
            waiter: None,
            reply: None,
        }
    }
}

async fn late_reply(ex: Exec, timer: Timer) {
    let slot = Guarded::new(ex.clone(), Slot::<oneshot::Sender<()>>::free());
    let inbox = Guarded::new(ex.clone(), VecDeque::<u32>::new());
    let (s, i, t) = (slot.clone(), inbox.clone(), timer.clone());
    // Answers one request per tick, into the slot.
    let server = ex.spawn(async move {
        for _ in 0..2 {
            t.sleep(TICK).await;
            if let Some(req) = i.with(|q| q.pop_front()).await.unwrap() {
                // Whoever waits on the slot now takes this reply, even if
                // the request it answers timed out and the slot was reused.
                s.with(move |s| {
                    s.reply = Some(req * 10);
                    if let Some(w) = s.waiter.take() {
                        let _ = w.send(());
                    }
                })
                .await
                .unwrap();
            }
        }
    });
    let client = ex.spawn(async move {
        for req in 1..=2 {
            let (tx, rx) = oneshot::channel();
            slot.with(move |s| {
                *s = Slot {
                    waiter: Some(tx),
                    reply: None,
                }
            })
            .await
            .unwrap();
            inbox.with(move |q| q.push_back(req)).await.unwrap();
            if let Ok(Ok(())) = timer.timeout(TICK, rx).await {
                let reply = slot.with(|s| s.reply).await.unwrap();
                assert_eq!(
                    reply,
                    Some(req * 10),
                    "a late reply landed in the reused slot"
                );
                return;
            }
            slot.with(|s| *s = Slot::free()).await.unwrap();
        }
    });
    server.await.unwrap();
    client.await.unwrap();
}

fn late_reply_shuttle() {
    use shuttle::sync::{mpsc, Mutex};
    enum Event {
        Reply,
        Timeout,
    }
    let slot = Arc::new(Mutex::new(Slot::<mpsc::Sender<Event>>::free()));
    let inbox = Arc::new(Mutex::new(VecDeque::<u32>::new()));
    let (tick, ticks) = mpsc::channel::<()>();
    let (arm, deadlines) = mpsc::channel::<mpsc::Sender<Event>>();
    let (s, i) = (slot.clone(), inbox.clone());
    let server = shuttle::thread::spawn(move || {
        for () in ticks {
            if let Some(req) = i.lock().unwrap().pop_front() {
                let mut s = s.lock().unwrap();
                s.reply = Some(req * 10);
                if let Some(w) = s.waiter.take() {
                    let _ = w.send(Event::Reply);
                }
            }
        }
    });
    // Shuttle has no clock: this thread stands for it. Once a request is
    // sent, the server's tick and the client's deadline fall due
    // together, and the schedule decides which is acted on first.
    let clock = shuttle::thread::spawn(move || {
        for deadline in deadlines {
            tick.send(()).unwrap();
            let _ = deadline.send(Event::Timeout);
        }
    });
    let client = shuttle::thread::spawn(move || {
        for req in 1..=2 {
            let (tx, rx) = mpsc::channel();
            *slot.lock().unwrap() = Slot {
                waiter: Some(tx.clone()),
                reply: None,
            };
            inbox.lock().unwrap().push_back(req);
            arm.send(tx).unwrap();
            if let Event::Reply = rx.recv().unwrap() {
                let reply = slot.lock().unwrap().reply;
                assert_eq!(
                    reply,
                    Some(req * 10),
                    "a late reply landed in the reused slot"
                );
                return;
            }
            *slot.lock().unwrap() = Slot::free();
        }
    });
    client.join().unwrap();
    clock.join().unwrap();
    server.join().unwrap();
}

// ---- 7. ABA on a recycled node ----

const NIL: usize = usize::MAX;
const NODES: usize = 4;

/// The test's record of which nodes someone holds, to catch a node
/// handed out twice.
fn hand_out(held: &[AtomicBool], node: usize) {
    assert!(
        !held[node].swap(true, SeqCst),
        "node {node} was popped twice"
    );
}

/// A Treiber stack over node indices, the links in a `Guarded`; its
/// compare-and-swap checks the head's index alone.
struct Stack {
    head: AtomicUsize,
    next: Guarded<Vec<usize>>,
    held: Vec<AtomicBool>,
}

impl Stack {
    async fn pop(&self) -> Option<usize> {
        loop {
            let top = self.head.load(SeqCst);
            if top == NIL {
                return None;
            }
            // By the CAS below, `top` may have been popped and pushed
            // back with another successor: the index alone still matches.
            let next = self.next.with(move |n| n[top]).await.unwrap();
            if self
                .head
                .compare_exchange(top, next, SeqCst, SeqCst)
                .is_ok()
            {
                hand_out(&self.held, top);
                return Some(top);
            }
        }
    }

    async fn push(&self, node: usize) {
        self.held[node].store(false, SeqCst);
        loop {
            let top = self.head.load(SeqCst);
            self.next.with(move |n| n[node] = top).await.unwrap();
            if self
                .head
                .compare_exchange(top, node, SeqCst, SeqCst)
                .is_ok()
            {
                return;
            }
        }
    }
}

/// Two pops by one task, and two pops and a push of the first by the
/// other: in spawn order the stack 0, 1, 2, 3 serves every pop.
async fn aba(ex: Exec) {
    let links = (1..NODES).chain([NIL]).collect();
    let stack = Arc::new(Stack {
        head: AtomicUsize::new(0),
        next: Guarded::new(ex.clone(), links),
        held: (0..NODES).map(|_| AtomicBool::new(false)).collect(),
    });
    let s = stack.clone();
    let one = ex.spawn(async move {
        s.pop().await;
        s.pop().await;
    });
    let two = ex.spawn(async move {
        let first = stack.pop().await;
        stack.pop().await;
        if let Some(node) = first {
            stack.push(node).await;
        }
    });
    one.await.unwrap();
    two.await.unwrap();
}

/// [`Stack`] on shuttle's atomic and lock.
struct ShuttleStack {
    head: shuttle::sync::atomic::AtomicUsize,
    next: shuttle::sync::Mutex<Vec<usize>>,
    /// std's, not shuttle's: the test's record adds no scheduling point.
    held: Vec<AtomicBool>,
}

impl ShuttleStack {
    fn pop(&self) -> Option<usize> {
        loop {
            let top = self.head.load(SeqCst);
            if top == NIL {
                return None;
            }
            let next = self.next.lock().unwrap()[top];
            if self
                .head
                .compare_exchange(top, next, SeqCst, SeqCst)
                .is_ok()
            {
                hand_out(&self.held, top);
                return Some(top);
            }
        }
    }

    fn push(&self, node: usize) {
        self.held[node].store(false, SeqCst);
        loop {
            let top = self.head.load(SeqCst);
            self.next.lock().unwrap()[node] = top;
            if self
                .head
                .compare_exchange(top, node, SeqCst, SeqCst)
                .is_ok()
            {
                return;
            }
        }
    }
}

fn aba_shuttle() {
    let stack = Arc::new(ShuttleStack {
        head: shuttle::sync::atomic::AtomicUsize::new(0),
        next: shuttle::sync::Mutex::new((1..NODES).chain([NIL]).collect()),
        held: (0..NODES).map(|_| AtomicBool::new(false)).collect(),
    });
    let s = stack.clone();
    let one = shuttle::thread::spawn(move || {
        s.pop();
        s.pop();
    });
    let two = shuttle::thread::spawn(move || {
        let first = stack.pop();
        stack.pop();
        if let Some(node) = first {
            stack.push(node);
        }
    });
    one.join().unwrap();
    two.join().unwrap();
}

// ---- 8. a four-lock cycle ----

/// Tasks (and locks) in the cycle: each of the first three must be
/// preempted between its two locks; the last then blocks by itself.
const CYCLE: usize = 4;

async fn lock_cycle(ex: Exec) {
    let locks: Vec<_> = (0..CYCLE).map(|_| Guarded::new(ex.clone(), 0u32)).collect();
    let tasks: Vec<_> = (0..CYCLE)
        .map(|i| {
            let (first, second) = (locks[i].clone(), locks[(i + 1) % CYCLE].clone());
            ex.spawn(async move {
                let mut first = first.lock().await;
                let mut second = second.lock().await;
                *first += 1;
                *second += 1;
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

fn lock_cycle_shuttle() {
    let locks: Vec<_> = (0..CYCLE)
        .map(|_| Arc::new(shuttle::sync::Mutex::new(0u32)))
        .collect();
    let threads: Vec<_> = (0..CYCLE)
        .map(|i| {
            let (first, second) = (locks[i].clone(), locks[(i + 1) % CYCLE].clone());
            shuttle::thread::spawn(move || {
                let mut first = first.lock().unwrap();
                let mut second = second.lock().unwrap();
                *first += 1;
                *second += 1;
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

// ---- spawn order ----

/// Runs the viaduct version with no interleaving: tasks in the order
/// they are queued, each until it waits, the clock moved only when
/// nothing can run.
fn viaduct_in_spawn_order(bug: &Bug) -> Result<(), String> {
    let manual = ManualExecutor::new();
    let timer = Timer::manual();
    let main = manual.spawn((bug.viaduct)(Exec::new(manual.clone()), timer.clone()));
    loop {
        manual.run_until_idle();
        if main.is_finished() {
            return viaduct::block_on(main).map_err(|e| e.to_string());
        }
        if timer.pending() == 0 {
            return Err("deadlock".into());
        }
        timer.advance(Duration::from_millis(1));
    }
}

fn shuttle_config() -> shuttle::Config {
    let mut config = shuttle::Config::new();
    config.failure_persistence = FailurePersistence::None;
    config.max_steps = MaxSteps::FailAfter(MAX_STEPS);
    config
}

/// Runs the shuttle version once, oldest task first at every step (DFS's
/// first schedule).
fn shuttle_in_spawn_order(bug: &Bug) -> Result<(), String> {
    let runner = shuttle::Runner::new(DfsScheduler::new(Some(1), false), shuttle_config());
    let body = bug.shuttle;
    panic::catch_unwind(AssertUnwindSafe(|| runner.run(body)))
        .map(drop)
        .map_err(|p| panic_text(p.as_ref()).to_owned())
}

// ---- measuring ----

#[derive(Clone, Copy)]
enum Column {
    /// `None`: the simulation's default, no strategy named.
    Viaduct(Option<Strategy>),
    ShuttleRandom,
    ShuttlePct,
}

const COLUMNS: [(&str, Column); 5] = [
    ("viaduct random", Column::Viaduct(Some(Strategy::Random))),
    (
        "viaduct pct3",
        Column::Viaduct(Some(Strategy::Pct { depth: 3 })),
    ),
    ("viaduct default", Column::Viaduct(None)),
    ("shuttle random", Column::ShuttleRandom),
    ("shuttle pct3", Column::ShuttlePct),
];

/// One bug under one strategy, every base.
#[derive(Default)]
struct Cell {
    /// Per base: the runs until the first failure, `None` if none failed.
    found: Vec<Option<u32>>,
    /// Runs stopped at the step limit.
    limits: u32,
    wall: Duration,
}

struct Settings {
    bases: u64,
    max: u32,
    filter: String,
}

impl Settings {
    fn from_env() -> Settings {
        let num = |var: &str, default: u64| {
            std::env::var(var)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(default)
                .max(1)
        };
        Settings {
            bases: num("ZOO_BASES", 20),
            max: num("ZOO_MAX", 1000) as u32,
            filter: std::env::var("ZOO_BUG").unwrap_or_default(),
        }
    }
}

/// SplitMix64: spreads consecutive run numbers over the seed space.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Runs until the first that fails, and how many stopped at the limit.
fn viaduct_runs(bug: &Bug, strategy: Option<Strategy>, base: u64, max: u32) -> (Option<u32>, u32) {
    let seed_of = |i: u32| splitmix(base.wrapping_mul(1_000_003).wrapping_add(u64::from(i)));
    let Some(strategy) = strategy else {
        // The default, as a user meets it: `check`, which also learns how
        // long the program's runs are (and shrinks what fails).
        let failed = panic::catch_unwind(AssertUnwindSafe(|| {
            viaduct::sim::check((0..max).map(seed_of), |sim| {
                (bug.viaduct)(sim.executor(), sim.timer())
            })
        }));
        let found = failed.err().map(|p| {
            let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
            let seed: u64 = msg
                .strip_prefix("viaduct::sim::check: seed ")
                .and_then(|rest| rest.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{}: not a failing seed: {msg}", bug.name));
            (0..max)
                .position(|i| seed_of(i) == seed)
                .expect("one of the seeds") as u32
                + 1
        });
        return (found, 0);
    };
    let mut limits = 0;
    for i in 0..max {
        let seed = seed_of(i);
        let sim = Simulation::new(seed)
            .strategy(strategy)
            .max_steps(MAX_STEPS as u64);
        let program = (bug.viaduct)(sim.executor(), sim.timer());
        match sim.block_on(program) {
            Ok(()) => {}
            Err(SimError::StepLimit { .. }) => limits += 1,
            Err(SimError::Panicked(_) | SimError::Deadlock(_)) => return (Some(i + 1), limits),
            Err(e) => panic!("{}: {e}", bug.name),
        }
    }
    (None, limits)
}

/// The iterations shuttle runs until the first that fails, and 1 if the
/// run stopped at the step limit instead (the base then found nothing).
fn shuttle_runs(bug: &Bug, pct: bool, base: u64, max: u32) -> (Option<u32>, u32) {
    let runs = Arc::new(AtomicU32::new(0));
    let (counted, body) = (runs.clone(), bug.shuttle);
    let test = move || {
        counted.fetch_add(1, SeqCst);
        body();
    };
    let max = max as usize;
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        if pct {
            let scheduler = PctScheduler::new_from_seed(base, 3, max);
            shuttle::Runner::new(scheduler, shuttle_config()).run(test);
        } else {
            let scheduler = RandomScheduler::new_from_seed(base, max);
            shuttle::Runner::new(scheduler, shuttle_config()).run(test);
        }
    }));
    match outcome {
        Ok(()) => (None, 0),
        Err(p) if panic_text(p.as_ref()).starts_with("exceeded max_steps") => (None, 1),
        Err(_) => (Some(runs.load(SeqCst)), 0),
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)")
}

fn measure(bug: &Bug, column: Column, settings: &Settings) -> Cell {
    let mut cell = Cell::default();
    let start = Instant::now();
    for base in 0..settings.bases {
        let (found, limits) = match column {
            Column::Viaduct(strategy) => viaduct_runs(bug, strategy, base, settings.max),
            Column::ShuttleRandom => shuttle_runs(bug, false, base, settings.max),
            Column::ShuttlePct => shuttle_runs(bug, true, base, settings.max),
        };
        cell.found.push(found);
        cell.limits += limits;
    }
    cell.wall = start.elapsed();
    cell
}

/// The child's half: shuttle's columns, one line per cell on stdout.
fn shuttle_child(settings: &Settings, bugs: &[&Bug]) {
    for bug in bugs {
        for (col, (_, column)) in COLUMNS.iter().enumerate() {
            if let Column::Viaduct(_) = column {
                continue;
            }
            let cell = measure(bug, *column, settings);
            let found: Vec<String> = cell
                .found
                .iter()
                .map(|f| f.map_or("-".into(), |n| n.to_string()))
                .collect();
            println!(
                "{} {col} {} {} {}",
                bug.name,
                cell.wall.as_nanos(),
                cell.limits,
                found.join(",")
            );
        }
    }
}

/// Runs this bench again with `CHILD` set and stderr closed, and reads
/// back its cells, keyed by bug name and column.
fn shuttle_cells() -> HashMap<(String, usize), Cell> {
    let exe = std::env::current_exe().expect("this bench's path");
    let out = Command::new(exe)
        .env(CHILD, "1")
        .stderr(Stdio::null())
        .output()
        .expect("the shuttle child starts");
    assert!(
        out.status.success(),
        "the shuttle child failed ({}); run it with {CHILD}=1 to see why",
        out.status
    );
    let mut cells = HashMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        let [name, col, wall, limits, found] = parts[..] else {
            panic!("the shuttle child printed {line:?}");
        };
        let cell = Cell {
            found: found.split(',').map(|f| f.parse().ok()).collect(),
            limits: limits.parse().unwrap(),
            wall: Duration::from_nanos(wall.parse().unwrap()),
        };
        cells.insert((name.to_owned(), col.parse().unwrap()), cell);
    }
    cells
}

/// The median, a base that found nothing counting as never; then how
/// many found it, if not all did.
fn summary(cell: &Cell, max: u32) -> String {
    let mut runs: Vec<u32> = cell.found.iter().map(|f| f.unwrap_or(u32::MAX)).collect();
    runs.sort_unstable();
    let median = match runs[runs.len() / 2] {
        u32::MAX => format!(">{max}"),
        n => n.to_string(),
    };
    let found = cell.found.iter().filter(|f| f.is_some()).count();
    if found == cell.found.len() {
        median
    } else {
        format!("{median} ({found}/{})", cell.found.len())
    }
}

fn main() {
    let settings = Settings::from_env();
    let all = bugs();
    let bugs: Vec<&Bug> = all
        .iter()
        .filter(|b| b.name.contains(&settings.filter))
        .collect();
    assert!(!bugs.is_empty(), "ZOO_BUG={} names no bug", settings.filter);

    if std::env::var_os(CHILD).is_some() {
        shuttle_child(&settings, &bugs);
        return;
    }

    for bug in &bugs {
        if let Err(e) = viaduct_in_spawn_order(bug) {
            panic!("{} (viaduct) fails in spawn order: {e}", bug.name);
        }
        if let Err(e) = shuttle_in_spawn_order(bug) {
            panic!("{} (shuttle) fails in spawn order: {e}", bug.name);
        }
    }
    println!(
        "every bug passes in spawn order, in both versions; measuring {} bases x up to {} runs",
        settings.bases, settings.max
    );

    let quiet = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let mut cells: HashMap<(String, usize), Cell> = HashMap::new();
    for bug in &bugs {
        for (col, (_, column)) in COLUMNS.iter().enumerate() {
            if let Column::Viaduct(_) = column {
                cells.insert((bug.name.to_owned(), col), measure(bug, *column, &settings));
            }
        }
    }
    panic::set_hook(quiet);
    cells.extend(shuttle_cells());

    println!();
    println!(
        "seeds to first failure: median over {} bases (runs per base at most {})",
        settings.bases, settings.max
    );
    let header: Vec<String> = COLUMNS.iter().map(|(n, _)| format!("{n:>17}")).collect();
    println!("{:<16}{}", "bug", header.join(""));
    for bug in &bugs {
        let row: Vec<String> = (0..COLUMNS.len())
            .map(|col| {
                format!(
                    "{:>17}",
                    summary(&cells[&(bug.name.to_owned(), col)], settings.max)
                )
            })
            .collect();
        println!("{:<16}{}", bug.name, row.join(""));
    }
    let cells = &cells;
    let column_total = |col: usize| bugs.iter().map(move |b| &cells[&(b.name.to_owned(), col)]);
    let walls: Vec<String> = (0..COLUMNS.len())
        .map(|col| {
            let wall: Duration = column_total(col).map(|c| c.wall).sum();
            format!("{:>14.1} ms", wall.as_secs_f64() * 1e3)
        })
        .collect();
    println!("{:<16}{}", "wall time", walls.join(""));
    let limits: Vec<String> = (0..COLUMNS.len())
        .map(|col| format!("{:>17}", column_total(col).map(|c| c.limits).sum::<u32>()))
        .collect();
    println!("{:<16}{}", "step limits", limits.join(""));
}
