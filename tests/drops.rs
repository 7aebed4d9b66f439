//! Drop counters: every future and closure handed to viaduct is dropped
//! exactly once, and none is dropped after its executor is gone (after
//! `shutdown_now` returned, after the last handle of a manual executor
//! dropped, after a cancelled timer's `cancel` returned), through abort,
//! shutdown, panics, strand teardown with queued sections, cancelled
//! timers and dropped or aborted continuation chains.
//!
//! Each piece of work carries a [`Token`]; its [`Book`] counts, per token,
//! how often it was dropped and whether its body ran.

mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::channel::oneshot;
use support::{pool, quiet_test_panics, within, DEADLINE, TEST_PANIC};
use viaduct::time::Timer;
use viaduct::{
    block_on, Exec, Executor, ExecutorExt, Guarded, Inline, JoinHandle, ManualExecutor,
    PriorityExecutor, Strand, TaskError, ThreadPerTask,
};

/// Per-token drop counts and run flags.
struct Book {
    drops: Box<[AtomicU8]>,
    ran: Box<[AtomicBool]>,
    next: AtomicUsize,
}

impl Book {
    fn new(capacity: usize) -> Arc<Book> {
        Arc::new(Book {
            drops: (0..capacity).map(|_| AtomicU8::new(0)).collect(),
            ran: (0..capacity).map(|_| AtomicBool::new(false)).collect(),
            next: AtomicUsize::new(0),
        })
    }

    fn token(self: &Arc<Self>) -> Token {
        Token {
            book: self.clone(),
            i: self.next.fetch_add(1, SeqCst),
        }
    }

    fn made(&self) -> usize {
        self.next.load(SeqCst)
    }

    /// Tokens dropped so far; fails on any token dropped twice.
    fn dropped(&self) -> usize {
        let counts: Vec<u8> = self.drops[..self.made()]
            .iter()
            .map(|d| d.load(SeqCst))
            .collect();
        assert!(
            counts.iter().all(|&n| n <= 1),
            "a token dropped twice: {counts:?}"
        );
        counts.iter().filter(|&&n| n == 1).count()
    }

    fn ran(&self) -> usize {
        self.ran[..self.made()]
            .iter()
            .filter(|r| r.load(SeqCst))
            .count()
    }

    /// Every token made was dropped exactly once.
    fn all_dropped_once(&self) {
        assert_eq!(self.dropped(), self.made(), "every token dropped once");
    }
}

/// Rides inside a future or closure.
struct Token {
    book: Arc<Book>,
    i: usize,
}

impl Token {
    fn run(&self) {
        assert!(!self.book.ran[self.i].swap(true, SeqCst), "ran twice");
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        self.book.drops[self.i].fetch_add(1, SeqCst);
    }
}

/// A future that runs its token when polled and is ready at once.
async fn job(t: Token) {
    t.run()
}

/// A closure that runs its token.
fn call(t: Token) -> impl FnOnce() + Send {
    move || t.run()
}

/// A future that waits for `rx` and then runs its token; `polled` hears
/// when it has registered its waker.
fn waiting(
    t: Token,
    rx: oneshot::Receiver<()>,
    polled: mpsc::Sender<()>,
) -> impl Future<Output = ()> + Send {
    struct Told<F>(Option<mpsc::Sender<()>>, F);
    impl<F: Future + Unpin> Future for Told<F> {
        type Output = F::Output;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            let r = Pin::new(&mut self.1).poll(cx);
            if let Some(tx) = self.0.take() {
                let _ = tx.send(());
            }
            r
        }
    }
    async move {
        if Told(Some(polled), rx).await.is_ok() {
            t.run();
        }
    }
}

/// Blocks the threads that wait on it until opened.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }
    fn wait(&self) {
        let mut open = self.0 .0.lock().unwrap();
        while !*open {
            open = self.0 .1.wait(open).unwrap();
        }
    }
}

fn cancelled<T: std::fmt::Debug>(h: JoinHandle<T>) {
    let outcome = block_on(h);
    assert!(matches!(outcome, Err(TaskError::Cancelled)), "{outcome:?}");
}

