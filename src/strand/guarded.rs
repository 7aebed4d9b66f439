//! [`Guarded<T>`]: data owned by a strand, the strand as an async mutex.
//!
//! A [`with`](Guarded::with) section runs on the spot when it can; else it
//! is a node of the strand's queue (`node.rs`), which the runner runs
//! between its other items, writing the result in place for the handle. A
//! [`lock`](Guarded::lock) request is a [`Waiter`] in the same queue: when
//! its turn comes, the strand's owner *grants* it (ground rule 3 of the
//! strand) and the strand is parked until the guard drops; the guard's drop
//! passes the strand on (`Core::hand_on`), granting the next waiter directly
//! when one is next in line.
//!
//! # Ground rules of a waiter
//!
//! A waiter's `state` goes between `WAITING` and `REGISTERED` (the lock
//! future storing its waker, then taking the cell back to look at it when
//! polled again), and ends once in exactly one of:
//!
//! - `GRANTED`, by the strand's owner, which hands the strand over with it;
//!   from then on the lock future (then its guard) owns the strand and
//!   must pass it on when dropped. A grant from `REGISTERED` takes the
//!   waker and wakes it; a grant from `WAITING` leaves the cell alone (the
//!   future may be writing it) and the future sees the grant when it
//!   tries to register;
//! - `CANCELLED`, by the lock future's drop; the owner that reaches the
//!   waiter skips it.
//!
//! The waker cell is the lock future's while `WAITING` and the granter's
//! after it moved `REGISTERED` to `GRANTED`: never both, with no lock.
//!
//! A dead strand (its executor threw its runner away) still grants its
//! waiters: granting needs no executor.
//!
//! The grant/cancel race is settled by the one compare-and-swap that wins:
//! a lock future whose cancel loses owns the strand and passes it on, so a
//! dropped lock future never wedges the strand.

use std::cell::UnsafeCell;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::Arc;
use std::task::{ready, Context, Poll, Waker};

use super::node;
use super::queue::{Header, Item, Node, NodeVTable, Pushed, Ran};
use super::{Data, Handle, StrandMetrics, Whole};
use crate::admission::Sink;
use crate::dump::lock::{LockKind, LockRef};
use crate::dump::records::{Noted, WaitKey, WaitOn};
use crate::error::{Panic, PanicPayload, TaskError};
use crate::executor::Executor;
use crate::loom::{AtomicUsize, Ordering::*};
use crate::section::{self, Frame};
use crate::task::completion::Common;
use crate::task::{current_task, current_task_id, current_task_sink, reporting_panics, JoinHandle};

/// Data owned by a strand: an async mutex whose critical sections can run
/// on the strand or in the caller's task, in one FIFO order.
///
/// - [`with`](Guarded::with) runs a section on the strand and returns a
///   handle to await: the caller does not wait for its turn, and under load
///   the strand runs many sections per synchronisation (batching). A task
///   of the strand's executor that finds the strand free runs its section
///   on the spot, as a mutex would.
/// - [`lock`](Guarded::lock) waits for the strand and gives a [`Guard`]:
///   the section runs in the caller's task, may be held across `.await`,
///   and keeps the strand busy until the guard drops.
///
/// There is no poisoning: a section that panics is reported on its handle
/// (or unwinds the task that holds the guard, whose drop releases the
/// strand), and the next section sees the data as the panic left it.
///
/// Cloning gives another handle to the same data. A handle is one word,
/// and an idle `Guarded<u64>` takes 72 bytes in all, as an
/// `Arc<tokio::sync::Mutex<u64>>` does.
///
/// It is made for tasks. Threads outside any pool that wait for each
/// section with [`block_on`](crate::block_on) pay a wake-up of a parked
/// thread at every hand-over, in FIFO order (microseconds under
/// contention, where a `std::sync::Mutex` lets the running thread take it
/// again): there, use a `std::sync::Mutex`, or
/// [`post`](Guarded::post), which does not wait.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, Guarded, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(2).build().unwrap();
/// let counter = Guarded::new(pool.clone(), 0u64);
/// let tasks: Vec<_> = (0..4)
///     .map(|_| {
///         let counter = counter.clone();
///         pool.spawn(async move {
///             for _ in 0..100 {
///                 counter.with(|n| *n += 1).await.unwrap();
///                 *counter.lock().await += 1;
///             }
///         })
///     })
///     .collect();
/// for t in tasks {
///     block_on(t).unwrap();
/// }
/// assert_eq!(block_on(counter.with(|n| *n)).unwrap(), 800);
/// ```
pub struct Guarded<T> {
    shared: Handle<Slot<T>>,
}

/// The guarded value.
pub(crate) struct Slot<T>(UnsafeCell<T>);

