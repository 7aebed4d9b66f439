//! Stall detection: a long poll is reported once, while it still runs,
//! with its task id, worker, spawn location and how long it has run; short
//! polls never are; bad settings are build errors; a panicking handler
//! does not stop the watcher.

#[allow(dead_code)] // only `within` and `quiet_test_panics` are used here
mod support;

use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{quiet_test_panics, within, TEST_PANIC};
use viaduct::dump::{TaskKind, TaskState};
use viaduct::pool::{BuildError, Stall};
use viaduct::{block_on, ExecutorExt, ThreadPool};

const THRESHOLD: Duration = Duration::from_millis(40);

/// A pool that sends every stall it sees.
fn watched(name: &str, threads: usize, threshold: Duration) -> (ThreadPool, Receiver<Stall>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let pool = ThreadPool::builder()
        .threads(threads)
        .name(name)
        .stall_threshold(threshold)
        .on_stall(move |s| {
            let _ = tx.lock().unwrap().send(s.clone());
        })
        .build()
        .unwrap();
    (pool, rx)
}

#[test]
fn a_long_poll_is_reported_once_while_it_runs_with_its_id_worker_location_and_time() {
    within("stall", || {
        let (pool, stalls) = watched("stalls", 2, THRESHOLD);
        let (release, wait) = mpsc::channel::<()>();
        let line = line!() + 1;
        let stuck = pool.run(move || wait.recv().unwrap());
        // The poll ends only once its stall has been reported.
        let stall = stalls.recv().unwrap();
        assert!(!stuck.is_finished());
        assert_eq!(Some(stall.task()), stuck.id());
        assert!(stall.worker().starts_with("stalls-"), "{}", stall.worker());
        assert_eq!(stall.location().file(), file!());
        assert_eq!(stall.location().line(), line);
        assert!(stall.elapsed() >= THRESHOLD, "{:?}", stall.elapsed());
        let text = stall.to_string();
        assert!(
            text.contains(&format!("task {}", stuck.id().unwrap())),
            "{text}"
        );
        assert!(text.contains(&format!("tests/stall.rs:{line}")), "{text}");
        assert!(text.contains(stall.worker()), "{text}");
        assert!(format!("{stall:?}").contains("Stall"));
        // Still stuck for many more thresholds: no second report.
        std::thread::sleep(THRESHOLD * 6);
        release.send(()).unwrap();
        block_on(stuck).unwrap();
        pool.shutdown().unwrap();
        assert!(stalls.try_recv().is_err(), "reported twice");
    });
}

#[test]
fn a_blocking_strand_post_is_reported_as_the_runner_of_the_strand_created_at_its_line() {
    within("runner", || {
        let (pool, stalls) = watched("runner", 2, THRESHOLD);
        let line = line!() + 1;
        let strand = viaduct::Strand::new(pool.clone());
        let (release, wait) = mpsc::channel::<()>();
        let wait = Mutex::new(wait);
        strand.post(move || wait.lock().unwrap().recv().unwrap());
        let stall = stalls.recv().unwrap();
        assert_eq!(stall.kind(), TaskKind::StrandRunner);
        assert_eq!(
            (stall.location().file(), stall.location().line()),
            (file!(), line)
        );
        let text = stall.to_string();
        assert!(
            text.starts_with(&format!(
                "strand runner {} of the strand created at",
                stall.task()
            )),
            "{text}"
        );
        // The dump lists the runner, labelled, running on the stall's worker.
        let dump = pool.dump();
        let entry = dump
            .task(stall.task())
            .expect("the running runner is listed");
        assert_eq!(entry.kind(), TaskKind::StrandRunner);
        assert_eq!(
            entry.state(),
            &TaskState::Running {
                worker: Some(stall.worker().to_string())
            }
        );
        assert!(dump.to_string().contains("(strand runner;"), "{dump}");
        release.send(()).unwrap();
        drop(strand);
        pool.shutdown().unwrap();
        // A user's task is a plain task.
        let (pool, stalls) = watched("plain", 1, THRESHOLD);
        let stuck = pool.run(|| std::thread::sleep(THRESHOLD * 3));
        assert_eq!(stalls.recv().unwrap().kind(), TaskKind::Spawned);
        block_on(stuck).unwrap();
    });
}

