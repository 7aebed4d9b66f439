//! `metrics()` on every executor and decorator that queues work, with exact
//! counts: the executors underneath are manual (and the timer's clock is),
//! so nothing runs unless the test says so.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::task::{Context, Poll};
use std::time::Duration;

use viaduct::time::Timer;
use viaduct::{
    block_on, ExecutorExt, Guarded, KeyedStrands, ManualExecutor, PriorityExecutor, Strand,
    ThreadPerTask, ThreadPool,
};

/// Pending once, waking itself: a task that needs two polls, so it is
/// scheduled twice.
#[derive(Default)]
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

#[test]
fn manual_executor_counts_runnables() {
    let ex = ManualExecutor::new();
    let task = ex.spawn(async {
        YieldOnce::default().await;
        5
    });
    ex.execute(|| ());
    let m = ex.metrics();
    assert_eq!((m.scheduled, m.ran, m.queued), (2, 0, 2));

    // The task runs, wakes itself: scheduled again, behind the closure.
    assert!(ex.run_at_most_one());
    let m = ex.metrics();
    assert_eq!((m.scheduled, m.ran, m.queued), (3, 1, 2));

    assert_eq!(ex.run_until_idle(), 2);
    let m = ex.metrics();
    assert_eq!((m.scheduled, m.ran, m.queued), (3, 3, 0));
    assert_eq!(block_on(task).unwrap(), 5);
    assert_eq!(
        ex.metrics().ran,
        3,
        "awaiting a finished handle runs nothing"
    );
}

#[test]
fn thread_per_task_counts_threads() {
    let ex = ThreadPerTask::new("metrics-tpt");
    assert_eq!(ex.metrics().started, 0);
    let (release, wait) = mpsc::channel::<()>();
    let blocked = ex.run(move || wait.recv().unwrap());
    // `schedule` counts the thread in before it returns.
    let m = ex.metrics();
    assert_eq!((m.started, m.running), (1, 1));
    release.send(()).unwrap();
    block_on(blocked).unwrap();
    for _ in 0..2 {
        block_on(ex.run(|| ())).unwrap();
    }
    ex.join_threads().unwrap();
    let m = ex.metrics();
    assert_eq!((m.started, m.running), (3, 0));
}

#[test]
fn priority_executor_counts_submissions_and_pumps() {
    let manual = ManualExecutor::new();
    let pq = PriorityExecutor::new(manual.clone());
    for p in [1, 2, 3] {
        pq.execute_with(p, || ());
    }
    let m = pq.metrics();
    assert_eq!((m.submitted, m.pending, m.idle_pumps), (3, 3, 0));
    assert_eq!(manual.len(), 3, "a pump per push");

    assert!(manual.run_at_most_one());
    let m = pq.metrics();
    assert_eq!((m.submitted, m.pending, m.idle_pumps), (3, 2, 1));
    manual.run_until_idle();
    let m = pq.metrics();
    assert_eq!((m.submitted, m.pending, m.idle_pumps), (3, 0, 3));

    // A parked pump carries the next push; a wake-up is a submission too.
    let task = pq.spawn_with(0, YieldOnce::default());
    let m = pq.metrics();
    assert_eq!((m.submitted, m.pending, m.idle_pumps), (4, 1, 2));
    manual.run_until_idle();
    let m = pq.metrics();
    assert_eq!((m.submitted, m.pending, m.idle_pumps), (5, 0, 3));
    block_on(task).unwrap();
}

#[test]
fn keyed_strands_count_keys_and_live_tasks() {
    let manual = ManualExecutor::new();
    let keyed = KeyedStrands::new(manual.clone());
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let waiting = keyed.spawn("a", async move { rx.await.unwrap() });
    keyed.execute("a", || ());
    keyed.execute("b", || ());
    let m = keyed.metrics();
    assert_eq!((m.keys, m.tasks), (2, 3));

    // The strands serialise polls, not whole tasks: "a"'s second task ran
    // while its first waits for the channel, and "b" is done and gone.
    manual.run_until_idle();
    let m = keyed.metrics();
    assert_eq!((m.keys, m.tasks), (1, 1));

    tx.send(()).unwrap();
    manual.run_until_idle();
    let m = keyed.metrics();
    assert_eq!((m.keys, m.tasks), (0, 0));
    block_on(waiting).unwrap();
}

#[test]
fn strand_counts_batches() {
    let manual = ManualExecutor::new();
    let strand = Strand::new(manual.clone());
    for _ in 0..5 {
        strand.post(|| ());
    }
    manual.run_until_idle();
    let m = strand.metrics();
    assert_eq!((m.queued, m.batches, m.inline), (5, 1, 0));
    for _ in 0..3 {
        strand.post(|| ());
    }
    manual.run_until_idle();
    let m = strand.metrics();
    assert_eq!((m.queued, m.batches, m.inline), (8, 2, 0));
    assert_eq!(m.mean_batch(), 4.0);
}

#[test]
fn guarded_counts_queued_and_inline_sections() {
    let manual = ManualExecutor::new();
    let g = Guarded::new(manual.clone(), 0u32);
    // From outside the executor, `with` sections queue.
    let handles: Vec<_> = (0..3).map(|_| g.with(|v| *v += 1)).collect();
    manual.run_until_idle();
    for h in handles {
        block_on(h).unwrap();
    }
    let m = g.metrics();
    assert_eq!((m.queued, m.batches, m.inline), (3, 1, 0));

    // A lock of an idle strand is granted on the spot.
    *block_on(g.lock()) += 1;
    let m = g.metrics();
    assert_eq!((m.queued, m.batches, m.inline), (3, 1, 1));

    // So is a `with` from a task of the strand's executor.
    let g2 = g.clone();
    let task = manual.spawn(async move { g2.with(|v| *v += 1).await.unwrap() });
    manual.run_until_idle();
    block_on(task).unwrap();
    let m = g.metrics();
    assert_eq!((m.queued, m.batches, m.inline), (3, 1, 2));
    assert_eq!(*block_on(g.lock()), 5);
}

#[test]
fn timer_counts_pending_timers() {
    let timer = Timer::manual();
    let ex = ManualExecutor::new();
    let second = Duration::from_secs(1);
    let jobs: Vec<_> = (1..=3)
        .map(|n| timer.execute_after(&ex, second * n, || ()))
        .collect();
    // A sleep counts once it has been polled.
    let mut sleep = Box::pin(timer.sleep(second));
    assert_eq!(timer.metrics().pending, 3);
    let waker = futures::task::noop_waker();
    assert!(sleep
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    assert_eq!(timer.metrics().pending, 4);

    let last = jobs.into_iter().last().unwrap();
    assert!(last.cancel());
    assert_eq!(timer.metrics().pending, 3);
    timer.advance(second);
    assert_eq!(timer.metrics().pending, 1);
    timer.advance(second);
    assert_eq!(timer.metrics().pending, 0);
    assert_eq!(ex.run_until_idle(), 2);
}

#[test]
fn pool_counts_are_exact_once_shut_down() {
    let pool = ThreadPool::builder()
        .threads(2)
        .name("metrics-pool")
        .build()
        .unwrap();
    let handles: Vec<_> = (0..100).map(|i| pool.spawn(async move { i })).collect();
    let sum: i32 = handles.into_iter().map(|h| block_on(h).unwrap()).sum();
    assert_eq!(sum, 4950);
    pool.shutdown().unwrap();
    let m = pool.metrics();
    assert_eq!(
        (m.threads, m.spawned, m.completed, m.queued),
        (2, 100, 100, 0)
    );
}
