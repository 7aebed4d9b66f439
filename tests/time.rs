//! Time: the timer service, its futures and timed tasks.
//!
//! Virtual-clock tests are exact; real-clock tests assert only bounds that
//! hold on a loaded machine (never early, done within a generous limit).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use futures::StreamExt;
use viaduct::time::{self, Elapsed, MissedTickBehavior, Pacing, Timer};
use viaduct::{
    block_on, ExecutorExt, Inline, ManualExecutor, RejectReason, TaskError, ThreadPool, TimedExt,
};

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Tests that count the global timer's pending timers take turns.
fn global_turn() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

fn noop_cx() -> Context<'static> {
    Context::from_waker(futures::task::noop_waker_ref())
}

fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    Pin::new(f).poll(&mut noop_cx())
}

/// A waker that logs its id and the timer's time when woken.
struct Logger {
    id: usize,
    timer: Timer,
    log: Arc<Mutex<Vec<(usize, Instant)>>>,
}

impl Wake for Logger {
    fn wake(self: Arc<Self>) {
        self.log.lock().unwrap().push((self.id, self.timer.now()));
    }
}

#[test]
fn ten_thousand_timers_fire_in_deadline_order_never_early() {
    let timer = Timer::manual();
    let t0 = timer.now();
    let mut rng = Rng(0x5eed);
    let log = Arc::new(Mutex::new(Vec::new()));
    // Deadlines up to 10 s, many colliding (1 in 50 is a repeat), some at 0.
    let mut deadlines = Vec::new();
    for i in 0..10_000 {
        let d = if i > 0 && rng.below(50) == 0 {
            deadlines[rng.below(i as u64) as usize]
        } else {
            Duration::from_nanos(rng.below(10_000_000_000))
        };
        deadlines.push(d);
    }
    let mut sleeps: Vec<_> = deadlines
        .iter()
        .map(|&d| Box::pin(timer.sleep(d)))
        .collect();
    for (id, s) in sleeps.iter_mut().enumerate() {
        let waker = Waker::from(Arc::new(Logger {
            id,
            timer: timer.clone(),
            log: log.clone(),
        }));
        if s.as_mut().poll(&mut Context::from_waker(&waker)).is_ready() {
            log.lock().unwrap().push((id, timer.now())); // deadline 0
        }
    }
    // Move the clock in uneven steps, from 1 ns to half a second.
    while timer.now() - t0 < Duration::from_secs(10) {
        let before = timer.now();
        timer.advance(Duration::from_nanos(1 + rng.below(500_000_000)));
        for &(id, at) in &log.lock().unwrap()[..] {
            if at > before {
                assert!(t0 + deadlines[id] > before, "timer {id} fired late");
            }
        }
    }
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 10_000, "every timer fired once");
    let mut seen = vec![false; 10_000];
    for w in log.windows(2) {
        let (a, b) = (w[0].0, w[1].0);
        assert!(
            deadlines[a] <= deadlines[b],
            "out of order: {a} ({:?}) before {b} ({:?})",
            deadlines[a],
            deadlines[b]
        );
    }
    for &(id, at) in log.iter() {
        assert!(at >= t0 + deadlines[id], "timer {id} fired early");
        assert!(!std::mem::replace(&mut seen[id], true));
    }
    assert!(sleeps.iter_mut().all(|s| poll_once(s).is_ready()));
    assert_eq!(timer.pending(), 0);
}

/// The ticks an interval yields at once (as offsets from `t0` in periods
/// of `p`, times 2 to keep halves whole).
fn ready_ticks(every: &mut time::Interval, t0: Instant, p: Duration) -> Vec<u128> {
    let mut ticks = Vec::new();
    while let Poll::Ready(t) = every.poll_tick(&mut noop_cx()) {
        ticks.push((t - t0).as_nanos() * 2 / p.as_nanos());
        assert!(ticks.len() < 100, "runaway interval");
    }
    ticks
}

