//! Cancellation tokens: the tree (parents fire children, never the
//! reverse), `cancelled()`, `cancel_after` on the timer, and
//! `spawn_cancellable` (cancelled at once, future dropped even while
//! parked, never polled if the token fired first, continuations skipped);
//! and the attacks: cancelling from inside a guarded task, panicking
//! wakers and `Drop`s, `Duration::MAX`, deep trees, and cancel racing
//! spawns.

mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use support::{pool, quiet_test_panics, within, DropFlag, PanicsOnDrop, TEST_PANIC};
use viaduct::cancel::CancellationToken;
use viaduct::prelude::*;
use viaduct::{block_on, ManualExecutor, TaskError};

/// A future that counts its polls and never completes.
struct CountPolls(Arc<AtomicUsize>);

impl Future for CountPolls {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        self.0.fetch_add(1, SeqCst);
        Poll::Pending
    }
}

/// Polls `fut` once with `waker`.
fn poll_once<F: Future + Unpin>(fut: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(waker))
}

struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, SeqCst);
    }
}

struct PanicsOnWake;

impl Wake for PanicsOnWake {
    fn wake(self: Arc<Self>) {
        panic!("{TEST_PANIC}: waker");
    }
}

#[test]
fn a_parent_fires_its_descendants_and_never_the_reverse() {
    let root = CancellationToken::new();
    let child = root.child_token();
    let grandchild = child.child_token();
    let sibling = root.child_token();
    grandchild.cancel();
    assert!(grandchild.is_cancelled());
    assert!(!child.is_cancelled() && !root.is_cancelled() && !sibling.is_cancelled());
    child.cancel();
    assert!(!root.is_cancelled() && !sibling.is_cancelled());
    root.cancel();
    assert!(sibling.is_cancelled());
    assert!(root.child_token().is_cancelled(), "born cancelled");
    let clone = root.clone();
    root.cancel(); // idempotent
    assert!(clone.is_cancelled());
}

#[test]
fn cancelled_wakes_every_waiter_and_is_ready_once_fired() {
    let token = CancellationToken::new();
    let child = token.child_token();
    let flags: Vec<Arc<Flag>> = (0..3)
        .map(|_| Arc::new(Flag(AtomicBool::new(false))))
        .collect();
    let mut waits = [token.cancelled(), child.cancelled(), child.cancelled()];
    for (wait, flag) in waits.iter_mut().zip(&flags) {
        assert!(poll_once(wait, &Waker::from(flag.clone())).is_pending());
    }
    // A re-poll with another waker: only the newest is woken.
    let newer = Arc::new(Flag(AtomicBool::new(false)));
    assert!(poll_once(&mut waits[0], &Waker::from(newer.clone())).is_pending());
    token.cancel();
    assert!(newer.0.load(SeqCst));
    assert!(!flags[0].0.load(SeqCst));
    assert!(flags[1].0.load(SeqCst) && flags[2].0.load(SeqCst));
    for wait in &mut waits {
        assert!(poll_once(wait, futures::task::noop_waker_ref()).is_ready());
    }
    assert!(poll_once(&mut token.cancelled(), futures::task::noop_waker_ref()).is_ready());
}

#[test]
fn a_waker_that_panics_does_not_stop_the_others() {
    quiet_test_panics();
    let token = CancellationToken::new();
    let mut bad = token.cancelled();
    let mut good = token.cancelled();
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    assert!(poll_once(&mut bad, &Waker::from(Arc::new(PanicsOnWake))).is_pending());
    assert!(poll_once(&mut good, &Waker::from(flag.clone())).is_pending());
    token.cancel(); // must not unwind
    assert!(flag.0.load(SeqCst));
}

#[test]
fn a_cancellable_task_parked_forever_is_cancelled_and_dropped() {
    within("parked", || {
        let pool = pool("cancel", 2);
        let token = CancellationToken::new();
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = DropFlag(dropped.clone());
        let started = Arc::new(Barrier::new(2));
        let s = started.clone();
        let parked = pool.spawn_cancellable(&token, async move {
            let _flag = flag;
            s.wait();
            std::future::pending::<()>().await
        });
        let task = parked.abort_handle();
        started.wait();
        // Waiting or not yet: either way the handle says cancelled.
        let waiter = thread::spawn(move || block_on(parked));
        token.cancel();
        let result = waiter.join().unwrap();
        assert!(matches!(result, Err(TaskError::Cancelled)), "{result:?}");
        while !task.is_finished() {
            thread::yield_now(); // the pool drops the future at its next turn
        }
        assert!(dropped.load(SeqCst));
    });
}

#[test]
fn a_parked_task_of_a_token_nobody_holds_does_not_keep_its_pool() {
    within("orphan", || {
        let pool = pool("orphan", 1);
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = DropFlag(dropped.clone());
        {
            let token = CancellationToken::new();
            drop(pool.spawn_cancellable(&token, async move {
                let _flag = flag;
                std::future::pending::<()>().await
            }));
            block_on(pool.run(|| ())).unwrap(); // it has parked
        }
        // Nothing can wake or cancel it now: like any such detached task,
        // it is dropped, and the pool shuts down.
        pool.shutdown().unwrap();
        assert!(dropped.load(SeqCst));
    });
}