// SAFETY: the value is reached only by the strand's current owner (a
// section running on the strand, or the holder of a guard), one at a time,
// each handing over to the next with a release/acquire pair (the strand's
// ground rules); so it is used by one thread at a time, which `T: Send`
// allows.
unsafe impl<T: Send> Sync for Slot<T> {}

impl<T: Send + 'static> Data for Slot<T> {
    fn kind() -> LockKind {
        LockKind::Guarded(std::any::type_name::<T>())
    }
}

/// A pointer to the guarded value, carried by a `with` section.
struct SlotPtr<T>(*mut T);

// SAFETY: the pointer is dereferenced only inside a section of the strand,
// on whatever thread runs it; moving it there moves access to a `T`, which
// `T: Send` allows.
unsafe impl<T: Send> Send for SlotPtr<T> {}

impl<T> SlotPtr<T> {
    /// # Safety
    ///
    /// The caller is a section of the strand that owns the value, and the
    /// value is alive.
    #[allow(clippy::mut_from_ref)]
    unsafe fn get(&self) -> &mut T {
        // SAFETY: the caller's contract.
        unsafe { &mut *self.0 }
    }
}

impl<T: Send + 'static> Guarded<T> {
    /// Puts `value` in the care of a new strand over `executor`.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, Guarded, Inline};
    ///
    /// let names = Guarded::new(Inline, vec!["a"]);
    /// block_on(names.with(|v| v.push("b"))).unwrap();
    /// assert_eq!(*block_on(names.lock()), ["a", "b"]);
    /// ```
    #[track_caller]
    pub fn new<E: Executor + Clone>(executor: E, value: T) -> Self {
        Guarded {
            shared: Handle::new(
                &executor,
                Slot(UnsafeCell::new(value)),
                std::panic::Location::caller(),
            ),
        }
    }

    /// Runs `f` on the value, as a section of the strand, after every
    /// section requested before it. The handle resolves to what `f`
    /// returns, or to [`TaskError::Panicked`](crate::TaskError::Panicked) if
    /// it panicked; the strand goes on either way. Awaiting the handle is
    /// optional: dropping it leaves the section queued, and a panic nobody
    /// reads goes where a detached task's does (a pool's
    /// [`on_unobserved_panic`](crate::pool::Builder::on_unobserved_panic)).
    ///
    /// Where it runs: if the caller is a task of the strand's executor and
    /// the strand is free (or is about to be: another section is running
    /// on the spot), `f` runs right here, before `with` returns, like
    /// asio's `dispatch`; the caller is on that executor already, and
    /// nothing is queued before it. Otherwise the section is queued and
    /// runs on the strand's executor, in the strand's runner task: no task
    /// is made for it, and it is woken once, with its result. Its handle's
    /// [`id`](JoinHandle::id) names it, and a task dump lists it, running,
    /// at this call; what it waits on while it runs is listed under the
    /// runner, which then holds the value. Aborting the handle before the
    /// section's turn drops `f` unrun, in its turn; the handle says
    /// [`Cancelled`](crate::TaskError::Cancelled) once `f` is dropped.
    ///
    /// On a closed strand (its executor closed) the handle resolves to
    /// [`TaskError::Rejected`](crate::TaskError::Rejected); once its
    /// executor threw its work away (shut down with `shutdown_now`, or
    /// terminated with the strand's runner queued), to
    /// [`TaskError::Cancelled`](crate::TaskError::Cancelled): a section needs
    /// an executor to run on. [`lock`](Guarded::lock) still works then.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, Guarded, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(2).build().unwrap();
    /// let total = Guarded::new(pool, 0);
    /// let handles: Vec<_> = (1..=10).map(|i| total.with(move |t| { *t += i; *t })).collect();
    /// let last = handles.into_iter().map(|h| block_on(h).unwrap()).last();
    /// assert_eq!(last, Some(55)); // the sections ran in request order
    /// ```
    #[track_caller]
    pub fn with<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce(&mut T) -> R + Send + 'static,
        R: Send + 'static,
    {
        let core = &self.shared.core;
        if core.is_dead() {
            return JoinHandle::failed(TaskError::Cancelled, self.shared.exec());
        }
        // Closing is checked before taking the strand, not after: the
        // section is then simply ordered before a close that races it, and
        // the strand is held no longer than the section itself takes,
        // which is what others spin on.
        let caller = (!core.is_closed())
            .then(|| core.caller_on_inner())
            .flatten();
        if let Some((me, id)) = caller.filter(|_| core.acquire_briefly(true)) {
            // SAFETY: `acquire_briefly` made this thread the owner of the
            // strand, so nothing else touches the value, and it stays the
            // owner until `release_quick`.
            let value = unsafe { &mut *self.shared.data.0.get() };
            let frame = Frame::new(core.id(), me, me);
            let entered = frame.enter();
            core.took(Some(id));
            let result = catch_unwind(AssertUnwindSafe(|| f(value)));
            drop(entered);
            // SAFETY: this thread took the strand with `acquire_briefly`
            // and gives it up.
            unsafe { core.release_quick(Whole::of(&self.shared)) };
            let exec = self.shared.exec();
            return match result {
                Ok(v) => JoinHandle::ready(v, exec),
                // Where a queued section's panic would go if nobody
                // reads the handle: the executor's panic hook.
                Err(p) => JoinHandle::failed_reporting(
                    TaskError::Panicked(Panic::new(p)),
                    exec,
                    // The caller is a task of the strand's executor
                    // (that is how it ran the section on the spot):
                    // its sink is that executor's.
                    current_task_sink(),
                ),
            };
        }
        let exec = self.shared.exec();
        let accepted = match core.accept_queued() {
            Ok(accepted) => accepted,
            Err(reason) => return JoinHandle::failed(TaskError::Rejected(reason), exec),
        };
        let slot = SlotPtr(self.shared.data.0.get());
        let section = move || {
            // SAFETY: a queued section runs only on the strand's runner,
            // which owns the value then; the handle's executor (or, for a
            // detached section, the runner) keeps the strand, and so the
            // value, alive.
            f(unsafe { slot.get() })
        };
        let (item, done) = node::section(
            section,
            std::panic::Location::caller(),
            &core.book,
            Slot::<T>::kind,
        );
        /// The reference of the completion that the handle takes over, let
        /// go if the section is never queued (refused, or the admission
        /// unwinds).
        struct Unqueued(NonNull<Common>);
        impl Drop for Unqueued {
            fn drop(&mut self) {
                // SAFETY: the reference `node::section` made for the handle,
                // which no handle took.
                unsafe { Common::release(self.0) };
            }
        }
        let unqueued = Unqueued(done.cast());
        match core.submit_covered(accepted, Whole::of(&self.shared), item) {
            Ok(()) => {
                std::mem::forget(unqueued);
                JoinHandle::section(done, exec)
            }
            Err((reason, item)) => {
                // Never queued: dropped unrun, and its completion with it.
                drop(item);
                drop(unqueued);
                JoinHandle::failed(TaskError::Rejected(reason), exec)
            }
        }
    }

    /// Requests the strand for a section in the caller's task. The request
    /// takes its place in the strand's FIFO order when `lock` is called,
    /// not when the future is first polled; the future resolves to a
    /// [`Guard`] when the request's turn comes.
    ///
    /// A guard (or a lock future that has got the strand) must not wait
    /// for a `with` section of the same value: that section runs only after
    /// the guard drops.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future gives up the request; if its turn had already
    /// come, the strand is passed on to the next request.
    ///
    /// A lock needs no executor: it is granted in its turn even after the
    /// strand's executor shut down (sections queued before it are then
    /// cancelled instead of run).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, Guarded, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(2).build().unwrap();
    /// let log = Guarded::new(pool.clone(), String::new());
    /// let l = log.clone();
    /// block_on(pool.spawn(async move {
    ///     let mut guard = l.lock().await;
    ///     guard.push_str("held ");
    ///     futures::future::ready(()).await; // may be held across .await
    ///     guard.push_str("across await");
    /// }))
    /// .unwrap();
    /// assert_eq!(*block_on(log.lock()), "held across await");
    /// ```
    pub fn lock(&self) -> Lock<'_, T> {
        Lock {
            guarded: self,
            state: self.request(),
            noted: Noted::default(),
        }
    }

    /// Like [`lock`](Guarded::lock), but the guard owns a handle of the
    /// value instead of borrowing it, so it is `'static` and can move into
    /// a spawned task (tokio's `lock_owned`). The request takes its place
    /// in the FIFO order when `lock_owned` is called.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::prelude::*;
    /// use viaduct::{block_on, Guarded, ThreadPool};
    ///
    /// let pool = ThreadPool::builder().threads(2).build().unwrap();
    /// let total = Guarded::new(pool.clone(), 0);
    /// let guard = block_on(total.lock_owned());
    /// // The guard moves into a task, which releases the value when done.
    /// let task = pool.spawn(async move {
    ///     let mut guard = guard;
    ///     *guard += 1;
    /// });
    /// block_on(task).unwrap();
    /// assert_eq!(*block_on(total.lock()), 1);
    /// ```
    pub fn lock_owned(&self) -> LockOwned<T> {
        LockOwned {
            guarded: self.clone(),
            state: self.request(),
            noted: Noted::default(),
        }
    }

    /// The strand for a section in the caller, right now, if it is free
    /// and nobody is queued for it (so FIFO order is kept); `None`
    /// otherwise. Never waits and never queues.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{Guarded, ManualExecutor};
    ///
    /// let g = Guarded::new(ManualExecutor::new(), 5);
    /// let mut guard = g.try_lock().unwrap();
    /// *guard += 1;
    /// assert!(g.try_lock().is_none()); // held
    /// drop(guard);
    /// assert_eq!(*g.try_lock().unwrap(), 6);
    /// ```
    pub fn try_lock(&self) -> Option<Guard<'_, T>> {
        let core = &self.shared.core;
        core.try_acquire().then(|| {
            core.took(current_task());
            Guard {
                guarded: self,
                _value: PhantomData,
            }
        })
    }

    /// Runs `f` on the value as a section of the strand, fire-and-forget:
    /// cheaper than [`with`](Guarded::with) (no task, no handle; one
    /// allocation), and never inside this call. A panic of `f` goes where a
    /// detached task's panic goes (a pool's
    /// [`on_unobserved_panic`](crate::pool::Builder::on_unobserved_panic)
    /// hook); if the strand is closed, `f` is dropped unrun.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{Guarded, ManualExecutor};
    ///
    /// let manual = ManualExecutor::new();
    /// let log = Guarded::new(manual.clone(), Vec::new());
    /// for i in 0..3 {
    ///     log.post(move |v| v.push(i));
    /// }
    /// manual.run_until_idle();
    /// assert_eq!(*log.try_lock().unwrap(), [0, 1, 2]);
    /// ```
    pub fn post<F>(&self, f: F)
    where
        F: FnOnce(&mut T) + Send + 'static,
    {
        let slot = SlotPtr(self.shared.data.0.get());
        // The posted closure holds the value's strand alive through the
        // runner, as a strand's posts do; the slot stays valid meanwhile.
        self.shared.post(move || {
            // SAFETY: a posted closure runs only as a section of the
            // strand, which owns the value then; the runner holds the
            // strand (and so the value) alive while it runs.
            f(unsafe { slot.get() })
        });
    }

    /// A request for the strand, in FIFO order from now on.
    fn request(&self) -> LockState {
        let core = &self.shared.core;
        if core.acquire_briefly(false) {
            // Not yet by whom: the task that polls the request holds the
            // strand (see `poll_owned`), and that may be another.
            core.took(None);
            return LockState::Held;
        }
        let waiter = Waiter::reuse_or_new();
        match core.push(waiter.node()) {
            Pushed::Queued => LockState::Waiting(waiter),
            Pushed::Owned => {
                // The strand went idle in between: the request is the
                // only item, and passing the strand on grants it.
                // SAFETY: the push made this thread the owner.
                unsafe { core.hand_on(Whole::of(&self.shared)) };
                LockState::Waiting(waiter)
            }
        }
    }

    /// The counters of the strand that owns the value.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, Guarded, Inline};
    ///
    /// let g = Guarded::new(Inline, 0);
    /// block_on(g.with(|n| *n += 1)).unwrap();
    /// assert_eq!(g.metrics().queued + g.metrics().inline, 1);
    /// ```
    pub fn metrics(&self) -> StrandMetrics {
        self.shared.core.metrics()
    }
}

