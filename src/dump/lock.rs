//! Who holds a strand or a `Guarded` value, as task dumps read it: a
//! [`LockBook`] inside the strand, written by the strand's owner.

use std::panic::Location;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::loom::{fence, AtomicU64, AtomicUsize, Ordering::*};
use crate::task_id::TaskId;

/// Which task holds a strand, and where the strand was made: two words
/// inside the strand, so that an idle `Guarded` costs what an
/// `Arc<tokio::sync::Mutex>` does.
///
/// # The holder word
///
/// `word = holder << 16 | taken`, where
///
/// - `holder` is 0 while the strand is free, else the holder's task id,
///   or [`NOT_A_TASK`] for code that is not a task (a post, a thread
///   outside any task) and for a task whose id needs more than 48 bits
///   (after 2^48 tasks; a dump then cannot name it);
/// - `taken` is the low 16 bits of how many times an owner took the
///   strand on the spot (a section run right away, a lock granted at
///   once): the strand's `inline` count, whose wraps the [`BookExt`]
///   counts.
///
/// Only the strand's current owner writes it (ownership passes with a
/// release and an acquire), so a write is a load and a store:
///
/// - taking the strand on the spot stores the taker with `taken` one up;
/// - letting it go stores holder 0;
/// - every other write that names a holder (the runner's, a lock request
///   granted from the queue), and the one that wraps `taken` round to 0,
///   is made under the sequence in the [`BookExt`], a seqlock. These come
///   with a queue, or once in 65,536 takes, and the extension is made
///   for them.
///
/// A dump reads the word and the sequence together ([`LockBook::reading`]).
/// Two readings that agree mean that the holder did not change in
/// between, not even away and back: every write that names a holder moves
/// `taken` or the sequence, and `taken` wraps only under the sequence.
///
/// # The site word
///
/// `site` holds [`EXT`] and [`HOLDS_OPEN`] in its low bits, and above
/// them either the `&'static Location` where the strand was made or, with
/// `EXT`, a pointer to the strand's [`BookExt`], which holds that
/// location. The strand installs its extension once, when it first needs
/// it, and frees it when the strand goes. `HOLDS_OPEN` is the strand's,
/// kept here because the word has room for it: whether the strand's
/// handles hold its executor open.
pub(crate) struct LockBook {
    word: AtomicU64,
    site: AtomicUsize,
}

/// The part of a [`LockBook`] that only a strand that queues needs, at
/// the start of the strand's extension (see [`LockBook::install`]).
pub(crate) struct BookExt {
    location: &'static Location<'static>,
    /// The seqlock's sequence: odd while a write is under way.
    seq: AtomicU64,
    /// How many times `taken` wrapped round. Written by the owner only.
    wraps: AtomicU64,
}

/// The holder of a lock that is not a task a dump can name.
const NOT_A_TASK: u64 = (1 << 48) - 1;
const TAKEN: u64 = 0xffff;

/// In `site`: the rest points to a [`BookExt`].
const EXT: usize = 0b01;
/// In `site`: the strand's handles hold its executor open.
const HOLDS_OPEN: usize = 0b10;
const FLAGS: usize = EXT | HOLDS_OPEN;

// A `Location` (and a `BookExt`) holds pointers, so its address leaves the
// flag bits clear.
const _: () = assert!(std::mem::align_of::<Location<'static>>() > FLAGS);
const _: () = assert!(std::mem::align_of::<BookExt>() > FLAGS);

/// What a [`LockBook`] is the book of.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum LockKind {
    Strand,
    /// A `Guarded` value, with the name of its type.
    Guarded(&'static str),
    /// A key's strand of a `KeyedStrands`.
    Keyed,
}

/// Who holds a lock, as a dump reads it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Holder {
    Free,
    Task(TaskId),
    NotATask,
}

/// A write of `taken` would wrap round: make the holder write with
/// [`LockBook::taken_wrapping`].
pub(crate) struct Wraps;

fn code(holder: Option<TaskId>) -> u64 {
    holder.map_or(NOT_A_TASK, |id| id.as_u64().min(NOT_A_TASK))
}

impl LockBook {
    /// The book of a strand made at `location`, whose handles hold its
    /// executor open if `holds_open`.
    pub(crate) fn new(location: &'static Location<'static>, holds_open: bool) -> LockBook {
        let site = location as *const Location<'static> as usize;
        LockBook {
            word: AtomicU64::new(0),
            site: AtomicUsize::new(if holds_open { site | HOLDS_OPEN } else { site }),
        }
    }

    /// Whether the strand's handles hold its executor open (see `new`).
    #[inline]
    pub(crate) fn holds_open(&self) -> bool {
        self.site.load(Relaxed) & HOLDS_OPEN != 0
    }

