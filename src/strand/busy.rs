//! How a strand keeps its executor counting its posted closures: one
//! admission of the executor, held while any post is outstanding (queued,
//! or being run), instead of one per post. A closing pool waits for the
//! posts as it waits for tasks (also for posts queued behind a guard held
//! outside the pool, with no runner scheduled), and a post costs one atomic
//! add on the strand's own counter instead of a round trip through the
//! pool's counters, which every thread of the pool contends on.
//!
//! # Protocol
//!
//! One word holds the count of outstanding posts (times two) and a
//! `COVERED` bit, set exactly while an admission is held; the admission
//! itself sits under a lock that only the transitions take.
//!
//! - `enter` adds a post before it is queued. If `COVERED` was set, that is
//!   all. Otherwise, unless the lock shows an admission held, it takes one
//!   (outside the lock: it may run a user's executor code), then stores it
//!   under the lock and sets `COVERED`, or drops it if another poster got
//!   there first. Either way no post is queued before an admission covers
//!   it: a poster returns from `enter` only once one is held.
//! - `leave(n)`, after `n` posts ran or were dropped: the call that brings
//!   the count to zero takes the lock and clears the word from exactly
//!   `COVERED` to zero with one compare-and-swap, dropping the admission
//!   only if it succeeds. A post that entered in between made the word
//!   differ, and keeps the admission; a post that enters after sees
//!   `COVERED` clear and waits for the lock.
//!
//! The loom models below check that every queued post is covered by an
//! admission, and that none is left when all have run or were refused.

use crate::loom::{lock, AtomicUsize, Mutex, Ordering::*};

/// Set while an admission is held (only under the lock).
const COVERED: usize = 1;
/// One post in the word.
const ONE: usize = 2;

/// Outstanding posts and the admission that covers them (`A`: an
/// `Admission`; anything in the loom model).
pub(crate) struct Busy<A> {
    word: AtomicUsize,
    held: Mutex<Option<A>>,
}

impl<A> Busy<A> {
    pub(crate) fn new() -> Self {
        Busy {
            word: AtomicUsize::new(0),
            held: Mutex::new(None),
        }
    }

    /// Counts a post in, taking an admission with `admit` if none is held.
    /// If `admit` fails, nothing is counted and its error is returned.
    ///
    /// `admit` runs outside the lock (it may run a user's executor code,
    /// which may post to this strand or panic); a panic counts the post
    /// back out and goes on unwinding.
    #[inline]
    pub(crate) fn enter<E>(&self, admit: impl FnOnce() -> Result<A, E>) -> Result<(), E> {
        if self.word.fetch_add(ONE, AcqRel) & COVERED != 0 {
            return Ok(());
        }
        self.cover(admit)
    }

    #[cold]
    fn cover<E>(&self, admit: impl FnOnce() -> Result<A, E>) -> Result<(), E> {
        if lock(&self.held).is_some() {
            return Ok(());
        }
        /// Counts the post out again if `admit` fails or unwinds.
        struct Undo<'a, A>(&'a Busy<A>);
        impl<A> Drop for Undo<'_, A> {
            fn drop(&mut self) {
                self.0.leave(1);
            }
        }
        let undo = Undo(self);
        let admission = admit()?;
        std::mem::forget(undo);
        let mut held = lock(&self.held);
        // Another poster may have covered the count meanwhile: then this
        // admission is one too many, dropped after the lock.
        let spare = match &*held {
            Some(_) => Some(admission),
            None => {
                *held = Some(admission);
                self.word.fetch_or(COVERED, AcqRel);
                None
            }
        };
        drop(held);
        drop(spare);
        Ok(())
    }

    /// Counts `n` posts out; the last one out drops the admission (after
    /// the lock is released: dropping it may wake a closing pool's workers).
    #[inline]
    pub(crate) fn leave(&self, n: usize) {
        if n == 0 || self.word.fetch_sub(n * ONE, AcqRel) >> 1 != n {
            return;
        }
        let mut held = lock(&self.held);
        let admission = match self.word.compare_exchange(COVERED, 0, AcqRel, Acquire) {
            Ok(_) => held.take(),
            Err(_) => None,
        };
        drop(held);
        drop(admission);
    }

    /// Runs `f` with the admission held now, if any.
    pub(crate) fn with_held<R>(&self, f: impl FnOnce(Option<&A>) -> R) -> R {
        f(lock(&self.held).as_ref())
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom::Arc;
    use loom::thread;

    /// A stand-in admission: counts how many are alive.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_sub(1, SeqCst);
        }
    }

    struct Rig {
        busy: Busy<Counted>,
        live: Arc<AtomicUsize>,
        queue: Mutex<Vec<usize>>,
    }

    impl Rig {
        /// Posts `id`; `refused`: an admission asked for is refused (a
        /// closed executor), and then nothing is queued. (Covered already,
        /// a post asks for none.) Returns whether it was queued.
        fn post(&self, id: usize, refused: bool) -> bool {
            let entered = self.busy.enter(|| {
                if refused {
                    return Err(());
                }
                self.live.fetch_add(1, SeqCst);
                Ok(Counted(self.live.clone()))
            });
            if entered.is_ok() {
                lock(&self.queue).push(id);
            }
            entered.is_ok()
        }

        /// The runner: takes what is queued, checks it is covered, runs
        /// it, counts it out.
        fn drain(&self) -> usize {
            let batch = std::mem::take(&mut *lock(&self.queue));
            for _ in &batch {
                assert!(self.live.load(SeqCst) >= 1, "a queued post is covered");
            }
            self.busy.leave(batch.len());
            batch.len()
        }
    }

    /// Two posters race the runner: every queued post is covered by an
    /// admission (briefly two, while a poster that lost the race to cover
    /// drops its spare), and when all ran none is left.
    #[test]
    fn posts_race_the_runner() {
        race(false);
    }

    /// The same, with the second poster's admission refused: it counts
    /// itself out, and the first poster's post is still covered.
    #[test]
    fn a_refused_post_counts_itself_out() {
        race(true);
    }

    fn race(refuse_second: bool) {
        loom::model(move || {
            let rig = Arc::new(Rig {
                busy: Busy::new(),
                live: Arc::new(AtomicUsize::new(0)),
                queue: Mutex::new(Vec::new()),
            });
            let posters: Vec<_> = (0..2)
                .map(|p| {
                    let rig = rig.clone();
                    thread::spawn(move || rig.post(p, refuse_second && p == 1))
                })
                .collect();
            let mut ran = rig.drain();
            let queued = posters
                .into_iter()
                .map(|p| p.join().unwrap())
                .filter(|&q| q)
                .count();
            ran += rig.drain();
            assert_eq!(ran, queued);
            assert!(queued == 2 || refuse_second);
            assert_eq!(rig.live.load(SeqCst), 0, "the admission was dropped");
            assert!(rig.busy.with_held(|a| a.is_none()));
        });
    }
}