#[test]
fn each_long_poll_is_reported_and_short_ones_never_are() {
    within("many", || {
        let (pool, stalls) = watched("many", 2, Duration::from_secs(2));
        // Thousands of short polls: none lasts two seconds.
        let handles: Vec<_> = (0..5_000).map(|i| pool.run(move || i)).collect();
        for h in handles {
            block_on(h).unwrap();
        }
        assert!(stalls.try_recv().is_err());
        drop(pool);

        let (pool, stalls) = watched("two", 2, THRESHOLD);
        let mut ids = Vec::new();
        for _ in 0..2 {
            let (release, wait) = mpsc::channel::<()>();
            let stuck = pool.run(move || wait.recv().unwrap());
            let stall = stalls.recv().unwrap();
            ids.push((stall.task(), stuck.id().unwrap()));
            release.send(()).unwrap();
            block_on(stuck).unwrap();
        }
        assert_eq!(ids[0].0, ids[0].1);
        assert_eq!(ids[1].0, ids[1].1);
        assert_ne!(ids[0].0, ids[1].0);
    });
}

#[test]
fn a_panicking_stall_handler_is_reported_and_the_watcher_goes_on() {
    quiet_test_panics();
    within("panicky", || {
        let calls = Arc::new(AtomicUsize::new(0));
        let panics = Arc::new(AtomicUsize::new(0));
        let (c, p) = (calls.clone(), panics.clone());
        let pool = ThreadPool::builder()
            .threads(1)
            .name("panicky")
            .stall_threshold(THRESHOLD)
            .on_stall(move |_| {
                c.fetch_add(1, SeqCst);
                panic!("{TEST_PANIC}: in on_stall");
            })
            .on_unobserved_panic(move |_| {
                p.fetch_add(1, SeqCst);
            })
            .build()
            .unwrap();
        for round in 1..=2 {
            let seen = calls.clone();
            let stuck = pool.run(move || {
                while seen.load(SeqCst) < round {
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            block_on(stuck).unwrap();
        }
        pool.shutdown().unwrap();
        assert_eq!(calls.load(SeqCst), 2);
        assert_eq!(panics.load(SeqCst), 2);
    });
}

#[test]
fn zero_thresholds_and_handlers_without_one_are_build_errors() {
    let err = ThreadPool::builder()
        .stall_threshold(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(matches!(err, BuildError::ZeroStallThreshold));
    assert!(err.to_string().contains("stall_threshold"), "{err}");
    let err = ThreadPool::builder().on_stall(|_| ()).build().unwrap_err();
    assert!(matches!(err, BuildError::OnStallWithoutThreshold));
    assert!(err.to_string().contains("stall_threshold"), "{err}");
}

#[test]
fn a_pool_with_an_endless_threshold_never_reports_and_shuts_down_promptly() {
    within("max", || {
        let (pool, stalls) = watched("max", 1, Duration::MAX);
        block_on(pool.run(|| std::thread::sleep(Duration::from_millis(50)))).unwrap();
        pool.shutdown().unwrap(); // joins the watcher too
        assert!(stalls.try_recv().is_err());
    });
}

#[test]
fn a_stall_of_a_task_run_inside_another_tasks_wait_names_the_inner_task() {
    within("nested", || {
        let (pool, stalls) = watched("nested", 1, THRESHOLD);
        let (release, wait) = mpsc::channel::<()>();
        let inner = Arc::new(Mutex::new(None));
        let (p, slot) = (pool.clone(), inner.clone());
        let outer = pool.run(move || {
            // A task that waits by running others: the stall is the inner one's.
            let handle = p.run(move || wait.recv().unwrap());
            *slot.lock().unwrap() = handle.id();
            block_on(handle).unwrap();
        });
        let stall = stalls.recv().unwrap();
        assert_eq!(Some(stall.task()), *inner.lock().unwrap());
        assert_ne!(Some(stall.task()), outer.id());
        release.send(()).unwrap();
        block_on(outer).unwrap();
    });
}
