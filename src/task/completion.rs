//! Work completed in place: a result that whoever runs the work writes
//! into a shared allocation, and that a [`JoinHandle`](super::JoinHandle)
//! reads from there. A strand's queued `with` section is one: a node in
//! the strand's queue, not a task, so it needs no allocation of a task, no
//! admission, no poll and no wake-up of its own; the strand's runner runs
//! it and wakes the waiting handle once, with the result in place.
//!
//! # Ground rules
//!
//! One state word, [`Common::state`]:
//!
//! - the *phase* (two bits) goes `QUEUED → DONE` for work that ran, or
//!   `QUEUED → CANCELLED` for work dropped unrun (aborted, or its executor
//!   is gone). Only the runner moves it; the move is the *finish*, one
//!   compare-and-swap that also clears `REGISTERED`. The work is running
//!   while the runner's id is stored and the phase is still `QUEUED`;
//! - `REGISTERED`: a waker is in the cell. The handle owns the cell while
//!   `REGISTERED` is clear and the work is not finished; the finish that
//!   clears `REGISTERED` takes the waker and wakes it (the handle's waker
//!   is woken once); a finish that finds it clear leaves the cell to the
//!   handle, which sees the finish when it tries to register (as a lock
//!   request's grant does, `strand::guarded`);
//! - `ABORT`: the handle asked for the work to be dropped unrun; the
//!   runner, when it gets there, drops it and finishes `CANCELLED`. A
//!   handle says `Cancelled` only then, after the work was dropped. An
//!   abort that lands once the work started changes nothing: its result
//!   stands, as a task's finishing poll wins over an abort;
//! - `HANDLE`: the `JoinHandle` exists. Whoever clears it or finishes last
//!   disposes of a result nobody will read: the finish if `HANDLE` was
//!   already clear, the handle's drop if the work had finished and the
//!   handle had not read it (the handle keeps that itself). Both happen on
//!   the state word, so exactly one does;
//! - the reference count (from bit 8): the handle, the queue (until the
//!   work is finished) and each `AbortHandle` hold one; the last frees the
//!   allocation.
//!
//! The loom models `finish_vs_register_vs_drop` and `abort_vs_start`
//! below check them.

use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::ptr::NonNull;
use std::task::{Context, Poll, Waker};

use super::fault::report;
use super::reporting_panics;
use crate::admission::Sink;
use crate::dump::lock::{LockBook, LockKind};
use crate::error::{Panic, PanicPayload, TaskError};
use crate::loom::{AtomicU64, AtomicUsize, Ordering::*, UnsafeCell};
use crate::task_id::TaskId;

const PHASE: usize = 0b11;
const QUEUED: usize = 0;
const DONE: usize = 2;
const CANCELLED: usize = 3;
const REGISTERED: usize = 1 << 2;
const ABORT: usize = 1 << 3;
const HANDLE: usize = 1 << 5;
const REF: usize = 1 << 8;

fn finished(state: usize) -> bool {
    state & PHASE >= DONE
}

/// What every completion has, whatever its result's type: the part an
/// [`AbortHandle`](super::AbortHandle) and a dump reach.
#[repr(C)]
pub(crate) struct Common {
    state: AtomicUsize,
    waker: UnsafeCell<Option<Waker>>,
    pub(crate) id: TaskId,
    pub(crate) location: &'static Location<'static>,
    /// The id of the task that runs the work (a strand's runner), written
    /// before it starts: what the work waits on while it runs is noted in
    /// that task, so a dump follows a wait on the work to it.
    runner: AtomicU64,
    /// The book of the strand the work is queued on, and what kind of lock
    /// it is: alive while the handle is, which holds the strand.
    pub(crate) book: NonNull<LockBook>,
    pub(crate) kind: fn() -> LockKind,
    /// Where a panic nobody reads goes, stored by the runner before it
    /// finishes with one (see `finish`).
    sink: UnsafeCell<Option<Sink>>,
    /// Frees the whole allocation, given this part's address.
    free: unsafe fn(NonNull<Common>),
}

