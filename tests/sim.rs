//! The deterministic simulation: replay by seed, virtual time, the global
//! functions inside it, deadlock and step-limit errors, panics, `check`,
//! and every strand-based type running on it unchanged.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use viaduct::cancel::CancellationToken;
use viaduct::dump::WaitsOn;
use viaduct::prelude::*;
use viaduct::sim::{self, SimError, Simulation, Strategy};
use viaduct::{Guarded, JoinSet, KeyedStrands, PriorityExecutor, Strand, TaskError};

mod support;
use support::{crossed_locks, quiet_test_panics, within, TEST_PANIC};

/// A program that uses every kind of viaduct work on the simulated pool,
/// and returns the order in which its pieces ran.
async fn everything(sim: Simulation) -> Vec<String> {
    let ex = sim.executor();
    let log = Arc::new(Mutex::new(Vec::new()));
    let note = {
        let log = log.clone();
        move |s: String| log.lock().unwrap().push(s)
    };

    // Tasks, continuations and a hop to a strand.
    let strand = Strand::new(ex.clone());
    let n = note.clone();
    let chained = ex.run(|| 1).then(|v| v + 1).via(&strand).then(move |v| {
        n(format!("chain {v}"));
        v
    });
    // Guarded: sections and locks from several tasks.
    let counter = Guarded::new(ex.clone(), 0u32);
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let (c, n) = (counter.clone(), note.clone());
            ex.spawn(async move {
                c.with(|v| *v += 1).await.unwrap();
                *c.lock().await += 1;
                n(format!("worker {i}"));
            })
        })
        .collect();
    // Keyed strands and priorities.
    let keyed = KeyedStrands::new(ex.clone());
    let prio = PriorityExecutor::new(ex.clone());
    let k: Vec<_> = (0..6u32)
        .map(|i| {
            let n = note.clone();
            keyed.spawn(i % 2, async move { n(format!("key {} #{i}", i % 2)) })
        })
        .collect();
    let p: Vec<_> = (0..3)
        .map(|i| {
            let n = note.clone();
            prio.spawn_with(i, async move { n(format!("priority {i}")) })
        })
        .collect();
    // A join set, timers on the ambient clock, a token fired by time.
    let mut set = JoinSet::new();
    for i in 0..3u64 {
        set.spawn(async move {
            viaduct::time::sleep(Duration::from_millis(10 * (3 - i))).await;
            i
        });
    }
    let token = CancellationToken::new();
    token.cancel_after(Duration::from_secs(5));
    let parked = ex.spawn_cancellable(&token, std::future::pending::<()>());
    let timed_out = viaduct::time::timeout(Duration::from_secs(1), std::future::pending::<()>());

    assert_eq!(chained.await.unwrap(), 2);
    for w in workers {
        w.await.unwrap();
    }
    assert_eq!(counter.with(|v| *v).await.unwrap(), 8);
    for h in k.into_iter().chain(p) {
        h.await.unwrap();
    }
    let mut order = Vec::new();
    while let Some(r) = set.join_next().await {
        order.push(r.unwrap());
    }
    note(format!("join set {order:?}"));
    assert!(timed_out.await.is_err());
    assert!(matches!(parked.await, Err(TaskError::Cancelled)));
    note(format!("elapsed {:?}", sim.elapsed()));
    let log = log.lock().unwrap().clone();
    log
}

#[test]
fn the_same_seed_replays_the_same_run_and_other_seeds_differ() {
    within("replay", || {
        let run = |seed| {
            let sim = Simulation::new(seed);
            let log = sim.block_on(everything(sim.clone())).unwrap();
            (log, sim.trace_hash(), sim.steps())
        };
        let first = run(17);
        assert_eq!(first, run(17));
        assert!(
            first.0.contains(&"join set [2, 1, 0]".to_owned()),
            "{:?}",
            first.0
        );
        assert!(first.0.contains(&"elapsed 5s".to_owned()), "{:?}", first.0);
        // Keyed strands keep each key's order, whatever the seed.
        let keys: Vec<_> = first.0.iter().filter(|s| s.starts_with("key 0")).collect();
        assert_eq!(keys, ["key 0 #0", "key 0 #2", "key 0 #4"]);
        // Other seeds take other schedules: most of 8 give other traces,
        // and the order of the pieces differs for some.
        let others: Vec<_> = (100..108).map(run).collect();
        let traces: std::collections::HashSet<u64> = others.iter().map(|r| r.1).collect();
        assert!(traces.len() >= 6, "only {} distinct traces", traces.len());
        assert!(
            others.iter().any(|r| r.0 != first.0),
            "every seed ran in one order"
        );
    });
}

