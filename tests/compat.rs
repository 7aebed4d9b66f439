//! The adapters of `viaduct::compat`, both ways: viaduct work on tokio,
//! hyper and rayon, and their work on viaduct. Needs the three features
//! (the test command turns them all on).

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::within;
use viaduct::{block_on, ExecutorExt, Guarded, RejectReason, TaskError, ThreadPool};

fn pool(name: &str) -> ThreadPool {
    ThreadPool::builder().threads(2).name(name).build().unwrap()
}

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("").to_owned()
}

fn message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

mod on_tokio {
    use super::*;
    use viaduct::compat::tokio::TokioExecutor;
    use viaduct::Executor;

    use support::tokio_runtime as runtime;

    #[test]
    fn viaduct_tasks_run_on_tokio_threads_with_tokio_at_hand() {
        within("tokio-tasks", || {
            let rt = runtime("tk-w");
            let on_tokio = TokioExecutor::new(rt.handle().clone());
            let handles: Vec<_> = (0..100)
                .map(|i| {
                    on_tokio.spawn(async move {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        let inner = tokio::spawn(async move { i * 2 }).await.unwrap();
                        (inner, thread_name())
                    })
                })
                .collect();
            for (i, h) in handles.into_iter().enumerate() {
                assert_eq!(block_on(h).unwrap(), (i * 2, "tk-w".to_owned()));
            }
        });
    }

    #[test]
    fn a_strand_over_tokio_runs_its_sections_one_at_a_time_in_order() {
        within("tokio-strand", || {
            let rt = runtime("tk-s");
            let log = Guarded::new(TokioExecutor::new(rt.handle().clone()), Vec::new());
            let handles: Vec<_> = (0..200).map(|i| log.with(move |v| v.push(i))).collect();
            for h in handles {
                block_on(h).unwrap();
            }
            assert_eq!(*block_on(log.lock()), (0..200).collect::<Vec<_>>());
        });
    }

    #[test]
    fn tokio_tasks_await_viaduct_handles_locks_and_timers() {
        within("tokio-awaits", || {
            let rt = runtime("tk-a");
            let p = pool("tk-a-pool");
            let counter = Guarded::new(p.clone(), 0u32);
            let total = rt.block_on(async move {
                let mut tasks = Vec::new();
                for _ in 0..8 {
                    let (p, counter) = (p.clone(), counter.clone());
                    tasks.push(tokio::spawn(async move {
                        viaduct::time::sleep(Duration::from_millis(1)).await;
                        let name = p.run(thread_name).await.unwrap();
                        assert!(name.starts_with("tk-a-pool-"), "{name}");
                        *counter.lock().await += 1;
                        counter.with(|c| *c).await.unwrap()
                    }));
                }
                for t in tasks {
                    t.await.unwrap();
                }
                *counter.lock().await
            });
            assert_eq!(total, 8);
        });
    }