impl<T> Clone for Guarded<T> {
    fn clone(&self) -> Self {
        Guarded {
            shared: self.shared.clone(),
        }
    }
}

impl<T> fmt::Debug for Guarded<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guarded")
            .field("executor", &self.shared.core.inner)
            .finish_non_exhaustive()
    }
}

/// The future [`Guarded::lock`] returns: resolves to a [`Guard`].
///
/// # Examples
///
/// ```
/// use viaduct::strand::Lock;
/// use viaduct::{block_on, Guarded, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(1).build().unwrap();
/// let list = Guarded::new(pool, vec![1]);
/// let request: Lock<'_, Vec<i32>> = list.lock();
/// let mut guard = block_on(request);
/// guard.push(2);
/// drop(guard); // lets the strand run its next section
/// assert_eq!(block_on(list.with(|v| v.clone())).unwrap(), [1, 2]);
/// ```
#[must_use = "a lock request is given up when dropped; await it to get the guard"]
pub struct Lock<'a, T> {
    guarded: &'a Guarded<T>,
    state: LockState,
    noted: Noted,
}

enum LockState {
    /// The strand was idle: this future owns it already.
    Held,
    /// Gave a free strand back because the task's budget was spent; asks
    /// again at the next poll.
    Unrequested,
    Waiting(Arc<Waiter>),
    /// The guard was handed out.
    Done,
}