#[test]
fn an_hour_of_one_second_ticks_runs_at_once() {
    within("hour", || {
        let sim = Simulation::new(1).workers(2);
        let started = Instant::now();
        let ticks = sim
            .block_on(async {
                viaduct::time::interval(Duration::from_secs(1))
                    .take(3601)
                    .count()
                    .await
            })
            .unwrap();
        assert_eq!(ticks, 3601);
        assert_eq!(sim.elapsed(), Duration::from_secs(3600));
        // Far less in practice (see BENCHMARKS.md); bounded for a loaded machine.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    });
}

#[test]
fn inside_the_simulation_the_global_functions_use_its_pool_and_clock() {
    within("ambient", || {
        let sim = Simulation::new(3);
        let me = std::thread::current().id();
        let (on, slept) = sim
            .block_on(async move {
                let on = viaduct::spawn(async { std::thread::current().id() })
                    .await
                    .unwrap();
                let ran = viaduct::run(|| 5).await.unwrap();
                assert_eq!(ran, 5);
                viaduct::time::sleep(Duration::from_secs(86_400)).await;
                let job = viaduct::Inline.execute_after(Duration::from_secs(10), || 7);
                assert_eq!(job.await.unwrap(), 7);
                (on, true)
            })
            .unwrap();
        assert_eq!(on, me, "the global spawn ran on the simulation's thread");
        assert!(slept);
        assert_eq!(sim.elapsed(), Duration::from_secs(86_410));
        // Outside `block_on` the global pool is the real one again.
        let pool_thread = viaduct::block_on(viaduct::spawn(async { std::thread::current().id() }));
        assert_ne!(pool_thread.unwrap(), me);
    });
}

#[test]
fn a_lock_order_inversion_is_reported_as_a_deadlock_with_its_cycle() {
    within("deadlock", || {
        let sim = Simulation::new(4);
        let ex = sim.executor();
        let outcome = sim.block_on(async move {
            let [one, two] = crossed_locks(&ex);
            one.await.unwrap();
            two.await.unwrap();
        });
        let Err(SimError::Deadlock(dump)) = outcome else {
            panic!("{outcome:?}")
        };
        let cycles = dump.deadlocks();
        assert_eq!(cycles.len(), 1, "{dump}");
        assert_eq!(cycles[0].steps().len(), 2);
        let text = SimError::Deadlock(dump).to_string();
        assert!(text.starts_with("deadlock: no task can run"), "{text}");
        assert!(text.contains("tests/sim.rs"), "{text}");
    });
}

#[test]
fn a_future_nothing_wakes_is_a_deadlock_not_a_hang() {
    within("never woken", || {
        let sim = Simulation::new(5);
        let outcome = sim.block_on(std::future::pending::<()>());
        let Err(SimError::Deadlock(dump)) = outcome else {
            panic!("{outcome:?}")
        };
        assert!(dump.deadlocks().is_empty());
        assert_eq!(dump.tasks().len(), 1, "the future's own task: {dump}");
        // A sleep or timeout of Duration::MAX never fires either, and the
        // clock does not run to its end looking for it.
        // (Made inside `block_on`, where they take the simulated clock.)
        let outcome = sim.block_on(async { viaduct::time::sleep(Duration::MAX).await });
        assert!(matches!(outcome, Err(SimError::Deadlock(_))), "{outcome:?}");
        let outcome = sim.block_on(async {
            viaduct::time::timeout(Duration::MAX, std::future::pending::<()>()).await
        });
        assert!(matches!(outcome, Err(SimError::Deadlock(_))), "{outcome:?}");
        assert_eq!(sim.elapsed(), Duration::ZERO);
    });
}

#[test]
fn a_program_that_never_settles_stops_at_the_step_limit() {
    within("step limit", || {
        // A task that yields forever, while the future waits for it.
        let sim = Simulation::new(6).max_steps(5_000);
        let ex = sim.executor();
        let outcome = sim.block_on(async move {
            ex.spawn(async {
                loop {
                    viaduct::coop::consume_budget().await;
                }
            })
            .await
            .unwrap();
        });
        assert!(
            matches!(outcome, Err(SimError::StepLimit { steps: 5_000 })),
            "{outcome:?}"
        );
        assert_eq!(sim.steps(), 5_000);
        // The limit is per call: the same world runs the next one, the
        // spinning task included.
        assert_eq!(sim.block_on(async { 7 }).unwrap(), 7);
        assert!(sim.steps() > 5_000);
        // An interval nobody stops, likewise.
        let sim = Simulation::new(6).max_steps(1_000);
        let outcome = sim.block_on(async {
            let mut every = viaduct::time::interval(Duration::from_secs(1));
            loop {
                every.tick().await;
            }
        });
        assert!(
            matches!(outcome, Err(SimError::StepLimit { .. })),
            "{outcome:?}"
        );
        // A periodic job run where it fires (on `Inline`) moves only the
        // clock, never polling a task: each move counts.
        let sim = Simulation::new(6).max_steps(1_000);
        let outcome = sim.block_on(async {
            let _job = viaduct::Inline.execute_every(Duration::from_millis(1), || ());
            std::future::pending::<()>().await
        });
        assert!(
            matches!(outcome, Err(SimError::StepLimit { steps: 1_000 })),
            "{outcome:?}"
        );
    });
}

#[test]
fn workers_zero_is_a_clear_error() {
    let err = std::panic::catch_unwind(|| Simulation::new(1).workers(0)).unwrap_err();
    let msg = err.downcast_ref::<&str>().copied().unwrap_or_default();
    assert!(
        msg.contains("workers(0)") && msg.contains("workers(1)"),
        "{msg}"
    );
}

#[test]
fn a_detached_task_that_panics_fails_the_run_with_its_message() {
    quiet_test_panics();
    within("panics", || {
        let sim = Simulation::new(8);
        let ex = sim.executor();
        let outcome = sim.block_on(async move {
            drop(ex.run(|| panic!("{TEST_PANIC}: detached")));
            viaduct::time::sleep(Duration::from_secs(1)).await;
        });
        let Err(SimError::Panicked(p)) = outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(
            p.message(),
            Some(format!("{TEST_PANIC}: detached").as_str())
        );

        // A panic delivered to a handle is the program's to handle.
        let ex = sim.executor();
        let handled = sim.block_on(async move {
            let err = ex
                .run(|| panic!("{TEST_PANIC}: observed"))
                .await
                .unwrap_err();
            err.panic_message().unwrap().to_owned()
        });
        assert_eq!(handled.unwrap(), format!("{TEST_PANIC}: observed"));

        // The future's own panic.
        let outcome = sim.block_on(async { panic!("{TEST_PANIC}: main") });
        assert!(matches!(outcome, Err(SimError::Panicked(_))), "{outcome:?}");
    });
}

#[test]
fn check_names_the_failing_seed_and_how_to_replay_it() {
    quiet_test_panics();
    within("check", || {
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            sim::check(0..1_000, |sim| {
                r.fetch_add(1, SeqCst);
                // Two withdrawals that check and write in separate
                // sections: some schedule lets both pass the check.
                money_must_add_up(sim.executor())
            })
        }))
        .unwrap_err();
        let msg = failed.downcast_ref::<String>().unwrap();
        let seed: u64 = msg
            .strip_prefix("viaduct::sim::check: seed ")
            .and_then(|rest| rest.split(' ').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no seed in {msg:?}"));
        assert!(msg.contains("money appeared"), "{msg}");
        println!("check on the lost update: {msg}");
        // The whole run replays by seed only before `check` has learned
        // how long runs are (at its first seed).
        let whole = match seed {
            0 => format!("`Simulation::new({seed})`"),
            _ => "the same check over the same seeds".to_owned(),
        };
        assert!(
            msg.contains(&format!("or the whole run with {whole}")),
            "{msg}"
        );
        // Every seed before the failing one ran once, the failing one
        // twice, and then as many times as shrinking took.
        let shrink_runs: u64 = msg
            .split(" runs: replay it with")
            .next()
            .and_then(|head| head.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no shrink runs in {msg:?}"));
        assert_eq!(runs.load(SeqCst) as u64, seed + 2 + shrink_runs);
        // The shrunk replay needs one preemption: a withdrawal stopped
        // between its check and its write.
        assert!(msg.contains("Shrunk to 1 preemption(s)"), "{msg}");
        let replay = replay_in(msg);
        for _ in 0..3 {
            let sim = Simulation::replay(replay).unwrap();
            let outcome = sim.block_on(money_must_add_up(sim.executor()));
            let Err(SimError::Panicked(p)) = outcome else {
                panic!("the replay did not fail: {outcome:?}")
            };
            assert!(p.message().unwrap().contains("money appeared"));
        }
        // Another program does not take the replay for its own.
        let sim = Simulation::replay(replay).unwrap();
        let outcome = sim.block_on(async { 1 });
        assert!(
            matches!(&outcome, Err(SimError::ReplayMismatch(_))),
            "{outcome:?}"
        );

        // The fixed version (check and write in one section) passes.
        sim::check(0..300, |sim| {
            let ex = sim.executor();
            async move {
                let account = Guarded::new(ex.clone(), 100i64);
                let withdraw = |account: Guarded<i64>| async move {
                    account
                        .with(|b| {
                            if *b >= 80 {
                                *b -= 80;
                                80
                            } else {
                                0
                            }
                        })
                        .await
                        .unwrap()
                };
                let a = ex.spawn(withdraw(account.clone()));
                let b = ex.spawn(withdraw(account.clone()));
                let paid = a.await.unwrap() + b.await.unwrap();
                assert_eq!(paid + account.with(|b| *b).await.unwrap(), 100);
            }
        });
    });
}

#[test]
fn check_reports_a_program_that_escapes_the_simulation() {
    quiet_test_panics();
    within("escapes", || {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            sim::check(0..10, |_| {
                // Fails on its first run only: state outside the simulation.
                let first = c.fetch_add(1, SeqCst) == 0;
                async move { assert!(!first, "{TEST_PANIC}: first run") }
            })
        }))
        .unwrap_err();
        let msg = failed.downcast_ref::<String>().unwrap();
        assert!(
            msg.starts_with("viaduct::sim::check: seed 0 failed"),
            "{msg}"
        );
        assert!(
            msg.contains("Run again, it passed: something escapes"),
            "{msg}"
        );
    });
}

