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
//!   all. Otherwise it takes the lock and, if no admission is held, takes
//!   one and sets `COVERED`; a second poster that arrives meanwhile waits
//!   on the lock, so no post is queued before an admission covers it.
//! - `leave(n)`, after `n` posts ran or were dropped: the call that brings
//!   the count to zero takes the lock and clears the word from exactly
//!   `COVERED` to zero with one compare-and-swap, dropping the admission
//!   only if it succeeds. A post that entered in between made the word
//!   differ, and keeps the admission; a post that enters after sees
//!   `COVERED` clear and waits for the lock.
//!
//! The loom model below checks that every queued post is covered by
//! exactly one admission, and that none is left when all have run.

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
    #[inline]
    pub(crate) fn enter<E>(&self, admit: impl FnOnce() -> Result<A, E>) -> Result<(), E> {
        if self.word.fetch_add(ONE, AcqRel) & COVERED != 0 {
            return Ok(());
        }
        let mut held = lock(&self.held);
        if held.is_none() {
            match admit() {
                Ok(admission) => {
                    *held = Some(admission);
                    self.word.fetch_or(COVERED, AcqRel);
                }
                Err(e) => {
                    // Not covered (nothing is held), so the word cannot
                    // become exactly `COVERED`: just count out.
                    self.word.fetch_sub(ONE, AcqRel);
                    return Err(e);
                }
            }
        }
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
        fn post(&self, id: usize) {
            self.busy
                .enter(|| {
                    self.live.fetch_add(1, SeqCst);
                    Ok::<_, ()>(Counted(self.live.clone()))
                })
                .unwrap();
            lock(&self.queue).push(id);
        }

        /// The runner: takes what is queued, checks it is covered, runs
        /// it, counts it out.
        fn drain(&self) -> usize {
            let batch = std::mem::take(&mut *lock(&self.queue));
            for _ in &batch {
                assert_eq!(self.live.load(SeqCst), 1, "a queued post is covered");
            }
            self.busy.leave(batch.len());
            batch.len()
        }
    }

    /// Two posters race the runner: every queued post is covered by exactly
    /// one admission, and when all ran none is left.
    #[test]
    fn posts_race_the_runner() {
        loom::model(|| {
            let rig = Arc::new(Rig {
                busy: Busy::new(),
                live: Arc::new(AtomicUsize::new(0)),
                queue: Mutex::new(Vec::new()),
            });
            let posters: Vec<_> = (0..2)
                .map(|p| {
                    let rig = rig.clone();
                    thread::spawn(move || rig.post(p))
                })
                .collect();
            let mut ran = rig.drain();
            for p in posters {
                p.join().unwrap();
            }
            ran += rig.drain();
            assert_eq!(ran, 2);
            assert_eq!(rig.live.load(SeqCst), 0, "the admission was dropped");
            assert!(rig.busy.with_held(|a| a.is_none()));
        });
    }
}