/// As in tokio, the handle resolves once the future is dropped, not when
/// the token fires: then whatever the task held is released.
#[test]
fn a_fired_token_cancels_the_handle_once_the_executor_drops_the_future() {
    let ex = ManualExecutor::new();
    let token = CancellationToken::new();
    let polls = Arc::new(AtomicUsize::new(0));
    let mut handle = ex.spawn_cancellable(&token, CountPolls(polls.clone()));
    assert_eq!(ex.run_until_idle(), 1);
    assert_eq!(polls.load(SeqCst), 1);
    token.cancel();
    assert!(!handle.is_finished(), "its future is not dropped yet");
    assert!(futures::FutureExt::now_or_never(&mut handle).is_none());
    assert_eq!(ex.run_until_idle(), 1, "the executor drops the future");
    assert!(handle.is_finished());
    assert!(block_on(handle).unwrap_err().is_cancelled());
    assert_eq!(polls.load(SeqCst), 1, "never polled again");
}

#[test]
fn a_fired_token_means_the_future_is_never_polled() {
    let ex = ManualExecutor::new();
    let token = CancellationToken::new();
    token.cancel();
    let polls = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = DropFlag(dropped.clone());
    let polled = polls.clone();
    let handle = ex.spawn_cancellable(&token, async move {
        let _flag = flag;
        polled.fetch_add(1, SeqCst);
    });
    assert!(dropped.load(SeqCst), "dropped unpolled, before spawning");
    ex.run_until_idle();
    assert_eq!(polls.load(SeqCst), 0);
    assert!(block_on(handle).unwrap_err().is_cancelled());
    // A child of a fired parent too.
    let child = token.child_token();
    let handle = ex.spawn_cancellable(&child, CountPolls(polls.clone()));
    ex.run_until_idle();
    assert_eq!(polls.load(SeqCst), 0);
    assert!(block_on(handle).unwrap_err().is_cancelled());
}

#[test]
fn a_task_that_finished_first_keeps_its_value() {
    let ex = ManualExecutor::new();
    let token = CancellationToken::new();
    let handle = ex.spawn_cancellable(&token, async { 5 });
    ex.run_until_idle();
    token.cancel();
    assert_eq!(block_on(handle).unwrap(), 5);
}

#[test]
fn value_steps_after_a_cancelled_handle_do_not_run() {
    within("continuations", || {
        let pool = pool("steps", 2);
        let token = CancellationToken::new();
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let chained = pool
            .spawn_cancellable(&token, std::future::pending::<u32>())
            .then(move |v| {
                r.store(true, SeqCst);
                v + 1
            })
            .then_try(|r| r.map_err(|e| e.is_cancelled()));
        token.cancel();
        assert_eq!(block_on(chained).unwrap(), Err(true));
        assert!(!ran.load(SeqCst));
    });
}

#[test]
fn cancelling_from_inside_a_guarded_task_returns() {
    within("self cancel", || {
        let pool = pool("self", 1);
        let token = CancellationToken::new();
        let t = token.clone();
        let after = Arc::new(AtomicBool::new(false));
        let a = after.clone();
        let handle = pool.spawn_cancellable(&token, async move {
            t.cancel();
            a.store(true, SeqCst); // the poll goes on to its end
            7
        });
        // The poll the token fired in went on to its end and finished the
        // task: its value wins, as in tokio.
        assert_eq!(block_on(handle).unwrap(), 7);
        assert!(after.load(SeqCst));
        assert!(token.is_cancelled());
    });
}

#[test]
fn a_future_whose_drop_panics_does_not_unwind_through_cancel() {
    quiet_test_panics();
    within("drop panics", || {
        let pool = pool("droppanic", 1);
        let token = CancellationToken::new();
        let handle = pool.spawn_cancellable(&token, async {
            let _bomb = PanicsOnDrop;
            std::future::pending::<()>().await
        });
        block_on(pool.run(|| ())).unwrap(); // it has parked
        token.cancel();
        assert!(block_on(handle).unwrap_err().is_cancelled());
        assert_eq!(block_on(pool.run(|| 1)).unwrap(), 1, "the worker lives");
    });
}

#[test]
fn cancel_after_fires_on_the_timer_and_max_never_fires() {
    within("cancel_after", || {
        let token = CancellationToken::new();
        token.cancel_after(Duration::from_millis(5));
        block_on(token.cancelled());
        assert!(token.is_cancelled());

        let never = CancellationToken::new();
        never.cancel_after(Duration::MAX);
        never.cancel_after(Duration::from_secs(u64::MAX));
        let fired = viaduct::time::timeout(Duration::from_millis(20), never.cancelled());
        assert!(block_on(fired).is_err());
        assert!(!never.is_cancelled());

        let now = CancellationToken::new();
        now.cancel_after(Duration::ZERO);
        assert!(now.is_cancelled());

        // The earliest deadline wins.
        let twice = CancellationToken::new();
        twice.cancel_after(Duration::from_secs(3600));
        twice.cancel_after(Duration::from_millis(1));
        twice.cancel_after(Duration::from_secs(7200));
        block_on(twice.cancelled());
    });
}