#[test]
fn block_on_inside_a_simulated_task_runs_the_simulation() {
    quiet_test_panics();
    within("nested", || {
        let sim = Simulation::new(9).workers(1);
        let ex = sim.executor();
        let got = sim.block_on(async move {
            let e = ex.clone();
            ex.spawn(async move {
                let child = e.spawn(async {
                    viaduct::time::sleep(Duration::from_secs(1)).await;
                    21
                });
                viaduct::block_on(child).unwrap() * 2 // one worker: would hang without help
            })
            .await
            .unwrap()
        });
        assert_eq!(got.unwrap(), 42);

        // Waiting there for what nothing wakes fails the run, with why.
        let outcome = sim.block_on(async {
            viaduct::block_on(std::future::pending::<()>());
        });
        let Err(SimError::Panicked(p)) = outcome else {
            panic!("{outcome:?}")
        };
        assert!(
            p.message().unwrap().contains("nothing will wake"),
            "{:?}",
            p.message()
        );
    });
}

#[test]
fn a_closed_simulation_refuses_and_a_dropped_one_cancels_its_tasks() {
    within("closed", || {
        let sim = Simulation::new(10);
        let ex = sim.executor();
        let sleeper = ex.spawn(async {
            viaduct::time::sleep(Duration::from_secs(3600)).await;
        });
        let queued = ex.run(|| ());
        ex.close();
        assert!(matches!(sim.block_on(async {}), Err(SimError::Closed)));
        assert!(matches!(
            viaduct::block_on(ex.spawn(async {})),
            Err(TaskError::Rejected(_))
        ));
        drop(sim);
        // Nobody will run them: both resolve instead of waiting forever.
        assert!(matches!(
            viaduct::block_on(queued),
            Err(TaskError::Cancelled)
        ));
        assert!(matches!(
            viaduct::block_on(sleeper),
            Err(TaskError::Cancelled)
        ));
    });
}

/// A step of the world waiting on a task outside it, which never runs:
/// the world counts it, and its end cancels it (its future dropped), the
/// step before too; so for a step that waits on such a task in its body.
#[test]
fn ending_a_world_cancels_its_steps_waiting_on_tasks_outside_it() {
    within("waiting step", || {
        let sim = Simulation::new(13);
        let outside = viaduct::ManualExecutor::new();
        let before = outside.spawn(std::future::pending::<u8>());
        let (before_abort, before_id) = (before.abort_handle(), before.id().unwrap());
        let step = before.via(&sim.executor()).then(|x| x);
        let step_abort = step.abort_handle();
        let outcome = sim.block_on(std::future::pending::<()>());
        let Err(SimError::Deadlock(dump)) = outcome else {
            panic!("{outcome:?}");
        };
        // The world counts the step, waiting on the task outside it.
        let entry = dump.task(step.id().unwrap()).expect("the step is listed");
        assert!(
            matches!(entry.waits_on(), [WaitsOn::Task(id)] if *id == before_id),
            "{dump}"
        );
        drop(sim);
        // Over, its future dropped: not merely marked aborted.
        assert!(step_abort.is_finished());
        assert!(viaduct::block_on(step).unwrap_err().is_cancelled());
        outside.run_until_idle();
        assert!(before_abort.is_finished());

        // A step whose body waits on such a task: the end cancels it too.
        let sim = Simulation::new(14);
        let never = outside.spawn(std::future::pending::<()>());
        let step = sim.executor().run(|| ()).then_async(move |()| never);
        let step_abort = step.abort_handle();
        let outcome = sim.block_on(std::future::pending::<()>());
        assert!(matches!(outcome, Err(SimError::Deadlock(_))), "{outcome:?}");
        assert!(!step_abort.is_finished(), "the step runs, and waits");
        drop(sim);
        assert!(step_abort.is_finished());

        // A step in line behind a task of the world that never ran: the
        // end cancels the task, which lets the step go, to be cancelled.
        let sim = Simulation::new(15);
        let step = sim.executor().run(|| 1u8).then(|x| x);
        let step_abort = step.abort_handle();
        drop(sim);
        assert!(step_abort.is_finished());
        assert!(viaduct::block_on(step).unwrap_err().is_cancelled());
    });
}

