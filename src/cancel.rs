//! Cancellation tokens: stop a group of tasks with one call.
//!
//! A [`CancellationToken`] is a flag that goes up once and stays up. Work
//! watches it in one of three ways:
//!
//! - a task spawned with
//!   [`spawn_cancellable`](crate::ExecutorExt::spawn_cancellable) is
//!   aborted the moment the token fires: its future is dropped, unpolled,
//!   at its executor's next turn, even if it was parked on something that
//!   will never come, and its handle then says [`TaskError::Cancelled`];
//! - a future awaits [`cancelled`](CancellationToken::cancelled), for a
//!   clean exit at a point of its choosing (in a `select!`, say);
//! - a loop polls [`is_cancelled`](CancellationToken::is_cancelled).
//!
//! Two conveniences come from tokio-util:
//! [`run_until_cancelled`](CancellationToken::run_until_cancelled) races a
//! future against the token, and a [`DropGuard`] fires the token when a
//! scope ends, however it ends, unless it is disarmed.
//!
//! Tokens form a tree: [`child_token`](CancellationToken::child_token)
//! makes a token that fires with its parent, and may fire alone.
//! [`cancel_after`](CancellationToken::cancel_after) fires a token on
//! viaduct's timer.
//!
//! ```
//! use viaduct::cancel::CancellationToken;
//! use viaduct::prelude::*;
//! use viaduct::{block_on, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(2).build().unwrap();
//! let shutdown = CancellationToken::new();
//! let server = shutdown.child_token();
//! // Parked forever, until the token fires.
//! let listener = pool.spawn_cancellable(&server, std::future::pending::<()>());
//! let watcher = server.cancelled();
//! let worker = pool.spawn(async move {
//!     watcher.await;
//!     "cleaned up"
//! });
//! shutdown.cancel(); // fires the child too
//! assert!(block_on(listener).unwrap_err().is_cancelled());
//! assert_eq!(block_on(worker).unwrap(), "cleaned up");
//! ```
//!
//! # How it works
//!
//! A token is a node with a flag and, behind a mutex, the entries to
//! notify when it fires: wakers of `cancelled()` futures, abort handles of
//! cancellable tasks, and weak links to children. Firing sets the flag and
//! takes the entries under the lock, then notifies them outside it, so a
//! woken task (or a task cancelling its own token) may touch the token at
//! once. A fired token never takes an entry again, which is what lets an
//! entry's owner remove it by its key without a generation count. Every
//! entry is removed by whoever made it when it goes (a finished task, a
//! dropped future, a dropped child), so a long-lived token does not
//! collect the work it once watched.
//!
//! A `cancelled()` future polled again with the waker it registered (a
//! `select!` loop polls it at every turn) only reads the flag: the lock,
//! which every waiter of the token shares, is taken to register a waker or
//! change it. If the token fires after that read, firing takes the entry
//! and wakes that waker, so the task is polled again and sees the flag.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use pin_project::pin_project;

use crate::error::TaskError;
use crate::executor::{admit, home_of, Executor};
use crate::inline::Inline;
use crate::loom::{lock, AtomicBool, Mutex, Ordering};
use crate::slab::Slab;
use crate::task::AbortHandle;
use crate::task::{admitted_or_rejected, create_admitted, reporting_panics, JoinHandle};
use crate::time::{Scheduled, Timer};

/// A flag that, once raised, stops the work that watches it; see the
/// [module docs](self).
///
/// Clones are the same token. Cancelling is idempotent, and never waits:
/// it marks the token and its descendants, wakes what waits on them and
/// aborts their cancellable tasks, then returns. It is safe to call from
/// anywhere, including from a task the token guards.
///
/// # Examples
///
/// ```
/// use viaduct::cancel::CancellationToken;
///
/// let parent = CancellationToken::new();
/// let child = parent.child_token();
/// child.cancel(); // never the reverse
/// assert!(!parent.is_cancelled());
/// parent.cancel();
/// assert!(parent.is_cancelled() && child.is_cancelled());
/// assert!(parent.child_token().is_cancelled()); // born cancelled
/// ```
#[derive(Clone, Default)]
pub struct CancellationToken {
    node: Arc<Node>,
}

