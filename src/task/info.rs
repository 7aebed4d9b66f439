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
use crate::dump::records::{RareRecord, TaskRecord};
use crate::error::RejectReason;
use crate::successor::{Parkable, Successor};
use crate::task_id::TaskKind;

/// The task has been aborted: its next poll drops its future instead (or
/// its executor drops it). Set by anyone, with a read-modify-write, at
/// most once; never cleared.
pub(crate) const ABORTED: u8 = 1;
/// The task's future has been dropped: the task is over. Set once, by
/// whoever drops the future (it holds the runnable), with release, after
/// the future is gone; never cleared. A handle that reads it with acquire
/// finds everything the future held released.
pub(crate) const DONE: u8 = 2;

/// A task's metadata, generic over the handle of its executor (`H`, an
/// `Exec`) and its runnable (`R`), so that it names neither: every viaduct
/// task's is the one inside a [`TaskInfo`](crate::TaskInfo).
pub struct Metadata<H, R: Parkable> {
    /// Who counts the task: released when its future is dropped (or, if
    /// async-task frees the task without dropping it, here, first: a dump
    /// that no longer lists the task must not count it as not started).
    /// Touched only by whoever holds the task's runnable (see the `Sync`
    /// impl).
    pub(crate) admission: UnsafeCell<Admission>,
    /// What stall reports and dumps read of the task.
    pub(crate) record: TaskRecord,
    /// The executor the task was spawned on; a hop moves it elsewhere
    /// (see [`Rare`]).
    pub(crate) home: H,
    /// The next item while the runnable sits in a strand's queue or a
    /// `ManualExecutor`'s: the queues are intrusive, so queueing allocates
    /// nothing (see `strand::queue`, `run_queue`). A runnable is in one
    /// queue at a time.
    pub(crate) queue_link: AtomicUsize,
    /// The step waiting in line behind the task's first poll, if any (see
    /// `successor`).
    pub(crate) successor: Successor<R>,
}

/// What few tasks need, boxed so that the others do not carry it: what a
/// dump lists the task waiting on, where a hop sent the task, and why it
/// ended inside its executor's `schedule`. Made by the first that needs it;
/// its address is in the record's `rare`, which reaches the first field.
#[repr(C)]
struct Rare<H> {
    /// First, at the box's own address (see above).
    record: RareRecord,
    /// Set by `hop_to`; read by `schedule`. `hopped` lets a task that only
    /// faulted skip the lock.
    hop: Mutex<Option<H>>,
    hopped: AtomicBool,
    fault: FaultSlot,
}

impl<H, R: Parkable> Metadata<H, R> {
    /// A new task's metadata: spawned on `home`, counted by `admission`.
    pub(crate) fn new(record: TaskRecord, home: H, admission: Admission) -> Self {
        Metadata {
            admission: UnsafeCell::new(admission),
            record,
            home,
            queue_link: AtomicUsize::new(0),
            successor: Successor::new(),
        }
    }

    /// The rare part, if something has made it.
    #[inline]
    fn rare_if_any(&self) -> Option<&Rare<H>> {
        // SAFETY: a non-null pointer is a `Box<Rare<H>>` installed by
        // `rare`, at the address of its first field, and freed only when
        // the metadata is dropped.
        unsafe {
            self.record
                .rare
                .load(Ordering::Acquire)
                .cast::<Rare<H>>()
                .as_ref()
        }
    }

