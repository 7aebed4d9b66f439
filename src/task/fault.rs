//! Faults: what happens when user code panics where viaduct cannot let it
//! unwind, in one place.
//!
//! - **A task's future or output panics in `Drop`.** The future is held
//!   in a [`DropOnce`] and the value in a [`Value`]: the panic is caught
//!   and goes where the task's unread panic would ([`report`]: the
//!   executor's panic hook, or nowhere).
//! - **A detached task panics.** Its [`Failure`] reaches nobody, and its
//!   drop reports the payload the same way.
//! - **An executor's `schedule` panics, or refuses the task.** The task's
//!   schedule function runs `schedule` inside [`catching`]. If the
//!   task's future was dropped during that call (the executor threw the
//!   runnable away, perhaps as it unwound), the task is over, and its
//!   [`FaultSlot`] says why: the handle first waits for the call to end
//!   (`Fault::Unwinding`), then reads the panic, or a plain cancellation
//!   if the call returned. An executor that counts its tasks and refuses
//!   one forwarded to it records the refusal first
//!   ([`FaultSlot::refuse`]), and the handle says `Rejected`. If the
//!   executor kept the runnable, the task lives on and the panic is only
//!   printed (by std's hook).
//!
//! Nothing here unwinds: it runs where async-task aborts the process on a
//! panic (a waker, the drop of a detached task's output or future).

use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use crate::admission::Sink;
use crate::error::{drop_payload, Panic, PanicPayload, RejectReason, TaskError};

/// Why a task ended inside its own executor's `schedule`, for its handle.
enum Fault {
    /// Its future was dropped unfinished during that call, which has not
    /// returned yet (it may be unwinding). A handle polled meanwhile waits
    /// here.
    Unwinding {
        sink: Option<Sink>,
        waiter: Option<Waker>,
    },
    /// The panic, for the handle; reported to the sink if the handle never
    /// takes it (when the task is freed).
    Panicked(Failure),
    /// An executor that counts its tasks refused this one when it reached
    /// it through a user's executor.
    Refused(RejectReason),
}

/// A task's fault, if it has one, behind a flag that a task which only
/// hopped reads alone. It lives in the task's rare part, which only a task
/// that hops or faults makes.
#[derive(Default)]
pub(crate) struct FaultSlot {
    faulted: AtomicBool,
    fault: Mutex<Option<Fault>>,
}

impl FaultSlot {
    /// The task's future was dropped unfinished inside its own executor's
    /// `schedule` (the executor refused or threw away the runnable, perhaps
    /// as that `schedule` panics): its handle waits for that call to end,
    /// to tell a panic from a plain cancellation. A refusal recorded
    /// already stands.
    pub(crate) fn began(&self, sink: Option<Sink>) {
        let mut fault = crate::loom::lock_std(&self.fault);
        if fault.is_none() {
            *fault = Some(Fault::Unwinding { sink, waiter: None });
            self.faulted.store(true, Ordering::Release);
        }
    }

    /// The `schedule` call during which the future may have been dropped
    /// has ended, with `panicked` if it unwound. Never unwinds itself: it
    /// runs in the schedule function.
    fn ended(&self, panicked: Option<PanicPayload>) {
        if !self.faulted.load(Ordering::Acquire) {
            // The future was not dropped in that call: the executor kept
            // the runnable, the task lives on, and has no use for a payload
            // (std's hook has printed it).
            if let Some(payload) = panicked {
                drop_payload(payload);
            }
            return;
        }
        let mut fault = crate::loom::lock_std(&self.fault);
        let waiter = match fault.as_mut() {
            Some(Fault::Unwinding { sink, waiter }) => {
                let waiter = waiter.take();
                let sink = sink.take();
                *fault = panicked.map(|payload| {
                    Fault::Panicked(Failure {
                        error: Some(TaskError::Panicked(Panic::new(payload))),
                        sink,
                    })
                });
                waiter
            }
            // A refusal, or an earlier outcome: it stands.
            _ => {
                if let Some(payload) = panicked {
                    drop_payload(payload);
                }
                None
            }
        };
        drop(fault);
        if let Some(w) = waiter {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| w.wake())) {
                drop_payload(p);
            }
        }
    }

    /// For a handle whose task was closed without a result: why, if its
    /// executor's `schedule` panicked or refused it (`None`: plain
    /// cancellation).
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Option<Poll<TaskError>> {
        if !self.faulted.load(Ordering::Acquire) {
            return None;
        }
        let mut fault = crate::loom::lock_std(&self.fault);
        match fault.as_mut() {
            Some(Fault::Unwinding { waiter, .. }) => {
                *waiter = Some(cx.waker().clone());
                Some(Poll::Pending)
            }
            Some(Fault::Panicked(failure)) => Some(Poll::Ready(
                failure.error.take().unwrap_or(TaskError::Cancelled),
            )),
            Some(Fault::Refused(reason)) => Some(Poll::Ready(TaskError::Rejected(*reason))),
            None => None,
        }
    }

    /// Marks the task refused by the executor it was scheduled on, before
    /// its runnable is dropped: its handle says `Rejected(reason)`.
    pub(crate) fn refuse(&self, reason: RejectReason) {
        *crate::loom::lock_std(&self.fault) = Some(Fault::Refused(reason));
        self.faulted.store(true, Ordering::Release);
    }
}