    #[test]
    fn a_pool_that_enters_tokio_runs_tokio_sockets_timers_and_spawns_in_its_tasks() {
        within("enter-tokio", || {
            let rt = runtime("tk-io");
            let p = ThreadPool::builder()
                .threads(2)
                .name("io-pool")
                .enter_tokio(rt.handle().clone())
                .build()
                .unwrap();
            let echoed = p.spawn(async {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                let server = tokio::spawn(async move {
                    let (mut socket, _) = listener.accept().await.unwrap();
                    let mut buf = [0u8; 5];
                    socket.read_exact(&mut buf).await.unwrap();
                    socket.write_all(&buf).await.unwrap();
                });
                let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
                client.write_all(b"hello").await.unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
                let mut back = [0u8; 5];
                client.read_exact(&mut back).await.unwrap();
                server.await.unwrap();
                (back, thread_name())
            });
            let (back, name) = block_on(echoed).unwrap();
            assert_eq!(&back, b"hello");
            assert!(name.starts_with("io-pool-"), "{name}");
            // The hooks run inside the runtime too.
            let seen = Arc::new(AtomicUsize::new(0));
            let s = seen.clone();
            let hooked = ThreadPool::builder()
                .threads(1)
                .enter_tokio(rt.handle().clone())
                .on_thread_start(move || {
                    if tokio::runtime::Handle::try_current().is_ok() {
                        s.fetch_add(1, Ordering::SeqCst);
                    }
                })
                .build()
                .unwrap();
            hooked.shutdown().unwrap();
            assert_eq!(seen.load(Ordering::SeqCst), 1);
            let stopped = Arc::new(AtomicUsize::new(0));
            let s = stopped.clone();
            ThreadPool::builder()
                .threads(2)
                .enter_tokio(rt.handle().clone())
                .on_thread_stop(move || {
                    if tokio::runtime::Handle::try_current().is_ok() {
                        s.fetch_add(1, Ordering::SeqCst);
                    }
                })
                .build()
                .unwrap()
                .shutdown()
                .unwrap();
            assert_eq!(stopped.load(Ordering::SeqCst), 2);
            p.shutdown().unwrap();
        });
    }

    #[test]
    fn a_pool_with_its_own_reactor_serves_sockets_timers_and_tokio_tasks() {
        within("own-reactor", || {
            let p = ThreadPool::builder()
                .threads(2)
                .name("own")
                .tokio_reactor()
                .build()
                .unwrap();
            let handles: Vec<_> = (0..20u8)
                .map(|i| {
                    p.spawn(async move {
                        use tokio::io::{AsyncReadExt, AsyncWriteExt};
                        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                        let addr = listener.local_addr().unwrap();
                        let server = tokio::spawn(async move {
                            let (mut socket, _) = listener.accept().await.unwrap();
                            let mut b = [0u8; 1];
                            socket.read_exact(&mut b).await.unwrap();
                            tokio::time::sleep(Duration::from_millis(1)).await;
                            socket.write_all(&[b[0] + 1]).await.unwrap();
                        });
                        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
                        client.write_all(&[i]).await.unwrap();
                        let mut back = [0u8; 1];
                        client.read_exact(&mut back).await.unwrap();
                        server.await.unwrap();
                        (back[0], thread_name())
                    })
                })
                .collect();
            for (i, h) in handles.into_iter().enumerate() {
                let (got, name) = block_on(h).unwrap();
                assert_eq!(got, i as u8 + 1);
                assert!(name.starts_with("own-"), "{name}");
            }
            let outside = p.tokio_handle().unwrap();
            outside.block_on(async { tokio::time::sleep(Duration::from_millis(1)).await });
            p.shutdown().unwrap();
        });
    }