impl LockState {
    /// Polls the request; `Ready` once it owns the strand (and is `Done`),
    /// with the request's allocation for [`Waiter::recycle`] once the
    /// caller has made its guard: dropping it drops a user's waker, which
    /// may panic, and the guard must then exist to pass the strand on.
    fn poll_owned<T: Send + 'static>(
        &mut self,
        guarded: &Guarded<T>,
        noted: &mut Noted,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Arc<Waiter>>> {
        let core = &guarded.shared.core;
        if let LockState::Unrequested = self {
            *self = guarded.request();
        }
        match self {
            LockState::Held => {
                // The budget is spent: the strand is given back rather
                // than held across the yield, with waiters behind it. A
                // granted request keeps it (it has waited already).
                if crate::coop::poll_proceed(cx).is_pending() {
                    self.give_up(guarded);
                    *self = LockState::Unrequested;
                    return Poll::Pending;
                }
                core.book.moved_to(current_task());
            }
            LockState::Unrequested => unreachable!("requested just above"),
            LockState::Waiting(waiter) => {
                if waiter.poll_granted(cx).is_pending() {
                    section::check_not_blocking_on("the lock", || (core.id(), current_task_id()));
                    let key = WaitKey::of(&core.book);
                    crate::task::note_wait(noted, key, || {
                        WaitOn::Lock(LockRef::new(
                            Arc::clone(&guarded.shared),
                            |shared| &shared.core.book,
                            Slot::<T>::kind,
                        ))
                    });
                    return Poll::Pending;
                }
                noted.done(WaitKey::of(&core.book));
                core.granted_to(current_task());
            }
            LockState::Done => panic!("a lock request polled after it returned its guard"),
        }
        crate::coop::spend();
        Poll::Ready(match std::mem::replace(self, LockState::Done) {
            LockState::Waiting(waiter) => Some(waiter),
            _ => None,
        })
    }