    /// The owner took the strand on the spot, in `holder`; `Err` if that
    /// wraps `taken` round, which only [`taken_wrapping`](Self::taken_wrapping)
    /// may do. Called by the strand's new owner.
    #[inline]
    pub(crate) fn taken(&self, holder: Option<TaskId>) -> Result<(), Wraps> {
        let taken = (self.word.load(Relaxed) + 1) & TAKEN;
        if taken == 0 {
            return Err(Wraps);
        }
        // Release, though it publishes nothing else: a reading that reads
        // this store then sees the wraps and installs before it, so it
        // does not pair this take with an older sequence.
        self.word.store(code(holder) << 16 | taken, Release);
        Ok(())
    }

    /// As [`taken`](Self::taken), when it returned [`Wraps`].
    #[cold]
    pub(crate) fn taken_wrapping(&self, holder: Option<TaskId>, ext: &BookExt) {
        self.write(ext, code(holder) << 16, true);
    }

    /// The strand is held by `holder`, which did not take it on the spot
    /// (a task or section the runner runs, a granted lock request). Called
    /// by the strand's owner. Nothing is written if `holder` holds it
    /// already (the runner's posts, back to back): the word sits on the
    /// line that submitters contend for.
    #[inline]
    pub(crate) fn held_by(&self, holder: Option<TaskId>, ext: &BookExt) {
        let word = self.word.load(Relaxed);
        if word >> 16 != code(holder) {
            self.write(ext, code(holder) << 16 | word & TAKEN, false);
        }
    }

    /// The owner that took the strand on the spot naming no holder is
    /// `holder`: a lock request made outside the task that polls it. Only
    /// right after that [`taken`](Self::taken), before any other write:
    /// the holder then changes without `taken` or the sequence, which
    /// tells readings apart all the same, since neither the nameless
    /// holder nor this one can come back without another take.
    #[inline]
    pub(crate) fn moved_to(&self, holder: Option<TaskId>) {
        let taken = self.word.load(Relaxed) & TAKEN;
        self.word.store(code(holder) << 16 | taken, Release);
    }

    /// Called by the strand's owner before it gives the strand up. Nothing
    /// is written if nobody holds it.
    #[inline]
    pub(crate) fn released(&self) {
        let word = self.word.load(Relaxed);
        if word >> 16 != 0 {
            self.word.store(word & TAKEN, Relaxed);
        }
    }

    /// Stores `word` under the sequence, and counts a wrap of `taken` if
    /// `wraps`.
    fn write(&self, ext: &BookExt, word: u64, wraps: bool) {
        let seq = ext.seq.load(Relaxed);
        ext.seq.store(seq + 1, Relaxed);
        fence(Release);
        if wraps {
            ext.wraps.store(ext.wraps.load(Relaxed) + 1, Relaxed);
        }
        self.word.store(word, Relaxed);
        ext.seq.store(seq + 2, Release);
    }

    /// Who holds the lock, and a sequence that changes with every write
    /// that names a holder.
    pub(crate) fn reading(&self) -> (u64, Holder) {
        let (seq, word, _) = self.snapshot();
        let holder = match word >> 16 {
            0 => Holder::Free,
            NOT_A_TASK => Holder::NotATask,
            id => Holder::Task(TaskId::from_u64(id).expect("not 0")),
        };
        (seq << 16 | word & TAKEN, holder)
    }

    /// How many times an owner took the strand on the spot (as of a
    /// moment ago: the owner may be taking it again).
    pub(crate) fn taken_count(&self) -> u64 {
        let (_, word, wraps) = self.snapshot();
        wraps << 16 | word & TAKEN
    }

    /// The sequence's count of writes, the word and the wraps of `taken`,
    /// as one write left them.
    fn snapshot(&self) -> (u64, u64, u64) {
        loop {
            let site = self.site.load(Acquire);
            let Some(ext) = ext_of(site) else {
                // Acquire, and `site` again: a write under the sequence
                // that this load reads comes after the extension's
                // install, which the second load then sees.
                let word = self.word.load(Acquire);
                if self.site.load(Acquire) & EXT == 0 {
                    return (0, word, 0);
                }
                continue;
            };
            // SAFETY: an installed extension lives as long as the book.
            let ext = unsafe { ext.as_ref() };
            let seq = ext.seq.load(Acquire);
            let word = self.word.load(Relaxed);
            let wraps = ext.wraps.load(Relaxed);
            fence(Acquire);
            if seq % 2 == 0 && ext.seq.load(Relaxed) == seq {
                return (seq / 2, word, wraps);
            }
            crate::loom::spin_loop();
        }
    }

