//! `PriorityExecutor`: a later higher priority first, FIFO among equals, priorities
//! kept across wake-ups, parallelism, and bad input.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier, Mutex};

use support::{quiet_test_panics, within, TEST_PANIC};
use viaduct::{
    block_on, Executor, ExecutorExt, ManualExecutor, PriorityExecutor, RejectReason, Runnable,
    TaskError, ThreadPool,
};

fn pool(threads: usize) -> ThreadPool {
    ThreadPool::builder()
        .threads(threads)
        .name("prio-test")
        .build()
        .unwrap()
}

type Log = Arc<Mutex<Vec<String>>>;

fn logger(log: &Log, entry: impl Into<String>) -> impl FnOnce() + Send + 'static {
    let (log, entry) = (log.clone(), entry.into());
    move || log.lock().unwrap().push(entry)
}

/// Holds the only worker of a one-thread pool until released, so that
/// what is submitted meanwhile queues up.
fn gate(pq: &PriorityExecutor) -> mpsc::Sender<()> {
    let (open, wait) = mpsc::channel::<()>();
    let (started, is_started) = mpsc::channel();
    pq.execute_with(i32::MAX, move || {
        started.send(()).unwrap();
        wait.recv().unwrap();
    });
    is_started.recv().unwrap();
    open
}

/// On a one-thread pool A (100) runs; B (-100) is
/// queued while A runs; then A submits C (100). C runs before B.
#[test]
fn a_higher_priority_submitted_later_runs_before_a_lower_one_queued_earlier() {
    within("scene", || {
        let pq = PriorityExecutor::new(pool(1));
        let log: Log = Arc::default();
        let (a_running, wait_a) = mpsc::channel();
        let (b_queued, wait_b) = mpsc::channel::<()>();
        let (pq2, log2) = (pq.clone(), log.clone());
        let a = pq.spawn_with(100, async move {
            log2.lock().unwrap().push("A".into());
            a_running.send(()).unwrap();
            wait_b.recv().unwrap();
            pq2.execute_with(100, logger(&log2, "C"));
        });
        wait_a.recv().unwrap();
        let l = logger(&log, "B");
        let b = pq.spawn_with(-100, async move { l() });
        b_queued.send(()).unwrap();
        block_on(a).unwrap();
        block_on(b).unwrap();
        // One thread, so C ran before B or not at all.
        assert_eq!(*log.lock().unwrap(), ["A", "C", "B"]);
    });
}

#[test]
fn highest_first_and_fifo_among_equals() {
    within("order", || {
        let pq = PriorityExecutor::new(pool(1));
        let log: Log = Arc::default();
        let open = gate(&pq);
        let plan = [
            (0, "a0"),
            (5, "b5"),
            (0, "c0"),
            (-3, "d-3"),
            (5, "e5"),
            (0, "f0"),
            (9, "g9"),
        ];
        let handles: Vec<_> = plan
            .iter()
            .map(|&(p, name)| {
                let l = logger(&log, name);
                pq.spawn_with(p, async move { l() })
            })
            .collect();
        assert_eq!(pq.pending(), plan.len());
        open.send(()).unwrap();
        for h in handles {
            block_on(h).unwrap();
        }
        assert_eq!(
            *log.lock().unwrap(),
            ["g9", "b5", "e5", "a0", "c0", "f0", "d-3"]
        );
        assert_eq!(pq.pending(), 0);
    });
}

#[test]
fn equal_priorities_run_in_submission_order() {
    within("fifo", || {
        let pq = PriorityExecutor::new(pool(1));
        let log: Log = Arc::default();
        let open = gate(&pq);
        let level = pq.fixed(7);
        for i in 0..1000 {
            level.execute(logger(&log, i.to_string()));
        }
        open.send(()).unwrap();
        block_on(level.run(|| ())).unwrap();
        let want: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        assert_eq!(*log.lock().unwrap(), want);
    });
}