    #[test]
    fn a_pools_own_reactor_is_served_while_every_worker_is_busy() {
        within("busy-reactor", || {
            let p = ThreadPool::builder()
                .threads(2)
                .tokio_reactor()
                .build()
                .unwrap();
            let woke = Arc::new(std::sync::atomic::AtomicBool::new(false));
            // Each worker runs a chain of short jobs until the sleeper
            // wakes: no worker is ever idle, so only the turns busy
            // workers give the driver can fire the tokio timer.
            fn busy(
                p: ThreadPool,
                woke: Arc<std::sync::atomic::AtomicBool>,
                until: std::time::Instant,
            ) {
                let q = p.clone();
                drop(p.spawn(async move {
                    let spin = std::time::Instant::now();
                    while spin.elapsed() < Duration::from_micros(50) {}
                    if !woke.load(Ordering::SeqCst) && std::time::Instant::now() < until {
                        busy(q, woke, until);
                    }
                }));
            }
            let until = std::time::Instant::now() + Duration::from_secs(10);
            let w = woke.clone();
            let sleeper = p.spawn(async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                w.store(true, Ordering::SeqCst);
            });
            for _ in 0..2 {
                busy(p.clone(), woke.clone(), until);
            }
            block_on(sleeper).unwrap();
            assert!(
                std::time::Instant::now() < until,
                "the timer fired only once the work ran out"
            );
        });
    }

    #[test]
    fn a_long_job_woken_in_the_reactor_hands_the_driver_to_an_idle_worker() {
        within("reactor-hand-off", || {
            let p = ThreadPool::builder()
                .threads(2)
                .tokio_reactor()
                .build()
                .unwrap();
            let long_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let l = long_done.clone();
            // Woken by a tokio timer, on the worker in the driver, then
            // busy for a long while.
            let long = p.spawn(async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let spin = std::time::Instant::now();
                while spin.elapsed() < Duration::from_millis(1500) {}
                l.store(true, Ordering::SeqCst);
            });
            let d = long_done.clone();
            let timer = p.spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                d.load(Ordering::SeqCst)
            });
            let fired_after_the_long_job = block_on(timer).unwrap();
            block_on(long).unwrap();
            assert!(
                !fired_after_the_long_job,
                "the timer waited for the long job: nobody took the driver over"
            );
        });
    }

    #[test]
    fn a_tokio_task_in_the_pools_reactor_that_blocks_on_the_pool_panics_instead_of_hanging() {
        within("reactor-block-on", || {
            let p = ThreadPool::builder()
                .threads(1)
                .tokio_reactor()
                .build()
                .unwrap();
            let joined = block_on(p.spawn(async {
                tokio::spawn(async {
                    block_on(tokio::time::sleep(Duration::from_millis(20)));
                })
                .await
            }))
            .unwrap();
            let panic = joined.unwrap_err().into_panic();
            let msg = message(&*panic);
            assert!(msg.contains("tokio reactor"), "{msg}");
            // The pool goes on: its reactor still serves.
            let later = p.spawn(async {
                tokio::time::sleep(Duration::from_millis(1)).await;
                9
            });
            assert_eq!(block_on(later).unwrap(), 9);
        });
    }

    #[test]
    fn a_pool_with_its_own_reactor_shuts_down_with_tokio_work_pending() {
        within("reactor-shutdown", || {
            let p = ThreadPool::builder()
                .threads(2)
                .tokio_reactor()
                .build()
                .unwrap();
            let parked = p.spawn(async {
                tokio::spawn(tokio::time::sleep(Duration::from_secs(3600)));
                tokio::time::sleep(Duration::from_secs(3600)).await;
            });
            std::thread::sleep(Duration::from_millis(5));
            p.shutdown_now().unwrap();
            assert!(matches!(block_on(parked), Err(TaskError::Cancelled)));
        });
    }

    #[test]
    fn without_enter_tokio_a_tokio_timer_in_a_pool_task_fails_as_tokio_says() {
        support::quiet_test_panics();
        within("no-enter", || {
            let p = pool("no-tokio");
            let failed = block_on(p.spawn(async {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }));
            match failed {
                Err(TaskError::Panicked(panic)) => {
                    let msg = panic.message().unwrap_or_default().to_owned();
                    assert!(msg.contains("no reactor running"), "{msg}");
                }
                other => panic!("expected tokio's panic, got {other:?}"),
            }
        });
    }

    #[test]
    fn block_on_on_a_current_thread_runtime_panics_at_once_and_names_the_fix() {
        within("current-thread", || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                rt.block_on(async {
                    // Would hang: the sleep needs this very thread's runtime.
                    block_on(tokio::time::sleep(Duration::from_millis(1)))
                })
            }));
            let msg = message(&*caught.unwrap_err());
            assert!(msg.contains("current-thread runtime"), "{msg}");
            assert!(msg.contains("`.await` the future instead"), "{msg}");
            // Inside one of its spawned tasks too.
            let inner = rt.block_on(async { tokio::spawn(async { block_on(async { 1 }) }).await });
            assert!(inner.unwrap_err().is_panic());
            // Not refused: one of its spawn_blocking threads (the fix the
            // message names), a pool task, a thread that only entered it.
            let p = pool("tk-cur-pool");
            let q = p.clone();
            let from_blocking = rt.block_on(async move {
                tokio::task::spawn_blocking(move || block_on(q.run(|| 4)))
                    .await
                    .unwrap()
            });
            assert_eq!(from_blocking.unwrap(), 4);
            let on_pool =
                rt.block_on(async move { p.spawn(async { block_on(async { 6 }) }).await });
            assert_eq!(on_pool.unwrap(), 6);
            let _entered = rt.handle().enter();
            assert_eq!(block_on(async { 7 }), 7);
        });
    }

    #[test]
    fn block_on_on_a_multi_thread_worker_lets_the_workers_tasks_run_meanwhile() {
        within("multi-thread-block", || {
            // One worker: what it spawns sits in its LIFO slot, which no
            // other worker may take; blocking it there waited forever.
            let multi = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let v = multi.block_on(async {
                tokio::spawn(async {
                    block_on(async {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        tokio::spawn(async { 5 }).await.unwrap()
                    })
                })
                .await
                .unwrap()
            });
            assert_eq!(v, 5);
            let on_tokio = TokioExecutor::new(multi.handle().clone());
            let again = on_tokio.clone();
            let w = block_on(
                on_tokio.spawn(async move { block_on(again.spawn(async { 8 })).unwrap() }),
            )
            .unwrap();
            assert_eq!(w, 8);
        });
    }

    #[test]
    fn a_closed_tokio_executor_refuses_new_tasks_in_every_clone_and_keeps_the_old() {
        within("tokio-close", || {
            let rt = runtime("tk-c");
            let on_tokio = TokioExecutor::new(rt.handle().clone());
            let clone = on_tokio.clone();
            let (tx, rx) = futures::channel::oneshot::channel::<u8>();
            let accepted = on_tokio.spawn(async move { rx.await.unwrap() });
            clone.close();
            assert!(on_tokio.is_closed());
            let refused = block_on(on_tokio.spawn(async { 1 }));
            assert!(matches!(
                refused,
                Err(TaskError::Rejected(RejectReason::Closed))
            ));
            tx.send(9).unwrap(); // the accepted task is woken, and runs
            assert_eq!(block_on(accepted).unwrap(), 9);
        });
    }

    #[test]
    fn a_task_woken_after_its_runtime_shut_down_is_cancelled_not_lost() {
        within("tokio-gone", || {
            let rt = runtime("tk-g");
            let on_tokio = TokioExecutor::new(rt.handle().clone());
            let dropped = Arc::new(AtomicUsize::new(0));
            struct Count(Arc<AtomicUsize>);
            impl Drop for Count {
                fn drop(&mut self) {
                    self.0.fetch_add(1, Ordering::SeqCst);
                }
            }
            let (tx, rx) = futures::channel::oneshot::channel::<u8>();
            let (started_tx, started_rx) = std::sync::mpsc::channel();
            let count = Count(dropped.clone());
            let parked = on_tokio.spawn(async move {
                let _count = count;
                started_tx.send(()).unwrap();
                rx.await.unwrap()
            });
            started_rx.recv().unwrap();
            rt.shutdown_timeout(Duration::from_secs(5));
            tx.send(1).unwrap(); // wakes it: tokio refuses, and drops it
            assert!(matches!(block_on(parked), Err(TaskError::Cancelled)));
            assert_eq!(dropped.load(Ordering::SeqCst), 1);
        });
    }

    #[test]
    fn current_panics_outside_a_runtime_and_works_inside() {
        support::quiet_test_panics();
        let outside = std::panic::catch_unwind(TokioExecutor::current);
        assert!(outside.is_err());
        let rt = runtime("tk-cur");
        let name = rt.block_on(async {
            TokioExecutor::current()
                .spawn(async { thread_name() })
                .await
                .unwrap()
        });
        assert_eq!(name, "tk-cur");
        assert_eq!(
            Executor::name(&TokioExecutor::new(rt.handle().clone())),
            "tokio"
        );
    }
}

