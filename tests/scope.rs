//! Borrowing scopes: tasks borrow the caller's data and have all ended
//! when `scope` returns, whatever happened (panics in tasks and in the
//! closure, dropped and leaked handles, aborts, a pool shut down under
//! them, a closed pool); scopes nest and never deadlock, on a one-thread
//! pool from inside a task included.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;

use futures::channel::oneshot;

use support::{pool, quiet_test_panics, within, DropFlag, PanicsOnDrop, TEST_PANIC};
use viaduct::prelude::*;
use viaduct::{block_on, time, RejectReason, TaskError, ThreadPool};

fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("")
}

#[test]
fn tasks_borrow_the_callers_data_mutably_and_shared() {
    within("borrow", || {
        let pool = pool("scope", 2);
        let mut halves = [vec![1u64; 1000], vec![2u64; 1000]];
        let factor = 3u64; // shared by every task
        let [a, b] = &mut halves;
        let sums = pool.scope(|s| {
            let x = s.run(|| {
                a.iter_mut()
                    .map(|v| {
                        *v *= factor;
                        *v
                    })
                    .sum::<u64>()
            });
            let y = s.spawn(async {
                b.iter_mut()
                    .map(|v| {
                        *v *= factor;
                        *v
                    })
                    .sum::<u64>()
            });
            (x.join().unwrap(), block_on(y).unwrap())
        });
        assert_eq!(sums, (3000, 6000));
        assert!(halves[0].iter().all(|&v| v == 3) && halves[1].iter().all(|&v| v == 6));
    });
}

#[test]
fn the_scope_waits_for_tasks_whose_handles_were_dropped_or_leaked() {
    within("waits", || {
        let pool = pool("wait", 2);
        let done = AtomicUsize::new(0);
        pool.scope(|s| {
            for i in 0..20u64 {
                let done = &done;
                let h = s.spawn(async move {
                    time::sleep(Duration::from_millis(i % 5)).await;
                    done.fetch_add(1, SeqCst);
                });
                if i % 2 == 0 {
                    drop(h);
                } else {
                    std::mem::forget(h);
                }
            }
        });
        assert_eq!(done.load(SeqCst), 20);
    });
}

#[test]
fn an_unjoined_panic_is_raised_after_every_task_ended() {
    quiet_test_panics();
    within("unjoined", || {
        let pool = pool("unjoined", 2);
        let slow_done = AtomicBool::new(false);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.scope(|s| {
                s.run(|| panic!("{TEST_PANIC}: scoped"));
                s.spawn(async {
                    time::sleep(Duration::from_millis(30)).await;
                    slow_done.store(true, SeqCst);
                });
            })
        }))
        .unwrap_err();
        assert_eq!(panic_message(&*caught), "test panic: scoped");
        assert!(
            slow_done.load(SeqCst),
            "raised only after the slow task ended"
        );
    });
}

#[test]
fn a_joined_panic_is_the_callers_to_read() {
    quiet_test_panics();
    within("joined", || {
        let pool = pool("joined", 1);
        let got = pool.scope(|s| {
            let h = s.run(|| -> u8 { panic!("{TEST_PANIC}: read") });
            h.join().unwrap_err().panic_message().map(str::to_owned)
        });
        assert_eq!(got.as_deref(), Some("test panic: read"));
    });
}

#[test]
fn a_panicking_closure_still_waits_for_its_tasks() {
    quiet_test_panics();
    within("closure", || {
        let pool = pool("closure", 2);
        let slow_done = AtomicBool::new(false);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.scope(|s| {
                s.spawn(async {
                    time::sleep(Duration::from_millis(30)).await;
                    slow_done.store(true, SeqCst);
                });
                panic!("{TEST_PANIC}: closure");
            })
        }))
        .unwrap_err();
        assert_eq!(panic_message(&*caught), "test panic: closure");
        assert!(slow_done.load(SeqCst));
    });
}

#[test]
fn scopes_nest_inside_tasks_of_a_one_thread_pool() {
    within("nest", || {
        let pool = pool("one", 1);
        let p = pool.clone();
        let total = block_on(pool.spawn(async move {
            let outer = [1u64, 2, 3];
            // On the pool's only worker: waiting must run the scoped tasks.
            p.scope(|s| {
                let sums: Vec<_> = outer
                    .iter()
                    .map(|&x| {
                        let p = &p;
                        s.run(move || {
                            let inner = [x; 4];
                            p.scope(|s2| {
                                let hs: Vec<_> = inner.iter().map(|v| s2.run(move || *v)).collect();
                                hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
                            })
                        })
                    })
                    .collect();
                sums.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
            })
        }))
        .unwrap();
        assert_eq!(total, 24);
    });
}

#[test]
fn tasks_spawn_more_tasks_into_their_scope() {
    within("fan-out", || {
        let pool = pool("fan", 2);
        let count = AtomicUsize::new(0);
        pool.scope(|s| {
            for _ in 0..4 {
                let count = &count;
                s.spawn(async move {
                    for _ in 0..4 {
                        s.run(move || count.fetch_add(1, SeqCst));
                    }
                });
            }
        });
        assert_eq!(count.load(SeqCst), 16);
    });
}