#[test]
fn missed_ticks_after_a_stall_of_three_and_a_half_periods() {
    let p = Duration::from_millis(100);
    // Ticks given at 3.5p (right after the stall), 4p, 4.5p, 5p and 5.5p,
    // in half periods: each behaviour as its docs promise.
    let cases: [(MissedTickBehavior, [&[u128]; 5]); 3] = [
        (
            MissedTickBehavior::Burst,
            [&[2, 4, 6], &[8], &[], &[10], &[]],
        ),
        (MissedTickBehavior::Delay, [&[2], &[], &[9], &[], &[11]]),
        (MissedTickBehavior::Skip, [&[2], &[8], &[], &[10], &[]]),
    ];
    for (behavior, expected) in cases {
        let timer = Timer::manual();
        let t0 = timer.now();
        let mut every = timer.interval(p);
        every.set_missed_tick_behavior(behavior);
        assert_eq!(
            ready_ticks(&mut every, t0, p),
            [0],
            "{behavior:?}: first tick at once"
        );
        timer.advance(p * 7 / 2);
        for (step, ticks) in expected.iter().enumerate() {
            assert_eq!(
                ready_ticks(&mut every, t0, p),
                *ticks,
                "{behavior:?}, step {step}"
            );
            timer.advance(p / 2);
        }
    }
}

#[test]
fn interval_is_a_stream_and_zero_period_is_defined() {
    let timer = Timer::manual();
    let t0 = timer.now();
    let mut every = timer.interval(Duration::from_secs(1));
    assert_eq!(block_on(every.next()), Some(t0));
    timer.advance(Duration::from_secs(2));
    let two: Vec<_> = block_on((&mut every).take(2).collect());
    assert_eq!(
        two,
        [t0 + Duration::from_secs(1), t0 + Duration::from_secs(2)]
    );

    let mut zero = timer.interval(Duration::ZERO);
    assert_eq!(zero.period(), Duration::from_nanos(1));
    // On a clock that stands still, ticks are one nanosecond apart and only
    // those that have come are given.
    assert!(zero.poll_tick(&mut noop_cx()).is_ready());
    assert!(zero.poll_tick(&mut noop_cx()).is_pending());
    timer.advance(Duration::from_nanos(3));
    assert_eq!(ready_ticks(&mut zero, t0, Duration::from_nanos(2)).len(), 3);
}

#[test]
fn timeout_elapses_exactly_at_the_deadline() {
    let timer = Timer::manual();
    let mut t =
        Box::pin(timer.timeout(Duration::from_millis(10), futures::future::pending::<()>()));
    assert!(poll_once(&mut t).is_pending());
    timer.advance(Duration::from_millis(10) - Duration::from_nanos(1));
    assert!(poll_once(&mut t).is_pending());
    assert_eq!(timer.pending(), 1);
    timer.advance(Duration::from_nanos(1));
    assert_eq!(poll_once(&mut t), Poll::Ready(Err(Elapsed::new())));
    assert_eq!(timer.pending(), 0);
}

#[test]
fn timeout_gives_the_value_when_the_future_wins() {
    let timer = Timer::manual();
    let (tx, rx) = futures::channel::oneshot::channel();
    let mut t = Box::pin(timer.timeout(Duration::from_millis(10), rx));
    assert!(poll_once(&mut t).is_pending());
    timer.advance(Duration::from_millis(9));
    tx.send(7).unwrap();
    assert_eq!(poll_once(&mut t), Poll::Ready(Ok(Ok(7))));
    assert_eq!(timer.pending(), 0, "the winner's timer is gone");

    // Ready at the deadline too: the value still wins.
    let (tx, rx) = futures::channel::oneshot::channel();
    let mut t = Box::pin(timer.timeout(Duration::from_millis(10), rx));
    assert!(poll_once(&mut t).is_pending());
    timer.advance(Duration::from_millis(10));
    tx.send(8).unwrap();
    assert_eq!(poll_once(&mut t), Poll::Ready(Ok(Ok(8))));
}

#[test]
fn far_deadlines_saturate_at_the_end_of_the_clock() {
    let timer = Timer::manual();
    let years = |n: u64| Duration::from_secs(n * 365 * 86_400);
    let mut forever = Box::pin(timer.sleep(Duration::MAX));
    let mut far = Box::pin(timer.sleep_until(timer.now() + years(1_000)));
    let mut to = Box::pin(timer.timeout(Duration::MAX, futures::future::pending::<()>()));
    assert!(poll_once(&mut forever).is_pending());
    assert!(poll_once(&mut far).is_pending());
    assert!(poll_once(&mut to).is_pending());
    assert_eq!(forever.deadline(), far.deadline(), "both saturate");
    assert!(forever.deadline() > timer.now() + years(500));
    assert_eq!(timer.pending(), 3);
    timer.advance(years(100));
    assert!(poll_once(&mut forever).is_pending());
    drop(to);
    assert_eq!(timer.pending(), 2);
    // The virtual clock saturates too; at its very end everything is due.
    timer.advance(Duration::MAX);
    timer.advance(Duration::MAX);
    assert!(poll_once(&mut forever).is_ready());
    assert!(poll_once(&mut far).is_ready());
    assert_eq!(timer.pending(), 0);

    let timer = Timer::manual();
    let mut every = timer.interval(Duration::MAX);
    assert!(every.poll_tick(&mut noop_cx()).is_ready());
    timer.advance(years(100));
    assert!(every.poll_tick(&mut noop_cx()).is_pending());
    let ex = ManualExecutor::new();
    let job = timer.execute_every(&ex, Duration::MAX, || ());
    let late = timer.execute_after(&ex, Duration::MAX, || ());
    timer.advance(years(100));
    assert_eq!((ex.run_until_idle(), job.runs()), (0, 0));
    assert!(job.cancel() && late.cancel());
}

