//! viaduct with the rest of the ecosystem: `futures` utilities, tokio
//! futures on viaduct executors, and viaduct executors over tokio.

#[allow(dead_code)] // it uses the tokio runtime alone
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::tokio_runtime;
use viaduct::compat::tokio::TokioExecutor;
use viaduct::{
    block_on, Exec, Executor, ExecutorExt, Inline, ManualExecutor, ThreadPerTask, ThreadPool,
};

fn pool(name: &str) -> ThreadPool {
    ThreadPool::builder().threads(2).name(name).build().unwrap()
}

/// Spawns a future through `futures::task::Spawn` and waits for its value.
type Runner = Box<dyn Fn(futures::future::BoxFuture<'static, usize>) -> usize>;

#[test]
fn futures_spawn_trait_on_every_executor() {
    use futures::task::SpawnExt;
    let manual = ManualExecutor::new();
    let executors: Vec<(&str, Runner)> = vec![
        ("pool", {
            let p = pool("spawn");
            Box::new(move |f| futures::executor::block_on(p.spawn_with_handle(f).unwrap()))
        }),
        (
            "inline",
            Box::new(|f| futures::executor::block_on(Inline.spawn_with_handle(f).unwrap())),
        ),
        ("manual", {
            let m = manual.clone();
            Box::new(move |f| {
                let h = m.spawn_with_handle(f).unwrap();
                m.run_until(h)
            })
        }),
        ("thread-per-task", {
            let t = ThreadPerTask::new("spawn-tpt");
            Box::new(move |f| futures::executor::block_on(t.spawn_with_handle(f).unwrap()))
        }),
        ("exec", {
            let e = Exec::new(pool("spawn-exec"));
            Box::new(move |f| futures::executor::block_on(e.spawn_with_handle(f).unwrap()))
        }),
    ];
    for (name, run) in executors {
        assert_eq!(run(Box::pin(async { 7 })), 7, "{name}");
    }
}

#[test]
fn futures_spawn_on_a_closed_executor_is_shutdown() {
    let p = pool("closed");
    assert!(futures::task::Spawn::status(&p).is_ok());
    p.close();
    assert!(futures::task::Spawn::status(&p).unwrap_err().is_shutdown());
    let spawn_err = futures::task::SpawnExt::spawn(&p, async {}).unwrap_err();
    assert!(spawn_err.is_shutdown());
}

#[test]
fn viaduct_handles_under_futures_executor_and_combinators() {
    let p = pool("combine");
    let handles: Vec<_> = (0..10u64).map(|i| p.spawn(async move { i * 2 })).collect();
    let all = futures::executor::block_on(futures::future::try_join_all(handles)).unwrap();
    assert_eq!(all, (0..10u64).map(|i| i * 2).collect::<Vec<_>>());

    let slow = p.spawn(async {
        futures::future::pending::<()>().await;
        1
    });
    let fast = p.spawn(async { 2 });
    let winner = futures::executor::block_on(futures::future::select(slow, fast));
    match winner {
        futures::future::Either::Right((Ok(v), _slow)) => assert_eq!(v, 2),
        _ => panic!("the pending task cannot win"),
    }
}

#[test]
fn tokio_oneshot_awaited_on_a_viaduct_pool() {
    let p = pool("tokio-oneshot");
    let (tx, rx) = tokio::sync::oneshot::channel::<&'static str>();
    let h = p.spawn(async move {
        (
            rx.await.unwrap(),
            std::thread::current().name().unwrap().to_owned(),
        )
    });
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(10));
        tx.send("hi").unwrap();
    });
    let (msg, thread) = block_on(h).unwrap();
    assert_eq!(msg, "hi");
    assert!(thread.starts_with("tokio-oneshot-"), "{thread}");
}

/// Polls `fut` inside `handle`'s runtime context, which tokio needs to
/// register new I/O resources (an accepted socket) with its reactor. The
/// context is entered per poll, so the future stays `Send`.
async fn in_tokio<F: std::future::Future>(handle: tokio::runtime::Handle, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    futures::future::poll_fn(move |cx| {
        let _context = handle.enter();
        fut.as_mut().poll(cx)
    })
    .await
}

#[test]
fn tokio_tcp_listener_awaited_on_a_viaduct_pool() {
    // tokio's reactor runs on its runtime's threads; the socket futures are
    // polled by viaduct's workers.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_io()
        .build()
        .unwrap();
    let listener = {
        let _enter = rt.enter();
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        tokio::net::TcpListener::from_std(std_listener).unwrap()
    };
    let addr = listener.local_addr().unwrap();
    let p = pool("tcp");
    let server = p.spawn(in_tokio(rt.handle().clone(), async move {
        use tokio::io::AsyncReadExt;
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = Vec::new();
        socket.read_to_end(&mut buf).await.unwrap();
        (
            String::from_utf8(buf).unwrap(),
            std::thread::current().name().unwrap().to_owned(),
        )
    }));
    let client = std::thread::spawn(move || {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"over the viaduct").unwrap();
    });
    client.join().unwrap();
    let (got, thread) = block_on(server).unwrap();
    assert_eq!(got, "over the viaduct");
    assert!(thread.starts_with("tcp-"), "{thread}");
    drop(rt);
}

