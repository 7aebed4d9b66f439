//! The one loop behind every blocking wait on a future: poll it when its
//! waker has raised a flag, otherwise let the caller wait (run other work,
//! park). The flag, not the thread's park token, says whether the future
//! was woken, so a future whose poll parks the thread itself (a `join`
//! from outside a pool, a channel `recv`) cannot swallow the wake-up.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// A waker that raises a flag, then nudges whoever waits for it.
struct Flag<N> {
    woken: AtomicBool,
    nudge: N,
}

impl<N: Fn() + Send + Sync + 'static> Wake for Flag<N> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Release);
        (self.nudge)();
    }
}

/// Polls `fut` to completion on this thread. Between polls it calls
/// `wait(woken)`, which returns when `woken()` may hold (returning early is
/// allowed: it is called again). `nudge` is called after every wake-up,
/// from whichever thread wakes the future, to end a `wait` that sleeps.
pub(crate) fn poll_to_end<F: Future>(
    fut: F,
    nudge: impl Fn() + Send + Sync + 'static,
    mut wait: impl FnMut(&dyn Fn() -> bool),
) -> F::Output {
    let mut fut = pin!(fut);
    let flag = Arc::new(Flag {
        woken: AtomicBool::new(true),
        nudge,
    });
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        if flag.woken.swap(false, AcqRel) {
            let budget = crate::coop::fresh();
            let polled = fut.as_mut().poll(&mut cx);
            drop(budget);
            if let Poll::Ready(v) = polled {
                return v;
            }
            continue;
        }
        wait(&|| flag.woken.load(Acquire));
    }
}
