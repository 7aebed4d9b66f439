//! [`block_on`]: run a future to completion on the calling thread.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use crate::pool::with_worker;

/// Runs `fut` to completion on the calling thread and returns its output.
///
/// On a worker of a [`ThreadPool`](crate::ThreadPool) it runs that pool's
/// tasks while `fut` waits (boost's `reschedule_until`), so a task may
/// spawn children and block on them even on a one-thread pool without
/// deadlocking. Elsewhere the thread parks until `fut` is woken. Either
/// way it sleeps rather than spins when there is nothing to do.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(1).build().unwrap();
/// let p = pool.clone();
/// // A task that blocks on its own child, on a one-thread pool.
/// let parent = pool.spawn(async move {
///     let child = p.spawn(async { 21 });
///     block_on(child).unwrap() * 2
/// });
/// assert_eq!(block_on(parent).unwrap(), 42);
/// ```
pub fn block_on<F: Future>(fut: F) -> F::Output {
    match with_worker(|w| w.map(|w| w as *const crate::pool::WorkerCtx)) {
        // SAFETY: the worker context outlives everything its thread runs,
        // this call included (it is reset only when the worker exits).
        Some(w) => unsafe { &*w }.block_on(fut),
        None => park_on(fut),
    }
}

struct Unparker(Thread);

impl Wake for Unparker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

fn park_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let waker = Waker::from(Arc::new(Unparker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        // A wake before this park leaves the token set, so it is not lost;
        // a spurious return only costs one more poll.
        thread::park();
    }
}