/// A token: the flag and the mutex are loom's under `cfg(loom)`, so that
/// the model at the end of this file checks the lock-free re-poll of a
/// [`WaitForCancellation`] against `cancel`.
#[derive(Default)]
struct Node {
    cancelled: AtomicBool,
    state: Mutex<State>,
    /// Where this node is listed in its parent, if it has one.
    parent: Option<Parent>,
}

struct Parent {
    node: Arc<Node>,
    key: usize,
}

#[derive(Default)]
struct State {
    /// What to notify on firing; emptied for good when the node fires.
    entries: Slab<Entry>,
    /// The earliest `cancel_after` deadline still pending.
    deadline: Option<(Instant, Scheduled<()>)>,
}

enum Entry {
    /// Taken by a cancellable task whose handle is not made yet.
    Reserved,
    Wake(Waker),
    Abort(AbortHandle),
    Child(Weak<Node>),
}

impl CancellationToken {
    /// A token that has not fired.
    pub fn new() -> CancellationToken {
        CancellationToken::default()
    }

    /// A token that fires when this one does, or when it is cancelled
    /// itself; cancelling it leaves this one alone. The child of a fired
    /// token is born fired.
    pub fn child_token(&self) -> CancellationToken {
        let mut state = lock(&self.node.state);
        if self.node.is_cancelled() {
            let node = Node::default();
            node.cancelled.store(true, Ordering::Relaxed);
            return CancellationToken {
                node: Arc::new(node),
            };
        }
        let key = state.entries.insert(Entry::Reserved);
        let child = Arc::new(Node {
            cancelled: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            parent: Some(Parent {
                node: self.node.clone(),
                key,
            }),
        });
        state.entries[key] = Entry::Child(Arc::downgrade(&child));
        CancellationToken { node: child }
    }

    /// Fires the token and every token below it. Returns at once; the
    /// futures of cancellable tasks are dropped by their executors.
    ///
    /// A waker that panics when woken does not stop the rest from being
    /// notified: its panic goes where the calling task's unread panics go,
    /// or is dropped.
    pub fn cancel(&self) {
        cancel(&self.node);
    }

    /// `true` once the token (or a parent of it) has fired.
    pub fn is_cancelled(&self) -> bool {
        self.node.is_cancelled()
    }

    /// A future that completes when the token fires (at once if it has).
    /// It owns a share of the token, so it can move into a spawned task.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use futures::FutureExt;
    /// use viaduct::cancel::CancellationToken;
    /// use viaduct::{block_on, time};
    ///
    /// let token = CancellationToken::new();
    /// token.cancel_after(Duration::from_millis(5));
    /// let how = block_on(async {
    ///     futures::select! {
    ///         _ = token.cancelled().fuse() => "cancelled",
    ///         _ = time::sleep(Duration::from_secs(60)).fuse() => "slept",
    ///     }
    /// });
    /// assert_eq!(how, "cancelled");
    /// ```
    pub fn cancelled(&self) -> WaitForCancellation {
        WaitForCancellation {
            node: self.node.clone(),
            key: None,
            registered: None,
        }
    }

    /// Runs `future` until it completes (`Some` of its output) or the
    /// token fires (`None`, and `future` is dropped with the returned
    /// future), whichever comes first. The token is looked at first: once
    /// it has fired, `future` is not polled at all.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::cancel::CancellationToken;
    /// use viaduct::block_on;
    ///
    /// let token = CancellationToken::new();
    /// assert_eq!(block_on(token.run_until_cancelled(async { 7 })), Some(7));
    /// token.cancel();
    /// let never = std::future::pending::<()>();
    /// assert_eq!(block_on(token.run_until_cancelled(never)), None);
    /// ```
    pub async fn run_until_cancelled<F: Future>(&self, future: F) -> Option<F::Output> {
        let mut cancelled = std::pin::pin!(self.cancelled());
        let mut future = std::pin::pin!(future);
        std::future::poll_fn(|cx| {
            if cancelled.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            future.as_mut().poll(cx).map(Some)
        })
        .await
    }