#[test]
fn timers_due_together_fire_in_a_seeded_order() {
    within("timer order", || {
        let order = |seed| {
            let sim = Simulation::new(seed);
            let ex = sim.executor();
            sim.block_on(async move {
                let log = Arc::new(Mutex::new(Vec::new()));
                let hs: Vec<_> = (0..6)
                    .map(|i| {
                        let log = log.clone();
                        ex.spawn(async move {
                            viaduct::time::sleep(Duration::from_secs(1)).await;
                            log.lock().unwrap().push(i);
                        })
                    })
                    .collect();
                for h in hs {
                    h.await.unwrap();
                }
                let log = log.lock().unwrap().clone();
                log
            })
            .unwrap()
        };
        let orders: std::collections::HashSet<Vec<i32>> = (0..20).map(order).collect();
        assert!(orders.len() > 3, "{orders:?}");
        assert_eq!(order(3), order(3));
    });
}

#[test]
fn waits_nested_in_simulated_work_neither_spin_nor_wedge() {
    within("nested edges", || {
        // Nested `block_on` under every seed: an injected yield must not
        // spin it (each seed gives some polls a budget of 0).
        for seed in 0..200 {
            let sim = Simulation::new(seed).workers(1);
            let ex = sim.executor();
            let got = sim.block_on(async move {
                let child = ex.spawn(async { 2 });
                viaduct::block_on(child).unwrap()
            });
            assert_eq!(got.unwrap(), 2, "seed {seed}");
        }
        // A timer job run where it fires (on `Inline`) that blocks on a sleep.
        let sim = Simulation::new(1);
        let got = sim.block_on(async {
            viaduct::Inline
                .spawn_after(Duration::from_millis(1), async {
                    viaduct::block_on(viaduct::time::sleep(Duration::from_millis(1)));
                    3
                })
                .await
                .unwrap()
        });
        assert_eq!(got.unwrap(), 3);
        // `Inline` work blocked on from an `Inline` task runs, as outside.
        let got = sim.block_on(async {
            viaduct::Inline
                .spawn(async { viaduct::block_on(viaduct::Inline.run(|| 1)).unwrap() })
                .await
                .unwrap()
        });
        assert_eq!(got.unwrap(), 1);
        // `block_on` of a simulation where the caller's budget is spent.
        let outer = Simulation::new(3);
        let got = outer.block_on(async {
            for _ in 0..2 * viaduct::coop::BUDGET {
                viaduct::coop::consume_budget().await;
            }
            let inner = Simulation::new(4);
            inner.block_on(async { 5 }).unwrap()
        });
        assert_eq!(got.unwrap(), 5);
    });
}

#[test]
fn a_dropped_simulation_ends_what_it_holds_without_running_out_its_clock() {
    within("end", || {
        // A periodic job run where it fires, still armed.
        let sim = Simulation::new(11);
        let timer = sim.timer();
        let start = timer.now();
        let (job,) = sim
            .block_on(async {
                let job = viaduct::Inline.execute_every(Duration::from_millis(1), || ());
                viaduct::time::sleep(Duration::from_millis(10)).await;
                (job,) // the handle itself, not awaited
            })
            .unwrap();
        assert_eq!(job.runs(), 10);
        drop(sim);
        assert_eq!(
            timer.now() - start,
            Duration::from_millis(10),
            "the clock stays"
        );
        assert_eq!(timer.pending(), 0, "every timer is cancelled");
        // The job is `Inline`'s, not the world's: it waits on a clock that
        // will not move again, and stops when told.
        assert_eq!(job.runs(), 10);
        assert!(!job.is_finished());
        assert!(job.cancel());
        assert!(viaduct::block_on(job).is_cancelled());

        // Two tasks deadlocked on each other's locks, their handles kept
        // outside: dropping the world cancels both.
        let sim = Simulation::new(12);
        let [one, two] = crossed_locks(&sim.executor());
        let outcome = sim.block_on(std::future::pending::<()>());
        assert!(matches!(outcome, Err(SimError::Deadlock(_))), "{outcome:?}");
        drop(sim);
        assert!(viaduct::block_on(one).unwrap_err().is_cancelled());
        assert!(viaduct::block_on(two).unwrap_err().is_cancelled());
    });
}

#[test]
fn work_run_through_the_executor_by_hand_runs_inside_the_simulation() {
    within("try_run_one", || {
        let sim = Simulation::new(13);
        let ex = sim.executor();
        let h = ex.spawn(async {
            viaduct::time::sleep(Duration::from_secs(60)).await; // the simulated clock
            viaduct::spawn(async { 1 }).await.unwrap() // the simulated pool
        });
        let mut steps = 0;
        while ex.try_run_one() {
            steps += 1;
            assert!(steps < 1_000, "never settles");
        }
        assert_eq!(sim.elapsed(), Duration::from_secs(60));
        assert!(h.is_finished());
        assert_eq!(viaduct::block_on(h).unwrap(), 1);
    });
}

#[test]
fn check_sees_a_nested_deadlock_fail_the_same_way_every_time() {
    quiet_test_panics();
    within("check nested", || {
        let failed = std::panic::catch_unwind(|| {
            sim::check(0..5, |_| async {
                viaduct::block_on(std::future::pending::<()>());
            })
        })
        .unwrap_err();
        let msg = failed.downcast_ref::<String>().unwrap();
        assert!(msg.contains("nothing will wake"), "{msg}");
        assert!(msg.contains("fails the same way every time"), "{msg}");
    });
}

#[test]
fn a_dump_reads_timers_by_the_simulated_clock() {
    within("dump clock", || {
        let sim = Simulation::new(14);
        sim.block_on(async { viaduct::time::sleep(Duration::from_secs(10 * 3600)).await })
            .unwrap();
        // Ten virtual hours in, a task sleeps for one more.
        let ex = sim.executor();
        let sleeper = ex.spawn(async { viaduct::time::sleep(Duration::from_secs(3600)).await });
        for _ in 0..10 {
            if sim.timer().pending() == 1 {
                break;
            }
            assert!(ex.try_run_one());
        }
        let dump = sim.dump();
        let task = dump.task(sleeper.id().unwrap()).expect("listed");
        match task.waits_on() {
            [WaitsOn::Timer { left, .. }] => assert_eq!(*left, Duration::from_secs(3600)),
            other => panic!("{other:?}"),
        }
        assert!(
            dump.to_string().contains("timer due in 3600000 ms"),
            "{dump}"
        );
    });
}

