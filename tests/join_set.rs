//! `JoinSet`: results in completion order over any executor, abort on
//! drop, `shutdown` waits for the futures to go, `join_all`; and the
//! attacks: closed executors, a set dropped by one of its own tasks,
//! panicking tasks and `Drop`s.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::oneshot;

use support::{pool, quiet_test_panics, within, DropFlag, PanicsOnDrop, TEST_PANIC};
use viaduct::prelude::*;
use viaduct::{block_on, time, JoinSet, ManualExecutor, RejectReason, TaskError};

#[test]
fn results_come_out_in_the_order_tasks_end() {
    within("order", || {
        let pool = pool("set", 2);
        let mut set = JoinSet::new();
        let senders: Vec<_> = (0..3u32)
            .map(|i| {
                let (tx, rx) = oneshot::channel::<()>();
                set.spawn_on(
                    async move {
                        rx.await.unwrap();
                        i
                    },
                    &pool,
                );
                tx
            })
            .collect();
        assert_eq!(set.len(), 3);
        assert!(set.try_join_next().is_none());
        // Released last first: each comes out as it ends.
        for (tx, i) in senders.into_iter().zip(0..3u32).rev() {
            tx.send(()).unwrap();
            assert_eq!(block_on(set.join_next()).unwrap().unwrap(), i);
        }
        assert!(set.is_empty());
        assert!(block_on(set.join_next()).is_none());
    });
}

#[test]
fn a_set_spans_executors_and_the_global_pool() {
    within("executors", || {
        let pool = pool("a", 1);
        let manual = ManualExecutor::new();
        let mut set = JoinSet::new();
        set.spawn_on(async { "pool" }, &pool);
        set.spawn_on(async { "manual" }, &manual);
        set.spawn(async { "global" });
        manual.run_until_idle();
        let mut got: Vec<_> = block_on(set.join_all());
        got.sort_unstable();
        assert_eq!(got, ["global", "manual", "pool"]);
    });
}

/// tokio's `try_join_next` runs without the cooperative budget; so does
/// ours: a task draining 1,000 ready results gets them all, not the 128
/// its budget would allow.
#[test]
fn try_join_next_in_a_task_returns_every_ready_result() {
    within("try_join_next", || {
        let pool = pool("drain", 1);
        let manual = ManualExecutor::new();
        let mut set = JoinSet::new();
        for i in 0..1_000u64 {
            set.spawn_on(async move { i }, &manual);
        }
        assert_eq!(manual.run_until_idle(), 1_000);
        let drained = block_on(pool.spawn(async move {
            let mut sum = 0;
            let mut count = 0;
            while let Some(result) = set.try_join_next() {
                sum += result.unwrap();
                count += 1;
            }
            (count, sum, set.len())
        }))
        .unwrap();
        assert_eq!(drained, (1_000, 499_500, 0));
    });
}

#[test]
fn a_closed_executor_gives_rejected_in_the_set() {
    let closed = ManualExecutor::new();
    closed.close();
    let mut set = JoinSet::new();
    let abort = set.spawn_on(async { 1 }, &closed);
    assert!(abort.is_finished());
    let result = set.try_join_next().expect("ready at once");
    assert!(
        matches!(result, Err(TaskError::Rejected(RejectReason::Closed))),
        "{result:?}"
    );
}

#[test]
fn dropping_the_set_aborts_its_tasks() {
    within("drop", || {
        let pool = pool("drop", 1);
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = DropFlag(dropped.clone());
        let mut set = JoinSet::new();
        let abort = set.spawn_on(
            async move {
                let _flag = flag;
                std::future::pending::<()>().await
            },
            &pool,
        );
        block_on(pool.run(|| ())).unwrap(); // it has parked
        drop(set);
        while !abort.is_finished() {
            std::thread::yield_now();
        }
        assert!(dropped.load(SeqCst));
    });
}