// SAFETY: the cells are handed between threads by the state word (see the
// ground rules), with release/acquire on each hand-over; `book` is only
// read (a `LockBook` is `Sync`) while the handle keeps it alive.
unsafe impl Send for Common {}
// SAFETY: as above.
unsafe impl Sync for Common {}

/// A completion with its result cell: `repr(C)`, the common part first,
/// so that a pointer to one is a pointer to the other. The work itself
/// comes after, in the allocation the runner made.
#[repr(C)]
pub(crate) struct Completion<R> {
    pub(crate) common: Common,
    out: UnsafeCell<MaybeUninit<Result<R, PanicPayload>>>,
}

impl<R> Completion<R> {
    /// A completion for work queued now, held by the handle and the queue.
    ///
    /// # Safety
    ///
    /// `free` frees the allocation this completion is placed in, given
    /// its address, and drops nothing but the completion's cells; `book`
    /// lives as long as the handle made for it.
    pub(crate) unsafe fn new(
        location: &'static Location<'static>,
        book: &LockBook,
        kind: fn() -> LockKind,
        free: unsafe fn(NonNull<Common>),
    ) -> Self {
        Completion {
            common: Common {
                state: AtomicUsize::new(QUEUED | HANDLE | (2 * REF)),
                waker: UnsafeCell::new(None),
                id: TaskId::next(),
                location,
                runner: AtomicU64::new(0),
                book: NonNull::from(book),
                kind,
                sink: UnsafeCell::new(None),
                free,
            },
            out: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// For the runner, the task `runner`: `true` if the work should run now;
    /// `false` if it was aborted, and must be dropped and then finished
    /// with [`finish_cancelled`](Self::finish_cancelled). A load, not a
    /// read-modify-write: an abort that comes after it is too late.
    pub(crate) fn start(&self, runner: Option<TaskId>) -> bool {
        if self.common.state.load(Relaxed) & ABORT != 0 {
            return false;
        }
        self.common
            .runner
            .store(runner.map_or(0, TaskId::as_u64), Relaxed);
        true
    }

    /// For the runner, after the work ran: puts the result in place and
    /// finishes. `sink` says where a panic nobody reads goes; it is asked
    /// only for one: a panic of the work is stored with its result, for
    /// the handle's drop to report; a value whose `Drop` panics where
    /// nobody reads it is reported where it is dropped (the runner's sink,
    /// or the sink of the task dropping the handle).
    pub(crate) fn finish(&self, result: Result<R, PanicPayload>, sink: impl Fn() -> Option<Sink>) {
        if result.is_err() {
            // SAFETY: not finished: the sink cell is the runner's.
            unsafe { self.common.sink.with_mut(|s| *s = sink()) };
        }
        // SAFETY: not finished: nobody else touches the result cell.
        unsafe {
            self.out.with_mut(|o| {
                o.write(result);
            })
        };
        if self.common.end(DONE) & HANDLE == 0 {
            // Detached before the finish: nobody will read it.
            // SAFETY: finished `DONE` by this thread, and no handle.
            unsafe { self.dispose(sink) };
        }
    }

    /// For the runner: the work was dropped unrun.
    pub(crate) fn finish_cancelled(&self) {
        self.common.end(CANCELLED);
    }

    /// Takes the result out.
    ///
    /// # Safety
    ///
    /// The work finished `DONE`, and the caller saw it with acquire; the
    /// result is taken once: by the handle reading it, or by whoever
    /// disposes of it (see the ground rules).
    unsafe fn take(&self) -> Result<R, PanicPayload> {
        // SAFETY: the caller's contract: the cell holds the result, which
        // this call alone moves out.
        unsafe { self.out.with_mut(|o| o.assume_init_read()) }
    }

    /// Drops a result nobody will read; a panic in it goes to the sink the
    /// runner stored, and a panic in dropping a value to `fallback`'s.
    ///
    /// # Safety
    ///
    /// As for [`take`](Self::take).
    unsafe fn dispose(&self, fallback: impl FnOnce() -> Option<Sink>) {
        // SAFETY: the caller's contract.
        let payload = match unsafe { self.take() } {
            Ok(value) => catch_unwind(AssertUnwindSafe(move || drop(value))).err(),
            Err(payload) => Some(payload),
        };
        if let Some(payload) = payload {
            // SAFETY: finished: the runner stored the sink (for a panic of
            // the work) before it finished, and nobody writes it after.
            let sink = unsafe { self.common.sink.with_mut(Option::take) }.or_else(fallback);
            report(sink.as_ref(), payload);
        }
    }

    /// For the handle: the result once finished; otherwise registers
    /// `cx`'s waker for the finish to wake.
    ///
    /// User code runs here (cloning and dropping wakers) and may panic:
    /// the new waker is cloned before anything changes, and the old one
    /// is dropped only once the new one is registered.
    ///
    /// # Safety
    ///
    /// Called by the handle, and never again once it returned `Ready`.
    pub(crate) unsafe fn poll(&self, cx: &mut Context<'_>) -> Poll<Result<R, TaskError>> {
        let mut state = self.common.state.load(Acquire);
        if finished(state) {
            return Poll::Ready(self.read(state));
        }
        let waker = cx.waker().clone();
        // Polled again: take the cell back first. A finish that wins this
        // race has taken the old waker.
        while state & REGISTERED != 0 {
            match self.common.state.compare_exchange_weak(
                state,
                state & !REGISTERED,
                Acquire,
                Acquire,
            ) {
                Ok(_) => state &= !REGISTERED,
                Err(now) if finished(now) => return Poll::Ready(self.read(now)),
                Err(now) => state = now,
            }
        }
        // SAFETY: `REGISTERED` is clear and the work not finished (or
        // finished after finding it clear, so leaving the cell alone): the
        // cell is the handle's.
        let old = unsafe { self.common.waker.with_mut(|slot| slot.replace(waker)) };
        loop {
            // Release publishes the waker to the finish.
            match self.common.state.compare_exchange_weak(
                state,
                state | REGISTERED,
                Release,
                Acquire,
            ) {
                Ok(_) => break,
                Err(now) if finished(now) => {
                    drop(old);
                    return Poll::Ready(self.read(now));
                }
                Err(now) => state = now,
            }
        }
        drop(old);
        Poll::Pending
    }

    /// The handle's reading of a finished work, `state` read with
    /// acquire; once (see `poll`).
    fn read(&self, state: usize) -> Result<R, TaskError> {
        match state & PHASE {
            // SAFETY: finished `DONE`, seen with acquire; the handle reads
            // once, and nobody disposes of it while the handle exists.
            DONE => unsafe { self.take() }.map_err(|p| TaskError::Panicked(Panic::new(p))),
            _ => Err(TaskError::Cancelled),
        }
    }

    /// For the handle's drop: from now on nobody reads the result; if the
    /// work finished and the handle did not read it (`read`), its result
    /// is disposed of here. Gives up the handle's reference: one
    /// read-modify-write for a handle that read its result.
    ///
    /// # Safety
    ///
    /// Called once, by the handle, which then never touches `this` again.
    pub(crate) unsafe fn detach(this: NonNull<Completion<R>>, read: bool) {
        if read {
            // SAFETY: the handle's reference, given up once, with `HANDLE`
            // (set, so subtracting it clears it).
            return unsafe { Common::release_with(this.cast(), HANDLE) };
        }
        // SAFETY: the handle's reference keeps it alive until the release.
        let me = unsafe { this.as_ref() };
        let state = me.common.state.fetch_and(!HANDLE, AcqRel);
        if state & PHASE == DONE {
            // SAFETY: finished `DONE` (acquire), unread, and the finish
            // saw `HANDLE` set, so left it to this drop.
            unsafe { me.dispose(super::current_task_sink) };
        }
        // SAFETY: the handle's reference, given up once.
        unsafe { Common::release(this.cast()) };
    }
}

impl Common {
    /// The finish: the phase becomes `phase` and `REGISTERED` is cleared;
    /// a registered waker is woken. Returns the state before.
    fn end(&self, phase: usize) -> usize {
        let mut state = self.state.load(Relaxed);
        loop {
            debug_assert!(!finished(state));
            let new = (state & !(PHASE | REGISTERED)) | phase;
            // Release publishes the result; acquire takes the waker the
            // handle stored before it set `REGISTERED`.
            match self
                .state
                .compare_exchange_weak(state, new, AcqRel, Relaxed)
            {
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        if state & REGISTERED != 0 {
            // SAFETY: the finish cleared `REGISTERED` (acquiring the
            // handle's release): the cell is the finisher's.
            let waker = unsafe { self.waker.with_mut(Option::take) };
            if let Some(w) = waker {
                // The runner goes on after this: a panicking waker must not
                // unwind through it.
                reporting_panics(|| w.wake());
            }
        }
        state
    }

    /// Asks for the work to be dropped unrun, if it has not started.
    pub(crate) fn abort(&self) {
        self.state.fetch_or(ABORT, Relaxed);
    }

    /// The task running the work, while it runs (a dump's reading).
    pub(crate) fn run_by(&self) -> Option<TaskId> {
        let runner = TaskId::from_u64(self.runner.load(Relaxed));
        runner.filter(|_| !finished(self.state.load(Acquire)))
    }

    /// `true` once the work ran or was dropped.
    pub(crate) fn is_finished(&self) -> bool {
        finished(self.state.load(Acquire))
    }

    /// One more reference (an `AbortHandle`'s). Aborts the process if the
    /// count would overflow, as `Arc` does (only `mem::forget` in a loop
    /// gets there).
    pub(crate) fn acquire(&self) {
        if self.state.fetch_add(REF, Relaxed) > usize::MAX >> 1 {
            std::process::abort();
        }
    }

    /// Gives up a reference; the last frees the allocation.
    ///
    /// # Safety
    ///
    /// The caller holds a reference, given up here once, and does not
    /// touch `this` afterwards.
    pub(crate) unsafe fn release(this: NonNull<Common>) {
        // SAFETY: the caller's contract.
        unsafe { Common::release_with(this, 0) }
    }

    /// [`release`](Self::release), clearing the set `bits` in the same
    /// read-modify-write.
    ///
    /// # Safety
    ///
    /// As for `release`; `bits` are set.
    unsafe fn release_with(this: NonNull<Common>, bits: usize) {
        // SAFETY: the caller's reference keeps it alive until here.
        let state = unsafe { this.as_ref() }.state.fetch_sub(REF + bits, AcqRel);
        if state >> 8 == 1 {
            // SAFETY: the last reference: nothing else reaches the
            // allocation, and `free` is its own (see `Completion::new`).
            let free = unsafe { this.as_ref() }.free;
            // A waker left in the cell (a handle's last one, if a finish
            // raced its registration) is dropped here, on whatever thread
            // lets go last: a runner must not unwind from its `Drop`.
            // SAFETY: as above.
            reporting_panics(|| unsafe { free(this) });
        }
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::dump::lock::LockKind;
    use crate::loom::wakes;
    use crate::loom::Arc;
    use loom::thread;

    /// A result that counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    std::thread_local! {
        /// How many completions this test's models freed (loom runs a
        /// model's threads on the test's own thread).
        static FREED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn freed() -> usize {
        FREED.with(std::cell::Cell::get)
    }

    unsafe fn free(common: NonNull<Common>) {
        FREED.with(|f| f.set(f.get() + 1));
        // SAFETY: every completion of these models is a box of this type.
        drop(unsafe { Box::from_raw(common.cast::<Completion<Counted>>().as_ptr()) });
    }

    fn completion(book: &LockBook) -> NonNull<Completion<Counted>> {
        // SAFETY: `free` frees the box; the book outlives the model's run.
        let done = Box::new(unsafe {
            Completion::new(Location::caller(), book, || LockKind::Strand, free)
        });
        NonNull::from(Box::leak(done))
    }

    /// The shares of one completion, sendable to the models' threads.
    #[derive(Clone, Copy)]
    struct Ptr(NonNull<Completion<Counted>>);
    // SAFETY: the completion's protocol is what the models check.
    unsafe impl Send for Ptr {}

    /// The runner finishes while the handle registers its waker, reads (if
    /// it was in time) and drops: the result is dropped once, by whoever
    /// took it; the handle's waker is woken at most once, and only if the
    /// handle saw `Pending`; the completion is freed once.
    #[test]
    fn finish_vs_register_vs_drop() {
        loom::model(|| {
            let book = std::sync::Arc::new(LockBook::new(Location::caller(), false));
            let freed_before = freed();
            let drops = Arc::new(AtomicUsize::new(0));
            let done = Ptr(completion(&book));
            let runner = {
                let drops = drops.clone();
                thread::spawn(move || {
                    let done = done;
                    // SAFETY: the queue's reference, held until the release.
                    let me = unsafe { done.0.as_ref() };
                    assert!(me.start(None));
                    me.finish(Ok(Counted(drops)), || None);
                    // SAFETY: the queue's reference, given up once.
                    unsafe { Common::release(done.0.cast()) };
                })
            };
            let (wakes, waker) = wakes::counter();
            // SAFETY: the handle's reference, held until `detach`; its
            // one poll.
            let polled = unsafe { done.0.as_ref().poll(&mut Context::from_waker(&waker)) };
            let pending = polled.is_pending();
            if let Poll::Ready(result) = polled {
                assert!(result.is_ok());
            }
            // SAFETY: the handle's reference, given up once.
            unsafe { Completion::detach(done.0, !pending) };
            runner.join().unwrap();
            assert_eq!(drops.load(SeqCst), 1, "the result dropped once");
            assert!(
                wakes.get() <= usize::from(pending),
                "woken only if it waited"
            );
            assert_eq!(freed(), freed_before + 1, "freed once");
        });
    }

    /// The handle aborts while the runner reaches the work: it runs or is
    /// dropped unrun, and the handle reads which, after the fact; an
    /// `AbortHandle`'s reference keeps the completion until it goes.
    #[test]
    fn abort_vs_start() {
        loom::model(|| {
            let book = std::sync::Arc::new(LockBook::new(Location::caller(), false));
            let drops = Arc::new(AtomicUsize::new(0));
            let done = Ptr(completion(&book));
            // SAFETY: the handle's reference keeps it alive meanwhile.
            let common = unsafe { &done.0.as_ref().common };
            common.acquire(); // an abort handle's
            let aborter = {
                let done = done;
                thread::spawn(move || {
                    let done = done;
                    // SAFETY: the abort handle's reference.
                    let common = unsafe { &done.0.as_ref().common };
                    common.abort();
                    // SAFETY: the abort handle's reference, given up once.
                    unsafe { Common::release(done.0.cast()) };
                })
            };
            let ran = {
                // SAFETY: the queue's reference.
                let me = unsafe { done.0.as_ref() };
                let ran = me.start(None);
                if ran {
                    me.finish(Ok(Counted(drops.clone())), || None);
                } else {
                    me.finish_cancelled();
                }
                // SAFETY: the queue's reference, given up once.
                unsafe { Common::release(done.0.cast()) };
                ran
            };
            let freed_before = freed();
            aborter.join().unwrap();
            let (_, waker) = wakes::counter();
            // SAFETY: the handle's reference; its one poll.
            let read = unsafe { done.0.as_ref().poll(&mut Context::from_waker(&waker)) };
            match read {
                Poll::Ready(Ok(value)) => {
                    assert!(ran);
                    drop(value);
                }
                Poll::Ready(Err(e)) => assert!(!ran && e.is_cancelled()),
                Poll::Pending => panic!("finished, yet pending"),
            }
            // SAFETY: the handle's reference, given up once; it read.
            unsafe { Completion::detach(done.0, true) };
            assert_eq!(drops.load(SeqCst), usize::from(ran));
            assert_eq!(freed(), freed_before + 1, "freed once, by the last");
        });
    }
}