    /// Where the strand was made.
    pub(crate) fn location(&self) -> &'static Location<'static> {
        let site = self.site.load(Acquire);
        match ext_of(site) {
            // SAFETY: an installed extension lives as long as the book.
            Some(ext) => unsafe { ext.as_ref() }.location,
            // SAFETY: without `EXT`, the rest of `site` is the location
            // `new` stored.
            None => unsafe { &*((site & !FLAGS) as *const Location<'static>) },
        }
    }

    /// The extension, if one is installed.
    #[inline]
    pub(crate) fn ext(&self) -> Option<NonNull<BookExt>> {
        ext_of(self.site.load(Acquire))
    }

    /// A new extension for this book, to install at the start of the
    /// strand's own.
    pub(crate) fn new_ext(&self) -> BookExt {
        BookExt {
            location: self.location(),
            seq: AtomicU64::new(0),
            wraps: AtomicU64::new(0),
        }
    }

    /// Installs `ext` (made by [`new_ext`](Self::new_ext), in an
    /// allocation that outlives the book), unless another is installed:
    /// that one then, and the caller keeps `ext`.
    pub(crate) fn install(&self, ext: NonNull<BookExt>) -> Result<(), NonNull<BookExt>> {
        let mut site = self.site.load(Acquire);
        loop {
            if let Some(installed) = ext_of(site) {
                return Err(installed);
            }
            let new = ext.as_ptr() as usize | EXT | site & HOLDS_OPEN;
            match self.site.compare_exchange_weak(site, new, AcqRel, Acquire) {
                Ok(_) => return Ok(()),
                Err(now) => site = now,
            }
        }
    }

    /// The lock as a dump sees it now, copied out (a dump keeps nothing of
    /// the lock alive): a lock of `kind`.
    pub(crate) fn seen(&self, kind: LockKind) -> LockSeen {
        let (seq, holder) = self.reading();
        LockSeen {
            addr: self as *const LockBook as usize,
            kind,
            location: self.location(),
            seq,
            holder,
        }
    }
}

fn ext_of(site: usize) -> Option<NonNull<BookExt>> {
    if site & EXT == 0 {
        return None;
    }
    NonNull::new((site & !FLAGS) as *mut BookExt)
}

/// A lock as one reading of a dump saw it: copied out while the wait that
/// names it was still noted, so a dump keeps nothing of the lock alive.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct LockSeen {
    /// The book's address: the lock's identity while it lives. A lock
    /// freed between two readings and another made at its address is not
    /// mistaken for it where it matters: the waits on the first went with
    /// it, so no wait on it is seen in both.
    pub(crate) addr: usize,
    pub(crate) kind: LockKind,
    pub(crate) location: &'static Location<'static>,
    /// The book's sequence at the reading (see [`LockBook::reading`]).
    pub(crate) seq: u64,
    pub(crate) holder: Holder,
}

/// A noted wait's hold on a lock: its book, what kind of lock it is, and
/// a strong reference to whatever holds the book (a strand), so that a
/// lock future that is forgotten leaves its wait noted on a live book.
pub(crate) struct LockRef {
    book: NonNull<LockBook>,
    kind: fn() -> LockKind,
    owner: NonNull<()>,
    drop_owner: unsafe fn(NonNull<()>),
}

// SAFETY: the owner is an `Arc` of a `Send + Sync` value (see `new`), and
// the book is inside it and `Sync`.
unsafe impl Send for LockRef {}
// SAFETY: as above.
unsafe impl Sync for LockRef {}

impl LockRef {
    /// The book `book` finds in `owner`, held by `owner`.
    pub(crate) fn new<T: Send + Sync + 'static>(
        owner: Arc<T>,
        book: impl FnOnce(&T) -> &LockBook,
        kind: fn() -> LockKind,
    ) -> LockRef {
        let book = NonNull::from(book(&owner));
        LockRef {
            book,
            kind,
            owner: NonNull::new(Arc::into_raw(owner).cast_mut())
                .expect("an `Arc` is not null")
                .cast(),
            drop_owner: |owner| {
                // SAFETY: `owner` came from `Arc::into_raw` of an `Arc<T>`,
                // and gives its count back once (in `LockRef`'s drop).
                unsafe { drop(Arc::from_raw(owner.cast::<T>().as_ptr())) }
            },
        }
    }

    /// The lock as a dump sees it now.
    pub(crate) fn seen(&self) -> LockSeen {
        // SAFETY: the owner keeps the book alive while `self` lives.
        unsafe { self.book.as_ref() }.seen((self.kind)())
    }
}