#[test]
fn a_closed_pool_rejects_and_the_scope_returns() {
    let pool = pool("closed", 1);
    pool.close();
    let local = 7;
    let result = pool.scope(|s| s.run(|| local).join());
    assert!(
        matches!(result, Err(TaskError::Rejected(RejectReason::Closed))),
        "{result:?}"
    );
}

#[test]
fn aborted_and_shut_down_tasks_are_waited_for_and_read_cancelled() {
    quiet_test_panics();
    within("abort", || {
        let pool = pool("abort", 1);
        let dropped = Arc::new(AtomicBool::new(false));
        let result = pool.scope(|s| {
            let flag = DropFlag(dropped.clone());
            let parked = s.spawn(async move {
                let _flag = flag;
                std::future::pending::<()>().await
            });
            block_on(pool.run(|| ())).unwrap(); // it has parked
            parked.abort();
            block_on(parked).unwrap_err()
        });
        assert!(result.is_cancelled());
        assert!(dropped.load(SeqCst));

        // A pool shut down under a scope: its parked tasks, woken after the
        // shutdown, are thrown away, and that ends them. (A task parked
        // forever would keep the scope waiting forever, as a thread
        // blocked forever keeps `std::thread::scope`.)
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.scope(|s| {
                let (wake_a, parked_a) = oneshot::channel::<()>();
                let (wake_b, parked_b) = oneshot::channel::<()>();
                let parked = s.spawn(parked_a);
                let _bomb = s.spawn(async move {
                    let _bomb = PanicsOnDrop;
                    parked_b.await
                });
                block_on(pool.run(|| ())).unwrap(); // both have parked
                pool.shutdown_now().unwrap();
                drop((wake_a, wake_b)); // wakes both, on a pool that is gone
                assert!(block_on(parked).unwrap_err().is_cancelled());
            })
        }))
        .unwrap_err();
        // The panic of the thrown-away future's `Drop`, which no handle
        // can read, is raised.
        assert_eq!(panic_message(&*caught), "test panic: drop");
    });
}

#[test]
fn a_waker_woken_after_the_scope_ended_is_harmless() {
    within("late wake", || {
        let pool = pool("late", 1);
        let saved: Arc<Mutex<Option<Waker>>> = Arc::default();
        let value = String::from("borrowed");
        pool.scope(|s| {
            let saved = saved.clone();
            let value = &value;
            s.spawn(std::future::poll_fn(move |cx| {
                *saved.lock().unwrap() = Some(cx.waker().clone());
                Poll::Ready(value.len())
            }));
        });
        drop(value);
        let waker = saved.lock().unwrap().take().unwrap();
        waker.wake();
        assert_eq!(block_on(pool.run(|| 1)).unwrap(), 1);
    });
}

#[test]
fn the_global_scope_works_from_outside_any_pool() {
    within("global", || {
        let words = ["a", "bb", "ccc"];
        let total: usize = viaduct::scope(|s| {
            let hs: Vec<_> = words.iter().map(|w| s.run(move || w.len())).collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(total, 6);
        let _: &ThreadPool = ThreadPool::global();
    });
}

#[test]
fn handles_are_awaitable_from_other_scoped_tasks() {
    within("await", || {
        let pool = pool("await", 2);
        let data = [5u32; 10];
        let doubled = pool.scope(|s| {
            let sum = s.run(|| data.iter().sum::<u32>());
            let twice = s.spawn(async move { sum.await.unwrap() * 2 });
            twice.join().unwrap()
        });
        assert_eq!(doubled, 100);
    });
}

#[test]
fn tasks_await_their_siblings_on_a_one_thread_pool() {
    within("siblings", || {
        let pool = pool("sib", 1);
        let p = pool.clone();
        let got = block_on(pool.spawn(async move {
            let base = 20u32;
            p.scope(|s| {
                let slow = s.spawn(async {
                    time::sleep(Duration::from_millis(5)).await;
                    base
                });
                // Awaited, not joined: the waiting task yields the worker.
                let next = s.spawn(async move { slow.await.unwrap() + 1 });
                next.join().unwrap()
            })
        }))
        .unwrap();
        assert_eq!(got, 21);
    });
}

#[test]
fn scopes_nested_past_the_stack_panic_before_borrowing() {
    quiet_test_panics();
    within("deep", || {
        // Nothing joins: each scope's own wait runs the next level, so the
        // waits nest until the stack is nearly full. The scope there must
        // refuse before its closure runs (its wait could not help, and on
        // one thread nobody else would run the tasks), and the unread
        // panic then travels up through every scope.
        fn nest(pool: &ThreadPool, depth: usize) -> usize {
            pool.scope(|s| {
                s.run(move || nest(pool, depth + 1));
                depth
            })
        }
        let pool = ThreadPool::builder()
            .threads(1)
            .stack_size(256 * 1024)
            .build()
            .unwrap();
        let p = pool.clone();
        let err = block_on(pool.run(move || nest(&p, 0))).unwrap_err();
        let message = err.panic_message().unwrap_or_default().to_owned();
        assert!(message.contains("nested too deep"), "{message}");
        assert_eq!(block_on(pool.run(|| 1)).unwrap(), 1, "the worker lives");
    });
}