#[test]
fn ending_a_world_cancels_the_tasks_of_executors_over_it_too() {
    within("end layered", || {
        // Crossed locks on a strand over the simulated pool, and a task of
        // a priority executor over it that waits on nothing.
        let sim = Simulation::new(15);
        let strand = Strand::new(sim.executor());
        let prio = PriorityExecutor::new(sim.executor());
        let s = strand.clone();
        let (crossed, stuck) = sim
            .block_on(async move {
                let crossed = crossed_locks(&viaduct::Exec::new(s));
                let stuck = prio.spawn_with(1, std::future::pending::<()>());
                (crossed, (stuck,))
            })
            .unwrap();
        let outcome = sim.block_on(std::future::pending::<()>());
        assert!(matches!(outcome, Err(SimError::Deadlock(_))), "{outcome:?}");
        drop(sim);
        for h in crossed {
            assert!(viaduct::block_on(h).unwrap_err().is_cancelled());
        }
        assert!(viaduct::block_on(stuck.0).unwrap_err().is_cancelled());
    });
}

#[test]
fn drops_that_wait_while_a_world_ends_neither_hang_nor_move_its_clock() {
    quiet_test_panics();
    within("end waits", || {
        struct WaitsWhenDropped(Duration);
        impl Drop for WaitsWhenDropped {
            fn drop(&mut self) {
                if self.0 == Duration::MAX {
                    viaduct::block_on(std::future::pending::<()>());
                } else {
                    viaduct::block_on(viaduct::time::sleep(self.0));
                }
            }
        }
        let sim = Simulation::new(16);
        let timer = sim.timer();
        let (job,) = sim
            .block_on(async { (viaduct::Inline.execute_every(Duration::from_millis(1), || ()),) })
            .unwrap();
        let ex = sim.executor();
        let waiters: Vec<_> = [Duration::from_secs(3600), Duration::MAX]
            .into_iter()
            .map(|d| {
                ex.spawn(async move {
                    let _w = WaitsWhenDropped(d);
                    std::future::pending::<()>().await
                })
            })
            .collect();
        sim.block_on(async { viaduct::coop::consume_budget().await })
            .unwrap();
        let (start, runs) = (timer.now(), job.runs());
        drop(sim); // the drops find nothing to wait for: they panic, caught
        assert_eq!(timer.now(), start, "the clock stays");
        assert_eq!(job.runs(), runs);
        for w in waiters {
            assert!(viaduct::block_on(w).unwrap_err().is_cancelled());
        }
        job.cancel(); // if the end's panicking drops have not ended it
        assert!(viaduct::block_on(job).is_cancelled());
    });
}

#[test]
fn the_step_limit_holds_for_work_run_by_hand() {
    quiet_test_panics();
    within("try_run_one limit", || {
        let sim = Simulation::new(17).max_steps(1_000);
        let ex = sim.executor();
        let _ticks = ex.spawn(async {
            loop {
                viaduct::time::sleep(Duration::from_secs(1)).await
            }
        });
        let blocked = ex.spawn(async { viaduct::block_on(std::future::pending::<()>()) });
        for _ in 0..20 {
            if blocked.is_finished() {
                break;
            }
            assert!(ex.try_run_one());
        }
        let Err(TaskError::Panicked(p)) = viaduct::block_on(blocked) else {
            panic!("the blocked task ends")
        };
        assert!(
            p.message().unwrap().contains("step limit"),
            "{:?}",
            p.message()
        );
    });
}

#[test]
fn a_world_ending_as_its_thread_exits_or_while_its_timers_fire_ends_cleanly() {
    within("end edges", || {
        // Kept in a thread-local: it ends while the thread's locals are
        // being destroyed.
        thread_local! {
            static KEPT: std::cell::RefCell<Option<Simulation>> = const { std::cell::RefCell::new(None) };
        }
        std::thread::spawn(|| {
            let sim = Simulation::new(18);
            drop(sim.executor().spawn(std::future::pending::<()>()));
            sim.block_on(async {}).unwrap();
            KEPT.with(|k| *k.borrow_mut() = Some(sim));
        })
        .join()
        .expect("the thread exits cleanly");

        // The last handle dropped by a job as it fires, next to another
        // job due at the same instant: nothing fires or is set after.
        let sim = Simulation::new(19);
        let (timer, ex) = (sim.timer(), sim.executor());
        let slot = Arc::new(Mutex::new(None::<Simulation>));
        let s = slot.clone();
        let jobs = sim
            .block_on(async move {
                let a = viaduct::Inline.execute_every(Duration::from_millis(1), || ());
                let b = viaduct::Inline.execute_every(Duration::from_millis(1), move || {
                    s.lock().unwrap().take();
                });
                (a, b)
            })
            .unwrap();
        *slot.lock().unwrap() = Some(sim);
        drop(jobs);
        let mut steps = 0;
        while ex.try_run_one() {
            steps += 1;
            assert!(steps < 100, "the world never ended");
        }
        assert!(slot.lock().unwrap().is_none());
        assert_eq!(timer.pending(), 0);
    });
}

#[test]
fn the_end_of_a_world_leaves_other_executors_tasks_alone_and_catches_late_waiters() {
    within("end scope", || {
        // A task of a manual executor run by hand inside the world.
        let manual = viaduct::ManualExecutor::new();
        let (tx, rx) = futures::channel::oneshot::channel::<u32>();
        let task = manual.spawn(async move { rx.await.unwrap() });
        let sim = Simulation::new(20);
        let m = manual.clone();
        sim.block_on(async move { assert!(m.run_at_most_one()) })
            .unwrap();
        drop(sim);
        tx.send(7).unwrap();
        while manual.run_at_most_one() {}
        assert_eq!(viaduct::block_on(task).unwrap(), 7);

        // A task of the world that first waits after the world ended (in
        // the poll that dropped the last handle).
        let sim = Simulation::new(21);
        let ex = sim.executor();
        let last = sim.clone();
        drop(sim);
        let late = ex.spawn(async move {
            drop(last);
            std::future::pending::<()>().await
        });
        assert!(ex.try_run_one());
        assert!(viaduct::block_on(late).unwrap_err().is_cancelled());
    });
}

/// Two withdrawals that check and write in separate sections (the lost
/// update of the module docs); `Err` with the money that appeared.
async fn racy_withdrawals(ex: viaduct::Exec) -> Result<(), i64> {
    let account = Guarded::new(ex.clone(), 100i64);
    let withdraw = |account: Guarded<i64>| async move {
        let balance = account.with(|b| *b).await.unwrap();
        if balance >= 80 {
            account.with(move |b| *b = balance - 80).await.unwrap();
            return 80;
        }
        0
    };
    let a = ex.spawn(withdraw(account.clone()));
    let b = ex.spawn(withdraw(account.clone()));
    let paid = a.await.unwrap() + b.await.unwrap();
    let left = account.with(|b| *b).await.unwrap();
    if paid + left == 100 {
        Ok(())
    } else {
        Err(paid + left - 100)
    }
}