impl Drop for LockRef {
    fn drop(&mut self) {
        // SAFETY: `drop_owner` is made for `owner`, given back once.
        unsafe { (self.drop_owner)(self.owner) }
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::thread;

    fn here() -> &'static Location<'static> {
        Location::caller()
    }

    /// A dump's readings of a lock's holder racing an owner that takes
    /// the lock on the spot, lets it go, takes it again as the same task
    /// (wrapping `taken` round, so under the sequence, with the extension
    /// installed just then), and hands it to the same task from the queue:
    /// two readings that agree read one write, and a holder that went away
    /// and came back is never taken for one that stayed.
    #[test]
    fn lock_readings_tell_every_holder_write_apart() {
        let location = here();
        loom::model(move || {
            let book = loom::sync::Arc::new(LockBook::new(location, false));
            // One take short of wrapping.
            book.word.store(TAKEN - 1, Relaxed);
            let task = TaskId::from_u64(7);
            let owner = {
                let book = book.clone();
                thread::spawn(move || {
                    assert!(book.taken(task).is_ok());
                    book.released();
                    assert!(book.taken(task).is_err());
                    let ext = Box::leak(Box::new(book.new_ext()));
                    assert!(book.install(NonNull::from(&*ext)).is_ok());
                    book.taken_wrapping(task, ext);
                    book.released();
                    book.held_by(task, ext);
                })
            };
            // Without a yield here, loom ran the readings first and
            // explored nothing else (1 iteration).
            thread::yield_now();
            let first = book.reading();
            let second = book.reading();
            // Each holder write: (sequence, holder) it leaves.
            let held = Holder::Task(task.unwrap());
            let states = [
                (TAKEN - 1, Holder::Free),
                (TAKEN, held),
                (TAKEN, Holder::Free),
                (1 << 16, held),
                (1 << 16, Holder::Free),
                (2 << 16, held),
            ];
            let at = |r: (u64, Holder)| {
                states
                    .iter()
                    .position(|&s| s == r)
                    .unwrap_or_else(|| panic!("{r:?} was never written"))
            };
            assert!(at(first) <= at(second));
            owner.join().unwrap();
            assert_eq!(book.reading(), states[5]);
            assert_eq!(book.taken_count(), 1 << 16);
        });
    }

    /// The owner that installed the extension (wrapping `taken` round)
    /// hands the strand to another thread, which takes it on the spot: a
    /// reading that sees that take sees the extension and the sequence it
    /// was taken under, never the take paired with the sequence before.
    #[test]
    fn a_take_after_a_hand_over_is_read_with_its_sequence() {
        let location = here();
        loom::model(move || {
            let book = loom::sync::Arc::new(LockBook::new(location, false));
            book.word.store(TAKEN, Relaxed);
            let task = TaskId::from_u64(7);
            let owners = {
                let book = book.clone();
                thread::spawn(move || {
                    assert!(book.taken(task).is_err());
                    let ext = Box::leak(Box::new(book.new_ext()));
                    assert!(book.install(NonNull::from(&*ext)).is_ok());
                    book.taken_wrapping(None, ext);
                    book.released();
                    // The hand-over (the strand's queue word does this): a
                    // release the next owner acquires, here a spawn.
                    let book = book.clone();
                    thread::spawn(move || assert!(book.taken(task).is_ok()))
                        .join()
                        .unwrap();
                })
            };
            thread::yield_now();
            let held = Holder::Task(task.unwrap());
            let states = [
                (TAKEN, Holder::Free),
                (1 << 16, Holder::NotATask),
                (1 << 16, Holder::Free),
                (1 << 16 | 1, held),
            ];
            let reading = book.reading();
            assert!(states.contains(&reading), "{reading:?} was never written");
            owners.join().unwrap();
            assert_eq!(book.reading(), states[3]);
        });
    }

    /// Two threads install an extension at once (a strand's first queued
    /// items, pushed from two threads) while a third reads the book: one
    /// extension wins and both callers get it, the flag bit survives, and
    /// the location reads the same before, during and after.
    #[test]
    fn one_extension_is_installed_and_both_racers_get_it() {
        let location = here();
        loom::model(move || {
            let book = loom::sync::Arc::new(LockBook::new(location, true));
            let install = |book: loom::sync::Arc<LockBook>| {
                thread::spawn(move || {
                    let mine = NonNull::from(Box::leak(Box::new(book.new_ext())));
                    let got = match book.install(mine) {
                        Ok(()) => mine,
                        Err(theirs) => theirs,
                    };
                    got.as_ptr() as usize
                })
            };
            let (a, b) = (install(book.clone()), install(book.clone()));
            assert!(std::ptr::eq(book.location(), location));
            let (a, b) = (a.join().unwrap(), b.join().unwrap());
            assert_eq!(a, b, "both racers use the installed extension");
            assert_eq!(book.ext().map(|e| e.as_ptr() as usize), Some(a));
            assert!(book.holds_open());
            assert!(std::ptr::eq(book.location(), location));
        });
    }
}