    /// A guard that fires the token when it drops, whether its scope
    /// ends normally, early or by a panic, unless
    /// [`disarm`](DropGuard::disarm) takes the token back first.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::cancel::CancellationToken;
    ///
    /// let token = CancellationToken::new();
    /// let watched = token.clone();
    /// {
    ///     let _guard = token.drop_guard();
    /// } // fired here
    /// assert!(watched.is_cancelled());
    ///
    /// let kept = CancellationToken::new();
    /// let token = kept.clone().drop_guard().disarm();
    /// assert!(!token.is_cancelled() && !kept.is_cancelled());
    /// ```
    pub fn drop_guard(self) -> DropGuard {
        DropGuard { token: Some(self) }
    }

    /// Fires the token once `delay` has passed on viaduct's global
    /// [`Timer`] (the simulated clock inside a [simulation](crate::sim)).
    /// Several deadlines keep the earliest. Cancelling the
    /// token takes the deadline off the timer, and so does the token going
    /// away for good (no clone, child token or `cancelled()` future of it
    /// left); while a child is left, the deadline still fires it.
    /// `Duration::MAX`, or any delay the clock cannot reach, never fires; a
    /// zero delay fires now.
    ///
    /// The deadline fires on the timer's thread (`viaduct-timer`; in a
    /// simulation, the simulation's own thread): the
    /// wakers of `cancelled()` futures are woken there, and cancellable
    /// tasks are aborted from there (their executors drop their futures).
    pub fn cancel_after(&self, delay: Duration) {
        if delay.is_zero() {
            return self.cancel();
        }
        let timer = Timer::ambient();
        let Some(deadline) = timer.now().checked_add(delay) else {
            return;
        };
        if self.is_cancelled() || lock(&self.node.state).deadline_by(deadline) {
            return;
        }
        let node = Arc::downgrade(&self.node);
        // Made outside the lock: a deadline already due runs the job right
        // here, and the job locks the node to fire it.
        let job = timer.execute_at(&Inline, deadline, move || {
            if let Some(node) = node.upgrade() {
                cancel(&node);
            }
        });
        let mut state = lock(&self.node.state);
        let unneeded = if self.is_cancelled() || state.deadline_by(deadline) {
            Some(job)
        } else {
            state.deadline.replace((deadline, job)).map(|(_, old)| old)
        };
        drop(state);
        if let Some(job) = unneeded {
            job.cancel();
        }
    }

    /// Reserves the entry a cancellable task will fill with its abort
    /// handle; `None` if the token has fired.
    fn reserve(&self) -> Option<Registration> {
        let mut state = lock(&self.node.state);
        if self.node.is_cancelled() {
            return None;
        }
        Some(Registration {
            node: Arc::downgrade(&self.node),
            key: state.entries.insert(Entry::Reserved),
        })
    }
}

/// Fires its token when dropped, unless disarmed; made by
/// [`CancellationToken::drop_guard`].
#[must_use = "a guard dropped at once fires its token at once"]
#[derive(Debug)]
pub struct DropGuard {
    /// `None` once disarmed.
    token: Option<CancellationToken>,
}

impl DropGuard {
    /// Takes the token back without firing it.
    pub fn disarm(mut self) -> CancellationToken {
        self.token
            .take()
            .expect("a guard is disarmed at most once: disarm takes it by value")
    }
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if let Some(token) = &self.token {
            token.cancel();
        }
    }
}

impl fmt::Debug for CancellationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancellationToken")
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl State {
    /// `true` if a deadline no later than `deadline` is pending already.
    fn deadline_by(&self, deadline: Instant) -> bool {
        self.deadline.as_ref().is_some_and(|(d, _)| *d <= deadline)
    }
}