    /// Gives the request up; if it owned the strand already, passes the
    /// strand on.
    fn give_up<T>(&mut self, guarded: &Guarded<T>) {
        let state = std::mem::replace(self, LockState::Done);
        let owns = match &state {
            LockState::Held => true,
            LockState::Waiting(waiter) => !waiter.cancel(),
            LockState::Unrequested | LockState::Done => false,
        };
        if owns {
            // SAFETY: the request was granted (or found the strand idle)
            // and no guard took over: the request owns the strand.
            unsafe { guarded.shared.core.hand_on(Whole::of(&guarded.shared)) };
        }
        // Only now: dropping the request may drop a user's waker, which
        // may panic, and the strand must be passed on first.
        drop(state);
    }
}

impl<'a, T: Send + 'static> Future for Lock<'a, T> {
    type Output = Guard<'a, T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Guard<'a, T>> {
        let this = self.get_mut();
        let spare = ready!(this.state.poll_owned(this.guarded, &mut this.noted, cx));
        let guard = Guard {
            guarded: this.guarded,
            _value: PhantomData,
        };
        Waiter::recycle(spare);
        Poll::Ready(guard)
    }
}

impl<T> Drop for Lock<'_, T> {
    fn drop(&mut self) {
        self.noted.done(WaitKey::of(&self.guarded.shared.core.book));
        self.state.give_up(self.guarded);
    }
}

/// The future [`Guarded::lock_owned`] returns: resolves to an
/// [`OwnedGuard`]. Dropping it gives the request up, as with [`Lock`].
///
/// # Examples
///
/// ```
/// use viaduct::strand::{LockOwned, OwnedGuard};
/// use viaduct::{block_on, Guarded, Inline};
///
/// let g = Guarded::new(Inline, 1);
/// let request: LockOwned<i32> = g.lock_owned();
/// let guard: OwnedGuard<i32> = block_on(request);
/// assert_eq!(*guard, 1);
/// ```
#[must_use = "a lock request is given up when dropped; await it to get the guard"]
pub struct LockOwned<T> {
    guarded: Guarded<T>,
    state: LockState,
    noted: Noted,
}

impl<T: Send + 'static> Future for LockOwned<T> {
    type Output = OwnedGuard<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<OwnedGuard<T>> {
        let this = self.get_mut();
        let spare = ready!(this.state.poll_owned(&this.guarded, &mut this.noted, cx));
        let guard = OwnedGuard {
            guarded: this.guarded.clone(),
            _value: PhantomData,
        };
        Waiter::recycle(spare);
        Poll::Ready(guard)
    }
}

impl<T> Drop for LockOwned<T> {
    fn drop(&mut self) {
        self.noted.done(WaitKey::of(&self.guarded.shared.core.book));
        self.state.give_up(&self.guarded);
    }
}

impl<T> fmt::Debug for LockOwned<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockOwned").finish_non_exhaustive()
    }
}