#[test]
fn shutdown_returns_once_every_future_is_gone() {
    within("shutdown", || {
        let pool = pool("shut", 2);
        let dropped = Arc::new(AtomicUsize::new(0));
        let mut set = JoinSet::new();
        struct Count(Arc<AtomicUsize>);
        impl Drop for Count {
            fn drop(&mut self) {
                // A slow drop: shutdown must wait for it.
                std::thread::sleep(Duration::from_millis(1));
                self.0.fetch_add(1, SeqCst);
            }
        }
        for _ in 0..50 {
            // Made outside the future: a task aborted before its first
            // poll drops it too.
            let count = Count(dropped.clone());
            set.spawn_on(
                async move {
                    let _count = count;
                    std::future::pending::<()>().await
                },
                &pool,
            );
        }
        block_on(set.shutdown());
        assert!(set.is_empty());
        assert_eq!(dropped.load(SeqCst), 50);
    });
}

#[test]
fn abort_all_keeps_finished_values_and_cancels_the_rest() {
    let ex = ManualExecutor::new();
    let mut set = JoinSet::new();
    set.spawn_on(async { Some(1) }, &ex);
    ex.run_until_idle();
    set.spawn_on(std::future::pending::<Option<i32>>(), &ex);
    set.abort_all();
    assert_eq!(set.len(), 2);
    assert_eq!(set.try_join_next().unwrap().unwrap(), Some(1));
    // The aborted one has not ended: its executor has not dropped it.
    assert!(set.try_join_next().is_none());
    ex.run_until_idle();
    assert!(set.try_join_next().unwrap().unwrap_err().is_cancelled());
}

#[test]
fn join_all_resumes_a_panic_and_aborts_the_rest() {
    quiet_test_panics();
    within("join_all", || {
        let pool = pool("all", 1);
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = DropFlag(dropped.clone());
        let mut set = JoinSet::new();
        let parked = set.spawn_on(
            async move {
                let _flag = flag;
                std::future::pending::<u32>().await
            },
            &pool,
        );
        set.spawn_on(async { panic!("{TEST_PANIC}: in a set") }, &pool);
        let caught =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| block_on(set.join_all())))
                .unwrap_err();
        let msg = caught.downcast_ref::<String>().unwrap();
        assert!(msg.contains("in a set"), "{msg}");
        while !parked.is_finished() {
            std::thread::yield_now();
        }
        assert!(dropped.load(SeqCst));
    });
}

#[test]
fn a_set_dropped_inside_one_of_its_own_tasks() {
    within("self drop", || {
        let pool = pool("own", 1);
        let slot: Arc<Mutex<Option<JoinSet<u32>>>> = Arc::new(Mutex::new(None));
        let mut set = JoinSet::new();
        let s = slot.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let own = set.spawn_on(
            async move {
                // Waits until the set is in the slot, then drops it: this
                // task aborts itself, and the other task with it.
                let set = loop {
                    if let Some(set) = s.lock().unwrap().take() {
                        break set;
                    }
                    time::sleep(Duration::from_millis(1)).await;
                };
                drop(set);
                tx.send(()).unwrap();
                1
            },
            &pool,
        );
        let other = set.spawn_on(std::future::pending::<u32>(), &pool);
        *slot.lock().unwrap() = Some(set);
        rx.recv().unwrap();
        while !(own.is_finished() && other.is_finished()) {
            std::thread::yield_now();
        }
        assert_eq!(block_on(pool.run(|| 2)).unwrap(), 2, "the worker lives");
    });
}

#[test]
fn a_panicking_task_and_a_panicking_drop_read_as_errors() {
    quiet_test_panics();
    within("panics", || {
        let pool = pool("p", 1);
        let mut set = JoinSet::new();
        set.spawn_on(async { panic!("{TEST_PANIC}: poll") }, &pool);
        let bomb = set.spawn_on(
            async {
                let _bomb = PanicsOnDrop;
                std::future::pending::<()>().await
            },
            &pool,
        );
        let first = block_on(set.join_next()).unwrap().unwrap_err();
        assert_eq!(first.panic_message(), Some("test panic: poll"));
        bomb.abort();
        assert!(block_on(set.join_next())
            .unwrap()
            .unwrap_err()
            .is_cancelled());
        assert_eq!(block_on(pool.run(|| 3)).unwrap(), 3);
    });
}