/// `shutdown_now` drops every queued future and closure before it
/// returns; a task parked on a waker is dropped the moment it is woken,
/// by the `schedule` of the stopped pool.
#[test]
fn shutdown_now_drops_queued_work_before_it_returns_and_parked_work_at_its_wakeup() {
    within("shutdown_now drops", || {
        let pool = pool("drops", 1);
        let book = Book::new(300);
        let (polled_tx, polled) = mpsc::channel();
        let (senders, parked): (Vec<_>, Vec<_>) = (0..20)
            .map(|_| {
                let (tx, rx) = oneshot::channel();
                (tx, pool.spawn(waiting(book.token(), rx, polled_tx.clone())))
            })
            .unzip();
        for _ in 0..20 {
            polled.recv_timeout(DEADLINE).unwrap();
        }
        let (gate, (started_tx, started)) = (Gate::default(), mpsc::channel());
        let g = gate.clone();
        let running = pool.run(move || {
            started_tx.send(()).unwrap();
            g.wait();
        });
        started.recv_timeout(DEADLINE).unwrap();
        let queued: Vec<_> = (0..200)
            .map(|i| {
                if i % 2 == 0 {
                    pool.spawn(job(book.token()))
                } else {
                    pool.run(call(book.token()))
                }
            })
            .collect();
        assert_eq!(book.dropped(), 0);

        let stopper = {
            let pool = pool.clone();
            std::thread::spawn(move || pool.shutdown_now())
        };
        while !pool.is_closed() {
            std::thread::yield_now();
        }
        gate.open();
        stopper.join().unwrap().unwrap();
        assert_eq!(
            book.dropped(),
            200,
            "all queued work dropped when shutdown_now returns"
        );
        assert_eq!(book.ran(), 0);

        drop(senders); // wakes the parked tasks
        assert_eq!(book.dropped(), 220, "woken parked tasks dropped at once");
        assert_eq!(book.ran(), 0);
        block_on(running).unwrap();
        queued.into_iter().chain(parked).for_each(cancelled);
        book.all_dropped_once();
    });
}

/// Everything queued on a manual executor, directly or through an `Exec`,
/// a strand, a `Guarded`, a priority decorator or a timer, is dropped when
/// its last handle goes, not before and not later; a parked task when it
/// is next woken.
#[test]
fn the_last_manual_handle_drops_everything_it_queued_at_once() {
    within("manual drops", || {
        let book = Book::new(200);
        let manual = ManualExecutor::new();
        let (polled_tx, polled) = mpsc::channel();
        let (senders, parked): (Vec<_>, Vec<_>) = (0..10)
            .map(|_| {
                let (tx, rx) = oneshot::channel();
                (
                    tx,
                    manual.spawn(waiting(book.token(), rx, polled_tx.clone())),
                )
            })
            .unzip();
        manual.run_until_idle();
        assert_eq!(polled.try_iter().count(), 10);

        let exec = Exec::new(manual.clone());
        let strand = Strand::new(manual.clone());
        let guarded = Guarded::new(manual.clone(), ());
        let pq = PriorityExecutor::new(manual.clone());
        let timer = Timer::manual();
        let mut handles = Vec::new();
        for i in 0..10 {
            handles.push(manual.spawn(job(book.token())));
            handles.push(exec.spawn(job(book.token())));
            strand.post(call(book.token()));
            handles.push(strand.spawn(job(book.token())));
            let t = book.token();
            handles.push(guarded.with(move |()| t.run()));
            handles.push(pq.spawn_with(i, job(book.token())));
            let t = book.token();
            drop(timer.execute_after(&manual, Duration::from_secs(1), move || t.run()));
        }
        timer.advance(Duration::from_secs(1)); // the timed tasks are queued now
        assert_eq!(book.dropped(), 0);
        drop((exec, strand, guarded, pq, timer));
        assert_eq!(book.dropped(), 0, "the executor still has a handle");

        drop(manual);
        assert_eq!(book.dropped(), 70, "dropped with the last handle");
        drop(senders);
        assert_eq!(book.dropped(), 80, "a parked task dropped when woken");
        assert_eq!(book.ran(), 0);
        handles.into_iter().chain(parked).for_each(cancelled);
        book.all_dropped_once();
    });
}