/// A section in the caller's task, like [`Guard`], that owns a handle of
/// the value: `'static`, so it can move into a spawned task. The strand
/// is passed on when it drops.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, Guarded, Inline};
///
/// let g = Guarded::new(Inline, String::from("a"));
/// let mut guard = block_on(g.lock_owned());
/// std::thread::spawn(move || guard.push('b')).join().unwrap();
/// assert_eq!(*block_on(g.lock()), "ab");
/// ```
#[must_use = "the strand is released as soon as the guard drops"]
pub struct OwnedGuard<T> {
    guarded: Guarded<T>,
    /// The guard hands out `&T` and `&mut T`: it is `Sync` only if `T`
    /// is (the handle it holds would make it `Sync` for any `T: Send`).
    _value: PhantomData<T>,
}

impl<T> Deref for OwnedGuard<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: as for `Guard`: the guard owns the strand until it drops,
        // and its handle keeps the value alive.
        unsafe { &*self.guarded.shared.data.0.get() }
    }
}

impl<T> DerefMut for OwnedGuard<T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this borrow unique.
        unsafe { &mut *self.guarded.shared.data.0.get() }
    }
}

impl<T> Drop for OwnedGuard<T> {
    fn drop(&mut self) {
        let shared = &self.guarded.shared;
        // SAFETY: the guard owns the strand (see `deref`) and gives it up.
        unsafe { shared.core.hand_on(Whole::of(shared)) };
    }
}

impl<T: fmt::Debug> fmt::Debug for OwnedGuard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T> fmt::Debug for Lock<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock").finish_non_exhaustive()
    }
}

/// Exclusive access to a [`Guarded`] value, in the caller's task. The
/// strand runs nothing else until the guard drops (also when it drops
/// during a panic).
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, Guarded, Inline};
///
/// let g = Guarded::new(Inline, 1);
/// let later = {
///     let mut guard = block_on(g.lock());
///     *guard += 1;
///     g.with(|n| *n * 10) // queued behind the guard
/// };
/// assert_eq!(block_on(later).unwrap(), 20);
/// ```
#[must_use = "the strand is released as soon as the guard drops"]
pub struct Guard<'a, T> {
    guarded: &'a Guarded<T>,
    /// Send and Sync as `&mut T` is.
    _value: PhantomData<&'a mut T>,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a guard exists only while its request owns the strand
        // (it was granted and has not dropped), so nothing else touches the
        // value; the borrow of the `Guarded` keeps the value alive.
        unsafe { &*self.guarded.shared.data.0.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this borrow unique.
        unsafe { &mut *self.guarded.shared.data.0.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        let shared = &self.guarded.shared;
        // SAFETY: the guard owns the strand (see `deref`) and gives it up.
        unsafe { shared.core.hand_on(Whole::of(shared)) };
    }
}

impl<T: fmt::Debug> fmt::Debug for Guard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// No waker stored: only the lock future touches the waker cell.
const WAITING: usize = 0;
/// A waker is stored: whoever grants the request takes it.
const REGISTERED: usize = 1;
const GRANTED: usize = 2;
const CANCELLED: usize = 3;

/// A lock request in a strand's queue: a queue node shared (as an `Arc`)
/// by the queue and the lock future. See the module's ground rules.
#[repr(C)]
struct Waiter {
    /// First, so that the `Arc`'s pointer is the node's header pointer.
    header: Header,
    state: AtomicUsize,
    /// The lock future's waker. The state says who may touch it: the lock
    /// future while `WAITING`, the granting owner once it moved the state
    /// from `REGISTERED` to `GRANTED`, and whoever drops the last share of
    /// the request (with it).
    waker: crate::loom::UnsafeCell<Option<Waker>>,
}

// SAFETY: the waker cell is touched by one side at a time, as the state
// word says (see the field), with acquire/release on each hand-over; a
// `Waker` is `Send + Sync`.
unsafe impl Sync for Waiter {}

/// A lock request in the queue: running it grants it.
const WAITER_VTABLE: NodeVTable = NodeVTable {
    run: Waiter::run,
    discard: Waiter::discard,
    grants: true,
    about: None,
};

impl Waiter {
    fn new() -> Self {
        Waiter {
            header: Header::new(&WAITER_VTABLE),
            state: AtomicUsize::new(WAITING),
            waker: crate::loom::UnsafeCell::new(None),
        }
    }

    /// A fresh request: this thread's spare one if it has one (a granted
    /// request is done with its allocation while the next `lock` on the
    /// thread needs one), else a new one.
    fn reuse_or_new() -> Arc<Waiter> {
        super::recycle::take_spare().unwrap_or_else(|| Arc::new(Waiter::new()))
    }