mod on_hyper {
    use super::*;
    use hyper::rt::{Executor as _, Timer as _};
    use std::time::Instant;
    use viaduct::compat::hyper::{HyperExecutor, HyperTimer};
    use viaduct::time::Timer;
    use viaduct::ManualExecutor;

    #[test]
    fn hyper_futures_run_on_the_viaduct_executor_and_a_refused_one_is_dropped() {
        within("hyper-exec", || {
            let p = pool("hx");
            let (tx, rx) = std::sync::mpsc::channel();
            let ex = HyperExecutor::new(p.clone());
            for _ in 0..10 {
                let tx = tx.clone();
                ex.execute(async move { tx.send(thread_name()).unwrap() });
            }
            for _ in 0..10 {
                let name = rx.recv_timeout(support::DEADLINE).unwrap();
                assert!(name.starts_with("hx-"), "{name}");
            }
            // A closed executor: the future is dropped unrun.
            let closed = ManualExecutor::new();
            closed.close();
            let dropped = Arc::new(AtomicUsize::new(0));
            struct Count(Arc<AtomicUsize>);
            impl Drop for Count {
                fn drop(&mut self) {
                    self.0.fetch_add(1, Ordering::SeqCst);
                }
            }
            let count = Count(dropped.clone());
            HyperExecutor::new(closed.clone()).execute(async move {
                let _count = count;
                panic!("a refused future never runs");
            });
            assert_eq!(dropped.load(Ordering::SeqCst), 1);
            assert_eq!(closed.run_until_idle(), 0);

            // A refused future whose `Drop` panics: `execute` does not.
            support::quiet_test_panics();
            struct Panics;
            impl Drop for Panics {
                fn drop(&mut self) {
                    panic!("{}: a refused future's drop", support::TEST_PANIC);
                }
            }
            let panics = Panics;
            HyperExecutor::new(closed).execute(async move {
                let _panics = panics;
            });

            // A full bounded pool: `execute` is inside hyper's poll and
            // must not wait for room; the future is dropped.
            let full = ThreadPool::builder()
                .threads(1)
                .max_pending(1)
                .build()
                .unwrap();
            let (release, parked) = futures::channel::oneshot::channel::<()>();
            let holder = full.spawn(async move {
                let _ = parked.await;
            });
            let count = Count(dropped.clone());
            HyperExecutor::new(full.clone()).execute(async move {
                let _count = count;
            });
            assert_eq!(dropped.load(Ordering::SeqCst), 2, "dropped, not queued");
            release.send(()).unwrap();
            block_on(holder).unwrap();
        });
    }