impl Node {
    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// Takes out the entry `key` unless the node fired (which took every
    /// entry, and may have let the key go to nobody since).
    fn remove(&self, key: usize) -> Option<Entry> {
        let mut state = lock(&self.state);
        if self.is_cancelled() {
            return None;
        }
        state.entries.remove(key)
    }
}

/// Fires `root` and its descendants, in a loop rather than by recursion: a
/// deep tree of tokens must not overflow the stack.
fn cancel(root: &Arc<Node>) {
    let mut nodes = vec![root.clone()];
    while let Some(node) = nodes.pop() {
        let mut state = lock(&node.state);
        if node.cancelled.swap(true, Ordering::AcqRel) {
            continue;
        }
        let entries = std::mem::take(&mut state.entries);
        let deadline = state.deadline.take();
        drop(state);
        if let Some((_, job)) = deadline {
            job.cancel();
        }
        for entry in entries.into_values() {
            match entry {
                Entry::Reserved => {} // its task sees the flag when armed
                Entry::Wake(waker) => reporting_panics(|| waker.wake()),
                Entry::Abort(task) => task.abort(),
                Entry::Child(child) => nodes.extend(child.upgrade()),
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some((_, job)) = state.deadline.take() {
            job.cancel();
        }
        // Unlisted from the parent; a parent whose last share this was is
        // dropped here too, and unlisted in turn, in a loop: a long chain
        // of child tokens must not recurse when it goes.
        let mut parent = self.parent.take();
        while let Some(Parent { node, key }) = parent {
            drop(node.remove(key));
            parent = Arc::try_unwrap(node).ok().and_then(|mut n| n.parent.take());
        }
    }
}

/// A future that completes when its token fires: see
/// [`CancellationToken::cancelled`].
#[must_use = "futures do nothing unless polled"]
pub struct WaitForCancellation {
    node: Arc<Node>,
    /// Its waker's entry, once registered.
    key: Option<usize>,
    /// The waker in that entry, while there is one (set only with `key`):
    /// polled again with one that wakes the same task, the future is still
    /// registered and need not take the token's lock, which every future
    /// waiting on the token shares.
    registered: Option<Waker>,
}

impl Future for WaitForCancellation {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        std::task::ready!(crate::coop::poll_proceed(cx));
        if self.node.is_cancelled() {
            return self.fired();
        }
        // Whether the token fired after the look above or fires later, it
        // takes the entry and wakes the waker there, which wakes this task.
        if (self.registered.as_ref()).is_some_and(|w| w.will_wake(cx.waker())) {
            return Poll::Pending;
        }
        // A user's waker may panic when cloned or dropped: neither happens
        // under the lock.
        let (waker, kept) = (cx.waker().clone(), cx.waker().clone());
        let this = &mut *self;
        let mut state = lock(&this.node.state);
        if this.node.is_cancelled() {
            drop(state);
            return this.fired();
        }
        let old = match this.key {
            Some(key) => std::mem::replace(&mut state.entries[key], Entry::Wake(waker)),
            None => {
                this.key = Some(state.entries.insert(Entry::Wake(waker)));
                Entry::Reserved
            }
        };
        // Replaced before any old waker is dropped: if that drop panics,
        // `registered` still names the waker in the entry.
        let before = this.registered.replace(kept);
        drop(state);
        drop(old);
        drop(before);
        Poll::Pending
    }
}

impl WaitForCancellation {
    /// Ready: firing took the entry's waker, and the clone kept here goes
    /// too, so a finished wait holds nothing of the task that awaited it.
    fn fired(&mut self) -> Poll<()> {
        crate::coop::spend();
        drop(self.registered.take());
        Poll::Ready(())
    }
}

impl Drop for WaitForCancellation {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            drop(self.node.remove(key));
        }
    }
}

impl fmt::Debug for WaitForCancellation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitForCancellation")
            .field("cancelled", &self.node.is_cancelled())
            .finish_non_exhaustive()
    }
}

