//! The viaduct task being polled on this thread, as the thread's context
//! holds it: set by the poll wrapper (`context::enter_poll`, with
//! [`task_id`]) for the length of one poll, read by
//! whatever that poll runs (a hop, a lock's wait, a section, a panic that
//! must not unwind).

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Waker;

use super::fault::report;
use crate::admission::Sink;
use crate::dump::records::{Noted, WaitKey, WaitOn};
use crate::executor::TaskInfo;
use crate::task_id::TaskId;

/// This thread's current task, in its context: the metadata's address and
/// the data pointer of the waker it is polled with.
#[inline]
fn current<R>(f: impl FnOnce(&Cell<(*const (), *const ())>) -> R) -> R {
    crate::context::with(|c| f(&c.task))
}

/// Runs `f` with the metadata of the viaduct task being polled on this
/// thread, if any.
#[inline]
pub(crate) fn with_current_task<R>(f: impl FnOnce(Option<&TaskInfo>) -> R) -> R {
    let ptr: *const TaskInfo = current(Cell::get).0.cast();
    // SAFETY: the pointer is set only by `context::enter_poll`, for the
    // duration of a poll of its task, and restored (by its guard) before
    // that poll returns; while the task is being polled its allocation, metadata
    // included, is alive.
    f(unsafe { ptr.as_ref() })
}

/// Like [`with_current_task`], but only if `waker` is the task's own: a
/// future polled with another waker (under a `block_on`, or inside a
/// combinator that wakes its parts separately) is not the task itself, and
/// waking the task would not be what resumes that future.
pub(crate) fn with_task_polled_by<R>(waker: &Waker, f: impl FnOnce(Option<&TaskInfo>) -> R) -> R {
    let (info, polled_by) = current(Cell::get);
    if polled_by != waker.data() {
        return f(None);
    }
    // SAFETY: as in `with_current_task`.
    f(unsafe { info.cast::<TaskInfo>().as_ref() })
}

/// Where a panic of the viaduct task being polled on this thread goes if
/// nobody reads it (its executor's panic hook), if there is such a task.
/// Read at the moment of asking: a hop may have replaced the admission
/// since the poll began.
pub(crate) fn current_task_sink() -> Option<Sink> {
    // SAFETY: this thread polls the task, so it is the one that may touch
    // its admission.
    with_current_task(|t| t.and_then(|info| unsafe { info.admission() }.sink()))
}

/// Runs `f`, a user's code (a waker, a `Drop`) called where a panic must
/// not unwind: a panic goes where the polled task's unread panic would
/// ([`current_task_sink`]), or is dropped.
pub(crate) fn reporting_panics(f: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        report(current_task_sink().as_ref(), payload);
    }
}

/// Lists the viaduct task being polled on this thread, if any, in the
/// dump records of the pool worker it runs on while its poll blocks (a
/// `block_on`, a scope's wait), so that a dump shows it and what it waits
/// on.
pub(crate) fn list_current_while_blocked() {
    with_current_task(|t| {
        if let Some(info) = t {
            crate::dump::records::list_while_blocked(&info.record);
        }
    });
}

/// Notes in the viaduct task being polled on this thread, if any, that it
/// waits on what `what` says, for dumps (see [`Noted`]).
#[inline]
pub(crate) fn note_wait(noted: &mut Noted, key: WaitKey, what: impl FnOnce() -> WaitOn) {
    with_current_task(|t| noted.waiting(t.map(|t| (&t.record, || t.rare_record())), key, what));
}

/// The viaduct task being polled on this thread, by address (null if
/// none): its identity for [`section`](crate::section).
#[inline]
pub(crate) fn current_task_id() -> *const () {
    current(Cell::get).0
}

/// The id of the viaduct task being polled on this thread, if any.
#[inline]
pub(crate) fn current_task() -> Option<TaskId> {
    with_current_task(|t| t.map(|t| t.record.id))
}

/// A task's identity for [`section`](crate::section) and for the fault
/// protocol: the address of its metadata.
pub(crate) fn task_id(info: &TaskInfo) -> *const () {
    info as *const TaskInfo as *const ()
}