/// Runs `schedule`, a call of the executor's `schedule` for the task at
/// address `task`, catching its panic: it must not unwind into async-task
/// (which aborts the process when a waker panics) or a worker's loop
/// (which would die). If the task's future was dropped during the call
/// ([`dropped_while_scheduling`]), the task is over and its handle
/// reports the panic (or, if detached, the executor's panic hook gets
/// it); if the executor kept the runnable, the task lives on and the panic
/// is only printed. `slot` finds the task's fault slot afterwards, if the
/// drop made one.
pub(crate) fn catching<'a>(
    task: *const (),
    slot: impl FnOnce() -> Option<&'a FaultSlot>,
    schedule: impl FnOnce(),
) {
    let outer = crate::context::with(|c| c.scheduling.replace(task));
    let scheduled = catch_unwind(AssertUnwindSafe(schedule));
    crate::context::with(|c| c.scheduling.set(outer));
    match slot() {
        Some(slot) => slot.ended(scheduled.err()),
        // Not dropped in that call: the task lives on, and has no use for
        // a payload (std's hook has printed it).
        None => {
            if let Err(payload) = scheduled {
                drop_payload(payload);
            }
        }
    }
}

/// `true` if this thread is inside [`catching`] for the task at `task`:
/// its future, dropped unfinished now, was dropped by its own executor's
/// `schedule`.
pub(crate) fn dropped_while_scheduling(task: *const ()) -> bool {
    crate::context::with(|c| c.scheduling.get() == task)
}

/// Why a task has no value, on its way to the handle: a caught panic, or the
/// error a continuation carries from the step before it. If the handle is
/// gone (the task was detached), dropping a panic hands the payload to the
/// executor's panic hook, so a detached task never dies silently.
pub(crate) struct Failure {
    pub(crate) error: Option<TaskError>,
    pub(crate) sink: Option<Sink>,
}

impl Failure {
    pub(crate) fn take(mut self) -> TaskError {
        self.error.take().expect("the error is taken once")
    }
}

impl Drop for Failure {
    fn drop(&mut self) {
        if let Some(TaskError::Panicked(p)) = self.error.take() {
            report(self.sink.as_ref(), p.into_payload());
        }
    }
}

/// Hands a panic nobody will read to `sink`, or drops it. Never unwinds:
/// this runs where async-task aborts the process on a panic (dropping a
/// detached task's output or future, freeing a task).
pub(crate) fn report(sink: Option<&Sink>, payload: PanicPayload) {
    match sink {
        Some(sink) => sink.unobserved_panic(payload),
        None => drop_payload(payload),
    }
}

/// A task's value on its way to the handle. If the handle is gone,
/// async-task drops it where a panic would abort the process, so a
/// panicking `Drop` of the value is caught here and reported like a
/// detached task's panic.
pub(crate) struct Value<T> {
    value: ManuallyDrop<T>,
    /// Only for values with drop glue: a `u32` cannot panic when dropped.
    sink: Option<Sink>,
}

impl<T> Value<T> {
    /// `value`, whose `Drop` reports a panic to `sink` (asked for only if
    /// the value has drop glue: a `u32` cannot panic when dropped).
    pub(crate) fn new(value: T, sink: impl FnOnce() -> Option<Sink>) -> Value<T> {
        Value {
            value: ManuallyDrop::new(value),
            sink: if std::mem::needs_drop::<T>() {
                sink()
            } else {
                None
            },
        }
    }

    pub(crate) fn into_inner(self) -> T {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again, so the value is
        // taken out once; the sink is dropped in place, once.
        unsafe {
            std::ptr::drop_in_place(&mut this.sink);
            ManuallyDrop::take(&mut this.value)
        }
    }
}

impl<T> Drop for Value<T> {
    fn drop(&mut self) {
        // SAFETY: dropped once, here; `into_inner` skips this `Drop`.
        let dropped = catch_unwind(AssertUnwindSafe(|| unsafe {
            ManuallyDrop::drop(&mut self.value)
        }));
        if let Err(p) = dropped {
            report(self.sink.as_ref(), p);
        }
    }
}

/// How a task ended, on its way to the handle. The failure is boxed:
/// rare, and five words that every task's allocation would hold room for.
pub(crate) type Outcome<T> = Result<Value<T>, Box<Failure>>;

/// A user's future that its task may drop early (an abort, a scoped task
/// ending), at most once, in place (so it may be pinned), catching a panic
/// of its `Drop`.
pub(crate) struct DropOnce<F> {
    fut: ManuallyDrop<F>,
    /// `false` once `fut` is dropped.
    live: bool,
}

impl<F> DropOnce<F> {
    pub(crate) fn new(fut: F) -> DropOnce<F> {
        DropOnce {
            fut: ManuallyDrop::new(fut),
            live: true,
        }
    }

    /// The future, if it has not been dropped.
    pub(crate) fn as_pin_mut(self: Pin<&mut Self>) -> Option<Pin<&mut F>> {
        // SAFETY: `fut` is structurally pinned: it is never moved, only
        // dropped in place (`drop_now`), and `DropOnce` has no `Unpin` impl.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above; `live` says `fut` has not been dropped.
        this.live
            .then(|| unsafe { Pin::new_unchecked(&mut *this.fut) })
    }

    /// Drops the future now, if it has not been; the panic of its `Drop`,
    /// if any. Dropping in place keeps the pinning promise.
    pub(crate) fn drop_now(&mut self) -> Option<PanicPayload> {
        if !std::mem::take(&mut self.live) {
            return None;
        }
        // SAFETY: `fut` is dropped once (`live` is now false), and never
        // used again.
        catch_unwind(AssertUnwindSafe(|| unsafe {
            ManuallyDrop::drop(&mut self.fut)
        }))
        .err()
    }
}

impl<F> Drop for DropOnce<F> {
    fn drop(&mut self) {
        // Its owners drop the future themselves, to say where a panic
        // goes; one left here has nowhere to go.
        if let Some(payload) = self.drop_now() {
            drop_payload(payload);
        }
    }
}