/// A cancellable task's entry in its token, removed when the task's
/// future goes (however the task ended).
///
/// It holds the token weakly: the token holds the task's waker (in its
/// abort handle), so a strong share here would make a cycle that keeps a
/// parked task, and its pool, alive forever once nobody can cancel the
/// token. A token nobody holds drops its entries, and with them the
/// task's last waker, as a parked task's dropped handle would.
struct Registration {
    node: Weak<Node>,
    key: usize,
}

/// Fills a cancellable task's reserved entry with its abort handle; if the
/// token fired since the reservation, aborts the task instead.
fn arm(node: &Node, key: usize, task: AbortHandle) {
    let mut state = lock(&node.state);
    if node.is_cancelled() {
        drop(state);
        return task.abort();
    }
    state.entries[key] = Entry::Abort(task);
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(node) = self.node.upgrade() {
            drop(node.remove(self.key));
        }
    }
}

/// A cancellable task's future: the user's, and its registration.
#[pin_project]
struct Registered<F> {
    #[pin]
    fut: F,
    _registration: Registration,
}

impl<F: Future> Future for Registered<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().fut.poll(cx)
    }
}

/// [`ExecutorExt::spawn_cancellable`]: the task is created, armed in the
/// token, and only then scheduled, so a token that fires at any point
/// either finds the abort handle or is seen by `arm`; and a task aborted
/// before its first run is never polled.
#[track_caller]
pub(crate) fn spawn_cancellable<E, F>(
    ex: &E,
    token: &CancellationToken,
    future: F,
) -> JoinHandle<F::Output>
where
    E: Executor + Clone,
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let home = home_of(ex);
    let admission = match admitted_or_rejected(&home, admit(ex)) {
        Ok(admission) => admission,
        Err(refused) => return refused,
    };
    let Some(registration) = token.reserve() else {
        return JoinHandle::failed(TaskError::Cancelled, home);
    };
    let key = registration.key;
    let (runnable, handle) = create_admitted(
        home,
        Registered {
            fut: future,
            _registration: registration,
        },
        admission,
    );
    // The runnable is held here, so the future (and its registration, with
    // the key) cannot be gone yet; `token` keeps the node.
    arm(&token.node, key, handle.abort_handle());
    runnable.schedule();
    handle
}

#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom::wakes::counter;
    use loom::thread;

    /// Polled with the wakers `earlier` in turn, then with `last` while
    /// another thread fires the token: one wake in all, and if that last
    /// poll says pending, `last` is the waker woken; the wait is then
    /// ready.
    fn latest_waker_against_cancel(earlier: &'static [usize], last: usize) {
        loom::model(move || {
            let token = CancellationToken::new();
            let wakers = [counter(), counter()];
            let mut wait = token.cancelled();
            let mut poll =
                |i: usize| Pin::new(&mut wait).poll(&mut Context::from_waker(&wakers[i].1));
            for &i in earlier {
                assert!(poll(i).is_pending());
            }
            let t = token.clone();
            let firer = thread::spawn(move || t.cancel());
            let again = poll(last);
            firer.join().unwrap();
            let wakes: usize = wakers.iter().map(|(count, _)| count.get()).sum();
            assert_eq!(wakes, 1, "exactly one wake");
            if again.is_pending() {
                assert_eq!(wakers[last].0.get(), 1, "the latest waker is the one woken");
            }
            assert!(poll(last).is_ready());
        });
    }

    /// Re-polled with the waker it registered: no lock is taken, and the
    /// registration holds.
    #[test]
    fn repoll_against_cancel() {
        latest_waker_against_cancel(&[0], 0);
    }

    /// Re-polled with another waker.
    #[test]
    fn new_waker_against_cancel() {
        latest_waker_against_cancel(&[0], 1);
    }

    /// Registered with one waker, then another, then the first again: the
    /// last poll must not take the first waker for registered still.
    #[test]
    fn first_waker_again_against_cancel() {
        latest_waker_against_cancel(&[0, 1], 0);
    }
}
