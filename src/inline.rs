//! [`Inline`]: run on the thread that schedules.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::LazyLock;

use crate::executor::Runnable;
use crate::executor::{Exec, Executor, Internal, Own};

/// Runs each runnable right away, on the thread that schedules it.
///
/// Re-entrant scheduling (a task that wakes itself, a continuation completing
/// another) goes through a per-thread trampoline: the outermost `schedule`
/// on a thread runs a loop and the nested ones only queue, so a
/// million-step chain runs in constant stack.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, Inline};
///
/// let here = std::thread::current().id();
/// let h = Inline.run(move || std::thread::current().id() == here);
/// assert!(h.is_finished()); // it already ran, inside `run`
/// assert!(block_on(h).unwrap());
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Inline;

thread_local! {
    /// `Some` while an outermost `Inline::schedule` runs on this thread.
    static TRAMPOLINE: RefCell<Option<VecDeque<Runnable>>> = const { RefCell::new(None) };
}

/// Clears the trampoline even if a runnable unwinds, so the thread's next
/// `schedule` starts a fresh loop; runnables still queued are dropped,
/// which cancels their tasks.
struct Exit;

impl Drop for Exit {
    fn drop(&mut self) {
        let left = TRAMPOLINE.with(|t| t.borrow_mut().take());
        drop(left);
    }
}

/// Runs one runnable queued on this thread's trampoline, if an outer
/// `Inline::schedule` is running it. For a `block_on` inside an `Inline`
/// task: what it waits for may be queued right here, behind the task that
/// blocks.
pub(crate) fn run_one_queued() -> bool {
    let next = TRAMPOLINE.with(|t| t.borrow_mut().as_mut().and_then(VecDeque::pop_front));
    match next {
        Some(runnable) => {
            runnable.run();
            true
        }
        None => false,
    }
}

/// `true` if this thread's trampoline has runnables queued.
pub(crate) fn has_queued() -> bool {
    TRAMPOLINE.with(|t| t.borrow().as_ref().is_some_and(|q| !q.is_empty()))
}

impl Executor for Inline {
    fn schedule(&self, runnable: Runnable) {
        let nested = TRAMPOLINE.with(|t| match &mut *t.borrow_mut() {
            Some(queue) => {
                queue.push_back(runnable);
                None
            }
            slot @ None => {
                *slot = Some(VecDeque::new());
                Some(runnable)
            }
        });
        let Some(first) = nested else { return };
        let _exit = Exit;
        first.run();
        while run_one_queued() {}
    }
    fn own(&self, _: Internal) -> Option<&dyn Own> {
        Some(self)
    }
}

impl Own for Inline {
    fn home(&self) -> Option<Exec> {
        static INLINE: LazyLock<Exec> = LazyLock::new(|| Exec::boxed(Inline));
        Some(INLINE.clone())
    }
}