/// The replay string in a message of `check`.
fn replay_in(msg: &str) -> &str {
    msg.split("Simulation::replay(\"")
        .nth(1)
        .and_then(|rest| rest.split("\")").next())
        .unwrap_or_else(|| panic!("no replay in {msg:?}"))
}

/// [`racy_withdrawals`], panicking when money appears.
async fn money_must_add_up(ex: viaduct::Exec) {
    if let Err(extra) = racy_withdrawals(ex).await {
        panic!("{TEST_PANIC}: money appeared: {extra} too much");
    }
}

#[test]
fn pct_finds_the_lost_update_and_replays_it_by_seed() {
    within("pct", || {
        let run = |seed| {
            let sim = Simulation::new(seed).strategy(Strategy::Pct { depth: 2 });
            let outcome = sim.block_on(racy_withdrawals(sim.executor())).unwrap();
            (outcome, sim.trace_hash())
        };
        let failing: Vec<u64> = (0..200).filter(|&s| run(s).0.is_err()).collect();
        // One preemption at the right await of one withdrawal: PCT with
        // depth 2 finds it in a good share of seeds, not by luck.
        assert!(
            failing.len() >= 10,
            "found by {} of 200 seeds",
            failing.len()
        );
        assert_eq!(run(failing[0]).0, Err(80));
        assert_eq!(run(failing[0]), run(failing[0]));
        // Depth 1 never preempts: the bug needs one preemption.
        for seed in 0..50 {
            let sim = Simulation::new(seed).strategy(Strategy::Pct { depth: 1 });
            assert_eq!(
                sim.block_on(racy_withdrawals(sim.executor())).unwrap(),
                Ok(())
            );
        }
    });
}

#[test]
fn pct_with_depth_zero_panics_naming_the_fix() {
    let refused = std::panic::catch_unwind(|| {
        Simulation::new(1).strategy(Strategy::Pct { depth: 0 });
    })
    .unwrap_err();
    let msg = refused
        .downcast_ref::<String>()
        .map(String::as_str)
        .or(refused.downcast_ref::<&str>().copied())
        .unwrap();
    assert!(
        msg.contains("at least 1") && msg.contains("3 finds most bugs"),
        "{msg}"
    );
}

#[test]
fn pct_lets_a_task_that_spins_on_another_through() {
    within("pct spins", || {
        for seed in 0..20 {
            // One spins on the budget, one on `yield_now`: under strict
            // priorities either could starve the task it waits for.
            for budget_spin in [true, false] {
                let sim = Simulation::new(seed).strategy(Strategy::Pct { depth: 3 });
                let ex = sim.executor();
                let done = sim.block_on(async move {
                    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
                    let f = flag.clone();
                    let spinner = ex.spawn(async move {
                        while !f.load(SeqCst) {
                            if budget_spin {
                                viaduct::coop::consume_budget().await;
                            } else {
                                // A yield of its own: pending once, woken.
                                let mut yielded = false;
                                std::future::poll_fn(|cx| {
                                    if std::mem::replace(&mut yielded, true) {
                                        return std::task::Poll::Ready(());
                                    }
                                    cx.waker().wake_by_ref();
                                    std::task::Poll::Pending
                                })
                                .await;
                            }
                        }
                    });
                    let setter = ex.spawn(async move { flag.store(true, SeqCst) });
                    spinner.await.unwrap();
                    setter.await.unwrap();
                });
                assert!(done.is_ok(), "seed {seed}: {done:?}");
            }
        }
    });
}

#[test]
fn check_shrinks_a_lock_order_inversion_to_its_preemption() {
    quiet_test_panics();
    within("shrink", || {
        let program = |sim: &Simulation| {
            let ex = sim.executor();
            async move {
                let (a, b) = (Guarded::new(ex.clone(), 0), Guarded::new(ex.clone(), 0));
                let (a2, b2) = (a.clone(), b.clone());
                let one = ex.spawn(async move {
                    let _a = a.lock().await;
                    let _b = b.lock().await;
                });
                let two = ex.spawn(async move {
                    let _b = b2.lock().await;
                    let _a = a2.lock().await;
                });
                one.await.unwrap();
                two.await.unwrap();
            }
        };
        let failed = std::panic::catch_unwind(|| sim::check(0..1_000, program)).unwrap_err();
        let msg = failed.downcast_ref::<String>().unwrap();
        assert!(msg.contains("deadlock"), "{msg}");
        let preemptions: u32 = msg
            .split("Shrunk to ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("not shrunk: {msg}"));
        assert!((1..=3).contains(&preemptions), "{msg}");
        println!("the lock-order inversion, shrunk: {msg}");
        let replay = replay_in(msg);
        let sim = Simulation::replay(replay).unwrap();
        let outcome = sim.block_on(program(&sim));
        assert!(matches!(outcome, Err(SimError::Deadlock(_))), "{outcome:?}");
    });
}

#[test]
fn a_sleep_timeout_or_interval_made_outside_a_simulation_runs_on_its_clock() {
    within("sleep outside", || {
        let sim = Simulation::new(1);
        let started = Instant::now();
        // Made here, on the real clock; awaited inside, on the simulated one.
        let nap = viaduct::time::sleep(Duration::from_secs(3600));
        let late =
            viaduct::time::timeout(Duration::from_secs(60), futures::future::pending::<()>());
        sim.block_on(nap).unwrap();
        assert_eq!(sim.elapsed(), Duration::from_secs(3600));
        assert_eq!(
            sim.block_on(late).unwrap(),
            Err(viaduct::time::Elapsed::new())
        );
        assert_eq!(sim.elapsed(), Duration::from_secs(3660));
        let mut ticks = viaduct::time::interval(Duration::from_secs(1));
        sim.block_on(async move {
            for _ in 0..3 {
                ticks.tick().await;
            }
        })
        .unwrap();
        assert_eq!(sim.elapsed(), Duration::from_secs(3662));
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "it waited in real time"
        );
        // A sleep bound by its first poll stays on that clock: polled
        // outside first, it waits on real time, which the simulation does
        // not run.
        let mut nap = Box::pin(viaduct::time::sleep(Duration::from_secs(60)));
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(std::future::Future::poll(nap.as_mut(), &mut cx).is_pending());
        assert!(matches!(sim.block_on(nap), Err(SimError::Deadlock(_))));
    });
}