#[test]
fn sleeps_on_any_thread_and_reset() {
    let timer = Timer::manual();
    let mut s = Box::pin(timer.sleep(Duration::from_secs(5)));
    assert!(poll_once(&mut s).is_pending());
    s.as_mut().reset(timer.now() + Duration::from_secs(1));
    assert_eq!(timer.pending(), 0, "reset unregisters");
    timer.advance(Duration::from_secs(1));
    assert!(poll_once(&mut s).is_ready());
    s.as_mut().reset(timer.now() + Duration::from_secs(1));
    assert!(poll_once(&mut s).is_pending(), "a reset sleep waits again");
    timer.advance(Duration::from_secs(1));
    assert!(poll_once(&mut s).is_ready());
}

#[test]
fn dropping_a_million_pending_sleeps_leaves_no_timer_behind() {
    let timer = Timer::manual();
    let sleeps: Vec<_> = std::thread::scope(|s| {
        let parts: Vec<_> = (0..4)
            .map(|part| {
                let timer = timer.clone();
                s.spawn(move || {
                    (0..250_000u64)
                        .map(|i| {
                            let mut sl = Box::pin(
                                timer.sleep(Duration::from_micros(1 + (i * 4 + part) % 5_000_000)),
                            );
                            assert!(poll_once(&mut sl).is_pending());
                            sl
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        parts.into_iter().flat_map(|p| p.join().unwrap()).collect()
    });
    assert_eq!(timer.pending(), 1_000_000);
    // Drop them on other threads than the ones that registered them.
    let mut halves = sleeps;
    let back = halves.split_off(500_000);
    std::thread::scope(|s| {
        s.spawn(move || drop(back));
        s.spawn(move || drop(halves));
    });
    assert_eq!(timer.pending(), 0);
}

#[test]
fn dropped_sleeps_leave_the_global_timer_as_it_was() {
    let _turn = global_turn();
    let timer = Timer::global();
    let before = timer.pending();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let sleeps: Vec<_> = (0..25_000u64)
                    .map(|i| {
                        let mut sl = Box::pin(time::sleep(Duration::from_secs(3600 + i)));
                        assert!(poll_once(&mut sl).is_pending());
                        sl
                    })
                    .collect();
                drop(sleeps);
            });
        }
    });
    assert_eq!(timer.pending(), before);
}

/// A job that records that it ran, and whether it ran twice.
fn job(ran: &Arc<Vec<AtomicU8>>, i: usize) -> impl FnOnce() + Send + 'static {
    let ran = ran.clone();
    move || {
        assert_eq!(ran[i].fetch_add(1, SeqCst), 0, "job {i} ran twice");
    }
}