#[test]
fn a_deep_tree_of_tokens_neither_fires_nor_drops_by_recursion() {
    within("deep", || {
        let root = CancellationToken::new();
        let mut leaf = root.clone();
        for _ in 0..200_000 {
            leaf = leaf.child_token();
        }
        let deep = leaf.clone();
        root.cancel();
        assert!(deep.is_cancelled());
        drop(root);
        drop(leaf);
        drop(deep); // the whole chain goes here

        let root = CancellationToken::new();
        let mut leaf = root.clone();
        for _ in 0..200_000 {
            leaf = leaf.child_token();
        }
        drop(root);
        drop(leaf); // unfired chain
    });
}

#[test]
fn cancel_racing_spawns_loses_nothing() {
    within("race", || {
        let pool = pool("race", 2);
        for _ in 0..200 {
            let token = CancellationToken::new();
            let canceller = {
                let token = token.clone();
                thread::spawn(move || token.cancel())
            };
            let polls = Arc::new(AtomicUsize::new(0));
            let handles: Vec<_> = (0..20)
                .map(|_| {
                    let fired_before = token.is_cancelled();
                    let p = polls.clone();
                    let h = pool.spawn_cancellable(&token, async move {
                        p.fetch_add(1, SeqCst);
                        std::future::pending::<()>().await
                    });
                    (fired_before, h)
                })
                .collect();
            canceller.join().unwrap();
            let mut started_after = 0;
            for (fired_before, h) in handles {
                // Parked forever: only the token ends each of them.
                assert!(block_on(h).unwrap_err().is_cancelled());
                started_after += usize::from(fired_before);
            }
            // Tasks spawned once the token had fired were never polled.
            assert!(polls.load(SeqCst) <= 20 - started_after);
        }
    });
}

struct CountWakes(AtomicUsize);

impl Wake for CountWakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A task re-polls its `cancelled()` with the waker it registered (as a
/// `select!` loop does), without taking the token's lock, while another
/// thread fires the token: the registration is never lost, the waker is
/// woken exactly once, once woken the wait is ready, and then it keeps no
/// clone of the waker (which would keep its task alive).
#[test]
fn a_wait_re_polled_by_its_task_while_the_token_fires_is_woken_once() {
    within("re-polled", || {
        for _ in 0..500 {
            let token = CancellationToken::new();
            let wakes = Arc::new(CountWakes(AtomicUsize::new(0)));
            let waker = Waker::from(wakes.clone());
            let mut wait = token.cancelled();
            assert!(poll_once(&mut wait, &waker).is_pending());
            let firing = {
                let token = token.clone();
                thread::spawn(move || token.cancel())
            };
            loop {
                let woken = wakes.0.load(SeqCst) > 0;
                let polled = poll_once(&mut wait, &waker.clone());
                if polled.is_ready() {
                    break;
                }
                assert!(!woken, "woken, yet still pending");
                thread::yield_now();
            }
            firing.join().unwrap();
            assert_eq!(wakes.0.load(SeqCst), 1, "one wake for one registration");
            drop(waker);
            assert_eq!(
                Arc::strong_count(&wakes),
                1,
                "a finished wait holds no waker of its task"
            );
        }
    });
}

#[test]
fn a_drop_guard_fires_its_token_however_the_scope_ends_unless_disarmed() {
    quiet_test_panics();
    let token = CancellationToken::new();
    let child = token.child_token();
    {
        let _guard = token.clone().drop_guard();
        assert!(!token.is_cancelled());
    }
    assert!(token.is_cancelled() && child.is_cancelled());

    let unwound = CancellationToken::new();
    let guard = unwound.clone().drop_guard();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _guard = guard;
        panic!("{TEST_PANIC}: the scope unwinds");
    }));
    assert!(caught.is_err());
    assert!(unwound.is_cancelled());

    let kept = CancellationToken::new();
    let back = kept.clone().drop_guard().disarm();
    drop(back);
    assert!(!kept.is_cancelled());
}

#[test]
fn run_until_cancelled_returns_the_output_or_none_and_drops_the_future() {
    within("run-until", || {
        let token = CancellationToken::new();
        assert_eq!(block_on(token.run_until_cancelled(async { 3 })), Some(3));

        // Fired from another thread while the future is parked.
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = DropFlag(dropped.clone());
        let t = token.clone();
        let firing = thread::spawn(move || {
            thread::sleep(Duration::from_millis(5));
            t.cancel();
        });
        let out = block_on(token.run_until_cancelled(async move {
            let _flag = flag;
            std::future::pending::<u8>().await
        }));
        firing.join().unwrap();
        assert_eq!(out, None);
        assert!(dropped.load(SeqCst));

        // Already fired: the future is never polled.
        let polls = Arc::new(AtomicUsize::new(0));
        assert_eq!(
            block_on(token.run_until_cancelled(CountPolls(polls.clone()))),
            None
        );
        assert_eq!(polls.load(SeqCst), 0);
    });
}
