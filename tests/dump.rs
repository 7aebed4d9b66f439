//! Task dumps: states, spawn locations on every spawn path, what tasks
//! wait on (locks and their holders, sections, handles, timers), and the
//! cycles of the wait-for graph, each reported once.

#[allow(dead_code)] // only `pool` and `within` are used here
mod support;

use std::future::pending;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::{pool, within};
use viaduct::dump::{TaskDump, TaskState, WaitsOn};
use viaduct::time::Timer;
use viaduct::{
    ExecutorExt, Guarded, JoinSet, KeyedStrands, PriorityExecutor, Strand, TaskId, ThreadPool,
    TimedExt,
};

/// Dumps until `ready` holds for the dump (each task's first poll has to
/// return first); after 10 s, fails with the last dump.
fn dump_when(pool: &ThreadPool, ready: impl Fn(&TaskDump) -> bool) -> TaskDump {
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        let dump = pool.dump();
        if ready(&dump) {
            return dump;
        }
        assert!(
            Instant::now() < give_up,
            "the dump never got ready:\n{dump}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn listed(dump: &TaskDump, ids: &[Option<TaskId>]) -> bool {
    ids.iter()
        .all(|id| id.is_some_and(|id| dump.task(id).is_some()))
}

#[test]
fn a_dump_lists_waiting_running_and_queued_tasks_and_counts_the_unstarted() {
    within("states", || {
        let pool = pool("states", 1);
        let parked = pool.spawn(pending::<()>());
        let (go, wait) = mpsc::channel::<()>();
        let (started, running) = mpsc::channel::<()>();
        let busy = pool.run(move || {
            started.send(()).unwrap();
            wait.recv().unwrap();
        });
        running.recv().unwrap();
        let unstarted: Vec<_> = (0..3).map(|i| pool.run(move || i)).collect();
        let dump = dump_when(&pool, |d| listed(d, &[parked.id(), busy.id()]));
        let entry = |id: Option<TaskId>| dump.task(id.unwrap()).unwrap();
        assert_eq!(entry(parked.id()).state(), &TaskState::Waiting);
        assert_eq!(
            entry(busy.id()).state(),
            &TaskState::Running {
                worker: Some("states-0".into())
            }
        );
        assert_eq!(entry(busy.id()).location().file(), file!());
        assert_eq!(dump.not_started(), 3);
        let text = dump.to_string();
        assert!(text.contains("running on states-0"), "{text}");
        assert!(text.contains("waiting"), "{text}");
        assert!(text.contains("3 more not started"), "{text}");
        go.send(()).unwrap();
        for h in unstarted {
            viaduct::block_on(h).unwrap();
        }
        viaduct::block_on(busy).unwrap();
        parked.abort();
        // Everything over: nothing listed, nothing left behind (a task
        // leaves the dump's lists a moment before its pool stops counting
        // it).
        dump_when(&pool, |d| d.tasks().is_empty() && d.not_started() == 0);
    });
}

#[test]
fn every_spawn_path_records_the_callers_line() {
    within("locations", || {
        let pool = pool("locations", 2);
        let strand = Strand::new(pool.clone());
        let guarded = Guarded::new(pool.clone(), ());
        let keyed = KeyedStrands::new(pool.clone());
        let priority = PriorityExecutor::new(pool.clone());
        let timer = Timer::global();
        let mut set = JoinSet::new();
        let (_hold, blocker) = mpsc::channel::<()>();
        let blocker = std::sync::Mutex::new(blocker);
        let mut expected = Vec::new();
        // The handles are kept: a task whose handle is gone and that no
        // waker can reach is dropped after its first poll.
        let mut handles: Vec<Box<dyn std::any::Any>> = Vec::new();
        macro_rules! spawned {
            ($e:expr) => {{
                let line = line!();
                let handle = $e;
                expected.push((handle.id(), line));
                handles.push(Box::new(handle));
            }};
        }
        spawned!(pool.spawn(pending::<()>()));
        spawned!(pool.spawn_cancellable(&Default::default(), pending::<()>()));
        spawned!(strand.spawn(pending::<()>()));
        spawned!(keyed.spawn(1, pending::<()>()));
        spawned!(priority.spawn_with(1, pending::<()>()));
        spawned!(timer.spawn_after(&pool, Duration::ZERO, pending::<()>()));
        spawned!(pool.spawn_after(Duration::ZERO, pending::<()>()));
        spawned!(pool.spawn(pending::<u8>()).then(|x| x));
        spawned!(set.spawn_on(pending::<()>(), &pool));
        // The parked tasks are listed first: the section below blocks a
        // worker, and work that worker had just woken (in its slot, which
        // others cannot take) would wait behind it.
        let ids: Vec<_> = expected.iter().map(|(id, _)| *id).collect();
        dump_when(&pool, |d| listed(d, &ids));
        let section = move |_: &mut ()| {
            let _ = blocker.lock().unwrap().recv();
        };
        spawned!(guarded.with(section));
        let ids: Vec<_> = expected.iter().map(|(id, _)| *id).collect();
        let dump = dump_when(&pool, |d| listed(d, &ids));
        for (id, line) in expected {
            let entry = dump.task(id.unwrap()).unwrap();
            // The call may be wrapped onto the lines after the macro's.
            let at = entry.location();
            assert!(
                at.file() == file!() && (line..line + 4).contains(&at.line()),
                "spawned at line {line}, recorded at {at}\n{dump}"
            );
        }
        set.abort_all();
        drop(handles);
    });
}

#[test]
fn waits_name_the_lock_and_its_holder_the_section_the_handle_and_the_timer() {
    within("waits", || {
        let pool = pool("waits", 2);
        let value = Guarded::new(pool.clone(), 0u32);
        let (release, wait) = mpsc::channel::<()>();
        let (held, holding) = mpsc::channel::<()>();
        let v = value.clone();
        let holder = pool.spawn(async move {
            let _guard = v.lock().await;
            held.send(()).unwrap();
            // Parked while holding the guard.
            let release = std::sync::Mutex::new(wait);
            std::future::poll_fn(|_| match release.lock().unwrap().try_recv() {
                Ok(()) => std::task::Poll::Ready(()),
                Err(_) => std::task::Poll::Pending,
            })
            .await;
        });
        holding.recv().unwrap();
        let v = value.clone();
        let locker = pool.spawn(async move { *v.lock().await += 1 });
        let v = value.clone();
        let sectioner = pool.spawn(async move { v.with(|n| *n += 1).await.unwrap() });
        let target = pool.spawn(pending::<()>());
        let target_id = target.id().unwrap();
        let joiner = pool.spawn(target);
        let sleeper = pool.spawn(viaduct::time::sleep(Duration::from_secs(3600)));

        let ids = [
            locker.id(),
            sectioner.id(),
            joiner.id(),
            sleeper.id(),
            holder.id(),
        ];
        let dump = dump_when(&pool, |d| {
            listed(d, &ids)
                && ids[..4]
                    .iter()
                    .all(|id| !d.task(id.unwrap()).unwrap().waits_on().is_empty())
        });
        let waits = |id: Option<TaskId>| dump.task(id.unwrap()).unwrap().waits_on().to_vec();
        match &waits(locker.id())[..] {
            [WaitsOn::Lock(lock)] => {
                assert_eq!(lock.holder(), holder.id());
                assert_eq!(lock.name(), "Guarded<u32>");
                assert_eq!(lock.location().file(), file!());
            }
            other => panic!("{other:?}"),
        }
        match &waits(sectioner.id())[..] {
            [WaitsOn::Section { lock, .. }] => assert_eq!(lock.holder(), holder.id()),
            other => panic!("{other:?}"),
        }
        assert!(matches!(&waits(joiner.id())[..], [WaitsOn::Task(id)] if *id == target_id));
        match &waits(sleeper.id())[..] {
            [WaitsOn::Timer { deadline, .. }] => {
                assert!(*deadline > std::time::Instant::now() + Duration::from_secs(3000))
            }
            other => panic!("{other:?}"),
        }
        assert!(dump.deadlocks().is_empty(), "{dump}");
        let text = dump.to_string();
        assert!(text.contains("Guarded<u32>"), "{text}");
        assert!(
            text.contains(&format!("held by task {}", holder.id().unwrap())),
            "{text}"
        );
        release.send(()).unwrap();
        for task in [holder, locker, sectioner] {
            task.abort();
        }
        sleeper.abort();
        joiner.abort();
    });
}

#[test]
fn a_handle_handed_on_is_listed_as_the_wait_of_whoever_polls_it_now() {
    within("handover", || {
        let pool = pool("handover", 2);
        let target = pool.spawn(pending::<()>());
        let target_id = target.id().unwrap();
        let (to_second, from_first) = futures::channel::oneshot::channel();
        let (hand_back, handed_back) = futures::channel::oneshot::channel::<()>();
        let (to_test, from_second) = mpsc::channel();
        let first = pool.spawn(async move {
            let mut target = target;
            assert!(futures::poll!(&mut target).is_pending());
            to_second
                .send(target)
                .expect("the second task waits for it");
            pending::<()>().await
        });
        let second = pool.spawn(async move {
            let mut target = from_first.await.unwrap();
            let mut handed_back = handed_back;
            futures::future::select(&mut target, &mut handed_back).await;
            to_test.send(target).unwrap();
            pending::<()>().await
        });
        let (first_id, second_id) = (first.id(), second.id());
        let waits = |dump: &TaskDump, id: Option<TaskId>| {
            dump.task(id.unwrap()).unwrap().waits_on().to_vec()
        };
        let dump = dump_when(&pool, |d| {
            listed(d, &[first_id, second_id]) && !waits(d, second_id).is_empty()
        });
        assert!(waits(&dump, first_id).is_empty(), "{dump}");
        assert!(
            matches!(&waits(&dump, second_id)[..], [WaitsOn::Task(id)] if *id == target_id),
            "{dump}"
        );
        // On to this thread, outside the pool, which polls it: no task
        // of the pool waits on it any more.
        hand_back.send(()).unwrap();
        let mut target = from_second.recv().unwrap();
        assert!(viaduct::block_on(async { futures::poll!(&mut target) }).is_pending());
        let dump = pool.dump();
        assert!(waits(&dump, first_id).is_empty(), "{dump}");
        assert!(waits(&dump, second_id).is_empty(), "{dump}");
        target.abort();
        first.abort();
        second.abort();
    });
}

#[test]
fn opposite_order_locking_of_two_values_is_exactly_one_cycle() {
    within("cycle", || {
        let pool = pool("cycle", 2);
        let (a, b) = (
            Guarded::new(pool.clone(), 'a'),
            Guarded::new(pool.clone(), 'b'),
        );
        let (both_hold, rx) = mpsc::channel::<()>();
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        let spawn_pair = |first: Guarded<char>, second: Guarded<char>| {
            let both = both_hold.clone();
            let rx = rx.clone();
            pool.spawn(async move {
                let _first = first.lock().await;
                both.send(()).unwrap();
                // Until both hold their first value (the other task sends).
                viaduct::time::sleep(Duration::from_millis(30)).await;
                drop(rx);
                let _second = second.lock().await;
            })
        };
        let one = spawn_pair(a.clone(), b.clone());
        let two = spawn_pair(b.clone(), a.clone());
        let dump = dump_when(&pool, |d| !d.deadlocks().is_empty());
        let deadlocks = dump.deadlocks();
        assert_eq!(deadlocks.len(), 1, "{dump}");
        let steps = deadlocks[0].steps();
        let mut tasks: Vec<_> = steps.iter().map(|s| s.task()).collect();
        tasks.sort();
        let mut expected = vec![one.id().unwrap(), two.id().unwrap()];
        expected.sort();
        assert_eq!(tasks, expected);
        for (i, step) in steps.iter().enumerate() {
            let next = steps[(i + 1) % steps.len()].task();
            match step.waits_on() {
                WaitsOn::Lock(lock) => assert_eq!(lock.holder(), Some(next)),
                other => panic!("{other:?}"),
            }
            assert_eq!(step.location().file(), file!());
        }
        let text = deadlocks[0].to_string();
        assert!(text.contains("Guarded<char>"), "{text}");
        assert_eq!(text.matches(file!()).count(), 4, "{text}"); // 2 tasks, 2 values
        one.abort();
        two.abort();
    });
}

#[test]
fn handles_awaiting_each_other_and_a_task_awaiting_its_own_section_are_cycles() {
    within("handles", || {
        let pool = pool("handles", 2);
        let (tx_a, rx_a) = mpsc::channel::<viaduct::JoinHandle<()>>();
        let (tx_b, rx_b) = mpsc::channel::<viaduct::JoinHandle<()>>();
        let rx_a = std::sync::Mutex::new(rx_a);
        let rx_b = std::sync::Mutex::new(rx_b);
        let a = pool.spawn(async move {
            let other = viaduct::Inline.run(move || rx_a.lock().unwrap().recv().unwrap());
            let _ = other.await.unwrap().await;
        });
        let b = pool.spawn(async move {
            let other = viaduct::Inline.run(move || rx_b.lock().unwrap().recv().unwrap());
            let _ = other.await.unwrap().await;
        });
        let (a_id, b_id) = (a.id().unwrap(), b.id().unwrap());
        tx_a.send(b).unwrap();
        tx_b.send(a).unwrap();
        let dump = dump_when(&pool, |d| !d.deadlocks().is_empty());
        let deadlocks = dump.deadlocks();
        assert_eq!(deadlocks.len(), 1, "{dump}");
        let mut tasks: Vec<_> = deadlocks[0].steps().iter().map(|s| s.task()).collect();
        tasks.sort();
        let mut expected = vec![a_id, b_id];
        expected.sort();
        assert_eq!(tasks, expected);

        // A guard held while awaiting a section of the same value.
        let value = Guarded::new(pool.clone(), 0);
        let self_lock = pool.spawn(async move {
            let _guard = value.lock().await;
            value.with(|n| *n += 1).await.unwrap();
        });
        let id = self_lock.id().unwrap();
        let dump = dump_when(&pool, |d| {
            d.deadlocks().iter().any(|c| c.steps()[0].task() == id)
        });
        let cycle = dump
            .deadlocks()
            .into_iter()
            .find(|c| c.steps()[0].task() == id)
            .unwrap();
        assert_eq!(cycle.steps().len(), 1, "{cycle}");
        assert!(matches!(
            cycle.steps()[0].waits_on(),
            WaitsOn::Section { .. }
        ));
        self_lock.abort();
    });
}

#[test]
fn a_task_nothing_can_wake_again_leaves_the_dump() {
    within("unwakeable", || {
        let pool = pool("unwakeable", 2);
        let polled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        // The handles go at once and the futures keep no waker: async-task
        // frees each task after its first poll (without dropping its
        // future), and its entry in the book must go with it.
        for _ in 0..200 {
            let polled = polled.clone();
            drop(pool.spawn(std::future::poll_fn(move |_| {
                polled.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                std::task::Poll::<()>::Pending
            })));
        }
        // Dumps taken meanwhile read only live tasks.
        while polled.load(std::sync::atomic::Ordering::SeqCst) < 200 {
            let _ = pool.dump().to_string();
        }
        let dump = dump_when(&pool, |d| d.tasks().is_empty());
        assert_eq!(dump.not_started(), 0, "{dump}");
    });
}

#[test]
fn a_sleep_reset_while_waiting_shows_its_new_deadline() {
    within("reset", || {
        use std::future::Future;
        let pool = pool("reset", 1);
        let task = pool.spawn(async {
            let mut sleep = Box::pin(viaduct::time::sleep(Duration::from_secs(3600)));
            // One poll, waiting with the first deadline, then a reset.
            std::future::poll_fn(|cx| {
                assert!(sleep.as_mut().poll(cx).is_pending());
                std::task::Poll::Ready(())
            })
            .await;
            sleep
                .as_mut()
                .reset(Instant::now() + Duration::from_secs(7200));
            sleep.await;
        });
        let id = task.id().unwrap();
        let dump = dump_when(&pool, |d| {
            d.task(id).is_some_and(|t| !t.waits_on().is_empty())
        });
        match dump.task(id).unwrap().waits_on() {
            [WaitsOn::Timer { deadline, .. }] => assert!(
                *deadline > Instant::now() + Duration::from_secs(5000),
                "the first deadline is still shown\n{dump}"
            ),
            other => panic!("{other:?}"),
        }
        task.abort();
    });
}

#[test]
fn a_task_lists_its_lock_then_its_timers_on_any_timer_and_a_dropped_sleep_leaves_no_wait() {
    within("timer waits", || {
        let pool = pool("timer-waits", 2);
        let value = Guarded::new(pool.clone(), 0u32);
        let guard = viaduct::block_on(value.lock());
        let manual = Timer::manual();
        let in_five = manual.now() + Duration::from_secs(5);
        let (v, m) = (value.clone(), manual.clone());
        let task = pool.spawn(async move {
            let locked = async {
                // Waits on the lock first, then (the timeout polls its
                // future first) on the global timer.
                let guard = Timer::global()
                    .timeout(Duration::from_secs(3600), v.lock())
                    .await
                    .expect("the lock comes first");
                drop(guard);
            };
            futures::join!(locked, m.sleep(Duration::from_secs(5)));
        });
        let id = task.id().unwrap();
        let dump = dump_when(&pool, |d| {
            d.task(id).is_some_and(|t| t.waits_on().len() == 3)
        });
        match dump.task(id).unwrap().waits_on() {
            [WaitsOn::Lock(lock), WaitsOn::Timer { deadline: a, .. }, WaitsOn::Timer { deadline: b, .. }] =>
            {
                assert_eq!(lock.holder(), None, "held outside any task");
                // Timers by deadline: the manual one's, then the global's.
                assert_eq!(*a, in_five, "{dump}");
                assert!(*b > Instant::now() + Duration::from_secs(3000), "{dump}");
            }
            other => panic!("{other:?}\n{dump}"),
        }

        // The lock comes: the timeout's sleep is dropped, and with it its
        // wait; the manual timer's stays.
        drop(guard);
        let dump = dump_when(&pool, |d| {
            d.task(id).is_some_and(|t| t.waits_on().len() == 1)
        });
        match dump.task(id).unwrap().waits_on() {
            [WaitsOn::Timer { deadline, .. }] => assert_eq!(*deadline, in_five),
            other => panic!("{other:?}\n{dump}"),
        }
        manual.advance(Duration::from_secs(5));
        viaduct::block_on(task).unwrap();
        assert_eq!(viaduct::block_on(value.with(|v| *v)).unwrap(), 0);
    });
}

/// A continuation whose step before has not ended waits on it: it is
/// listed as waiting on that step, whether it was chained from outside the
/// pool or from one of its tasks, and a cycle through it is a deadlock
/// like any other.
#[test]
fn a_step_is_listed_waiting_on_the_step_before_and_cycles_through_it_are_found() {
    within("steps", || {
        let pool = pool("steps", 2);
        let first = pool.spawn(pending::<u8>());
        let first_id = first.id().unwrap();
        let outside = first.then(|x| x);
        let p = pool.clone();
        let inside = pool.spawn(async move {
            let first = p.spawn(pending::<u8>());
            let id = first.id().unwrap();
            (id, first.then(|x| x))
        });
        let (inside_first, inside) = viaduct::block_on(inside).unwrap();
        for (step, before) in [(&outside, first_id), (&inside, inside_first)] {
            // Listed while its first poll runs too: wait for its wait.
            let dump = dump_when(&pool, |d| {
                d.task(step.id().unwrap())
                    .is_some_and(|e| !e.waits_on().is_empty())
            });
            let entry = dump.task(step.id().unwrap()).unwrap();
            assert_eq!(entry.state(), &TaskState::Waiting, "{dump}");
            assert!(
                matches!(entry.waits_on(), [WaitsOn::Task(id)] if *id == before),
                "{dump}"
            );
        }
        outside.abort();
        inside.abort();

        // A task holds a value and awaits a step whose step before waits
        // for that value: three tasks in one cycle.
        let value = Guarded::new(pool.clone(), 0);
        let (held, is_held) = mpsc::channel::<()>();
        let (send_step, step_rx) = futures::channel::oneshot::channel::<viaduct::JoinHandle<()>>();
        let v = value.clone();
        let holder = pool.spawn(async move {
            let _guard = v.lock().await;
            held.send(()).unwrap();
            let _ = step_rx.await.unwrap().await;
        });
        is_held.recv().unwrap();
        let v = value.clone();
        let before = pool.spawn(async move {
            let _ = v.lock().await;
        });
        let before_id = before.id().unwrap();
        let step = before.then(|()| ());
        let step_id = step.id().unwrap();
        assert!(send_step.send(step).is_ok());
        let dump = dump_when(&pool, |d| !d.deadlocks().is_empty());
        let deadlocks = dump.deadlocks();
        assert_eq!(deadlocks.len(), 1, "{dump}");
        let mut tasks: Vec<_> = deadlocks[0].steps().iter().map(|s| s.task()).collect();
        tasks.sort();
        let mut expected = vec![holder.id().unwrap(), before_id, step_id];
        expected.sort();
        assert_eq!(tasks, expected, "{dump}");
        holder.abort();
    });
}

/// A task blocked in `block_on` on a pool worker is listed, with what it
/// waits on, also while its worker, helping, runs another task on top of
/// it (it used to be listed only while it was the one its worker ran).
#[test]
fn a_task_blocked_in_block_on_is_listed_with_its_wait_while_its_worker_helps() {
    within("blocked", || {
        let pool = pool("blocked", 1);
        let p = pool.clone();
        let (handles, handed) = mpsc::channel();
        let (release, busy_until) = mpsc::channel::<()>();
        let blocker = pool.spawn(async move {
            let parked = p.spawn(pending::<()>());
            let busy = p.run(move || busy_until.recv().unwrap());
            handles.send((parked.abort_handle(), busy)).unwrap();
            viaduct::block_on(parked).unwrap_err().is_cancelled()
        });
        let (parked, busy) = handed.recv().unwrap();
        let id = blocker.id().unwrap();
        let dump = dump_when(&pool, |d| {
            d.task(id).is_some_and(|t| !t.waits_on().is_empty())
                && d.tasks()
                    .iter()
                    .any(|t| t.state() != &TaskState::Waiting && t.id() != id)
        });
        let entry = dump.task(id).unwrap();
        assert!(
            matches!(entry.waits_on(), [WaitsOn::Task(on)] if Some(*on) == parked.id()),
            "{dump}"
        );
        release.send(()).unwrap();
        viaduct::block_on(busy).unwrap();
        parked.abort();
        assert!(viaduct::block_on(blocker).unwrap());
    });
}

/// A task holds `a` and waits for a section it queued on `b`; the section,
/// once it runs, blocks on `a`. The section runs in `b`'s runner, where
/// its wait on `a` is noted: a dump follows the task's wait on the section
/// to that runner and reports the cycle. Aborting the task ends it.
#[test]
fn a_dump_finds_the_cycle_through_a_running_queued_section() {
    within("cycle through a queued section", || {
        let pool = pool("section-cycle", 2);
        let (a, b) = (
            Guarded::new(pool.clone(), 0u32),
            Guarded::new(pool.clone(), 0u32),
        );
        // `b` held from outside, so that the task's section queues.
        let b_held = viaduct::block_on(b.lock());
        let (queued_tx, queued) = mpsc::channel();
        let (a2, b2) = (a.clone(), b.clone());
        let task = pool.spawn(async move {
            let _held = a2.lock().await;
            let a3 = a2.clone();
            let section = b2.with(move |_| drop(viaduct::block_on(a3.lock())));
            queued_tx.send(()).unwrap();
            section.await
        });
        queued.recv_timeout(Duration::from_secs(10)).unwrap();
        drop(b_held);
        let dump = dump_when(&pool, |d| !d.deadlocks().is_empty());
        let cycle = &dump.deadlocks()[0];
        assert!(
            cycle.steps().iter().any(|s| Some(s.task()) == task.id()),
            "{dump}"
        );
        let runner = cycle
            .steps()
            .iter()
            .find(|s| matches!(s.waits_on(), WaitsOn::Lock(_)))
            .expect("a step waits on the lock")
            .task();
        assert_eq!(
            dump.task(runner).unwrap().kind(),
            viaduct::dump::TaskKind::StrandRunner,
            "the section's wait is its runner's\n{dump}"
        );
        task.abort();
        assert!(viaduct::block_on(task).unwrap_err().is_cancelled());
        assert_eq!(*viaduct::block_on(a.lock()), 0);
    });
}