    /// Keeps a granted request (if any) as this thread's spare, if nothing
    /// else holds it any more (the granting owner may still be waking it).
    fn recycle(waiter: Option<Arc<Waiter>>) {
        if let Some(mut waiter) = waiter {
            if let Some(w) = Arc::get_mut(&mut waiter) {
                // The waker cell and state are this thread's alone now.
                *w = Waiter::new();
                super::recycle::keep_spare(waiter);
            }
        }
    }

    /// The queue's share of the request.
    fn node(self: &Arc<Self>) -> Item {
        let ptr = Arc::into_raw(self.clone()) as *mut Header;
        // SAFETY: `Waiter` is `repr(C)` with the header first, so the `Arc`'s
        // pointer is the header's; the header's vtable is `WAITER_VTABLE`,
        // whose functions take the `Arc` count back, once.
        Item::Node(unsafe { Node::from_header(NonNull::new_unchecked(ptr)) })
    }

    /// # Safety
    ///
    /// `header` came from [`node`](Waiter::node); its count is consumed.
    unsafe fn take(header: NonNull<Header>) -> Arc<Waiter> {
        // SAFETY: the caller's contract.
        unsafe { Arc::from_raw(header.cast::<Waiter>().as_ptr()) }
    }

    /// # Safety
    ///
    /// As for [`take`](Waiter::take).
    unsafe fn run(header: NonNull<Header>, _: &dyn Fn() -> Option<Sink>) -> Ran {
        // SAFETY: the caller's contract.
        let waiter = unsafe { Waiter::take(header) };
        let granted = waiter.grant();
        // The queue's share may be the last: dropping it drops a waker left
        // in the cell (a user's, whose `Drop` may panic). The caller may
        // have just handed the strand over, or still own it: either way a
        // panic must not unwind through it. Reported instead.
        reporting_panics(move || drop(waiter));
        if granted {
            Ran::Granted
        } else {
            Ran::Done
        }
    }

    /// # Safety
    ///
    /// As for [`take`](Waiter::take).
    /// A request dropped unrun, with the queue holding it: only when the
    /// strand itself goes, which no live request allows (its future holds
    /// the `Guarded`), so nobody waits on it.
    unsafe fn discard(header: NonNull<Header>) -> Option<PanicPayload> {
        // SAFETY: the caller's contract.
        let waiter = unsafe { Waiter::take(header) };
        // Its waker's `Drop` is a user's, and may panic.
        catch_unwind(AssertUnwindSafe(move || drop(waiter))).err()
    }