/// An `Exec` made by `Exec::new` is a handle of the executor; the tasks
/// spawned through it are not, so dropping it (the last handle) cancels
/// them instead of leaving them queued forever.
#[test]
fn tasks_spawned_through_an_exec_do_not_keep_their_manual_executor_alive() {
    within("exec handle", || {
        let book = Book::new(10);
        let exec = Exec::new(ManualExecutor::new());
        let h = exec.spawn(job(book.token()));
        let chained = exec.run(call(book.token())).then(|()| ());
        drop(exec);
        assert_eq!(book.dropped(), 2);
        cancelled(h);
        cancelled(chained);
        book.all_dropped_once();
    });
}

/// `abort` drops each future exactly once whether it was queued, parked
/// or already done, on every executor; it never runs afterwards.
#[test]
fn abort_drops_each_future_once_on_every_executor() {
    within("abort", || {
        let book = Book::new(400);
        let cpu = pool("abort", 2);
        let manual = ManualExecutor::new();
        let executors: Vec<(&str, Exec)> = vec![
            ("manual", Exec::new(manual.clone())),
            ("strand", Exec::new(Strand::new(manual.clone()))),
            ("priority", Exec::new(PriorityExecutor::new(manual.clone()))),
            ("pool", Exec::new(cpu.clone())),
            ("strand over pool", Exec::new(Strand::new(cpu.clone()))),
            (
                "thread-per-task",
                Exec::new(ThreadPerTask::new("abort-tpt")),
            ),
            ("inline", Exec::new(Inline)),
        ];
        for (name, ex) in &executors {
            let before = book.made();
            let (polled_tx, polled) = mpsc::channel();
            let mut senders = Vec::new();
            let mut parked: Vec<_> = (0..10)
                .map(|_| {
                    let (tx, rx) = oneshot::channel();
                    senders.push(tx);
                    ex.spawn(waiting(book.token(), rx, polled_tx.clone()))
                })
                .collect();
            manual.run_until_idle();
            for _ in 0..10 {
                polled.recv_timeout(DEADLINE).unwrap();
            }
            // Queued on the manual executor (not yet run), or anywhere else
            // possibly run already: `abort` must cope with both.
            let mut queued: Vec<_> = (0..10).map(|_| ex.spawn(job(book.token()))).collect();
            for h in parked.iter_mut().chain(queued.iter_mut()) {
                h.abort();
            }
            drop(senders); // wake-ups of aborted tasks find them closed
            manual.run_until_idle();
            for h in parked {
                cancelled(h);
            }
            for h in queued {
                // Aborting a task that already finished keeps its result.
                let _ = block_on(h);
            }
            let made = book.made() - before;
            let ran_parked = book.ran[before..before + 10]
                .iter()
                .filter(|r| r.load(SeqCst))
                .count();
            assert_eq!(ran_parked, 0, "{name}: an aborted parked task never runs");
            // Threads of the pool or thread-per-task may still be dropping
            // what they were handed when `abort` ran: wait for the count.
            let t0 = std::time::Instant::now();
            while book.drops[before..before + made]
                .iter()
                .any(|d| d.load(SeqCst) == 0)
            {
                assert!(
                    t0.elapsed() < DEADLINE,
                    "{name}: something was never dropped"
                );
                std::thread::yield_now();
            }
        }
        drop(executors);
        cpu.shutdown().unwrap();
        book.all_dropped_once();
    });
}

/// A panicking future or closure is dropped exactly once, wherever it
/// runs, and reported on its handle.
#[test]
fn a_panicking_future_is_dropped_once_on_every_executor() {
    quiet_test_panics();
    within("panic drops", || {
        let book = Book::new(100);
        let cpu = pool("panic-drops", 2);
        let manual = ManualExecutor::new();
        let executors: Vec<Exec> = vec![
            Exec::new(Inline),
            Exec::new(manual.clone()),
            Exec::new(cpu.clone()),
            Exec::new(Strand::new(cpu.clone())),
            Exec::new(PriorityExecutor::new(cpu.clone())),
            Exec::new(ThreadPerTask::new("panic-tpt")),
        ];
        let mut handles = Vec::new();
        for ex in &executors {
            let t = book.token();
            handles.push(ex.spawn(async move {
                let _t = t;
                panic!("{TEST_PANIC}: future");
            }));
            let t = book.token();
            handles.push(ex.run(move || {
                let _t = t;
                panic!("{TEST_PANIC}: closure");
            }));
        }
        let g = Guarded::new(cpu.clone(), ());
        let t = book.token();
        handles.push(g.with(move |()| {
            let _t = t;
            panic!("{TEST_PANIC}: section");
        }));
        manual.run_until_idle();
        for h in handles {
            assert!(block_on(h).unwrap_err().is_panic());
        }
        drop((executors, g));
        cpu.shutdown().unwrap();
        book.all_dropped_once();
    });
}

