//! A task's line: a step chained on a task of a pool (or a simulation)
//! that it runs on too, before the task's first poll has ended, waits in
//! line behind that poll instead of being scheduled at once (ground rule 7
//! in `future::then` says when, and why only there).
//!
//! Scheduled at once, the step would be polled (often by another worker)
//! only to find its input not ready, register its waker and wait; chained
//! from outside a pool, it would also be a second push on the pool's
//! shared queue, next to the task it follows. In line, it is scheduled
//! when the poll ends, from the thread that ran it (on a pool worker, into
//! that worker's own queue), and usually finds its input ready at its
//! first poll.
//!
//! # Protocol
//!
//! The slot holds nothing (open), one parked runnable, or the sealed mark
//! (the line is closed).
//!
//! - [`park`](Successor::park): a compare-exchange from open to the
//!   runnable. It fails once the line is closed: the caller schedules the
//!   runnable itself.
//! - [`seal`](Successor::seal): a swap to the sealed mark, which hands back
//!   the runnable parked there, if any, for the caller to schedule. The
//!   end of every poll seals (after the first, a plain load finds the mark
//!   and stops there), as does the drop of the task's future. An abort of
//!   the task does not: its handle resolves only once the future is
//!   dropped, after that poll, so the step would find nothing to read
//!   before then.
//!
//! Exactly one of `park` failing and `seal` finding the runnable happens,
//! so the step is scheduled exactly once, and never held past the end of
//! the first poll (the loom model below checks both).

use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::loom::{AtomicPtr, Ordering::*};

/// What a slot can park: a runnable, or (in the model) a box.
///
/// # Safety
///
/// `from_raw(into_raw(x))` must give `x` back, and `into_raw` must never
/// give the address of `SEALED_MARK`.
pub unsafe trait Parkable {
    fn into_raw(self) -> NonNull<()>;
    /// # Safety
    ///
    /// `raw` comes from `into_raw` of the same type, and is passed here once.
    unsafe fn from_raw(raw: NonNull<()>) -> Self;
}

// SAFETY: async-task's own pair, and a runnable's address is that of its
// task's allocation on the heap, never a static's.
unsafe impl<M> Parkable for async_task::Runnable<M> {
    fn into_raw(self) -> NonNull<()> {
        async_task::Runnable::into_raw(self)
    }
    unsafe fn from_raw(raw: NonNull<()>) -> Self {
        // SAFETY: the caller passes a pointer from `into_raw`, once.
        unsafe { async_task::Runnable::from_raw(raw) }
    }
}

/// The mark of a sealed slot: an address no runnable can have.
static SEALED_MARK: u8 = 0;

fn sealed() -> *mut () {
    std::ptr::addr_of!(SEALED_MARK) as *mut ()
}

/// A task's successor slot (see the module docs).
pub(crate) struct Successor<T: Parkable> {
    slot: AtomicPtr<()>,
    _parks: PhantomData<T>,
}

impl<T: Parkable> Successor<T> {
    pub(crate) fn new() -> Self {
        Successor {
            slot: AtomicPtr::new(std::ptr::null_mut()),
            _parks: PhantomData,
        }
    }

    /// Parks `next` until the slot is sealed; hands it back if it is
    /// sealed already (or holds another, which chaining never does).
    pub(crate) fn park(&self, next: T) -> Result<(), T> {
        let raw = next.into_raw();
        match self
            .slot
            .compare_exchange(std::ptr::null_mut(), raw.as_ptr(), AcqRel, Acquire)
        {
            Ok(_) => Ok(()),
            // SAFETY: `raw` came from `into_raw` just above and was not
            // stored: this is its one way back.
            Err(_) => Err(unsafe { T::from_raw(raw) }),
        }
    }

    /// Seals the slot and hands back what was parked there.
    #[inline]
    pub(crate) fn seal(&self) -> Option<T> {
        // Relaxed: the mark is final, and nothing is read after seeing it.
        if self.slot.load(Relaxed) == sealed() {
            return None;
        }
        self.seal_slow()
    }

    #[inline(never)]
    fn seal_slow(&self) -> Option<T> {
        let parked = self.slot.swap(sealed(), AcqRel);
        if parked == sealed() {
            return None;
        }
        // SAFETY: anything but the mark and null in the slot was stored by
        // `park`, from `into_raw`; the swap took it out, so this is the
        // one `from_raw` of it.
        NonNull::new(parked).map(|raw| unsafe { T::from_raw(raw) })
    }
}

impl<T: Parkable> Drop for Successor<T> {
    fn drop(&mut self) {
        // Every task's future seals its slot when it is dropped, which is
        // before its metadata is. Were one left, it is leaked rather than
        // dropped: its future's `Drop` would run inside the freeing of
        // another task, where a panic aborts the process.
        if let Some(parked) = self.seal() {
            debug_assert!(false, "a step left in line behind a freed task");
            std::mem::forget(parked);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom::{AtomicUsize, Ordering::SeqCst};
    use loom::sync::Arc;

    /// A parked item that counts how often it was handed back and dropped.
    struct Item(Arc<AtomicUsize>);

    // SAFETY: `Box`'s own pair, and a box of a non-zero-sized item is on
    // the heap, never a static.
    unsafe impl Parkable for Box<Item> {
        fn into_raw(self) -> NonNull<()> {
            NonNull::new(Box::into_raw(self).cast()).unwrap()
        }
        unsafe fn from_raw(raw: NonNull<()>) -> Self {
            // SAFETY: from `into_raw` above, once.
            unsafe { Box::from_raw(raw.as_ptr().cast()) }
        }
    }

    impl Drop for Item {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// Parking against sealing, with a second seal from another thread (an
    /// abort): the item comes back exactly once, to whoever must schedule
    /// it, and is never left in a sealed slot.
    #[test]
    fn park_against_two_seals() {
        loom::model(|| {
            let slot = Arc::new(Successor::<Box<Item>>::new());
            let handed = Arc::new(AtomicUsize::new(0));
            let dropped = Arc::new(AtomicUsize::new(0));
            let sealers: Vec<_> = (0..2)
                .map(|_| {
                    let (slot, handed) = (slot.clone(), handed.clone());
                    loom::thread::spawn(move || {
                        if let Some(item) = slot.seal() {
                            handed.fetch_add(1, SeqCst);
                            drop(item);
                        }
                    })
                })
                .collect();
            if let Err(item) = slot.park(Box::new(Item(dropped.clone()))) {
                handed.fetch_add(1, SeqCst);
                drop(item);
            }
            for s in sealers {
                s.join().unwrap();
            }
            assert_eq!(handed.load(SeqCst), 1);
            assert_eq!(dropped.load(SeqCst), 1);
        });
    }
}
