//! Live heap over many create-use-drop cycles of every strand-based type,
//! measured by a counting global allocator: it must stay flat. On 0.1 every
//! strand leaked its shared block when its last handle went inside its own
//! runner's poll (about 136 B a `Strand`, a whole value a `Guarded`).
//!
//! The counter is process-wide, so this file holds one `#[test]` that runs
//! the checks in turn: the harness starts no other thread meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::Context;
use std::time::Duration;

#[allow(dead_code)] // only `within` and `crossed_locks` are used here
mod support;

use support::{crossed_locks, within};
use viaduct::cancel::CancellationToken;
use viaduct::sim::Simulation;
use viaduct::{
    block_on, ExecutorExt, Guarded, JoinSet, KeyedStrands, PriorityExecutor, Strand, ThreadPool,
    TimedExt,
};

struct Counting;

/// Bytes allocated and not yet freed.
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counter is
// an atomic, which allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, SeqCst);
        // SAFETY: the caller upholds `alloc`'s contract, passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, SeqCst);
        // SAFETY: `ptr` came from `System` through `alloc` above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, SeqCst);
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const CYCLES: usize = 10_000;

/// Live bytes may grow by this much over all cycles (queue blocks, epoch
/// garbage, thread-local caches); a leak of even 16 B a cycle is ten times
/// more.
const SLACK: isize = 16 * 1024;

/// Runs `cycle` (given the cycle's number and a counter its work bumps
/// once when it has run) `CYCLES` times after a warm-up, waits until the
/// pool has run everything the cycles left behind, and asserts that the
/// live heap did not grow.
fn check(what: &str, pool: &ThreadPool, mut cycle: impl FnMut(usize, Arc<AtomicUsize>)) {
    let ran = Arc::new(AtomicUsize::new(0));
    let settle = |expected: usize| {
        while ran.load(SeqCst) < expected {
            std::thread::yield_now();
        }
        // What a dropped strand schedules last (its runner's final run)
        // is queued before this; a one-thread pool runs it first.
        for _ in 0..4 {
            block_on(pool.run(|| ())).unwrap();
        }
    };
    for i in 0..100 {
        cycle(i, ran.clone());
    }
    settle(100);
    let before = LIVE.load(SeqCst);
    for i in 0..CYCLES {
        cycle(i, ran.clone());
    }
    settle(100 + CYCLES);
    let grew = LIVE.load(SeqCst) - before;
    assert!(
        grew < SLACK,
        "{what}: live heap grew by {grew} B over {CYCLES} cycles ({} B a cycle)",
        grew / CYCLES as isize
    );
}