/// A strand over a pool stopped by `shutdown_now` while one of its
/// sections runs: the rest of the runner's batch may still run (the pool
/// lets a running poll finish), the others are dropped unrun when
/// `shutdown_now` returns. What ran is a prefix, in order; nothing runs or
/// is dropped afterwards; a `Guarded` queued behind on the same pool is
/// killed with all its sections.
#[test]
fn strand_teardown_with_queued_sections_drops_each_once() {
    within("strand teardown", || {
        let book = Book::new(400);
        let cpu = pool("teardown", 1);
        let strand = Strand::new(cpu.clone());
        let guarded = Guarded::new(cpu.clone(), Vec::new());
        let (gate, (started_tx, started)) = (Gate::default(), mpsc::channel());
        let g = gate.clone();
        let blocker = strand.run(move || {
            started_tx.send(()).unwrap();
            g.wait();
        });
        started.recv_timeout(DEADLINE).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut sections = Vec::new();
        for i in 0..300 {
            let (t, order) = (book.token(), order.clone());
            let body = move || {
                t.run();
                order.lock().unwrap().push(i);
            };
            if i % 2 == 0 {
                strand.post(body);
            } else {
                sections.push(strand.run(body));
            }
        }
        let with: Vec<_> = (0..50)
            .map(|_| {
                let t = book.token();
                guarded.with(move |v| v.push(t.i))
            })
            .collect();

        let stopper = {
            let pool = cpu.clone();
            std::thread::spawn(move || pool.shutdown_now())
        };
        while !cpu.is_closed() {
            std::thread::yield_now();
        }
        gate.open();
        stopper.join().unwrap().unwrap();
        block_on(blocker).unwrap();

        let ran = order.lock().unwrap().clone();
        assert_eq!(
            ran,
            (0..ran.len()).collect::<Vec<_>>(),
            "a prefix, in order"
        );
        assert!(
            ran.len() < 128,
            "at most the rest of one batch: {}",
            ran.len()
        );
        assert_eq!(book.dropped(), 350, "all dropped when shutdown_now returns");
        assert_eq!(book.ran(), ran.len());
        for (k, h) in sections.into_iter().enumerate() {
            let i = 2 * k + 1;
            match block_on(h) {
                Ok(()) => assert!(ran.contains(&i)),
                Err(e) => assert!(e.is_cancelled() && !ran.contains(&i), "{e}"),
            }
        }
        with.into_iter().for_each(cancelled);
        // The strand is dead: a post now is dropped at once.
        assert!(strand.is_closed());
        strand.post(call(book.token()));
        assert_eq!(book.dropped(), 351);
        book.all_dropped_once();
    });
}