    /// The rare part, made now if it was not.
    #[cold]
    fn rare(&self) -> &Rare<H> {
        if let Some(rare) = self.rare_if_any() {
            return rare;
        }
        let new = Box::into_raw(Box::new(Rare {
            record: RareRecord::default(),
            hop: Mutex::new(None),
            hopped: AtomicBool::new(false),
            fault: FaultSlot::default(),
        }));
        let installed = match self.record.rare.compare_exchange(
            std::ptr::null_mut(),
            new.cast(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => new,
            Err(theirs) => {
                // SAFETY: `new` was never shared: this is its only owner.
                drop(unsafe { Box::from_raw(new) });
                theirs.cast()
            }
        };
        // SAFETY: as in `rare_if_any`.
        unsafe { &*installed }
    }

    /// `true` once the task has hopped to another executor.
    pub(crate) fn has_hopped(&self) -> bool {
        self.rare_if_any()
            .is_some_and(|r| r.hopped.load(Ordering::Acquire))
    }

    /// The task's fault slot, if it has one.
    #[inline]
    pub(crate) fn fault_if_any(&self) -> Option<&FaultSlot> {
        self.rare_if_any().map(|r| &r.fault)
    }

    /// The task's fault slot, made now if it had none.
    pub(crate) fn fault(&self) -> &FaultSlot {
        &self.rare().fault
    }

    /// What dumps read of the rare part, made now if it was not.
    pub(crate) fn rare_record(&self) -> &RareRecord {
        &self.rare().record
    }
}

impl<H: Clone, R: Parkable> Metadata<H, R> {
    /// The executor the task is scheduled on now.
    pub(crate) fn executor(&self) -> H {
        self.with_executor(H::clone)
    }

    /// Moves the task: its next schedule goes to `ex`.
    pub(crate) fn set_executor(&self, ex: H) {
        let rare = self.rare();
        *crate::loom::lock_std(&rare.hop) = Some(ex);
        rare.hopped.store(true, Ordering::Release);
    }

    /// Runs `f` with the executor the task is scheduled on now, cloning it
    /// only when the task has hopped.
    #[inline]
    pub(crate) fn with_executor<T>(&self, f: impl FnOnce(&H) -> T) -> T {
        if let Some(rare) = self
            .rare_if_any()
            .filter(|r| r.hopped.load(Ordering::Acquire))
        {
            // Unlocked before `f` runs: `f` schedules the task, which may
            // then run, and hop again, before `f` returns.
            let hop = crate::loom::lock_std(&rare.hop).clone();
            if let Some(ex) = hop {
                return f(&ex);
            }
        }
        f(&self.home)
    }
}

impl<H, R: Parkable> Drop for Metadata<H, R> {
    fn drop(&mut self) {
        // Out of the book first: a dump reads the rare part's waits under
        // the book's lock while the task is in it.
        self.record.leave_book_to_go();
        let rare = *self.record.rare.get_mut();
        if !rare.is_null() {
            // SAFETY: installed by `rare` from `Box::into_raw` of a
            // `Rare<H>` (see `rare_if_any`), once, and nothing borrows the
            // metadata any more.
            drop(unsafe { Box::from_raw(rare.cast::<Rare<H>>()) });
        }
    }
}

// SAFETY: every field but `admission` and the record's book and its key
// is `Sync`. Those are read and written only by the thread that holds the
// task's runnable (and the book by the `Drop`, once none does): the schedule
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
            info.record.flags.load(Ordering::Relaxed) & DONE == 0,
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
                // Its handle says `Rejected(reason)`.
                info.fault().refuse(reason);
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

#[cfg(all(test, target_pointer_width = "64"))]
mod tests {
    /// What every task carries beside its future: 136 bytes before the
    /// rare parts (a hop, a fault, then the waits) moved behind one
    /// pointer, the flags into a byte, the book's key into a `u32` and the
    /// executor into one word; a
    /// handle, 88 before what only chains carry was boxed and its noted
    /// wait became one word; and a task's
    /// outcome, 48 before its failure was boxed.
    #[test]
    fn a_task_carries_no_more_than_it_must() {
        assert!(std::mem::size_of::<crate::executor::TaskInfo>() <= 72);
        assert!(std::mem::size_of::<super::super::JoinHandle<()>>() <= 48);
        assert!(std::mem::size_of::<super::super::fault::Outcome<()>>() <= 16);
    }
}