    #[test]
    fn hyper_timer_sleeps_resets_and_reads_the_timers_clock() {
        within("hyper-timer", || {
            let clock = Timer::manual();
            let timer = HyperTimer::new(clock.clone());
            let start = timer.now();
            assert_eq!(start, clock.now());
            let mut nap = timer.sleep(Duration::from_secs(10));
            let mut until = timer.sleep_until(start + Duration::from_secs(20));
            // Moved in place: earlier, then later; the same box.
            let at = |s: &std::pin::Pin<Box<dyn hyper::rt::Sleep>>| {
                &**s as *const dyn hyper::rt::Sleep as *const u8
            };
            let before = at(&nap);
            timer.reset(&mut nap, start + Duration::from_secs(5));
            assert_eq!(at(&nap), before, "a reset on the same timer is in place");
            clock.advance(Duration::from_secs(5));
            block_on(&mut nap);
            timer.reset(&mut nap, start + Duration::from_secs(30));
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            assert!(nap.as_mut().poll(&mut cx).is_pending());
            clock.advance(Duration::from_secs(15));
            block_on(&mut until); // 20 s
            assert!(nap.as_mut().poll(&mut cx).is_pending()); // 30 s
            clock.advance(Duration::from_secs(10));
            block_on(&mut nap);
            assert_eq!(timer.now() - start, Duration::from_secs(30));
            // A sleep from another timer is replaced, on this one's clock.
            let other = HyperTimer::new(Timer::manual());
            let mut foreign = other.sleep(Duration::from_secs(3600));
            let before = at(&foreign);
            timer.reset(&mut foreign, timer.now() + Duration::from_secs(1));
            assert_ne!(at(&foreign), before, "another timer's sleep is replaced");
            clock.advance(Duration::from_secs(1));
            block_on(&mut foreign);
            // A deadline past what the clock can reach never fires.
            let mut far = timer.sleep(Duration::MAX);
            clock.advance(Duration::from_secs(3600 * 24 * 365));
            assert!(far.as_mut().poll(&mut cx).is_pending());
        });
    }

