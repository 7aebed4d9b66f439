//! Cooperative budget: a task that keeps finding viaduct's futures ready
//! yields to its executor after a while, so it cannot hold a worker.
//!
//! Every poll of a viaduct task (and every poll of a [`block_on`]'s future)
//! starts with a budget of [`BUDGET`] units. A finished [`JoinHandle`], a
//! free [`Guarded`] lock, a fired timer and a [`consume_budget`] each
//! spend one. Once the budget is spent, those futures answer `Pending` (and
//! wake their task at once) until the task's poll ends, so the task goes to
//! the back of its executor's queue and the others get a turn. tokio's
//! `coop` does the same, with the same number.
//!
//! A future polled outside any task or `block_on` has no budget and is
//! never held back. [`unconstrained`] lifts the budget for one future.
//!
//! [`block_on`]: crate::block_on
//! [`JoinHandle`]: crate::JoinHandle
//! [`Guarded`]: crate::Guarded
//!
//! # Examples
//!
//! A task that awaits many finished handles lets another task in:
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//! use viaduct::{block_on, ExecutorExt, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(1).build().unwrap();
//! let awaited = Arc::new(AtomicUsize::new(0));
//! let (count, p) = (awaited.clone(), pool.clone());
//! let busy = pool.spawn(async move {
//!     let done: Vec<_> = (0..10_000).map(|i| viaduct::Inline.run(move || i)).collect();
//!     let other = p.run(move || ()); // queued behind this task
//!     for handle in done {
//!         handle.await.unwrap(); // each is ready: only the budget makes this yield
//!         count.fetch_add(1, Ordering::Relaxed);
//!     }
//!     other
//! });
//! let other = block_on(busy).unwrap();
//! assert!(other.is_finished()); // it ran while the loop was going on
//! ```

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::context::Budget;

/// Units a task's poll may spend on ready viaduct futures before they make
/// it yield (tokio's number).
pub const BUDGET: u32 = 128;

/// Forced `Pending`s within one budget after which the budget is lifted:
/// that many means the future is not returning to its task but being
/// polled again in place (a foreign `block_on` inside the task), which
/// would otherwise spin forever.
const MAX_FORCED: u32 = 256;

/// This thread's budget, in its context.
#[inline]
fn budget_left<R>(f: impl FnOnce(&Cell<Budget>) -> R) -> R {
    crate::context::with(|c| f(&c.budget))
}

/// What this thread's next fresh budget holds: [`BUDGET`] (`None`), less
/// while a simulation injects a yield into a poll.
#[inline]
fn fresh_budget<R>(f: impl FnOnce(&Cell<Option<u32>>) -> R) -> R {
    crate::context::with(|c| f(&c.fresh_budget))
}

/// Restores the budget of the enclosing poll when a nested one ends.
pub(crate) struct Scope(Budget);

impl Drop for Scope {
    #[inline]
    fn drop(&mut self) {
        budget_left(|b| b.set(self.0));
    }
}

#[inline]
fn enter(left: Option<u32>) -> Scope {
    Scope(budget_left(|b| b.replace(Budget { left, forced: 0 })))
}

/// A fresh budget for one poll of a task or of a `block_on`'s future,
/// until the returned guard drops.
#[inline]
pub(crate) fn fresh() -> Scope {
    // One poll only: a `block_on` nested in it re-polls its future with
    // fresh budgets, which must be whole or it would spin.
    Scope(crate::context::with(|c| c.enter_fresh_budget(BUDGET)))
}

/// Runs `f` with the first poll in it starting from `budget` units
/// instead of [`BUDGET`]: a small one makes the first ready viaduct
/// futures answer `Pending`, the yield a simulation injects where a real
/// run could have been interrupted.
pub(crate) fn with_fresh_budget<R>(budget: u32, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<u32>);
    impl Drop for Restore {
        fn drop(&mut self) {
            fresh_budget(|b| b.set(self.0));
        }
    }
    let _restore = Restore(fresh_budget(|b| b.replace(Some(budget))));
    f()
}

/// No budget until the returned guard drops: for a future that must be
/// polled even when the budget is spent.
#[inline]
pub(crate) fn lifted() -> Scope {
    enter(None)
}

/// `Pending` (with the task woken, to run again soon) if the budget is
/// spent; the caller then must not make progress. Otherwise the caller may
/// go on, and calls [`spend`] if it makes progress.
#[inline]
pub(crate) fn poll_proceed(cx: &Context<'_>) -> Poll<()> {
    let held_back = budget_left(|b| {
        let mut budget = b.get();
        if budget.left != Some(0) {
            return false;
        }
        budget.forced += 1;
        if budget.forced > MAX_FORCED {
            budget.left = None;
        }
        b.set(budget);
        budget.left.is_some()
    });
    if held_back {
        crate::context::with(|c| c.held_back.set(true));
        cx.waker().wake_by_ref();
        Poll::Pending
    } else {
        Poll::Ready(())
    }
}

/// Whether a viaduct future answered `Pending` only because the budget
/// was spent, since the last call: how a simulation tells a yield it
/// injected from one the task made.
pub(crate) fn take_held_back() -> bool {
    crate::context::with(|c| c.held_back.replace(false))
}

/// One unit of progress made.
#[inline]
pub(crate) fn spend() {
    budget_left(|b| {
        let mut budget = b.get();
        if let Some(left) = &mut budget.left {
            *left = left.saturating_sub(1);
            b.set(budget);
        }
    });
}

/// Spends one unit of the task's budget, yielding to the executor first if
/// it is spent: for users' own futures that can be ready many times in a
/// row (a channel drained in a loop), so they share the worker as viaduct's
/// own do.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, coop, ExecutorExt, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(1).build().unwrap();
/// let sum = pool.spawn(async {
///     let mut sum = 0u64;
///     for i in 0..1_000u64 {
///         coop::consume_budget().await; // yields every `coop::BUDGET` rounds
///         sum += i;
///     }
///     sum
/// });
/// assert_eq!(block_on(sum).unwrap(), 499_500);
/// ```
pub fn consume_budget() -> ConsumeBudget {
    ConsumeBudget(())
}

/// The future of [`consume_budget`].
#[must_use = "futures do nothing unless awaited"]
#[derive(Debug)]
pub struct ConsumeBudget(());

impl Future for ConsumeBudget {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        std::task::ready!(poll_proceed(cx));
        spend();
        Poll::Ready(())
    }
}

/// Runs `future` without a budget: viaduct's futures inside it never make
/// it yield (a tight loop that must not be interleaved, and that you know
/// to be short).
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, coop, ExecutorExt, Inline, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(1).build().unwrap();
/// let p = pool.clone();
/// let busy = pool.spawn(coop::unconstrained(async move {
///     let done: Vec<_> = (0..10_000).map(|i| Inline.run(move || i)).collect();
///     let other = p.run(|| ()); // queued behind this task
///     for handle in done {
///         handle.await.unwrap();
///     }
///     other.is_finished()
/// }));
/// assert!(!block_on(busy).unwrap()); // the loop never yielded the only worker
/// ```
pub fn unconstrained<F: Future>(future: F) -> Unconstrained<F> {
    Unconstrained { future }
}

/// The future of [`unconstrained`].
#[must_use = "futures do nothing unless awaited"]
#[derive(Debug)]
#[pin_project::pin_project]
pub struct Unconstrained<F> {
    #[pin]
    future: F,
}

impl<F: Future> Future for Unconstrained<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _budget = lifted();
        self.project().future.poll(cx)
    }
}
