//! Dropping the runnables of an executor that will never run them (a
//! pool after it terminated, a `ManualExecutor` nobody holds), where
//! dropping one may schedule another onto the same executor, which drops
//! that one at once too. Nested, such a cascade took a stack frame per
//! task: a long chain of steps on a shut-down pool overflowed a worker's
//! stack. Here the drops a drop sets off on this thread wait for it to
//! return and are then made in a loop.

use std::cell::RefCell;

use crate::executor::Runnable;
use crate::run_queue::RunQueue;

/// Drops `runnable`, cancelling its task; drops it set off wait their
/// turn (see the module docs).
pub(crate) fn drop_runnable(runnable: Runnable) {
    let outer = crate::context::with(|c| c.dropping.get());
    if !outer.is_null() {
        // SAFETY: a non-null pointer in the context is the list of the
        // outer call below on this thread, which outlives this one (it
        // clears the pointer before its list goes).
        let outer = unsafe { &*outer.cast::<RefCell<RunQueue>>() };
        outer.borrow_mut().push_back(runnable);
        return;
    }
    // Linked through the tasks themselves: a cascade allocates nothing.
    let waiting: RefCell<RunQueue> = RefCell::default();
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            crate::context::with(|c| c.dropping.set(std::ptr::null()));
        }
    }
    crate::context::with(|c| {
        c.dropping
            .set((&waiting as *const RefCell<RunQueue>).cast())
    });
    // Declared after `waiting`, so dropped before it: what is left in the
    // list after a panic is dropped with the pointer cleared.
    let _clear = Clear;
    drop(runnable);
    loop {
        // The borrow ends before the drop, which may push onto the list.
        let next = waiting.borrow_mut().pop_front();
        match next {
            Some(runnable) => drop(runnable),
            None => break,
        }
    }
}