#[test]
fn strand_types_chains_tokens_sets_scopes_and_simulations_leave_the_heap_flat_over_ten_thousand_cycles(
) {
    within("leaks", || {
        let pool = ThreadPool::builder()
            .threads(1)
            .name("leak")
            .build()
            .unwrap();
        let bump = |ran: Arc<AtomicUsize>| {
            move || {
                ran.fetch_add(1, SeqCst);
            }
        };

        // A strand dropped with a post queued: its last reference goes in
        // the runner's poll.
        check("Strand::post then drop", &pool, |_, ran| {
            Strand::new(pool.clone()).post(bump(ran));
        });
        check("Strand::run awaited, then drop", &pool, |_, ran| {
            block_on(Strand::new(pool.clone()).run(bump(ran))).unwrap();
        });
        check("drop(Guarded::new(pool, big).with(..))", &pool, |_, ran| {
            let bump = bump(ran);
            drop(Guarded::new(pool.clone(), [7u8; 512]).with(move |v| {
                bump();
                v[0]
            }));
        });
        check("Guarded::lock then drop", &pool, |_, ran| {
            let g = Guarded::new(pool.clone(), 0u64);
            *block_on(g.lock()) += 1;
            bump(ran)();
        });
        check("KeyedStrands::execute then drop", &pool, |i, ran| {
            KeyedStrands::new(pool.clone()).execute(i % 7, bump(ran));
        });
        check(
            "PriorityExecutor::execute_with then drop",
            &pool,
            |i, ran| {
                PriorityExecutor::new(pool.clone()).execute_with(i as i32 % 3, bump(ran));
            },
        );

        // A long-lived token does not collect what once watched it.
        let token = CancellationToken::new();
        check("child_token and cancelled() dropped", &pool, |_, ran| {
            let child = token.child_token();
            let mut wait = Box::pin(child.cancelled());
            let waker = futures::task::noop_waker_ref();
            assert!(wait
                .as_mut()
                .poll(&mut Context::from_waker(waker))
                .is_pending());
            bump(ran)();
        });
        check("spawn_cancellable to its end", &pool, |_, ran| {
            let bump = bump(ran);
            block_on(pool.spawn_cancellable(&token, async move { bump() })).unwrap();
        });
        check("cancel_after an hour, then drop", &pool, |_, ran| {
            CancellationToken::new().cancel_after(Duration::from_secs(3600));
            bump(ran)();
        });
        check("JoinSet: spawn, join_next", &pool, |_, ran| {
            let mut set = JoinSet::new();
            set.spawn_on(async { 1u8 }, &pool);
            assert_eq!(block_on(set.join_next()).unwrap().unwrap(), 1);
            bump(ran)();
        });
        check("JoinSet dropped with a parked task", &pool, |_, ran| {
            let mut set = JoinSet::new();
            let parked = set.spawn_on(std::future::pending::<()>(), &pool);
            drop(set);
            while !parked.is_finished() {
                std::thread::yield_now();
            }
            bump(ran)();
        });
        check(
            "JoinSet: insert, join_next_with_id, detach_all",
            &pool,
            |_, ran| {
                let mut set = JoinSet::new();
                let id = set.insert(pool.spawn(async { 2u8 })).id();
                let (got, v) = block_on(set.join_next_with_id()).unwrap().unwrap();
                assert_eq!((Some(got), v), (id, 2));
                let bump = bump(ran);
                set.spawn_on(
                    async move {
                        bump();
                        3
                    },
                    &pool,
                );
                set.detach_all();
            },
        );
        check("a drop guard, and run_until_cancelled", &pool, |i, ran| {
            let token = CancellationToken::new();
            if i % 2 == 0 {
                drop(token.clone().drop_guard());
            } else {
                drop(token.clone().drop_guard().disarm());
            }
            let out = block_on(token.run_until_cancelled(async { 1u8 }));
            assert_eq!(out.is_none(), i % 2 == 0);
            bump(ran)();
        });
        #[cfg(feature = "tokio")]
        {
            let rt = support::tokio_runtime("leak-tokio");
            let on_tokio = viaduct::compat::tokio::TokioExecutor::new(rt.handle().clone());
            check("a task on TokioExecutor, awaited", &pool, |_, ran| {
                let bump = bump(ran);
                block_on(on_tokio.spawn(async move {
                    tokio::task::yield_now().await;
                    bump()
                }))
                .unwrap();
            });
        }
        #[cfg(feature = "rayon")]
        {
            let on_rayon = viaduct::compat::rayon::RayonExecutor::new(Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .build()
                    .unwrap(),
            ));
            check("a task on RayonExecutor, awaited", &pool, |_, ran| {
                block_on(on_rayon.run(bump(ran))).unwrap();
            });
        }
        #[cfg(feature = "hyper")]
        {
            use hyper::rt::Timer as _;
            let timer = viaduct::compat::hyper::HyperTimer::new(viaduct::time::Timer::manual());
            check("a hyper sleep, reset and dropped", &pool, |_, ran| {
                let mut sleep = timer.sleep(Duration::from_secs(60));
                timer.reset(&mut sleep, timer.now() + Duration::from_secs(30));
                drop(sleep);
                bump(ran)();
            });
        }
        check("scope: a joined task, a dropped one", &pool, |i, ran| {
            let local = i;
            pool.scope(|s| {
                drop(s.run(|| local + 1));
                assert_eq!(s.run(|| local * 2).join().unwrap(), i * 2);
            });
            bump(ran)();
        });
        check("cancel a token guarding a parked task", &pool, |_, ran| {
            let token = CancellationToken::new();
            let parked = pool.spawn_cancellable(&token, std::future::pending::<()>());
            token.cancel();
            assert!(block_on(parked).unwrap_err().is_cancelled());
            bump(ran)();
        });

        // Continuations: run to their end, aborted before they run (the
        // abort walks back to the step before), and detached.
        check("a chain run to its end", &pool, |i, ran| {
            let bump = bump(ran);
            let chain = pool.run(move || i).then(|i| i + 1).then(move |_| bump());
            block_on(chain).unwrap();
        });
        check("a chain aborted before its steps ran", &pool, |_, ran| {
            let parked = pool.spawn(std::future::pending::<u8>());
            let chain = parked.then(|x| x).then(|x| x);
            let step = chain.abort_handle();
            chain.abort();
            while !step.is_finished() {
                std::thread::yield_now();
            }
            bump(ran)();
        });
        check(
            "a detached chain whose first step is aborted",
            &pool,
            |_, ran| {
                let parked = pool.spawn(std::future::pending::<u8>());
                let first = parked.abort_handle();
                let ended = ran.load(SeqCst) + 1;
                let bump = bump(ran.clone());
                drop(parked.then(|x| x).then_try(move |_| bump()));
                first.abort();
                // One chain at a time: thousands waiting at once would only
                // measure how much the queues held at the peak.
                while ran.load(SeqCst) < ended {
                    std::thread::yield_now();
                }
            },
        );

        // A simulated world: strands, timers and tasks, run to the end
        // and dropped; and one dropped with a task parked on its clock.
        check("a simulation run to its end", &pool, |i, ran| {
            let sim = Simulation::new(i as u64).workers(2);
            let ex = sim.executor();
            let sum = sim.block_on(async move {
                let g = Guarded::new(ex.clone(), 0u64);
                let hs: Vec<_> = (0..3)
                    .map(|_| {
                        let g = g.clone();
                        ex.spawn(async move {
                            viaduct::time::sleep(Duration::from_millis(1)).await;
                            g.with(|v| *v += 1).await.unwrap();
                        })
                    })
                    .collect();
                for h in hs {
                    h.await.unwrap();
                }
                let sum = *g.lock().await;
                sum
            });
            assert_eq!(sum.unwrap(), 3);
            bump(ran)();
        });
        check(
            "a simulation dropped with a task asleep",
            &pool,
            |i, ran| {
                let sim = Simulation::new(i as u64);
                let asleep = sim.executor().spawn(async {
                    viaduct::time::sleep(Duration::from_secs(3600)).await;
                });
                sim.block_on(async {}).unwrap();
                drop(sim);
                assert!(block_on(asleep).unwrap_err().is_cancelled());
                bump(ran)();
            },
        );
        // Dropped in a deadlock: two tasks hold each other's locks (and
        // so each other), a detached one sleeps, and a job run where it
        // fires keeps the clock moving until the step limit.
        check("a simulation dropped in a deadlock", &pool, |i, ran| {
            let sim = Simulation::new(i as u64).max_steps(500);
            let ex = sim.executor();
            let outcome = sim.block_on(async move {
                let [one, two] = crossed_locks(&ex);
                drop(ex.spawn(viaduct::time::sleep(Duration::from_secs(3600))));
                let _job = viaduct::Inline.execute_every(Duration::from_secs(7200), || ());
                one.await.unwrap();
                two.await.unwrap();
            });
            assert!(matches!(
                outcome,
                Err(viaduct::sim::SimError::StepLimit { steps: 500 })
            ));
            bump(ran)();
        });
        // The same crossed locks on a strand over the world, their handles
        // kept until after it ends.
        check(
            "a simulation dropped in a deadlock on a strand",
            &pool,
            |i, ran| {
                let sim = Simulation::new(i as u64);
                let strand = viaduct::Exec::new(Strand::new(sim.executor()));
                let handles = crossed_locks(&strand);
                let outcome = sim.block_on(std::future::pending::<()>());
                assert!(matches!(outcome, Err(viaduct::sim::SimError::Deadlock(_))));
                drop(sim);
                for h in handles {
                    assert!(block_on(h).unwrap_err().is_cancelled());
                }
                bump(ran)();
            },
        );
        // `check` ends each world, even one a task holds a handle of.
        check(
            "a simulation a task holds, run by check",
            &pool,
            |i, ran| {
                viaduct::sim::check(i as u64..i as u64 + 1, |sim| {
                    let keep = sim.clone();
                    let ex = sim.executor();
                    async move {
                        drop(ex.spawn(async move {
                            let _keep = keep;
                            std::future::pending::<()>().await
                        }));
                    }
                });
                bump(ran)();
            },
        );
    });
}
