//! A FIFO of runnables linked through their tasks' own link word
//! (`TaskInfo::queue_link`, which a strand's queue also uses: a runnable
//! is in one queue at a time). Queueing allocates nothing, and the queue
//! keeps no buffer sized by the most it ever held. Not synchronized: its
//! owner keeps it under a lock.

use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::Ordering::Relaxed;

use crate::executor::Runnable;

/// Runnables, first in first out.
#[derive(Default)]
pub(crate) struct RunQueue {
    /// The first and last runnables' pointers (`Runnable::into_raw`), each
    /// standing for its runnable; the first links to the next, and so on.
    ends: Option<(NonNull<()>, NonNull<()>)>,
    len: usize,
}

// SAFETY: the queue owns the runnables its pointers stand for, and a
// `Runnable` is `Send`.
unsafe impl Send for RunQueue {}

/// Runs `f` with the link word of the runnable `raw` stands for.
///
/// # Safety
///
/// `raw` came from `Runnable::into_raw` and stands for a runnable that
/// has not been taken back yet.
unsafe fn with_link<R>(
    raw: NonNull<()>,
    f: impl FnOnce(&std::sync::atomic::AtomicUsize) -> R,
) -> R {
    // SAFETY: the caller's contract; `ManuallyDrop` keeps this borrow
    // from consuming the runnable.
    let runnable = ManuallyDrop::new(unsafe { Runnable::from_raw(raw) });
    f(&runnable.metadata().queue_link)
}

impl RunQueue {
    /// How many runnables are queued.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn push_back(&mut self, runnable: Runnable) {
        runnable.metadata().queue_link.store(0, Relaxed);
        let raw = runnable.into_raw();
        self.ends = Some(match self.ends {
            None => (raw, raw),
            Some((first, last)) => {
                // SAFETY: `last` stands for a runnable this queue holds.
                unsafe { with_link(last, |link| link.store(raw.as_ptr() as usize, Relaxed)) };
                (first, raw)
            }
        });
        self.len += 1;
    }

    pub(crate) fn pop_front(&mut self) -> Option<Runnable> {
        let (first, last) = self.ends?;
        // SAFETY: `first` stands for a runnable this queue holds; it is
        // taken back once, here, and leaves the queue.
        let runnable = unsafe { Runnable::from_raw(first) };
        let next = runnable.metadata().queue_link.load(Relaxed);
        self.ends = NonNull::new(next as *mut ()).map(|next| (next, last));
        self.len -= 1;
        Some(runnable)
    }
}

impl Drop for RunQueue {
    fn drop(&mut self) {
        while let Some(runnable) = self.pop_front() {
            drop(runnable);
        }
    }
}
