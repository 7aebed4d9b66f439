//! One timer: a deadline and what to do when it arrives.
//!
//! # Ground rules
//!
//! An [`Entry`] is owned by the thing that waits: it sits inside a pinned
//! [`Sleep`](super::Sleep), or inside the shared state of a timed task. The
//! wheel only points at it, and only while it is linked; the owner must
//! unlink it (under the shard lock) before it moves or is freed, which is
//! what `Sleep`'s `Drop` does. An entry belongs to exactly one shard, fixed
//! at creation, and its [`Core`] (links, deadline, action, waiting task)
//! is read and written only under that shard's lock.
//!
//! The state word says where the entry is. Every transition happens under
//! the shard lock, or with the only reference to the entry; the owner reads
//! it without the lock to skip the lock on the common paths (a fired sleep
//! completes, a fired sleep is dropped):
//!
//! | from | to | by | when |
//! |---|---|---|---|
//! | [`IDLE`] | [`LINKED`] | owner, locked | inserted with a deadline still ahead |
//! | [`LINKED`] | [`FIRED`] | wheel, locked | the deadline came: action taken; the wheel's last touch |
//! | [`LINKED`] | [`IDLE`] | owner, locked | cancelled: unlinked, action taken back |
//! | [`FIRED`] | [`IDLE`] | owner | reset for reuse (the wheel no longer sees it) |
//!
//! So `LINKED -> FIRED` and `LINKED -> IDLE` race, and the shard lock
//! decides: exactly one of "it fired" and "it was cancelled" happens, and the
//! loser sees the winner's state once it holds the lock. An owner that
//! reads [`FIRED`] (Acquire) may free the entry without the lock: the
//! wheel's Release store of [`FIRED`] was its last access.

use std::cell::UnsafeCell;
use std::fmt;
use std::task::Waker;

use crate::executor::Runnable;
use crate::loom::{AtomicUsize, Ordering};
use crate::task_id::TaskId;

/// Not in any wheel. The owner may insert it (again).
pub(crate) const IDLE: usize = 0;
/// In the wheel of its shard, which holds a strong count and its action.
pub(crate) const LINKED: usize = 1;
/// Fired: the wheel has taken the action and let go of the entry.
pub(crate) const FIRED: usize = 2;

/// What a timer does when it fires.
pub(crate) enum Action {
    /// Wake a future waiting for the deadline.
    Wake(Waker),
    /// Hand a timed task's first run to its executor.
    Run(Runnable),
}

impl Action {
    pub(crate) fn fire(self) {
        match self {
            Action::Wake(w) => w.wake(),
            Action::Run(r) => r.schedule(),
        }
    }
}

impl fmt::Debug for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Wake(_) => "Wake",
            Action::Run(_) => "Run",
        })
    }
}

/// The part of an entry guarded by its shard's lock.
pub(crate) struct Core {
    pub(crate) deadline: u64,
    pub(crate) prev: *const Entry,
    pub(crate) next: *const Entry,
    /// Which wheel list holds the entry while it is [`LINKED`].
    pub(crate) location: u16,
    pub(crate) action: Option<Action>,
    /// The task that waits for it (the one polling its sleep), if any:
    /// what task dumps read, instead of a note of their own.
    pub(crate) waiter: Option<TaskId>,
}

/// One timer. See the module docs for who may touch what.
pub(crate) struct Entry {
    /// The state in the low [`STATE_BITS`], the (fixed) shard above them:
    /// one word, so an entry fits a cache line.
    word: AtomicUsize,
    core: UnsafeCell<Core>,
}

const STATE_BITS: u32 = 2;
const STATE_MASK: usize = (1 << STATE_BITS) - 1;

// SAFETY: `core` (raw links, the waker or runnable) is only accessed under
// the lock of the entry's shard (see `core`), so sharing an `&Entry` across
// threads never gives two threads access to it at once; `Waker` and
// `Runnable` are `Send`; the raw links point at other entries and are only
// followed under the same lock.
unsafe impl Send for Entry {}
// SAFETY: as above; the only other field is an atomic.
unsafe impl Sync for Entry {}

impl Entry {
    pub(crate) fn new(shard: usize) -> Entry {
        debug_assert!(shard <= usize::MAX >> STATE_BITS);
        Entry {
            word: AtomicUsize::new(shard << STATE_BITS | IDLE),
            core: UnsafeCell::new(Core {
                deadline: 0,
                prev: std::ptr::null(),
                next: std::ptr::null(),
                location: 0,
                action: None,
                waiter: None,
            }),
        }
    }

    pub(crate) fn shard(&self) -> usize {
        // Relaxed: the shard bits never change.
        self.word.load(Ordering::Relaxed) >> STATE_BITS
    }

    /// The state, read without the lock. Acquire: on [`FIRED`], everything
    /// the wheel did to the entry happened before.
    pub(crate) fn state(&self) -> usize {
        self.word.load(Ordering::Acquire) & STATE_MASK
    }

    /// Sets the state; only under the shard lock, or by the owner of an
    /// entry the wheel does not see. Release pairs with the Acquire in
    /// [`state`](Entry::state). A plain store suffices: nobody else writes
    /// the word at the same time (those are the only writers).
    pub(crate) fn set_state(&self, state: usize) {
        let shard = self.word.load(Ordering::Relaxed) & !STATE_MASK;
        self.word.store(shard | state, Ordering::Release);
    }

    /// The guarded part.
    ///
    /// # Safety
    ///
    /// The caller holds the lock of shard [`shard`](Entry::shard), and no
    /// other reference obtained from this method is alive.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn core(&self) -> &mut Core {
        // SAFETY: the caller's lock makes this the only access (see above).
        unsafe { &mut *self.core.get() }
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("state", &self.state())
            .field("shard", &self.shard())
            .finish_non_exhaustive()
    }
}