#[test]
fn block_on_takes_a_borrowing_future_and_drops_it_before_returning() {
    within("borrowing block_on", || {
        let sim = Simulation::new(3);
        let ex = sim.executor();
        let names = ["ada".to_owned(), "grace".to_owned()];
        // Borrows `names`, and its output borrows them too.
        let longest = sim
            .block_on(async {
                let lens = ex.spawn(async { 5usize });
                let _ = lens.await;
                names.iter().max_by_key(|n| n.len()).unwrap()
            })
            .unwrap();
        assert_eq!(longest, "grace");

        // Ended by an error, the future is dropped before `block_on`
        // returns: what it borrows is free again.
        struct Noted<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Noted<'_> {
            fn drop(&mut self) {
                self.0.store(true, SeqCst);
            }
        }
        let dropped = std::sync::atomic::AtomicBool::new(false);
        let stuck = sim.block_on(async {
            let _noted = Noted(&dropped);
            futures::future::pending::<()>().await
        });
        assert!(matches!(stuck, Err(SimError::Deadlock(_))), "{stuck:?}");
        assert!(dropped.load(SeqCst));

        let dropped = std::sync::atomic::AtomicBool::new(false);
        let sim = Simulation::new(4).max_steps(100);
        let spinning = sim.block_on(async {
            let _noted = Noted(&dropped);
            loop {
                viaduct::coop::consume_budget().await;
            }
        });
        assert!(
            matches!(spinning, Err(SimError::StepLimit { .. })),
            "{spinning:?}"
        );
        assert!(dropped.load(SeqCst));
    });
}

/// A build graph of 15 jobs, a binary tree: each job waits for its
/// parent, fetches (a sleep of an un-rounded duration), then counts
/// itself done, with a planted lost update: the count is read in one
/// section and written in another. `Err` with the count it ended at.
async fn build_graph(ex: viaduct::Exec) -> Result<(), u32> {
    const JOBS: usize = 15;
    let done = Guarded::new(ex.clone(), 0u32);
    let (mut starts, gates): (Vec<_>, Vec<_>) = (0..JOBS)
        .map(|_| {
            let (tx, rx) = futures::channel::oneshot::channel::<()>();
            (Some(tx), rx)
        })
        .unzip();
    let mut jobs = Vec::new();
    for (i, gate) in gates.into_iter().enumerate() {
        let children: Vec<_> = [2 * i + 1, 2 * i + 2]
            .into_iter()
            .filter(|&c| c < JOBS)
            .map(|c| starts[c].take().unwrap())
            .collect();
        let done = done.clone();
        // Generated fetch times: 10-15 ms, to the nanosecond.
        let fetch = Duration::from_nanos(10_000_000 + (i as u64 * 7_919_333) % 5_000_000);
        jobs.push(ex.spawn(async move {
            gate.await.unwrap();
            viaduct::time::sleep(fetch).await;
            let n = done.with(|n| *n).await.unwrap();
            done.with(move |c| *c = n + 1).await.unwrap();
            for child in children {
                child.send(()).unwrap();
            }
        }));
    }
    starts[0].take().unwrap().send(()).unwrap();
    for job in jobs {
        job.await.unwrap();
    }
    let n = done.with(|n| *n).await.unwrap();
    if n == JOBS as u32 {
        Ok(())
    } else {
        Err(n)
    }
}

#[test]
fn jitter_finds_a_lost_update_that_exact_durations_hide() {
    within("jitter", || {
        let lost = |sim: Simulation| sim.block_on(build_graph(sim.executor())).unwrap().is_err();
        // Exact durations: no two jobs ever run at the same instant.
        let exact = (0..200).filter(|&s| lost(Simulation::new(s))).count();
        assert_eq!(exact, 0);
        let jittered: Vec<u64> = (0..200)
            .filter(|&s| lost(Simulation::new(s).jitter(Duration::from_millis(1))))
            .collect();
        assert!(!jittered.is_empty(), "not found in 200 seeds with jitter");
        let first = jittered[0];
        println!(
            "jitter: first found by seed {first}, {} of 200 seeds",
            jittered.len()
        );
        // Replays by seed, jitter and all.
        let run = |seed| {
            let sim = Simulation::new(seed).jitter(Duration::from_millis(1));
            let outcome = sim.block_on(build_graph(sim.executor())).unwrap();
            (outcome, sim.trace_hash(), sim.elapsed())
        };
        assert_eq!(run(first), run(first));
        // A reply due in 10 ms awaited for 11: never late on exact time,
        // late under jitter; `Simulation::check` runs worlds made with it.
        let reply = |sim: &Simulation| {
            let (t, ex) = (sim.timer(), sim.executor());
            async move {
                let (tx, rx) = futures::channel::oneshot::channel();
                let work = t.clone();
                drop(ex.spawn(async move {
                    work.sleep(Duration::from_millis(10)).await;
                    viaduct::coop::consume_budget().await;
                    let _ = tx.send(42);
                }));
                let reply = t.timeout(Duration::from_millis(11), rx).await;
                assert!(reply.is_ok(), "{TEST_PANIC}: the reply came too late");
            }
        };
        quiet_test_panics();
        sim::check(0..200, reply);
        let late = std::panic::catch_unwind(|| {
            Simulation::new(0)
                .jitter(Duration::from_millis(2))
                .check(0..200, reply)
        })
        .unwrap_err();
        let msg = late.downcast_ref::<String>().unwrap();
        assert!(msg.contains("too late") && msg.contains("jitter="), "{msg}");
        let replay = replay_in(msg);
        let sim = Simulation::replay(replay).unwrap();
        let outcome = sim.block_on(reply(&sim));
        assert!(matches!(outcome, Err(SimError::Panicked(_))), "{outcome:?}");
        // Huge jitter is clamped, not an overflow.
        let sim = Simulation::new(1).jitter(Duration::MAX);
        assert!(sim.block_on(build_graph(sim.executor())).is_ok());
    });
}