/// Schedules `n` jobs, fires them (from `fire`, or the timer's own
/// thread) while three threads cancel the even ones, each at about its
/// deadline, then checks that every job either ran once or was cancelled
/// and never ran, as `cancel` and the handle both say.
fn cancel_races_fire(
    timer: &Timer,
    pool: &ThreadPool,
    n: usize,
    lead: Duration,
    spread: Duration,
    fire: impl FnOnce() + Send,
) {
    let ran: Arc<Vec<AtomicU8>> = Arc::new((0..n).map(|_| AtomicU8::new(0)).collect());
    let start = timer.now() + lead;
    let at = |i: usize| start + spread * (i % 1_000) as u32 / 1_000;
    let handles: Vec<_> = (0..n)
        .map(|i| Mutex::new(Some(timer.execute_at(pool, at(i), job(&ran, i)))))
        .collect();
    let cancelled: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(false)).collect();
    std::thread::scope(|s| {
        s.spawn(fire);
        for t in 0..3 {
            let (handles, cancelled) = (&handles, &cancelled);
            s.spawn(move || {
                let mut rng = Rng(t as u64 + 1);
                let mut mine: Vec<_> = (0..n).filter(|i| i % 2 == 0 && i % 3 == t).collect();
                mine.sort_by_key(|&i| at(i));
                for i in mine {
                    // Cancel within a hair of the deadline, either side.
                    let jitter = spread / 200 * rng.below(2) as u32;
                    while timer.now() + jitter < at(i) {
                        std::thread::yield_now();
                    }
                    let mut h = handles[i].lock().unwrap();
                    cancelled[i].store(h.as_mut().unwrap().cancel(), SeqCst);
                }
            });
        }
    });
    let mut ran_count = 0;
    let mut cancelled_count = 0;
    for (i, h) in handles.into_iter().enumerate() {
        let h = h.into_inner().unwrap().unwrap();
        let outcome = block_on(h);
        if cancelled[i].load(SeqCst) {
            cancelled_count += 1;
            assert!(
                matches!(outcome, Err(TaskError::Cancelled)),
                "job {i}: {outcome:?}"
            );
            assert_eq!(ran[i].load(SeqCst), 0, "cancelled job {i} ran");
        } else {
            ran_count += 1;
            assert!(outcome.is_ok(), "job {i} lost: {outcome:?}");
            assert_eq!(ran[i].load(SeqCst), 1, "job {i} did not run");
        }
    }
    assert_eq!(ran_count + cancelled_count, n);
    assert!(
        cancelled_count > 0 && ran_count >= n / 2,
        "{cancelled_count} cancelled, {ran_count} ran"
    );
    assert_eq!(timer.pending(), 0);
}

#[test]
fn cancel_racing_fire_on_a_manual_clock() {
    let pool = ThreadPool::builder()
        .threads(2)
        .name("race")
        .build()
        .unwrap();
    let timer = Timer::manual();
    let t = timer.clone();
    let (lead, spread) = (Duration::from_micros(10), Duration::from_millis(1));
    cancel_races_fire(&timer, &pool, 20_000, lead, spread, move || {
        for _ in 0..1_200 {
            t.advance(Duration::from_micros(1));
            std::thread::yield_now();
        }
    });
}

#[test]
fn cancel_racing_fire_on_the_real_clock() {
    let _turn = global_turn();
    let pool = ThreadPool::builder()
        .threads(2)
        .name("race")
        .build()
        .unwrap();
    // The lead leaves time to create the jobs even in a debug build on a
    // loaded machine, so the cancellers start before the first deadline.
    let (lead, spread) = (Duration::from_millis(200), Duration::from_millis(20));
    cancel_races_fire(&Timer::global(), &pool, 10_000, lead, spread, || ());
}

#[test]
fn cancelled_periodic_jobs_stop_and_report_why() {
    let timer = Timer::manual();
    let pool = ThreadPool::builder().threads(2).build().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut jobs: Vec<_> = (0..200)
        .map(|i| {
            let runs = runs.clone();
            timer.execute_every(&pool, Duration::from_micros(1 + i % 7), move || {
                runs.fetch_add(1, SeqCst);
            })
        })
        .collect();
    let t = timer.clone();
    let mover = std::thread::spawn(move || {
        for _ in 0..2_000 {
            t.advance(Duration::from_micros(1));
        }
    });
    std::thread::sleep(Duration::from_millis(2));
    // Completed runs when cancelled; at most the one in progress may follow.
    let at_cancel: Vec<u64> = jobs
        .iter_mut()
        .map(|j| {
            assert!(j.cancel());
            j.runs()
        })
        .collect();
    mover.join().unwrap();
    timer.advance(Duration::from_secs(1));
    let mut total = 0;
    for (j, before) in jobs.iter_mut().zip(at_cancel) {
        assert!(block_on(&mut *j).is_cancelled());
        assert!(j.runs() <= before + 1, "a run started after cancel");
        total += j.runs();
    }
    assert_eq!(runs.load(SeqCst) as u64, total, "runs() counts every run");
    assert_eq!(timer.pending(), 0);
}

#[test]
fn a_panicking_periodic_run_stops_the_job_and_reports_it() {
    let timer = Timer::manual();
    let ex = ManualExecutor::new();
    let mut n = 0;
    let job = timer.execute_every(&ex, Duration::from_secs(1), move || {
        n += 1;
        if n == 3 {
            panic!("run 3 failed");
        }
    });
    for _ in 0..5 {
        timer.advance(Duration::from_secs(1));
        ex.run_until_idle();
    }
    assert_eq!(job.runs(), 2);
    assert!(job.is_finished());
    let why = ex.run_until(job);
    assert_eq!(why.panic_message(), Some("run 3 failed"));
    assert_eq!(timer.pending(), 0, "a dead job holds no timer");
}

