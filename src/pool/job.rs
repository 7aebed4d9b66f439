//! What the pool's queues hold: task runnables, and the stack-allocated
//! halves of `join` (rayon's stack jobs), which need no heap allocation.

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread;

use crate::executor::Runnable;

/// One unit of work in a queue.
pub(crate) enum Job {
    Task(Runnable),
    Fork(JobRef),
}

impl Job {
    pub(crate) fn run(self) {
        match self {
            Job::Task(r) => {
                r.run();
            }
            // SAFETY: a `JobRef` in a queue points at a live `StackJob`: its
            // owner does not return (and so does not pop the job off its
            // stack) before the job's latch is set, which happens only at the
            // end of `execute`.
            Job::Fork(j) => unsafe { j.execute() },
        }
    }
}

/// A type-erased pointer to a [`StackJob`] and the function that runs it.
#[derive(Clone, Copy)]
pub(crate) struct JobRef {
    ptr: *const (),
    execute: unsafe fn(*const ()),
}

// SAFETY: a `JobRef` is sent to the thread that runs the job. The `StackJob`
// it points at is `Sync` for the parts that thread touches (its closure is
// `Send` and taken once, its result slot is written once before the latch
// is set) and outlives the run, see `Job::run`.
unsafe impl Send for JobRef {}

/// Two refs are the same job if they point at the same `StackJob`.
impl PartialEq for JobRef {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.ptr, other.ptr)
    }
}

impl JobRef {
    /// # Safety
    ///
    /// The job this points at must be alive and not yet executed.
    pub(crate) unsafe fn execute(self) {
        // SAFETY: forwarded from the caller.
        unsafe { (self.execute)(self.ptr) }
    }
}

/// Something a [`StackJob`] signals when its result is in.
pub(crate) trait Latch {
    /// Sets the latch. After this returns, or even during it once the
    /// `done` flag is stored, the job (and the latch in it) may be gone.
    ///
    /// # Safety
    ///
    /// `this` must point at a live latch; it is only valid until the
    /// latch's flag is set.
    unsafe fn set(this: *const Self);
}

/// A closure and the slot for its result, living on the stack of the
/// thread that waits for it.
pub(crate) struct StackJob<L, F, R> {
    pub(crate) latch: L,
    func: UnsafeCell<Option<F>>,
    result: UnsafeCell<Option<thread::Result<R>>>,
}

impl<L: Latch, F: FnOnce() -> R + Send, R: Send> StackJob<L, F, R> {
    #[inline]
    pub(crate) fn new(latch: L, func: F) -> Self {
        StackJob {
            latch,
            func: UnsafeCell::new(Some(func)),
            result: UnsafeCell::new(None),
        }
    }

    #[inline]
    pub(crate) fn as_job_ref(&self) -> JobRef {
        JobRef {
            ptr: self as *const Self as *const (),
            execute: Self::execute,
        }
    }

    /// # Safety
    ///
    /// `ptr` comes from `as_job_ref` of a live job that has not run yet.
    unsafe fn execute(ptr: *const ()) {
        // SAFETY: per the contract, `ptr` is a live `StackJob` of this type;
        // only this call touches `func` and `result` until the latch is set,
        // and the owner reads them only after that.
        unsafe {
            let this = &*(ptr as *const Self);
            let func = (*this.func.get()).take().expect("a stack job runs once");
            *this.result.get() = Some(catch_unwind(AssertUnwindSafe(func)));
            L::set(&this.latch);
        }
    }

    /// Runs the job on the owner's thread (it was not stolen). A panic
    /// propagates as is: nothing else waits for this job.
    ///
    /// Borrows rather than consumes the job: moving it out would copy the
    /// whole job (latch and result slot too) on fork-join's hottest path,
    /// in wide loads that cannot be forwarded from the narrow stores that
    /// just wrote it.
    #[inline]
    pub(crate) fn run_inline(&mut self) -> R {
        let func = self.func.get_mut().take().expect("a stack job runs once");
        func()
    }

    /// The result, once the latch is set.
    #[inline]
    pub(crate) fn into_result(self) -> thread::Result<R> {
        self.result
            .into_inner()
            .expect("the latch is set after the result")
    }
}