#[test]
fn join_scope_and_pools_do_not_escape_a_simulation() {
    quiet_test_panics();
    within("nothing escapes", || {
        let pool = viaduct::ThreadPool::builder().threads(2).build().unwrap();
        let run = |seed| {
            let sim = Simulation::new(seed);
            let ex = sim.executor();
            let pool = pool.clone();
            let here = std::thread::current().id();
            let outcome = sim.block_on(async move {
                let order = Arc::new(Mutex::new(Vec::new()));
                let o = order.clone();
                let joined = ex.spawn(async move {
                    let (a, b) = pool.join(
                        || {
                            o.lock().unwrap().push("a");
                            std::thread::current().id()
                        },
                        || {
                            o.lock().unwrap().push("b");
                            std::thread::current().id()
                        },
                    );
                    // A scope of the pool, and the global one, borrowing.
                    let mut parts = [1u32, 2, 3];
                    pool.scope(|s| {
                        for p in parts.iter_mut() {
                            s.run(move || *p *= 10);
                        }
                    });
                    let ids = viaduct::scope(|s| {
                        let h = s.run(|| std::thread::current().id());
                        h.join().unwrap()
                    });
                    (a, b, ids, parts)
                });
                let (a, b, ids, parts) = joined.await.unwrap();
                // Building a real pool here is refused, saying what to do.
                let err = viaduct::ThreadPool::builder()
                    .threads(1)
                    .build()
                    .unwrap_err();
                assert!(matches!(err, viaduct::pool::BuildError::InsideSimulation));
                assert!(err.to_string().contains("Simulation::executor"), "{err}");
                let order = order.lock().unwrap().clone();
                ([a, b, ids], parts, order)
            });
            let (ids, parts, order) = outcome.unwrap();
            assert!(
                ids.iter().all(|&id| id == here),
                "a half ran on a real thread"
            );
            assert_eq!(parts, [10, 20, 30]);
            (order, sim.trace_hash())
        };
        for seed in 0..20 {
            let (order, trace) = run(seed);
            assert_eq!(order.len(), 2);
            assert_eq!(run(seed), (order, trace), "seed {seed} does not replay");
        }
        // A panicking half still lets the other end, and comes out of join.
        let sim = Simulation::new(1);
        let pool2 = pool.clone();
        let ended = Arc::new(AtomicUsize::new(0));
        let e = ended.clone();
        let outcome = sim.block_on(async move {
            pool2.join(
                || e.fetch_add(1, SeqCst),
                || -> usize { panic!("{TEST_PANIC}: half b") },
            )
        });
        assert!(matches!(outcome, Err(SimError::Panicked(_))), "{outcome:?}");
        assert_eq!(ended.load(SeqCst), 1);
    });
}

/// From a fresh-eyes review: waits that hung, a stack that overflowed,
/// a join that panicked, and a replay that lost the order of timers.
#[test]
fn the_ends_of_a_simulated_wait_neither_hang_nor_overflow() {
    quiet_test_panics();
    within("simulated ends", || {
        // A `block_on` whose task moved to a strand over the world, then
        // waits for ever (a deadlock) or spins (the step limit): the task
        // is ended on the strand, not waited for.
        let sim = Simulation::new(1);
        let strand = Strand::new(sim.executor());
        let s = strand.clone();
        let stuck = sim.block_on(async move {
            viaduct::hop_to(&s).await;
            futures::future::pending::<()>().await
        });
        assert!(matches!(stuck, Err(SimError::Deadlock(_))), "{stuck:?}");
        let sim = Simulation::new(2).max_steps(1_000);
        let strand = Strand::new(sim.executor());
        let spinning = sim.block_on(async move {
            viaduct::hop_to(&strand).await;
            loop {
                viaduct::coop::consume_budget().await;
            }
        });
        assert!(
            matches!(spinning, Err(SimError::StepLimit { .. })),
            "{spinning:?}"
        );

        // A scope whose task never ends, or spins: its wait fails, its
        // tasks are ended, and the failure comes out.
        for spin in [false, true] {
            let sim = Simulation::new(3).max_steps(1_000);
            let pool = viaduct::ThreadPool::builder().threads(1).build().unwrap();
            let failed = sim.block_on(async move {
                let data = [1u8; 4];
                pool.scope(|s| {
                    s.spawn(async {
                        let _ = &data;
                        if spin {
                            loop {
                                viaduct::coop::consume_budget().await;
                            }
                        }
                        futures::future::pending::<()>().await
                    });
                });
            });
            assert!(failed.is_err(), "spin {spin}: {failed:?}");
        }

        // A join on a simulation whose executor was closed runs both here.
        let sim = Simulation::new(4);
        let ex = sim.executor();
        let pool = viaduct::ThreadPool::builder().threads(1).build().unwrap();
        let pair = sim.block_on(async move {
            ex.close();
            pool.join(|| 1, || 2)
        });
        assert_eq!(pair.unwrap(), (1, 2));

        // A deep recursion of joins: each half nobody took runs at once,
        // not a wait nested per level.
        fn sum(pool: &viaduct::ThreadPool, xs: &[u64]) -> u64 {
            if xs.len() == 1 {
                return xs[0];
            }
            let (l, r) = xs.split_at(xs.len() / 2);
            let (a, b) = pool.join(|| sum(pool, l), || sum(pool, r));
            a + b
        }
        let xs: Vec<u64> = (1..=1 << 16).collect();
        let pool = viaduct::ThreadPool::builder().threads(1).build().unwrap();
        let sim = Simulation::new(5);
        let total = sim.block_on(async { sum(&pool, &xs) }).unwrap();
        assert_eq!(total, (1 << 16) * ((1 << 16) + 1) / 2);
    });
}

#[test]
fn a_shrunk_replay_keeps_the_order_of_timers_due_together() {
    quiet_test_panics();
    within("timer order", || {
        let program = |sim: &Simulation| {
            let t = sim.timer();
            async move {
                let order = Arc::new(Mutex::new(Vec::new()));
                for i in [1, 2] {
                    let o = order.clone();
                    drop(
                        t.execute_after(&viaduct::Inline, Duration::from_millis(1), move || {
                            o.lock().unwrap().push(i)
                        }),
                    );
                }
                t.sleep(Duration::from_millis(2)).await;
                let order = order.lock().unwrap().clone();
                assert_eq!(order, [1, 2], "{TEST_PANIC}: timers out of order");
            }
        };
        let failed = std::panic::catch_unwind(|| sim::check(0..100, program)).unwrap_err();
        let msg = failed.downcast_ref::<String>().unwrap();
        assert!(
            msg.contains("out of order") && msg.contains("Shrunk to"),
            "{msg}"
        );
        let sim = Simulation::replay(replay_in(msg)).unwrap();
        let outcome = sim.block_on(program(&sim));
        assert!(matches!(outcome, Err(SimError::Panicked(_))), "{outcome:?}");
    });
}