    /// For the strand's owner: hands it the strand, unless the request was
    /// cancelled. Returns `true` if it did (the caller no longer owns the
    /// strand and must touch nothing of it).
    fn grant(&self) -> bool {
        let mut state = self.state.load(Relaxed);
        loop {
            if state == CANCELLED {
                return false;
            }
            // Release hands the owner's writes (the batch, the counters,
            // the value) to the lock future; acquire takes the waker the
            // future stored before it set `REGISTERED`.
            match self.state.compare_exchange(state, GRANTED, AcqRel, Relaxed) {
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        if state == REGISTERED {
            // SAFETY: the state went from `REGISTERED` to `GRANTED` by this
            // call, acquiring the future's release: the cell is ours (see
            // the field).
            let waker = unsafe { self.waker.with_mut(Option::take) };
            if let Some(w) = waker {
                // Right after the grant handed the strand over: a panicking
                // waker must not unwind through the owner (the runner, a
                // guard's drop), which would go on as if it still owned it.
                reporting_panics(|| w.wake());
            }
        }
        true
    }

    /// For the lock future: `Ready` once granted; otherwise stores the
    /// waker for the grant to wake.
    ///
    /// User code runs here (cloning and dropping wakers) and may panic: the
    /// new waker is cloned before anything changes, and the old one is
    /// dropped only once the new one is registered, so a panic never leaves
    /// the request unregistered. A waker left in the cell by a grant that
    /// raced the registration is dropped with the request.
    fn poll_granted(&self, cx: &mut Context<'_>) -> Poll<()> {
        // Acquire pairs with the grant's release: the new owner sees what
        // the old one wrote.
        let state = self.state.load(Acquire);
        if state == GRANTED {
            return Poll::Ready(());
        }
        let waker = cx.waker().clone();
        // Polled again: take the cell back first. A grant that wins this
        // race has taken the old waker.
        if state == REGISTERED
            && self
                .state
                .compare_exchange(REGISTERED, WAITING, Acquire, Acquire)
                .is_err()
        {
            return Poll::Ready(());
        }
        // SAFETY: the state is `WAITING` (or `GRANTED` by a grant that
        // found it `WAITING` and so leaves the cell alone; cancelling is
        // this future's own drop): the cell is this future's.
        let old = unsafe { self.waker.with_mut(|slot| slot.replace(waker)) };
        // Release publishes the waker to the grant; a grant that came in
        // between did not touch the cell and finds nothing to wake.
        let registered = self
            .state
            .compare_exchange(WAITING, REGISTERED, Release, Acquire)
            .is_ok();
        drop(old);
        if registered {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }

    /// For the lock future's drop: gives up the request. Returns `false` if
    /// it had been granted already, in which case the caller owns the
    /// strand and must pass it on.
    fn cancel(&self) -> bool {
        let mut state = self.state.load(Relaxed);
        loop {
            match state {
                // Acquire: a granted caller becomes the owner.
                GRANTED => {
                    self.state.load(Acquire);
                    return false;
                }
                CANCELLED => return true,
                _ => {}
            }
            match self
                .state
                .compare_exchange(state, CANCELLED, Relaxed, Relaxed)
            {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::executor::Executor;
    use crate::executor::Runnable;
    use crate::loom::Arc as LoomArc;
    use crate::loom::Mutex;
    use loom::thread;

    /// An executor for the models: it keeps what it is given and runs
    /// nothing (the models queue only lock requests, which need no runner).
    #[derive(Clone)]
    struct Hold(LoomArc<Mutex<Vec<Runnable>>>);

    impl Executor for Hold {
        fn schedule(&self, runnable: Runnable) {
            crate::loom::lock(&self.0).push(runnable);
        }
    }

    /// Wakes a parked loom thread.
    struct Unpark(thread::Thread);

    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }

    fn block_on<F: Future>(fut: F) -> F::Output {
        let waker = Waker::from(std::sync::Arc::new(Unpark(thread::current())));
        let mut fut = std::pin::pin!(fut);
        loop {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
                return v;
            }
            thread::park();
        }
    }

    fn guarded() -> Guarded<usize> {
        Guarded::new(Hold(LoomArc::new(Mutex::new(Vec::new()))), 0)
    }

    /// Read-modify-write split in two, with a loom yield point between:
    /// lost updates show if two owners ever overlap.
    fn increment(g: &Guarded<usize>) {
        let mut guard = block_on(g.lock());
        let seen = *guard;
        thread::yield_now();
        *guard = seen + 1;
    }

    /// Two tasks lock while a third holds the strand: the hand-offs pass it
    /// to each exactly once, and it ends idle.
    #[test]
    fn hand_off() {
        loom::model(|| {
            let g = guarded();
            let held = block_on(g.lock());
            let others: Vec<_> = (0..2)
                .map(|_| {
                    let g = g.clone();
                    thread::spawn(move || increment(&g))
                })
                .collect();
            drop(held);
            for t in others {
                t.join().unwrap();
            }
            assert_eq!(*block_on(g.lock()), 2);
            assert!(g.shared.core.acquire_briefly(false), "idle at the end");
        });
    }

    /// Holds `g` while another thread requests it and polls the request
    /// once with a waker that does nothing, then releases it: the request
    /// is granted by that poll, or by the release racing what `then` does
    /// with it (on the other thread) while still pending.
    fn release_against(
        g: &Guarded<usize>,
        then: impl for<'a> FnOnce(Pin<Box<Lock<'a, usize>>>) + Send + 'static,
    ) {
        let held = block_on(g.lock());
        let other = {
            let g = g.clone();
            thread::spawn(move || {
                let mut lock = Box::pin(g.lock());
                let noop = futures::task::noop_waker();
                match lock.as_mut().poll(&mut Context::from_waker(&noop)) {
                    Poll::Ready(guard) => drop(guard),
                    Poll::Pending => then(lock),
                }
            })
        };
        drop(held);
        other.join().unwrap();
    }

    /// A lock future registers one waker, then another (a second poll
    /// takes the cell back), while the guard ahead of it is released: the
    /// grant wakes whichever waker is registered, or the future sees the
    /// grant itself; it never sleeps through it.
    #[test]
    fn repoll_vs_grant() {
        loom::model(|| {
            let g = guarded();
            // Polled again with the thread's own waker.
            release_against(&g, |lock| drop(block_on(lock)));
            assert!(g.shared.core.acquire_briefly(false), "idle at the end");
        });
    }

    /// A pending lock request is dropped while the guard ahead of it is
    /// released: whichever wins the race, the strand is passed on and the
    /// next lock gets it.
    #[test]
    fn cancel_vs_grant() {
        loom::model(|| {
            let g = guarded();
            release_against(&g, |lock| drop(lock));
            increment(&g);
            assert_eq!(*block_on(g.lock()), 1);
        });
    }
}