#[test]
fn tasks_spawned_elsewhere_join_the_set_with_their_ids_and_a_refused_one_gets_its_own() {
    within("insert", || {
        let pool = pool("ins", 2);
        let manual = ManualExecutor::new();
        let closed = ManualExecutor::new();
        closed.close();
        let mut set = JoinSet::new();
        let a = set.insert(pool.spawn(async { 1u32 }));
        let b = set.insert(manual.spawn(async { 2u32 }));
        let refused = set.insert(closed.spawn(async { 3u32 }));
        assert_eq!(refused.id(), None);
        set.extend([pool.spawn(async { 4u32 })]);
        assert_eq!(set.len(), 4);
        manual.run_until_idle();
        let mut seen = Vec::new();
        while let Some(next) = block_on(set.join_next_with_id()) {
            seen.push(match next {
                Ok((id, v)) => (id, Ok(v)),
                Err((id, e)) => (id, Err(e)),
            });
        }
        let value_of = |id| seen.iter().find(|(i, _)| Some(*i) == id).map(|(_, r)| r);
        assert!(matches!(value_of(a.id()), Some(Ok(1))));
        assert!(matches!(value_of(b.id()), Some(Ok(2))));
        let refused_ids: Vec<_> = seen
            .iter()
            .filter(|(_, r)| matches!(r, Err(TaskError::Rejected(RejectReason::Closed))))
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(refused_ids.len(), 1);
        let mut ids: Vec<_> = seen.iter().map(|(id, _)| *id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 4, "every result has an id of its own");
    });
}

#[test]
fn an_inserted_task_is_aborted_with_the_set_and_detached_ones_go_on() {
    within("detach", || {
        let pool = pool("det", 2);
        let aborted = Arc::new(AtomicBool::new(false));
        let mut set = JoinSet::new();
        let flag = DropFlag(aborted.clone());
        set.insert(pool.spawn(async move {
            let _flag = flag;
            std::future::pending::<()>().await;
        }));
        block_on(set.shutdown()); // waits until the future is gone
        assert!(aborted.load(SeqCst));

        let ran = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = oneshot::channel::<()>();
        let r = ran.clone();
        set.spawn_on(
            async move {
                rx.await.unwrap();
                r.fetch_add(1, SeqCst);
            },
            &pool,
        );
        set.detach_all();
        assert!(set.is_empty());
        drop(set); // aborts nothing: the task left the set
        tx.send(()).unwrap();
        let deadline = std::time::Instant::now() + support::DEADLINE;
        while ran.load(SeqCst) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the detached task never ran"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

#[test]
fn try_join_next_with_id_takes_every_ready_result_whatever_the_budget() {
    within("try-with-id", || {
        let pool = pool("try-id", 2);
        let p = pool.clone();
        let got = block_on(pool.spawn(async move {
            let mut set = JoinSet::new();
            let aborts: Vec<_> = (0..1000u32)
                .map(|i| set.insert(p.spawn(async move { i })))
                .collect();
            while !aborts.iter().all(|a| a.is_finished()) {
                time::sleep(Duration::from_millis(1)).await;
            }
            let mut ids = Vec::new();
            while let Some(next) = set.try_join_next_with_id() {
                ids.push(Some(next.unwrap().0));
            }
            let mut expected: Vec<_> = aborts.iter().map(|a| a.id()).collect();
            ids.sort();
            expected.sort();
            (ids, expected)
        }))
        .unwrap();
        assert_eq!(got.0.len(), 1000);
        assert_eq!(got.0, got.1, "each result carries its task's id");
    });
}