#[test]
fn periodic_runs_never_overlap() {
    let _turn = global_turn();
    let pool = ThreadPool::builder().threads(2).build().unwrap();
    let running = Arc::new(AtomicUsize::new(0));
    let (r, runs) = (running.clone(), Arc::new(AtomicUsize::new(0)));
    let counted = runs.clone();
    // Runs take 2 ms, the period is 100 µs: always behind, never two at once.
    let job = pool.execute_every(Duration::from_micros(100), move || {
        assert_eq!(r.fetch_add(1, SeqCst), 0, "two runs at once");
        std::thread::sleep(Duration::from_millis(2));
        r.fetch_sub(1, SeqCst);
        counted.fetch_add(1, SeqCst);
    });
    while runs.load(SeqCst) < 5 {
        std::thread::sleep(Duration::from_millis(1));
    }
    job.cancel();
    assert!(block_on(job).is_cancelled(), "no run panicked");
}

#[test]
fn fixed_rate_skips_and_fixed_delay_waits_after_each_run() {
    let timer = Timer::manual();
    let ex = ManualExecutor::new();
    let t0 = timer.now();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (rate_log, t) = (log.clone(), timer.clone());
    let rate = timer.execute_every(&ex, Duration::from_secs(1), move || {
        rate_log.lock().unwrap().push(("rate", t.now() - t0));
    });
    let (delay_log, t) = (log.clone(), timer.clone());
    let delay =
        timer.execute_every_with(&ex, Duration::from_secs(1), Pacing::FixedDelay, move || {
            delay_log.lock().unwrap().push(("delay", t.now() - t0));
        });
    let secs = |ms: u64| Duration::from_millis(ms);
    timer.advance(secs(1_000));
    ex.run_until_idle(); // both run at 1 s
    timer.advance(secs(2_500)); // at 3.5 s: both are behind
    ex.run_until_idle(); // both run late, once
    for _ in 0..3 {
        timer.advance(secs(500));
        ex.run_until_idle();
    } // 4.0, 4.5, 5.0
    let log = log.lock().unwrap().clone();
    let of = |name| {
        log.iter()
            .filter(|e| e.0 == name)
            .map(|e| e.1)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        of("rate"),
        [secs(1_000), secs(3_500), secs(4_000), secs(5_000)]
    );
    assert_eq!(of("delay"), [secs(1_000), secs(3_500), secs(4_500)]);
    assert_eq!((rate.runs(), delay.runs()), (4, 3));
}

#[test]
fn timed_tasks_wait_for_their_deadline_on_their_executor() {
    let timer = Timer::manual();
    let ex = ManualExecutor::new();
    let a = timer.execute_after(&ex, Duration::from_secs(2), || "A");
    let b = timer.spawn_after(&ex, Duration::from_secs(1), async { "B" });
    assert_eq!(
        (ex.len(), timer.pending()),
        (0, 2),
        "parked in the timer, not queued"
    );
    timer.advance(Duration::from_secs(1));
    assert_eq!((ex.len(), timer.pending()), (1, 1));
    assert_eq!(ex.run_until(b).unwrap(), "B");
    assert!(!a.is_finished());
    timer.advance(Duration::from_secs(1));
    assert_eq!(ex.run_until(a).unwrap(), "A");

    // A closed executor refuses at once, and nothing is parked.
    ex.close();
    let refused = timer.execute_after(&ex, Duration::from_secs(1), || ());
    assert!(refused.is_finished());
    assert!(
        !refused.cancel(),
        "nothing to cancel: awaiting says how it ended"
    );
    assert!(matches!(
        block_on(refused),
        Err(TaskError::Rejected(RejectReason::Closed))
    ));
    let periodic = timer.execute_every(&ex, Duration::from_secs(1), || ());
    assert!(periodic.is_finished());
    assert!(!periodic.cancel());
    assert_eq!(timer.pending(), 0);
}

#[test]
fn dropping_a_manual_timer_cancels_the_tasks_it_holds() {
    let ex = ManualExecutor::new();
    let timer = Timer::manual();
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let detached = timer.spawn_after(&ex, Duration::from_secs(1), async move {
        let _tx = tx;
        unreachable!("never runs");
    });
    drop(detached);
    drop(timer);
    assert!(block_on(rx).is_err(), "the task's future was dropped unrun");
    assert_eq!(ex.len(), 0);
}

