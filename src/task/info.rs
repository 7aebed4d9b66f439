//! A task's metadata: everything viaduct keeps beside a task's future in
//! its async-task allocation, and what an executor sees of it
//! ([`TaskInfo`](crate::TaskInfo)).
//!
//! Generic over the handle of the executor the task is scheduled on (an
//! `Exec`) and the runnable that may wait in line behind it, so that it
//! knows nothing of executors: `executor.rs` wraps the one kind every
//! viaduct task has in `TaskInfo`, the face an executor sees.

use std::cell::UnsafeCell;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::fault::FaultSlot;
use crate::admission::Admission;
use crate::error::RejectReason;
use crate::successor::{Parkable, Successor};
use crate::task_id::TaskKind;
use crate::watch::TaskRecord;

/// A task's metadata, generic over the handle of its executor (`H`, an
/// `Exec`) and its runnable (`R`), so that it names neither: every viaduct
/// task's is the one inside a [`TaskInfo`](crate::TaskInfo).
pub struct Metadata<H, R: Parkable> {
    /// What stall reports and dumps read of the task. First, so that the
    /// task leaves its worker's book before any other field is dropped.
    pub(crate) record: TaskRecord,
    pub(crate) home: H,
    /// Set by `hop_to`; read by `schedule`. `hopped` lets the common case
    /// skip the lock.
    pub(crate) hop: Mutex<Option<H>>,
    pub(crate) hopped: AtomicBool,
    pub(crate) yielded: AtomicBool,
    /// Set by `abort`: the task's next poll drops its future instead.
    pub(crate) aborted: AtomicBool,
    /// Set once the task's future has been dropped: the task is over.
    pub(crate) done: AtomicBool,
    /// Why the task ended inside its executor's `schedule`, if it did.
    pub(crate) fault: FaultSlot,
    /// Who counts the task: released when its future is dropped. Touched
    /// only by whoever holds the task's runnable (see the `Sync` impl).
    pub(crate) admission: UnsafeCell<Admission>,
    /// The next item while the runnable sits in a strand's queue: the
    /// queue is intrusive, so submitting to a strand allocates nothing
    /// (see `strand::queue`). A runnable is in one queue at a time.
    pub(crate) strand_link: AtomicUsize,
    /// The step waiting in line behind the task's first poll, if any (see
    /// `successor`).
    pub(crate) successor: Successor<R>,
}

impl<H: Clone, R: Parkable> Metadata<H, R> {
    /// The executor the task is scheduled on now.
    pub(crate) fn executor(&self) -> H {
        if self.hopped.load(Ordering::Acquire) {
            if let Some(ex) = crate::loom::lock_std(&self.hop).as_ref() {
                return ex.clone();
            }
        }
        self.home.clone()
    }

    /// Moves the task: its next schedule goes to `ex`.
    pub(crate) fn set_executor(&self, ex: H) {
        *crate::loom::lock_std(&self.hop) = Some(ex);
        self.hopped.store(true, Ordering::Release);
    }

    /// Runs `f` with the executor the task is scheduled on now, cloning it
    /// only when the task has hopped.
    #[inline]
    pub(crate) fn with_executor<T>(&self, f: impl FnOnce(&H) -> T) -> T {
        if self.hopped.load(Ordering::Acquire) {
            // Unlocked before `f` runs: `f` schedules the task, which may
            // then run, and hop again, before `f` returns.
            let hop = crate::loom::lock_std(&self.hop).clone();
            if let Some(ex) = hop {
                return f(&ex);
            }
        }
        f(&self.home)
    }
}

// SAFETY: every field but `admission` and the record's booking is `Sync`. Those two
// are read and written only by the thread that holds the task's runnable
// (and `booking` by its `Drop`, once none does): the schedule
// function and the executor's `schedule` it calls (which are handed the
// runnable), the task's poll (`Runnable::run`) and the drop of its future
// (by `run`, or by dropping the runnable). async-task lets one thread hold
// the runnable at a time and hands it over with release/acquire on the
// task's state, so those accesses never overlap and each sees the last.
unsafe impl<H: Send + Sync, R: Parkable + Send> Sync for Metadata<H, R> {}

impl<H, R: Parkable> Metadata<H, R> {
    /// # Safety
    ///
    /// The caller holds the task's runnable, or polls or drops its future.
    pub(crate) unsafe fn admission(&self) -> &Admission {
        // SAFETY: the caller's contract makes this the only access.
        unsafe { &*self.admission.get() }
    }

    /// # Safety
    ///
    /// As for [`admission`](Self::admission).
    pub(crate) unsafe fn replace_admission(&self, admission: Admission) -> Admission {
        // SAFETY: the caller's contract makes this the only access.
        unsafe { std::mem::replace(&mut *self.admission.get(), admission) }
    }

    /// Moves the task: its next schedule goes to `ex`, which counts it by
    /// `admission` from now on (the old admission is released).
    ///
    /// # Safety
    ///
    /// The caller is polling the task.
    pub(crate) unsafe fn move_to(&self, ex: H, admission: Admission)
    where
        H: Clone,
    {
        // SAFETY: the caller polls the task, so holds its runnable.
        drop(unsafe { self.replace_admission(admission) });
        self.set_executor(ex);
    }

    /// Marks the task refused by the executor it was scheduled on, before
    /// its runnable is dropped: its handle says `Rejected(reason)`.
    pub(crate) fn refuse(&self, reason: RejectReason) {
        self.fault.refuse(reason);
    }
}

impl<H, R: Parkable> Metadata<H, R> {
    /// For an executor that counts its tasks, in its `schedule`: if nobody
    /// counts the task of `runnable` yet (a user's executor admitted it and
    /// forwarded it here), count it in with `admit`. If that fails, the task is
    /// refused: its handle says `Rejected`, and its runnable is dropped.
    pub(crate) fn adopt<M: Deref<Target = Self>>(
        runnable: async_task::Runnable<M>,
        admit: impl FnOnce() -> Result<Admission, RejectReason>,
    ) -> Option<async_task::Runnable<M>> {
        let info = runnable.metadata();
        // A runnable holds its future, which keeps the task unfinished.
        debug_assert!(
            !info.done.load(Ordering::Relaxed),
            "a finished task scheduled"
        );
        // SAFETY: we hold the runnable.
        // viaduct's own machinery (strand runners, priority pumps) must not
        // keep a closed pool alive: nobody counts it.
        if !unsafe { info.admission() }.is_uncounted() || info.record.kind != TaskKind::Spawned {
            return Some(runnable);
        }
        match admit() {
            Ok(admission) => {
                // SAFETY: we hold the runnable.
                drop(unsafe { info.replace_admission(admission) });
                Some(runnable)
            }
            Err(reason) => {
                info.refuse(reason);
                drop(runnable);
                None
            }
        }
    }
}

impl<H, M> Metadata<H, async_task::Runnable<M>> {
    /// Lets the step waiting in line behind this task's first poll go to
    /// its executor, if one is, and lets no other wait there from now on.
    #[inline]
    pub(crate) fn close_line(&self) {
        if let Some(next) = self.successor.seal() {
            next.schedule();
        }
    }
}