    /// An HTTP/1 round trip: tokio does the I/O, connections and handlers
    /// run on a viaduct pool (`HyperExecutor`), header reads time out on
    /// viaduct's timer (`HyperTimer`).
    #[test]
    fn a_hyper_server_and_client_on_viaduct() {
        use http_body_util::{BodyExt, Empty, Full};
        use hyper::body::Bytes;
        use hyper_util::rt::TokioIo;

        within("hyper-http", || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let p = ThreadPool::builder()
                .threads(2)
                .name("http")
                .enter_tokio(rt.handle().clone())
                .build()
                .unwrap();
            let hits = Guarded::new(p.clone(), 0u32);
            let listener = rt
                .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
                .unwrap();
            let addr = listener.local_addr().unwrap();
            let (server_pool, server_hits) = (p.clone(), hits.clone());
            let server = p.spawn(async move {
                loop {
                    let (socket, _) = listener.accept().await.unwrap();
                    let (cpu, hits) = (server_pool.clone(), server_hits.clone());
                    let service = hyper::service::service_fn(move |req| {
                        let (cpu, hits) = (cpu.clone(), hits.clone());
                        async move {
                            let path = req.uri().path().to_owned();
                            let n = hits
                                .with(|h| {
                                    *h += 1;
                                    *h
                                })
                                .await
                                .unwrap();
                            let len = cpu.run(move || path.len()).await.unwrap();
                            let body = format!("{n} {len} {}", thread_name());
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                                Bytes::from(body),
                            )))
                        }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(HyperTimer::new(Timer::global()))
                        .header_read_timeout(Duration::from_millis(200))
                        .serve_connection(TokioIo::new(socket), service);
                    HyperExecutor::new(server_pool.clone()).execute(async move {
                        let _ = conn.await;
                    });
                }
            });
            let client_pool = p.clone();
            let replies = block_on(p.spawn(async move {
                let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
                let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .unwrap();
                HyperExecutor::new(client_pool).execute(async move {
                    let _ = conn.await;
                });
                let mut replies = Vec::new();
                for path in ["/a", "/bb", "/ccc"] {
                    let req = hyper::Request::get(path)
                        .body(Empty::<Bytes>::new())
                        .unwrap();
                    let res = send.send_request(req).await.unwrap();
                    assert_eq!(res.status(), 200);
                    let body = res.into_body().collect().await.unwrap().to_bytes();
                    replies.push(String::from_utf8(body.to_vec()).unwrap());
                }
                replies
            }))
            .unwrap();
            for (i, reply) in replies.iter().enumerate() {
                let mut parts = reply.split(' ');
                assert_eq!(parts.next(), Some((i + 1).to_string().as_str()));
                assert_eq!(parts.next(), Some((i + 2).to_string().as_str()));
                assert!(parts.next().unwrap().starts_with("http-"), "{reply}");
            }
            // A client that never finishes its headers is cut off by the
            // header-read timeout, on viaduct's timer.
            let cut = rt.block_on(async {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
                slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
                    .await
                    .unwrap();
                let started = Instant::now();
                let mut rest = Vec::new();
                let _ = tokio::time::timeout(support::DEADLINE, slow.read_to_end(&mut rest)).await;
                (started.elapsed(), rest)
            });
            assert!(cut.0 < support::DEADLINE, "the connection was never cut");
            assert!(
                cut.1.is_empty() || cut.1.starts_with(b"HTTP/1.1 408"),
                "{:?}",
                String::from_utf8_lossy(&cut.1)
            );
            server.abort();
            assert!(matches!(block_on(server), Err(TaskError::Cancelled)));
            assert_eq!(*block_on(hits.lock()), 3);
        });
    }
}