#[test]
fn timed_tasks_run_on_their_executors_threads() {
    let _turn = global_turn();
    let pool = ThreadPool::builder()
        .threads(2)
        .name("cpu")
        .build()
        .unwrap();
    let name = || std::thread::current().name().unwrap_or("").to_owned();
    let on_pool = pool.execute_after(Duration::from_millis(5), name);
    // Far enough ahead to be parked even on a loaded machine.
    let inline = Inline.execute_after(Duration::from_millis(50), name);
    assert!(block_on(on_pool).unwrap().starts_with("cpu-"));
    assert_eq!(block_on(inline).unwrap(), "viaduct-timer");
}

#[test]
fn seed_001_b_runs_before_a() {
    let _turn = global_turn();
    let pool = ThreadPool::builder().threads(2).build().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let (a, b) = (order.clone(), order.clone());
    let ha = pool.execute_after(Duration::from_millis(60), move || {
        a.lock().unwrap().push('A')
    });
    let hb = pool.execute_after(Duration::from_millis(30), move || {
        b.lock().unwrap().push('B')
    });
    block_on(ha).unwrap();
    block_on(hb).unwrap();
    assert_eq!(*order.lock().unwrap(), ['B', 'A']);
}

#[test]
fn an_earlier_deadline_wakes_the_timer_thread() {
    let _turn = global_turn();
    let mut far = Box::pin(time::sleep(Duration::from_secs(30)));
    assert!(poll_once(&mut far).is_pending());
    let start = Instant::now();
    block_on(time::sleep(Duration::from_millis(10)));
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_thousand_real_sleeps_never_early_all_within_a_second() {
    let _turn = global_turn();
    let pool = ThreadPool::builder().threads(2).build().unwrap();
    let start = Instant::now();
    let handles: Vec<_> = (0..1_000)
        .map(|_| {
            pool.spawn(async {
                let s = time::sleep(Duration::from_millis(10));
                let deadline = s.deadline();
                s.await;
                Instant::now() >= deadline
            })
        })
        .collect();
    for h in handles {
        assert!(block_on(h).unwrap(), "a sleep resumed before its deadline");
    }
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(10));
    assert!(took < Duration::from_secs(1), "took {took:?}");
}

#[test]
fn sleep_works_inside_tokio() {
    let _turn = global_turn();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let (slept, timed_out) = rt.block_on(async {
        let start = Instant::now();
        time::sleep(Duration::from_millis(5)).await;
        let slept = start.elapsed();
        let t = tokio::spawn(time::timeout(
            Duration::from_millis(1),
            std::future::pending::<()>(),
        ));
        (slept, t.await.unwrap())
    });
    assert!(slept >= Duration::from_millis(5));
    assert_eq!(timed_out, Err(Elapsed::new()));
    let current = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let ticks = current.block_on(time::interval(Duration::from_millis(1)).take(3).count());
    assert_eq!(ticks, 3);
}

#[test]
fn sleep_works_under_futures_block_on() {
    let _turn = global_turn();
    let start = Instant::now();
    futures::executor::block_on(time::sleep(Duration::from_millis(5)));
    assert!(start.elapsed() >= Duration::from_millis(5));
    let t = futures::executor::block_on(time::timeout(
        Duration::from_secs(5),
        time::sleep(Duration::from_millis(1)),
    ));
    assert_eq!(t, Ok(()));
}

#[test]
fn timers_work_under_a_manual_executor_and_clock_together() {
    let timer = Timer::manual();
    let ex = ManualExecutor::new();
    let t = timer.clone();
    let h = ex.spawn(async move {
        let mut seen = Vec::new();
        for i in 1..=3u64 {
            t.sleep(Duration::from_secs(i)).await;
            seen.push(i);
        }
        seen
    });
    let mut steps = 0;
    loop {
        ex.run_until_idle();
        if h.is_finished() {
            break;
        }
        timer.advance(Duration::from_secs(1));
        steps += 1;
    }
    assert_eq!(steps, 1 + 2 + 3);
    assert_eq!(ex.run_until(h).unwrap(), [1, 2, 3]);
}

#[test]
fn handles_and_futures_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Timer>();
    send_sync::<time::Sleep>();
    send_sync::<time::Timeout<std::future::Ready<u8>>>();
    send_sync::<time::Interval>();
    send_sync::<time::Scheduled<u8>>();
    send_sync::<time::Periodic>();
    send_sync::<Elapsed>();
}
