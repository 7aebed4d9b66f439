//! The 0.2 handle contract: `abort(&self)`, `AbortHandle` (`Clone + Send +
//! Sync`, usable from any thread, never lets a finished task's result go),
//! `Scheduled::cancel(&self)` and `Periodic::cancel(&self)`, and the
//! `prelude`.

#[allow(dead_code)] // only `within` and `DropFlag` are used here
mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use support::{within, DropFlag};
use viaduct::prelude::*;
use viaduct::time::Timer;
use viaduct::{block_on, AbortHandle, ManualExecutor, TaskError, ThreadPool};

fn send_sync_clone<T: Send + Sync + Clone>() {}

#[test]
fn an_abort_handle_is_clone_send_sync_and_aborts_from_another_thread() {
    send_sync_clone::<AbortHandle>();
    within("abort handle", || {
        let pool = ThreadPool::builder().threads(1).build().unwrap();
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = DropFlag(dropped.clone());
        // A task parked forever: only an abort ends it.
        let handle = pool.spawn(async move {
            let _flag = flag;
            std::future::pending::<()>().await
        });
        let abort = handle.abort_handle();
        let clone = abort.clone();
        assert!(!abort.is_finished());
        thread::spawn(move || clone.abort()).join().unwrap();
        assert!(block_on(handle).unwrap_err().is_cancelled());
        // The parked future is dropped once its pool runs the wake-up.
        while !abort.is_finished() {
            thread::sleep(Duration::from_millis(1));
        }
        assert!(dropped.load(SeqCst));
    });
}

#[test]
fn abort_through_a_shared_reference_keeps_a_finished_result() {
    let ex = ManualExecutor::new();
    let done = ex.run(|| 3);
    ex.run_until_idle();
    let shared: &_ = &done;
    shared.abort();
    shared.abort_handle().abort();
    assert!(done.abort_handle().is_finished());
    assert_eq!(block_on(done).unwrap(), 3);
}

#[test]
fn an_aborted_queued_task_is_never_polled_and_its_handle_resolves_once_it_is_dropped() {
    let ex = ManualExecutor::new();
    let polled = Arc::new(AtomicUsize::new(0));
    let p = polled.clone();
    let handle = ex.spawn(async move {
        p.fetch_add(1, SeqCst);
    });
    let abort = handle.abort_handle();
    abort.abort();
    let mut handle = handle;
    assert!(
        futures::FutureExt::now_or_never(&mut handle).is_none(),
        "its future is not dropped until the executor runs it"
    );
    assert!(!handle.is_finished() && !abort.is_finished());
    ex.run_until_idle();
    assert!(handle.is_finished() && abort.is_finished());
    assert_eq!(polled.load(SeqCst), 0);
    assert!(matches!(block_on(handle), Err(TaskError::Cancelled)));
}

#[test]
fn timed_jobs_cancel_through_a_shared_reference() {
    let timer = Timer::manual();
    let ex = ManualExecutor::new();
    let once = timer.execute_after(&ex, Duration::from_secs(1), || "never");
    let every = timer.execute_every(&ex, Duration::from_secs(1), || ());
    let (once_ref, every_ref) = (&once, &every);
    assert!(once_ref.cancel());
    assert!(!once_ref.cancel(), "a second cancel loses");
    assert!(every_ref.cancel());
    timer.advance(Duration::from_secs(5));
    assert_eq!(ex.run_until_idle(), 0);
    assert_eq!(every.runs(), 0);
    assert!(block_on(once).unwrap_err().is_cancelled());
}

/// As in tokio, a poll that returns `Ready` wins over an abort that
/// landed during it: the body ran to its end, so its value is the task's.
/// The handle, polled while that poll runs, waits for it (it resolves
/// only once the future is dropped), and both handles say finished
/// together.
#[test]
fn a_poll_that_finishes_wins_over_an_abort_that_lands_during_it() {
    within("abort mid-poll", || {
        let pool = ThreadPool::builder().threads(1).build().unwrap();
        let (started_tx, started) = std::sync::mpsc::channel();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let mut handle = pool.spawn(async move {
            started_tx.send(()).unwrap();
            wait.recv().unwrap();
            5
        });
        started.recv().unwrap(); // the poll that will finish is under way
        handle.abort();
        let abort = handle.abort_handle();
        assert!(futures::FutureExt::now_or_never(&mut handle).is_none());
        assert!(!handle.is_finished() && !abort.is_finished());
        go.send(()).unwrap();
        assert_eq!(block_on(&mut handle).unwrap(), 5);
        assert!(handle.is_finished() && abort.is_finished());
    });
}
