//! The admission a strand holds of its executor on behalf of its posts
//! and queued sections: one for all of them, instead of one each, so a
//! closing pool waits for them as it waits for tasks (also for posts
//! queued behind a guard held outside the pool, with no runner scheduled)
//! while a post costs no round trip through the pool's counters, which
//! every thread of the pool contends on.
//!
//! It keeps no count: the queue's `COVERED` bit says whether the
//! admission is held for what is queued (see `queue`), so a post on a
//! covered strand makes one atomic operation, its push.
//!
//! # Protocol
//!
//! The admission sits in `held`, under a lock.
//!
//! - A post that finds `COVERED` clear calls [`Cover::hold`]: under the
//!   lock, it makes sure an admission is held (taking one outside the
//!   lock if need be: that may run a user's executor code), and keeps the
//!   lock until its push has set `COVERED`.
//! - An owner that finds nothing queued on a covered strand calls
//!   [`Cover::drop_if`] with the queue's `uncover`: under the lock, if that
//!   clears `COVERED`, the admission is taken out, and dropped after the
//!   lock (dropping it may wake a closing pool's workers).
//!
//! So `COVERED` is set only by a push made under the lock with an
//! admission held, and an admission leaves only under the lock, in the
//! critical section that cleared `COVERED`: while it is set, an admission
//! is held. The loom models in `queue` check it against racing posts.

use crate::loom::{lock, Mutex, MutexGuard};

/// The admission that covers a strand's posts (`A`: an `Admission`;
/// anything in the loom models).
pub(crate) struct Cover<A> {
    held: Mutex<Option<A>>,
}

/// The lock of a [`Cover`] with an admission held in it, kept by a post
/// until its push has set `COVERED`. A spare admission, taken by a post
/// that raced another to it, is dropped after the lock.
pub(crate) struct Holding<'a, A> {
    _held: MutexGuard<'a, Option<A>>,
    _spare: Option<A>,
}

impl<A> Cover<A> {
    pub(crate) fn new() -> Self {
        Cover {
            held: Mutex::new(None),
        }
    }

    /// Makes sure an admission is held, taking one with `admit` if none
    /// is, and returns the lock with it. If `admit` fails (or unwinds),
    /// nothing changed and its error is returned.
    pub(crate) fn hold<E>(
        &self,
        admit: impl FnOnce() -> Result<A, E>,
    ) -> Result<Holding<'_, A>, E> {
        let held = lock(&self.held);
        if held.is_some() {
            return Ok(Holding {
                _held: held,
                _spare: None,
            });
        }
        drop(held);
        let admission = admit()?;
        let mut held = lock(&self.held);
        // Another post may have taken one meanwhile: then this one is a
        // spare.
        let spare = match &*held {
            Some(_) => Some(admission),
            None => {
                *held = Some(admission);
                None
            }
        };
        Ok(Holding {
            _held: held,
            _spare: spare,
        })
    }

    /// For the owner of a covered strand with nothing queued: runs
    /// `uncover` under the lock, and if it cleared `COVERED` (`true`),
    /// drops the admission.
    pub(crate) fn drop_if(&self, uncover: impl FnOnce() -> bool) -> bool {
        let mut held = lock(&self.held);
        if !uncover() {
            return false;
        }
        let admission = held.take();
        drop(held);
        drop(admission);
        true
    }

    /// Runs `f` with the admission held now, if any.
    pub(crate) fn with_held<R>(&self, f: impl FnOnce(Option<&A>) -> R) -> R {
        f(lock(&self.held).as_ref())
    }
}