#[test]
fn viaduct_tasks_on_a_tokio_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("tokio-w")
        .enable_all()
        .build()
        .unwrap();
    let tokio_ex = TokioExecutor::new(rt.handle().clone());
    let ran = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..100)
        .map(|_| {
            let ran = ran.clone();
            tokio_ex.spawn(async move {
                // A tokio timer works here: this is a tokio worker.
                tokio::time::sleep(Duration::from_millis(1)).await;
                ran.fetch_add(1, Ordering::Relaxed);
                std::thread::current().name().unwrap().to_owned()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(block_on(h).unwrap(), "tokio-w");
    }
    assert_eq!(ran.load(Ordering::Relaxed), 100);
}

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("").to_owned()
}

/// Where a step of a task ran: its thread, and whether tokio's context
/// (its timers and reactor) was there.
fn here() -> (String, bool) {
    (thread_name(), tokio::runtime::Handle::try_current().is_ok())
}

#[test]
fn hop_from_tokio_to_a_viaduct_pool_and_back() {
    let rt = tokio_runtime("tokio-hop");
    let tokio_ex = TokioExecutor::new(rt.handle().clone());
    let p = pool("hop-pool");
    let (back, to) = (tokio_ex.clone(), p.clone());
    let trip = tokio_ex.spawn(async move {
        let mut steps = vec![here()];
        tokio::time::sleep(Duration::from_millis(1)).await;
        viaduct::hop_to(&to).await;
        steps.push(here());
        viaduct::hop_to(&back).await;
        steps.push(here());
        // tokio's timer works again: the task is back on a tokio worker.
        tokio::time::sleep(Duration::from_millis(1)).await;
        steps.push(here());
        steps
    });
    // A viaduct handle awaited by tokio's own block_on.
    let steps = rt.block_on(trip).unwrap();
    assert_eq!(steps.len(), 4);
    assert_eq!(steps[0], ("tokio-hop".to_owned(), true));
    assert!(steps[1].0.starts_with("hop-pool-"), "{steps:?}");
    assert!(!steps[1].1, "a viaduct worker is outside tokio: {steps:?}");
    assert_eq!(steps[2], ("tokio-hop".to_owned(), true));
    assert_eq!(steps[3], ("tokio-hop".to_owned(), true));
}

#[test]
fn viaduct_timers_in_tasks_spawned_by_tokio() {
    use viaduct::time;
    let rt = tokio_runtime("tokio-timers");
    rt.block_on(async {
        let slept = tokio::spawn(async {
            let start = std::time::Instant::now();
            time::sleep(Duration::from_millis(20)).await;
            (start.elapsed(), thread_name())
        });
        let in_time = tokio::spawn(time::timeout(Duration::from_secs(10), async { 7 }));
        let too_late = tokio::spawn(time::timeout(
            Duration::from_millis(10),
            std::future::pending::<()>(),
        ));
        // A tokio future inside a viaduct timeout, in a tokio task.
        let tokio_in_viaduct = tokio::spawn(time::timeout(
            Duration::from_secs(10),
            tokio::time::sleep(Duration::from_millis(5)),
        ));
        let ticks = tokio::spawn(async {
            let mut every = time::interval(Duration::from_millis(5));
            let mut ticks = Vec::new();
            for _ in 0..4 {
                ticks.push(every.tick().await);
            }
            (ticks, std::time::Instant::now())
        });

        let (elapsed, thread) = slept.await.unwrap();
        assert!(elapsed >= Duration::from_millis(20), "{elapsed:?}");
        assert_eq!(thread, "tokio-timers");
        assert_eq!(in_time.await.unwrap(), Ok(7));
        assert!(too_late.await.unwrap().is_err());
        assert!(tokio_in_viaduct.await.unwrap().is_ok());
        let (ticks, now) = ticks.await.unwrap();
        for pair in ticks.windows(2) {
            assert_eq!(pair[1] - pair[0], Duration::from_millis(5));
        }
        assert!(now >= ticks[3], "a tick never comes early");
    });
}

#[test]
fn strand_on_tokio_serves_tasks_spawned_by_tokio() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Mutex;
    const SUBMITTERS: usize = 4;
    const EACH: usize = 50;
    let rt = tokio_runtime("tokio-strand");
    // The strand decorates the tokio adapter: its sections run on tokio.
    let strand = viaduct::Strand::new(TokioExecutor::new(rt.handle().clone()));
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let log = Arc::new(Mutex::new(Vec::new()));
    rt.block_on(async {
        let submitters: Vec<_> = (0..SUBMITTERS)
            .map(|s| {
                let (strand, inside, overlaps, log) = (
                    strand.clone(),
                    inside.clone(),
                    overlaps.clone(),
                    log.clone(),
                );
                tokio::spawn(async move {
                    let mut last = None;
                    for i in 0..EACH {
                        let (inside, overlaps, log) =
                            (inside.clone(), overlaps.clone(), log.clone());
                        last = Some(strand.run(move || {
                            if inside.swap(true, Ordering::SeqCst) {
                                overlaps.fetch_add(1, Ordering::SeqCst);
                            }
                            log.lock().unwrap().push((s, i, thread_name()));
                            inside.store(false, Ordering::SeqCst);
                        }));
                        if i % 10 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                    // Sections run in submission order: the last one ran last.
                    last.unwrap().await.unwrap();
                })
            })
            .collect();
        for s in submitters {
            s.await.unwrap();
        }
    });
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    let log = log.lock().unwrap();
    assert_eq!(log.len(), SUBMITTERS * EACH);
    for s in 0..SUBMITTERS {
        let order: Vec<usize> = log.iter().filter(|e| e.0 == s).map(|e| e.1).collect();
        assert_eq!(order, (0..EACH).collect::<Vec<_>>(), "submitter {s}");
    }
    assert!(log.iter().all(|e| e.2 == "tokio-strand"), "{log:?}");
}

#[test]
fn guarded_locked_by_tokio_tasks_across_await() {
    const TASKS: usize = 8;
    const ROUNDS: usize = 25;
    let rt = tokio_runtime("tokio-guarded");
    // The value is owned by a strand of a viaduct pool; tokio tasks lock it.
    let counter = viaduct::Guarded::new(pool("guarded"), (0usize, false));
    let total = rt.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let counter = counter.clone();
                tokio::spawn(async move {
                    for _ in 0..ROUNDS {
                        let mut guard = counter.lock().await;
                        assert!(!guard.1, "two guards at once");
                        guard.1 = true;
                        // Held across an await that really suspends.
                        tokio::time::sleep(Duration::from_micros(50)).await;
                        guard.0 += 1;
                        guard.1 = false;
                        drop(guard);
                        counter.with(|v| v.0 += 1).await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        counter.with(|v| v.0).await.unwrap()
    });
    assert_eq!(total, TASKS * ROUNDS * 2);
}

#[test]
fn futures_executor_utilities_drive_viaduct_futures() {
    use futures::executor::{block_on_stream, LocalPool};
    use futures::task::LocalSpawnExt;
    use futures::StreamExt;
    use std::cell::RefCell;
    use std::rc::Rc;

    // viaduct's timers under futures' block_on and block_on_stream.
    let start = std::time::Instant::now();
    futures::executor::block_on(viaduct::time::sleep(Duration::from_millis(5)));
    assert!(start.elapsed() >= Duration::from_millis(5));
    let ticks: Vec<_> =
        block_on_stream(viaduct::time::interval(Duration::from_millis(2)).take(3)).collect();
    assert_eq!(ticks[2] - ticks[0], Duration::from_millis(4));

    // Non-Send local tasks of a LocalPool awaiting handles of a viaduct pool.
    let p = pool("local");
    let mut local = LocalPool::new();
    let results = Rc::new(RefCell::new(Vec::new()));
    for i in 0..5u64 {
        let (results, h) = (results.clone(), p.run(move || (i * i, thread_name())));
        local
            .spawner()
            .spawn_local(async move {
                let r = h.await.unwrap();
                results.borrow_mut().push(r);
            })
            .unwrap();
    }
    local.run();
    let mut results = results.take();
    results.sort();
    assert_eq!(
        results.iter().map(|r| r.0).collect::<Vec<_>>(),
        [0, 1, 4, 9, 16]
    );
    assert!(
        results.iter().all(|r| r.1.starts_with("local-")),
        "{results:?}"
    );
}

#[test]
fn futures_spawn_trait_on_decorators() {
    use futures::task::{Spawn, SpawnExt};
    fn spawn_seven<S: Spawn>(s: &S) -> usize {
        futures::executor::block_on(s.spawn_with_handle(async { 7 }).unwrap())
    }
    let p = pool("spawn-decorators");
    let strand = viaduct::Strand::new(p.clone());
    let priority = viaduct::PriorityExecutor::new(p.clone());
    assert_eq!(spawn_seven(&strand), 7);
    assert_eq!(spawn_seven(&priority), 7);
    assert_eq!(spawn_seven(&priority.fixed(3)), 7);
    strand.close();
    assert!(strand.status().unwrap_err().is_shutdown());
}