/// A task keeps its priority when woken: woken while low-priority work
/// is queued, it still runs first.
#[test]
fn a_woken_task_keeps_its_priority() {
    within("wake", || {
        let pq = PriorityExecutor::new(pool(1));
        let log: Log = Arc::default();
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        let l = log.clone();
        let high = pq.fixed(10).spawn(async move {
            rx.await.unwrap();
            l.lock().unwrap().push("high, woken".into());
        });
        // Let it run up to its await.
        block_on(pq.fixed(10).run(|| ())).unwrap();
        let open = gate(&pq);
        for i in 0..3 {
            pq.execute_with(0, logger(&log, format!("low {i}")));
        }
        tx.send(()).unwrap(); // wakes `high` while the worker is held
        open.send(()).unwrap();
        block_on(high).unwrap();
        block_on(pq.fixed(-1).run(|| ())).unwrap();
        assert_eq!(
            *log.lock().unwrap(),
            ["high, woken", "low 0", "low 1", "low 2"]
        );
    });
}

/// Two tasks that wait for each other complete: the decorator runs on
/// both threads of the pool at once.
#[test]
fn uses_all_the_parallelism_of_the_inner_executor() {
    within("parallel", || {
        let pq = PriorityExecutor::new(pool(2));
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let b = barrier.clone();
                pq.spawn_with(i, async move {
                    b.wait();
                })
            })
            .collect();
        for h in handles {
            block_on(h).unwrap();
        }
    });
}

#[test]
fn many_tasks_at_many_priorities_all_run_once() {
    within("stress", || {
        let pq = PriorityExecutor::new(pool(2));
        let ran = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..20_000)
            .map(|i| {
                let ran = ran.clone();
                pq.spawn_with(i % 17 - 8, async move {
                    ran.fetch_add(1, SeqCst);
                })
            })
            .collect();
        for h in handles {
            block_on(h).unwrap();
        }
        assert_eq!(ran.load(SeqCst), 20_000);
        assert_eq!(pq.pending(), 0);
    });
}

#[test]
fn a_panicking_task_is_reported() {
    quiet_test_panics();
    within("panic", || {
        let pq = PriorityExecutor::new(pool(1));
        let err = block_on(pq.spawn_with(3, async { panic!("{TEST_PANIC}: prio") })).unwrap_err();
        assert!(err.is_panic());
        assert_eq!(block_on(pq.spawn_with(3, async { 1 })).unwrap(), 1);
    });
}

#[test]
fn closed_executors_hand_work_back() {
    within("closed", || {
        let manual = ManualExecutor::new();
        manual.close();
        let pq = PriorityExecutor::new(manual);
        assert!(pq.is_closed());
        let fut = pq.fixed(1).try_spawn(async { 2 }).unwrap_err().into_inner();
        assert_eq!(block_on(fut), 2);
        assert!(matches!(
            block_on(pq.spawn_with(1, async {})),
            Err(TaskError::Rejected(RejectReason::Closed))
        ));

        let open = PriorityExecutor::new(ManualExecutor::new());
        open.close();
        assert_eq!(
            open.try_execute(|| ()).unwrap_err().reason(),
            RejectReason::Closed
        );
    });
}

/// An executor that throws away what it is given (as `shutdown_now`
/// does): the tasks waiting in the heap are cancelled, not stranded.
#[derive(Clone)]
struct Discard;

impl Executor for Discard {
    fn schedule(&self, runnable: Runnable) {
        drop(runnable);
    }
}

#[test]
fn work_thrown_away_by_the_inner_executor_is_cancelled() {
    within("discard", || {
        let pq = PriorityExecutor::new(Discard);
        let h = pq.spawn_with(1, async { 1 });
        assert!(matches!(block_on(h), Err(TaskError::Cancelled)));
        assert_eq!(pq.pending(), 0);
    });
}

#[test]
fn shutdown_now_cancels_what_waits() {
    within("shutdown", || {
        let pool = pool(1);
        let pq = PriorityExecutor::new(pool.clone());
        let open = gate(&pq);
        let waiting: Vec<_> = (0..10).map(|i| pq.spawn_with(i, async {})).collect();
        let stopper = {
            let pool = pool.clone();
            std::thread::spawn(move || pool.shutdown_now())
        };
        // The gate is released only once the pool is stopping.
        while !pool.is_closed() {
            std::thread::yield_now();
        }
        open.send(()).unwrap();
        stopper.join().unwrap().unwrap();
        for h in waiting {
            assert!(matches!(block_on(h), Err(TaskError::Cancelled)));
        }
    });
}