/// Cancelling a timed job drops it before `cancel` returns if it still
/// waits in the timer, and when the executor next runs it if it was handed
/// over already; a cancelled periodic job's closure goes with its task;
/// dropping a manual timer drops the detached jobs it still holds.
#[test]
fn cancelled_timers_drop_their_jobs_once() {
    within("timers", || {
        let book = Book::new(300);
        let timer = Timer::manual();
        let manual = ManualExecutor::new();
        let mut jobs: Vec<_> = (0..100u64)
            .map(|i| timer.execute_after(&manual, Duration::from_millis(i + 1), call(book.token())))
            .collect();
        for job in jobs.iter_mut().step_by(2) {
            assert!(job.cancel());
        }
        assert_eq!(book.dropped(), 50, "dropped by cancel itself");
        assert_eq!(timer.pending(), 50);
        timer.advance(Duration::from_millis(100));
        // Handed over, not run yet: cancelling now drops at the next run.
        for job in jobs.iter_mut().skip(1).step_by(4) {
            assert!(job.cancel());
        }
        assert_eq!(book.dropped(), 50);
        manual.run_until_idle();
        assert_eq!(book.dropped(), 100);
        assert_eq!(book.ran(), 25);
        for (i, job) in jobs.into_iter().enumerate() {
            let ran = i % 4 == 3;
            assert_eq!(block_on(job).is_ok(), ran, "job {i}");
        }

        // Periodic jobs: on the manual executor the cancelled task is
        // dropped by its next run, on Inline at once.
        let runs = Arc::new(AtomicUsize::new(0));
        let (t, r) = (book.token(), runs.clone());
        let every = timer.execute_every(&manual, Duration::from_millis(1), move || {
            let _t = &t;
            r.fetch_add(1, SeqCst);
        });
        let t = book.token();
        let inline = timer.execute_every(&Inline, Duration::from_millis(1), move || {
            let _t = &t;
        });
        for _ in 0..3 {
            timer.advance(Duration::from_millis(1));
            manual.run_until_idle();
        }
        assert_eq!((runs.load(SeqCst), every.runs(), inline.runs()), (3, 3, 3));
        assert!(inline.cancel());
        assert_eq!(book.dropped(), 101);
        assert!(every.cancel());
        manual.run_until_idle();
        assert_eq!(book.dropped(), 102);
        assert!(block_on(every).is_cancelled());
        assert!(block_on(inline).is_cancelled());
        assert_eq!(timer.pending(), 0, "nothing left in the timer");

        // Detached jobs never fired: dropped with the timer.
        for i in 0..10u64 {
            drop(timer.execute_after(&manual, Duration::from_secs(i + 1), call(book.token())));
        }
        assert_eq!(book.dropped(), 102);
        drop(timer);
        assert_eq!(book.dropped(), 112, "dropped with the timer");
        assert_eq!(manual.len(), 0);
        book.all_dropped_once();
    });
}

/// Every step of a continuation chain is dropped exactly once: when the
/// chain is detached (all run), aborted (none run), cut by a panic (the
/// value steps after it are skipped), or left on an executor that goes
/// away.
#[test]
fn dropped_and_aborted_continuation_chains_drop_every_step_once() {
    quiet_test_panics();
    within("chains", || {
        let book = Book::new(200);
        let manual = ManualExecutor::new();
        let chain = |book: &Arc<Book>, ex: &ManualExecutor, steps: usize| {
            let mut h = ex.run(call(book.token()));
            for _ in 1..steps {
                let t = book.token();
                h = h.then(move |()| t.run());
            }
            h
        };

        // Detached: every step runs, then is dropped.
        drop(chain(&book, &manual, 10));
        manual.run_until_idle();
        assert_eq!((book.ran(), book.dropped()), (10, 10));

        // Aborted before any step ran: none runs, all are dropped.
        let h = chain(&book, &manual, 10);
        h.abort();
        manual.run_until_idle();
        assert_eq!((book.ran(), book.dropped()), (10, 20));
        cancelled(h);

        // A panic in step 3 of 10: the value steps after it are skipped,
        // the closing then_try sees the panic.
        let mut h = manual.run(call(book.token()));
        for k in 1..9 {
            let t = book.token();
            h = h.then(move |()| {
                if k == 3 {
                    panic!("{TEST_PANIC}: step 3");
                }
                t.run()
            });
        }
        let t = book.token();
        let last = h.then_try(move |r| {
            t.run();
            r.unwrap_err().panic_message().map(str::to_owned)
        });
        assert_eq!(
            manual.run_until(last).unwrap().as_deref(),
            Some("test panic: step 3")
        );
        manual.run_until_idle();
        assert_eq!((book.ran(), book.dropped()), (10 + 3 + 1, 30));

        // The executor goes away with the chain queued.
        let other = ManualExecutor::new();
        let h = chain(&book, &other, 10);
        drop(other);
        assert_eq!(book.dropped(), 40, "dropped with the last handle");
        cancelled(h);
        drop(manual);
        book.all_dropped_once();
    });
}
