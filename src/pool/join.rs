//! Fork-join: [`ThreadPool::join`](super::ThreadPool::join). On a worker,
//! `b` is pushed to the worker's LIFO deque of halves while `a` runs, and
//! taken back if nobody stole it; from outside, the pair is handed to a
//! worker and the caller parks. Both halves live on the callers' stacks
//! (`job.rs`), so a join allocates nothing.

use std::sync::atomic::{AtomicBool, Ordering::*};
use std::thread::{self, Thread};

use super::job::{Job, Latch, StackJob};
use super::worker::{on_this_pool, with_worker, WorkerCtx};
use super::Shared;

/// The latch of a `join` half offered to other workers: its owner is a
/// worker, woken through the pool's parkers.
struct WorkerLatch {
    done: AtomicBool,
    shared: *const Shared,
    owner: usize,
}

impl Latch for WorkerLatch {
    unsafe fn set(this: *const Self) {
        // SAFETY: `this` is live until `done` is stored (the contract). The
        // pool is kept alive by whoever runs the job: a worker (holding an
        // `Arc<Shared>`) or a thread holding a `ThreadPool` handle.
        unsafe {
            let shared = &*(*this).shared;
            let owner = (*this).owner;
            (*this).done.store(true, Release);
            shared.idle.unpark(owner);
        }
    }
}

/// The latch of a `join` handed in from outside: its owner is any thread.
struct ThreadLatch {
    done: AtomicBool,
    thread: Thread,
}

impl Latch for ThreadLatch {
    unsafe fn set(this: *const Self) {
        // SAFETY: `this` is live until `done` is stored; the thread handle
        // is cloned out before that.
        unsafe {
            let thread = (*this).thread.clone();
            (*this).done.store(true, Release);
            thread.unpark();
        }
    }
}

#[inline]
pub(crate) fn join<A, B, RA, RB>(shared: &Shared, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    with_worker(|w| match on_this_pool(w, shared) {
        Some(w) => w.join(a, b),
        None => join_from_outside(shared, a, b),
    })
}

fn join_from_outside<A, B, RA, RB>(shared: &Shared, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    if shared.terminated.load(SeqCst) {
        return (a(), b());
    }
    let (a, b) = match join_in_driver(a, b) {
        Ok(pair) => return pair,
        Err(halves) => halves,
    };
    let latch = ThreadLatch {
        done: AtomicBool::new(false),
        thread: thread::current(),
    };
    let job = StackJob::new(latch, move || {
        with_worker(|w| match w {
            Some(w) => w.join(a, b),
            // Run by the draining thread of a pool that just terminated.
            None => (a(), b()),
        })
    });
    shared.inject(Job::Fork(job.as_job_ref()));
    while !job.latch.done.load(Acquire) {
        thread::park();
    }
    match job.into_result() {
        Ok(pair) => pair,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// Hands the pair to the driver of this thread, if it runs joins itself
/// (a simulation does); gives them back if not.
#[cold]
fn join_in_driver<A, B, RA, RB>(a: A, b: B) -> Result<(RA, RB), (A, B)>
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let (mut a, mut b) = (Some(a), Some(b));
    let (mut ra, mut rb) = (None, None);
    let ran = {
        let mut run_a = || {
            let a = a.take().expect("run once");
            ra = Some(std::panic::catch_unwind(std::panic::AssertUnwindSafe(a)));
        };
        let mut run_b = || {
            let b = b.take().expect("run once");
            rb = Some(std::panic::catch_unwind(std::panic::AssertUnwindSafe(b)));
        };
        crate::context::with_driver(|d| d.is_some_and(|d| d.join(&mut run_a, &mut run_b)))
    };
    if !ran {
        return Err((a.expect("not run"), b.expect("not run")));
    }
    match (ra.expect("ran"), rb.expect("ran")) {
        (Ok(ra), Ok(rb)) => Ok((ra, rb)),
        // `a`'s panic first, as on a pool.
        (Err(p), _) | (_, Err(p)) => std::panic::resume_unwind(p),
    }
}

impl WorkerCtx {
    #[inline]
    fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        let latch = WorkerLatch {
            done: AtomicBool::new(false),
            shared: &*self.shared,
            owner: self.index,
        };
        self.share_with_tasks();
        let mut job_b = StackJob::new(latch, b);
        let job_b_ref = job_b.as_job_ref();
        self.queues.forks.push(job_b_ref);
        self.shared.idle.notify_for_fork();

        let result_a = std::panic::catch_unwind(std::panic::AssertUnwindSafe(a));

        // Take `b` back if nobody stole it. Joins nested in `a` have popped
        // their own halves, so `b` is on top unless it was stolen.
        let result_b = loop {
            if job_b.latch.done.load(Acquire) {
                break job_b.into_result();
            }
            match self.queues.forks.pop() {
                Some(fork) if fork == job_b_ref && result_a.is_ok() => {
                    // Not stolen: run it here, no latch or catch needed.
                    let Ok(ra) = result_a else { unreachable!() };
                    return (ra, job_b.run_inline());
                }
                // Another job, or `b` after `a` panicked: `b` still runs
                // (as in rayon), through its latch, then `a`'s panic goes on.
                Some(other) => Job::Fork(other).run(),
                None => {
                    self.wait_until(&|| job_b.latch.done.load(Acquire));
                    break job_b.into_result();
                }
            }
        };
        match (result_a, result_b) {
            (Ok(ra), Ok(rb)) => (ra, rb),
            (Err(p), _) | (_, Err(p)) => std::panic::resume_unwind(p),
        }
    }
}