mod on_rayon {
    use super::*;
    use rayon::prelude::*;
    use viaduct::compat::rayon::RayonExecutor;
    use viaduct::Executor;

    fn rayon_pool(name: &'static str) -> Arc<rayon::ThreadPool> {
        Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .thread_name(move |i| format!("{name}-{i}"))
                .build()
                .unwrap(),
        )
    }

    #[test]
    fn viaduct_tasks_run_as_rayon_jobs_and_use_rayon_inside() {
        within("rayon-tasks", || {
            let on_rayon = RayonExecutor::new(rayon_pool("ry"));
            let handles: Vec<_> = (0..50u64)
                .map(|i| {
                    on_rayon.spawn(async move {
                        viaduct::time::sleep(Duration::from_millis(1)).await;
                        let sum: u64 = (0..=i).into_par_iter().sum();
                        (sum, thread_name())
                    })
                })
                .collect();
            for (i, h) in handles.into_iter().enumerate() {
                let (sum, name) = block_on(h).unwrap();
                assert_eq!(sum, (i as u64) * (i as u64 + 1) / 2);
                assert!(name.starts_with("ry-"), "{name}");
            }
            let global = block_on(RayonExecutor::global().run(rayon::current_thread_index));
            assert!(global.unwrap().is_some());
        });
    }

    #[test]
    fn a_strand_over_rayon_serialises_its_sections() {
        within("rayon-strand", || {
            let counter = Guarded::new(RayonExecutor::new(rayon_pool("rs")), (0u64, 0u32));
            let handles: Vec<_> = (0..1000u64)
                .map(|i| {
                    counter.with(move |(sum, busy)| {
                        *busy += 1;
                        assert_eq!(*busy, 1, "two sections overlapped");
                        *sum += i;
                        *busy -= 1;
                    })
                })
                .collect();
            for h in handles {
                block_on(h).unwrap();
            }
            assert_eq!(block_on(counter.lock()).0, 499_500);
        });
    }

    #[test]
    fn rayon_code_waits_for_viaduct_work() {
        within("rayon-waits", || {
            let p = pool("ry-pool");
            let rp = rayon_pool("rw");
            let names: Vec<String> = rp.install(|| {
                (0..8)
                    .into_par_iter()
                    .map(|_| block_on(p.run(thread_name)).unwrap())
                    .collect()
            });
            assert!(names.iter().all(|n| n.starts_with("ry-pool-")), "{names:?}");
        });
    }

    #[test]
    fn a_closed_rayon_executor_refuses_new_tasks_in_every_clone() {
        within("rayon-close", || {
            let on_rayon = RayonExecutor::new(rayon_pool("rc"));
            let clone = on_rayon.clone();
            clone.close();
            assert!(on_rayon.is_closed());
            assert!(matches!(
                block_on(on_rayon.run(|| 1)),
                Err(TaskError::Rejected(RejectReason::Closed))
            ));
            assert_eq!(Executor::name(&on_rayon), "rayon");
        });
    }
}
