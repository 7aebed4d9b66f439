//! The strand's submission queue and ownership word: a lock-free MPSC
//! queue built from a Treiber stack (R. K. Treiber, *Systems Programming:
//! Coping with Parallelism*, IBM RJ 5118, 1986) that the owner swaps out
//! whole and reverses into a FIFO batch.
//!
//! One word, `head`, holds both the stack and the strand's state:
//!
//! ```text
//!  head = 0                       idle (and so empty)
//!  head = top item's word | OWNED  owned; the stack holds what was submitted
//!  head = QUICK                    owned by a section run on the spot, and
//!                                  nothing submitted yet
//!  ... | COVERED                   also: the strand holds an admission of
//!                                  its executor for the posts it has
//! ```
//!
//! - A submission is one compare-and-swap that links the item on top and
//!   sets `OWNED`. The submitter that finds `OWNED` clear has taken the
//!   strand over and must start it ([`Pushed::Owned`]).
//! - The owner takes everything submitted so far with one atomic AND
//!   ([`Queue::take`]); when there is nothing, one compare-and-swap clears
//!   `OWNED` and the strand is idle.
//! - `QUICK` is `OWNED` plus a hint for those who want the strand: its
//!   owner is running a short synchronous section and will give the strand
//!   up in a moment, so spinning a little beats queueing. The first push
//!   replaces it with an ordinary owned head.
//! - `COVERED` says that an admission of the strand's executor is held
//!   (a closing pool waits for it), on behalf of every post and queued
//!   section in the stack or in the owner's batch. A post is pushed
//!   with `COVERED` set; one that finds it clear first makes sure an
//!   admission is held, and pushes under the lock that guards it
//!   ([`Queue::push_covered`]). Only whoever gives the strand up with
//!   nothing queued clears it ([`Taken::Covered`]), under that same lock,
//!   and drops the admission. So a post costs no count of its own: while
//!   the strand is covered, its push is the one atomic operation it makes.
//!
//! Only pushes and whole-stack swaps touch `head`, never a single pop, so
//! the ABA problem of Treiber stacks does not arise: a push whose CAS
//! succeeds links onto whatever the head is at that instant.
//!
//! Items are intrusive: an item is a word (a tagged pointer) with a link
//! slot of its own, so queueing allocates nothing. [`Link`] says how; a
//! strand's [`Item`]s are task runnables (linked through their
//! `TaskInfo`) and [`Node`]s (a posted closure, a lock request).

use std::convert::Infallible;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::ptr::NonNull;

use crate::admission::Sink;
use crate::error::{drop_payload, PanicPayload};
use crate::executor::Runnable;
use crate::loom::{AtomicUsize, Ordering::*};
use crate::task_id::TaskId;

/// Set while someone owns the strand: its runner is scheduled or running,
/// a lock guard holds it, or a section runs on the spot. Set by the push
/// that finds the strand idle (or by [`Queue::try_acquire`]); cleared only
/// by the owner, in [`Queue::take`], when the stack is empty.
const OWNED: usize = 0b001;

/// The whole of `head` while the owner took the strand with
/// `try_acquire(true)` and nothing was pushed since. No item word is this
/// small.
const QUICK: usize = 0b011;

/// Set while an admission covers the posts in the stack and the owner's
/// batch (see the module docs). Never with `QUICK`: a strand is taken on
/// the spot only when idle, and idle means uncovered.
const COVERED: usize = 0b100;

/// The bits of `head` that are not the top item's word.
const STATE: usize = OWNED | COVERED;

/// The top item's word in `head`, or 0.
fn top(head: usize) -> usize {
    if head & !(STATE | QUICK) == 0 {
        0
    } else {
        head & !STATE
    }
}

/// A value that can sit in a [`Queue`] as a single word.
///
/// # Safety
///
/// - [`into_word`](Link::into_word) returns a word above 7 with bits 0 and
///   2 clear (a pointer to something aligned to 8 or more, perhaps tagged
///   in bit 1),
///   which [`from_word`](Link::from_word) turns back into the same value;
/// - while the value is a word, [`next`](Link::next) and
///   [`set_next`](Link::set_next) read and write a link slot that belongs to
///   that value alone and that nothing else touches.
pub(crate) unsafe trait Link: Sized {
    /// Gives up the value as a word.
    fn into_word(self) -> usize;

    /// # Safety
    ///
    /// `word` came from [`into_word`](Link::into_word) and has not been
    /// turned back into a value since.
    unsafe fn from_word(word: usize) -> Self;

    /// The word linked after `word`, or 0.
    ///
    /// # Safety
    ///
    /// As for [`from_word`](Link::from_word).
    unsafe fn next(word: usize) -> usize;

    /// Links `next` after `word`.
    ///
    /// # Safety
    ///
    /// As for [`from_word`](Link::from_word), and the caller is the only one
    /// touching `word`'s link.
    unsafe fn set_next(word: usize, next: usize);

    /// Whether the item is one the strand's admission covers (`COVERED`):
    /// a post or a queued section, not a task or a lock request.
    ///
    /// # Safety
    ///
    /// As for [`from_word`](Link::from_word).
    unsafe fn covered(word: usize) -> bool;
}

/// What a push found.
#[must_use]
pub(crate) enum Pushed {
    /// Someone owns the strand; it will get to the item.
    Queued,
    /// The strand was idle: the caller owns it now and must start it.
    Owned,
}

/// What [`Queue::peek`] saw.
pub(crate) enum Peek {
    /// Nobody owns the strand.
    Idle,
    /// Someone owns it; nothing is queued.
    Busy,
    /// Someone runs a section on the spot; nothing is queued.
    Quick,
    /// Someone owns it and work is queued.
    Queued,
}

/// What the owner's [`Queue::take`] found.
#[must_use]
pub(crate) enum Taken<I: Link> {
    /// Everything submitted since the last take, oldest first, how many,
    /// and how many of them the admission covers.
    Batch(List<I>, usize, usize),
    /// Nothing was submitted; the strand is idle and the caller no longer
    /// owns it.
    Released,
    /// Nothing was submitted, but the strand is covered: the caller still
    /// owns it, and gives it up with [`Queue::uncover`] under the
    /// lock of the admission, which it then drops.
    Covered,
}

/// The submission stack and ownership word. See the module docs.
pub(crate) struct Queue<I: Link> {
    head: AtomicUsize,
    _items: PhantomData<I>,
}

// SAFETY: the queue owns the items it holds and hands each one out exactly
// once, to one thread; sending or sharing the queue moves or shares only
// the right to push and take, which is what `I: Send` allows.
unsafe impl<I: Link + Send> Send for Queue<I> {}
// SAFETY: as above; every access to `head` is atomic.
unsafe impl<I: Link + Send> Sync for Queue<I> {}

impl<I: Link> Queue<I> {
    /// An idle, empty queue.
    pub(crate) fn new() -> Self {
        Queue {
            head: AtomicUsize::new(0),
            _items: PhantomData,
        }
    }

    /// Submits `item`: one compare-and-swap, retried only under contention,
    /// after a pause that doubles with each failure (up to 64 spins): two
    /// threads that keep colliding on `head` otherwise trade its cache
    /// line for every attempt (8 posting threads on 2 cores: 10 % faster).
    /// Leaves `COVERED` as it is.
    #[inline]
    pub(crate) fn push(&self, item: I) -> Pushed {
        let word = item.into_word();
        match self.push_word(word, None::<fn() -> Result<(), Infallible>>) {
            Ok(pushed) => pushed,
            Err(never) => match never {},
        }
    }

    /// Submits `item`, a post or a queued section, covered: if `head` does
    /// not show `COVERED`, `cover` first makes sure an admission is held
    /// and returns its lock, held until the push has set `COVERED` (so no
    /// owner can clear it and drop the admission in between). If `cover`
    /// fails, nothing is pushed and the item comes back with the error.
    #[inline]
    pub(crate) fn push_covered<G, E>(
        &self,
        item: I,
        cover: impl FnOnce() -> Result<G, E>,
    ) -> Result<Pushed, (E, I)> {
        let word = item.into_word();
        // SAFETY: `word` came from `into_word` just above and was not
        // published: the failed push hands it back.
        self.push_word(word, Some(cover))
            .map_err(|e| (e, unsafe { I::from_word(word) }))
    }

    #[inline]
    fn push_word<G, E>(
        &self,
        word: usize,
        mut cover: Option<impl FnOnce() -> Result<G, E>>,
    ) -> Result<Pushed, E> {
        debug_assert!(word > STATE && word & STATE == 0, "a bad item word");
        let covers = cover.is_some();
        let mut lock = None;
        let mut head = self.head.load(Relaxed);
        let mut backoff = 1u32;
        loop {
            if head & COVERED == 0 {
                if let Some(cover) = cover.take() {
                    // `cover` may run a user's executor code, which may
                    // panic: the item is dropped then, not leaked.
                    let unpushed = Unpushed::<I>(word, PhantomData);
                    let covered = cover();
                    std::mem::forget(unpushed);
                    lock = Some(covered?);
                    // Under the lock now: nobody clears `COVERED` until
                    // the push below sets it.
                    head = self.head.load(Relaxed);
                }
            }
            // SAFETY: `word` is ours until the CAS below publishes it.
            unsafe { I::set_next(word, top(head)) };
            let covered = if covers { COVERED } else { head & COVERED };
            // Release publishes the item (and its link) to the owner that
            // takes it. Acquire matters when `OWNED` was clear: the caller
            // becomes the owner and must see what the previous owner
            // released.
            match self
                .head
                .compare_exchange_weak(head, word | OWNED | covered, AcqRel, Relaxed)
            {
                Ok(_) => {
                    drop(lock);
                    return Ok(if head & OWNED != 0 {
                        Pushed::Queued
                    } else {
                        Pushed::Owned
                    });
                }
                Err(_) => {
                    for _ in 0..backoff {
                        std::hint::spin_loop();
                    }
                    backoff = (backoff * 2).min(64);
                    head = self.head.load(Relaxed);
                }
            }
        }
    }

    /// Takes the strand over if it is idle (and therefore empty), without
    /// queueing anything: the uncontended path of a lock, or (`quick`) of a
    /// section run on the spot.
    #[inline]
    pub(crate) fn try_acquire(&self, quick: bool) -> bool {
        let owned = if quick { QUICK } else { OWNED };
        // Acquire: see what the previous owner released.
        self.head
            .compare_exchange(0, owned, Acquire, Relaxed)
            .is_ok()
    }

    /// For an owner that took the strand with [`try_acquire`](Queue::try_acquire):
    /// gives it up if nothing was pushed since (`true`); otherwise keeps it
    /// (`false`, and the caller must take what was pushed).
    #[inline]
    pub(crate) fn release_if_empty(&self) -> bool {
        let head = self.head.load(Relaxed);
        debug_assert!(head & OWNED != 0, "a release by a non-owner");
        // Release, as in `take`.
        (head == OWNED || head == QUICK)
            && self
                .head
                .compare_exchange(head, 0, Release, Relaxed)
                .is_ok()
    }

    /// The strand's state right now (stale as soon as it returns).
    #[inline]
    pub(crate) fn peek(&self) -> Peek {
        match self.head.load(Relaxed) & !COVERED {
            0 => Peek::Idle,
            OWNED => Peek::Busy,
            QUICK => Peek::Quick,
            _ => Peek::Queued,
        }
    }

    /// For the owner: everything submitted so far as a FIFO batch, or, if
    /// nothing was, gives up ownership (unless the strand is covered: see
    /// [`Taken::Covered`]).
    pub(crate) fn take(&self) -> Taken<I> {
        let mut head = self.head.load(Relaxed);
        loop {
            debug_assert!(head & OWNED != 0, "take by a non-owner");
            if top(head) == 0 {
                if head & COVERED != 0 {
                    return Taken::Covered;
                }
                // Release hands what this owner wrote (its batch cursor, the
                // strand's counters) to whoever owns the strand next.
                match self.head.compare_exchange(head, 0, Release, Relaxed) {
                    Ok(_) => return Taken::Released,
                    Err(now) => head = now,
                }
                continue;
            }
            let (list, n, covered) = self.take_stack();
            return Taken::Batch(list, n, covered);
        }
    }

    /// For the owner: whether the strand is covered (only the owner clears
    /// `COVERED`, so a `true` stays true until it does).
    #[inline]
    pub(crate) fn is_covered(&self) -> bool {
        self.head.load(Relaxed) & COVERED != 0
    }

    /// For the owner: everything in the stack (perhaps nothing), oldest
    /// first, how many, and how many the admission covers. The strand
    /// stays owned, and covered if it was.
    pub(crate) fn take_stack(&self) -> (List<I>, usize, usize) {
        // Acquire: see the items (and links) the pushes released.
        let top = top(self.head.fetch_and(STATE, Acquire));
        // SAFETY: the AND took the stack out of the queue: its items are
        // ours alone.
        unsafe { List::reversed(top) }
    }

    /// For the owner of a covered strand with nothing queued, under the
    /// lock of the admission that covers it: clears `COVERED`, and gives
    /// the strand up too if `release`. `false` if something was pushed
    /// meanwhile (the caller takes it, still covered).
    pub(crate) fn uncover(&self, release: bool) -> bool {
        let to = if release { 0 } else { OWNED };
        // Release, as in `take`.
        self.head
            .compare_exchange(OWNED | COVERED, to, Release, Relaxed)
            .is_ok()
    }
}

impl<I: Link> Drop for Queue<I> {
    fn drop(&mut self) {
        let top = top(self.head.swap(0, Relaxed));
        // SAFETY: `&mut self`: nobody else can reach the items.
        drop(unsafe { List::<I>::reversed(top) });
    }
}

/// An item word not yet pushed, dropped as its item if a push unwinds.
struct Unpushed<I: Link>(usize, PhantomData<I>);

impl<I: Link> Drop for Unpushed<I> {
    fn drop(&mut self) {
        // SAFETY: the word came from `into_word` and was not published
        // (the push unwinds before its compare-and-swap).
        drop(unsafe { I::from_word(self.0) });
    }
}

/// A cache line: how far back the reversal looks for a thread's earlier
/// posts, which lie before its later ones in the chunk it carves.
const LINE: usize = 64;

/// Asks for the line at `addr` to be brought into the cache; a hint,
/// which never faults, whatever the address.
#[inline(always)]
fn prefetch(addr: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: a prefetch reads nothing the program sees and cannot fault,
    // so any address will do.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(addr as *const i8);
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = addr;
}

/// A FIFO list of items linked through their own slots, owned by whoever
/// holds it. Dropping it drops the items.
pub(crate) struct List<I: Link> {
    first: usize,
    /// The newest item, 0 if none: where [`append`](List::append) links.
    last: usize,
    _items: PhantomData<I>,
}

// SAFETY: a list owns its items; moving it moves them.
unsafe impl<I: Link + Send> Send for List<I> {}

impl<I: Link> Default for List<I> {
    fn default() -> Self {
        List {
            first: 0,
            last: 0,
            _items: PhantomData,
        }
    }
}

impl<I: Link> List<I> {
    /// Turns a stack (newest first) into a list (oldest first) by
    /// relinking it in place; counts it, and the items the admission
    /// covers.
    ///
    /// # Safety
    ///
    /// The stack from `top` on belongs to the caller alone.
    unsafe fn reversed(top: usize) -> (Self, usize, usize) {
        let (mut prev, mut cur, mut n, mut covered) = (0, top, 0, 0);
        while cur != 0 {
            // The walk is a chain of loads, each of memory another thread
            // wrote. A thread's posts sit in adjacent slots (see
            // `recycle`), and its earlier ones lie further down the
            // stack: their lines can be on their way while the walk gets
            // there.
            prefetch(cur.wrapping_sub(LINE));
            prefetch(cur.wrapping_sub(2 * LINE));
            // SAFETY: every word on the stack came from `into_word`, and
            // the caller owns the stack.
            unsafe {
                let next = I::next(cur);
                I::set_next(cur, prev);
                covered += usize::from(I::covered(cur));
                prev = cur;
                cur = next;
            }
            n += 1;
        }
        (
            List {
                first: prev,
                last: top,
                _items: PhantomData,
            },
            n,
            covered,
        )
    }

    /// Links `other` after this list's items.
    pub(crate) fn append(&mut self, mut other: List<I>) {
        if other.first == 0 {
            return;
        }
        if self.first == 0 {
            std::mem::swap(self, &mut other);
            return;
        }
        // SAFETY: the list owns its last item, and the word linked after
        // it is `other`'s, which this list takes over.
        unsafe { I::set_next(self.last, other.first) };
        self.last = other.last;
        (other.first, other.last) = (0, 0);
    }

    /// Takes the oldest item. Its successor is read first, so the item may
    /// be queued again (its link rewritten) as soon as it is returned.
    pub(crate) fn pop_front(&mut self) -> Option<I> {
        if self.first == 0 {
            return None;
        }
        let word = self.first;
        // SAFETY: the list owns `word`, which came from `into_word`.
        unsafe {
            self.first = I::next(word);
            if self.first == 0 {
                self.last = 0;
            }
            Some(I::from_word(word))
        }
    }

    /// Puts `item` back in front.
    pub(crate) fn push_front(&mut self, item: I) {
        let word = item.into_word();
        // SAFETY: `word` is ours: it came from `into_word` just above.
        unsafe { I::set_next(word, self.first) };
        if self.first == 0 {
            self.last = word;
        }
        self.first = word;
    }
}

impl<I: Link> Iterator for List<I> {
    type Item = I;
    fn next(&mut self) -> Option<I> {
        self.pop_front()
    }
}

impl<I: Link> Drop for List<I> {
    fn drop(&mut self) {
        while self.pop_front().is_some() {}
    }
}

/// A cell that only the strand's current owner touches. Ownership passes
/// through `head` (and, for locks, a waiter's state) with release/acquire
/// pairs, which is what makes the accesses ordered; under loom the cell
/// checks that they are.
pub(crate) struct OwnerCell<T>(crate::loom::UnsafeCell<T>);

// SAFETY: only the owner of the strand touches the value, one owner at a
// time, each handing over to the next with a release/acquire pair; so the
// value is used by one thread at a time, which `T: Send` allows.
unsafe impl<T: Send> Sync for OwnerCell<T> {}

impl<T> OwnerCell<T> {
    pub(crate) fn new(value: T) -> Self {
        OwnerCell(crate::loom::UnsafeCell::new(value))
    }

    /// Runs `f` on the value.
    ///
    /// # Safety
    ///
    /// The caller owns the strand (see the module docs of `strand`).
    #[inline]
    pub(crate) unsafe fn with_mut<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: the caller owns the strand, so nothing else is in the
        // cell, and ownership passed to it with a release/acquire pair.
        unsafe { self.0.with_mut(f) }
    }
}

/// An entry of a strand's queue.
pub(crate) enum Item {
    /// A task's runnable: a section of a spawned task.
    Task(Runnable),
    /// A posted closure, or a lock request.
    Node(Node),
}

/// Bit 1 of an item word: the word is a node, not a runnable.
const NODE_TAG: usize = 0b10;

/// A queue entry that is not a task: a [`Header`] at the start of a larger
/// allocation (a posted closure, a lock request, a queued `with` section),
/// which its vtable knows
/// how to run or dispose of. Dropping a node disposes of it.
pub(crate) struct Node(NonNull<Header>);

// SAFETY: every node is made from `Send` parts (a `Send` closure, or a
// waiter: atomics and a waker cell that its state word hands over), and is
// run or disposed of once, by whoever holds the `Node`.
unsafe impl Send for Node {}

/// The start of every node. Aligned to 8 on every target, so that a
/// node's address leaves the queue word's three state bits clear.
#[repr(C, align(8))]
pub(crate) struct Header {
    /// The queue's link.
    link: AtomicUsize,
    vtable: &'static NodeVTable,
}

/// What running a node did.
pub(crate) enum Ran {
    /// A lock request was granted: the caller handed the strand over and
    /// no longer owns it.
    Granted,
    /// A closure ran, or a cancelled lock request was skipped.
    Done,
    /// A closure panicked; nobody has a handle to read the payload, so the
    /// caller reports it.
    Panicked(PanicPayload),
}

/// What a node does.
pub(crate) struct NodeVTable {
    /// Runs the node, consuming it: calls a closure, or grants a lock
    /// request. The second argument says where a panic that a queued
    /// section's handle will never read goes (asked only for one).
    pub(crate) run: unsafe fn(NonNull<Header>, &dyn Fn() -> Option<Sink>) -> Ran,
    /// Disposes of a node that will never run, consuming it; a panic of a
    /// closure's captures' `Drop` is returned for the caller to report.
    pub(crate) discard: unsafe fn(NonNull<Header>) -> Option<PanicPayload>,
    /// `true` for lock requests: running one only hands the strand over, so
    /// any owner may; everything else runs on the runner.
    pub(crate) grants: bool,
    /// For a queued `with` section: its id and where it was called, which
    /// the runner notes while it runs (dumps list it as a task).
    pub(crate) about: Option<unsafe fn(NonNull<Header>) -> SectionAbout>,
}

/// A queued section's id and call site.
pub(crate) type SectionAbout = (TaskId, &'static Location<'static>);

impl Header {
    pub(crate) fn new(vtable: &'static NodeVTable) -> Header {
        Header {
            link: AtomicUsize::new(0),
            vtable,
        }
    }
}

impl Node {
    /// # Safety
    ///
    /// `header` starts a live node that belongs to the caller, and whose
    /// vtable's functions may be called with `header`, once.
    pub(crate) unsafe fn from_header(header: NonNull<Header>) -> Node {
        Node(header)
    }

    fn vtable(&self) -> &'static NodeVTable {
        // SAFETY: the node is alive while we hold it.
        unsafe { self.0.as_ref() }.vtable
    }

    /// `true` for a lock request.
    pub(crate) fn grants(&self) -> bool {
        self.vtable().grants
    }

    /// Runs the node; see [`NodeVTable::run`].
    pub(crate) fn run(self, sink: &dyn Fn() -> Option<Sink>) -> Ran {
        let this = ManuallyDrop::new(self);
        // SAFETY: the node is ours (`from_header`'s contract) and is
        // consumed here once: `ManuallyDrop` keeps `Drop` from discarding it.
        unsafe { (this.vtable().run)(this.0, sink) }
    }

    /// A queued section's id and call site; `None` for other nodes.
    pub(crate) fn about(&self) -> Option<SectionAbout> {
        // SAFETY: the node is alive while we hold it, and the function is
        // its vtable's.
        self.vtable().about.map(|about| unsafe { about(self.0) })
    }

    /// Disposes of the node unrun; see [`NodeVTable::discard`].
    pub(crate) fn discard(self) -> Option<PanicPayload> {
        let this = ManuallyDrop::new(self);
        // SAFETY: as in `run`.
        unsafe { (this.vtable().discard)(this.0) }
    }
}

/// Where a node is dropped without `discard` (a queue or batch dropped with
/// its strand), nobody is left to report a panic to.
impl Drop for Node {
    fn drop(&mut self) {
        // SAFETY: the node is ours and is consumed here once.
        if let Some(payload) = unsafe { (self.vtable().discard)(self.0) } {
            drop_payload(payload);
        }
    }
}

/// A posted closure, as a node. Its strand's admission covers it (see
/// `cover`), so it holds no admission of its own.
#[repr(C)]
struct Call<F> {
    header: Header,
    f: F,
}

impl<F: FnOnce() + Send + 'static> Call<F> {
    const VTABLE: NodeVTable = NodeVTable {
        run: Self::run,
        discard: Self::discard,
        grants: false,
        about: None,
    };

    /// Places `f` as a node: in a slot of this thread's (see `recycle`), so
    /// that a post allocates nothing of its own, or boxed if it is large.
    pub(crate) fn node(f: F) -> Node {
        let call = super::recycle::place(Call {
            header: Header::new(&Self::VTABLE),
            f,
        });
        // SAFETY: `Call` is `repr(C)` with the header first, so the call's
        // pointer is the header's; the vtable is this type's.
        unsafe { Node::from_header(call.cast()) }
    }

    /// # Safety
    ///
    /// `header` came from [`Call::node`] of this `F`, and is consumed.
    unsafe fn run(header: NonNull<Header>, _: &dyn Fn() -> Option<Sink>) -> Ran {
        // SAFETY: the caller's contract: the node is ours to take back.
        let Call { f, .. } = unsafe { super::recycle::take(header.cast::<Call<F>>()) };
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(()) => Ran::Done,
            Err(payload) => Ran::Panicked(payload),
        }
    }

    /// # Safety
    ///
    /// As for [`run`](Call::run).
    unsafe fn discard(header: NonNull<Header>) -> Option<PanicPayload> {
        // SAFETY: as in `run`.
        let Call { f, .. } = unsafe { super::recycle::take(header.cast::<Call<F>>()) };
        // Discarded while a runner is dropped, where async-task aborts on a
        // panic: a closure whose captures panic in `Drop` is reported.
        catch_unwind(AssertUnwindSafe(move || drop(f))).err()
    }
}

/// A posted closure, as a queue item.
pub(crate) fn call<F: FnOnce() + Send + 'static>(f: F) -> Item {
    Item::Node(Call::node(f))
}

/// The link slot of an item word.
enum LinkRef<'a> {
    Task(&'a std::sync::atomic::AtomicUsize),
    Node(&'a AtomicUsize),
}

impl Item {
    /// # Safety
    ///
    /// `word` came from `into_word` and is not yet turned back into an item.
    #[inline]
    unsafe fn with_link<R>(word: usize, f: impl FnOnce(LinkRef<'_>) -> R) -> R {
        if word & NODE_TAG != 0 {
            // SAFETY: the word is a live node's header pointer, tagged.
            let header = unsafe { &*((word & !NODE_TAG) as *const Header) };
            f(LinkRef::Node(&header.link))
        } else {
            // SAFETY: the word is a runnable's pointer; the task, its
            // metadata included, lives while the runnable does, and the
            // word stands for the runnable. `ManuallyDrop` keeps this
            // borrow from consuming it.
            let runnable = ManuallyDrop::new(unsafe {
                Runnable::from_raw(NonNull::new_unchecked(word as *mut ()))
            });
            f(LinkRef::Task(&runnable.metadata().queue_link))
        }
    }
}

// Checked where the alignment is declared, on every target.
const _: () = assert!(std::mem::align_of::<Header>() >= 8);
const _: () = assert!(std::mem::align_of::<crate::executor::TaskInfo>() >= 8);

// SAFETY:
// - a runnable's pointer points at its task's header, which holds its
//   `TaskInfo`, aligned to 8: above 7, bits 0 to 2 clear; a node's header
//   pointer likewise (`Header` is aligned to 8), tagged with bit 1 only;
// - the links are `TaskInfo::queue_link` and `Header::link`: a runnable
//   exists once and is in one queue at a time, and a node is pushed once,
//   so each link belongs to the one word that stands for its item.
unsafe impl Link for Item {
    #[inline]
    fn into_word(self) -> usize {
        match self {
            Item::Task(runnable) => runnable.into_raw().as_ptr() as usize,
            Item::Node(node) => ManuallyDrop::new(node).0.as_ptr() as usize | NODE_TAG,
        }
    }

    #[inline]
    unsafe fn from_word(word: usize) -> Self {
        // SAFETY: `word` came from `into_word` (the caller's contract), and
        // the tag says which kind it was.
        unsafe {
            if word & NODE_TAG != 0 {
                Item::Node(Node(NonNull::new_unchecked(
                    (word & !NODE_TAG) as *mut Header,
                )))
            } else {
                Item::Task(Runnable::from_raw(NonNull::new_unchecked(word as *mut ())))
            }
        }
    }

    #[inline]
    unsafe fn next(word: usize) -> usize {
        // SAFETY: the caller's contract is `with_link`'s. Relaxed: the
        // queue's release/acquire on its head orders the links.
        unsafe {
            Item::with_link(word, |link| match link {
                LinkRef::Task(l) => l.load(Relaxed),
                LinkRef::Node(l) => l.load(Relaxed),
            })
        }
    }

    #[inline]
    unsafe fn set_next(word: usize, next: usize) {
        // SAFETY: as in `next`.
        unsafe {
            Item::with_link(word, |link| match link {
                LinkRef::Task(l) => l.store(next, Relaxed),
                LinkRef::Node(l) => l.store(next, Relaxed),
            })
        }
    }

    #[inline]
    unsafe fn covered(word: usize) -> bool {
        // SAFETY: a node word is a live node's header pointer, tagged.
        word & NODE_TAG != 0
            && !unsafe { &*((word & !NODE_TAG) as *const Header) }
                .vtable
                .grants
    }
}

impl Item {
    /// Whether the strand's admission covers this item (see
    /// [`Link::covered`]).
    pub(crate) fn covered(&self) -> bool {
        matches!(self, Item::Node(node) if !node.grants())
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom::Arc;
    use loom::thread;

    /// A test item: a boxed node with a loom-checked link.
    struct Node {
        link: AtomicUsize,
        producer: usize,
        seq: usize,
        /// Submit once more when drained (a task that wakes itself).
        again: bool,
    }

    struct Item(Box<Node>);

    // SAFETY: a `Box<Node>` pointer is aligned to 8 (`Node` holds a
    // `usize`), so it is above 7 with bits 0 to 2 clear; the link is the
    // node's own.
    unsafe impl Link for Item {
        fn into_word(self) -> usize {
            Box::into_raw(self.0) as usize
        }
        unsafe fn from_word(word: usize) -> Self {
            // SAFETY: `word` came from `Box::into_raw`.
            Item(unsafe { Box::from_raw(word as *mut Node) })
        }
        unsafe fn next(word: usize) -> usize {
            // SAFETY: the node is alive while it is a word.
            unsafe { (*(word as *const Node)).link.load(Relaxed) }
        }
        unsafe fn set_next(word: usize, next: usize) {
            // SAFETY: as above.
            unsafe { (*(word as *const Node)).link.store(next, Relaxed) }
        }
        unsafe fn covered(_: usize) -> bool {
            true
        }
    }

    fn item(producer: usize, seq: usize, again: bool) -> Item {
        Item(Box::new(Node {
            link: AtomicUsize::new(0),
            producer,
            seq,
            again,
        }))
    }

    struct Strand {
        queue: Queue<Item>,
        /// Catches owners that overlap outright. Relaxed, so that it adds
        /// no ordering of its own: the loom-checked `log` cell is what
        /// proves each owner sees the previous one's writes.
        in_section: AtomicUsize,
        /// What ran, in order; touched by the owner only.
        log: OwnerCell<Vec<(usize, usize)>>,
        ran: AtomicUsize,
    }

    impl Strand {
        fn new() -> Arc<Strand> {
            Arc::new(Strand {
                queue: Queue::new(),
                in_section: AtomicUsize::new(0),
                log: OwnerCell::new(Vec::new()),
                ran: AtomicUsize::new(0),
            })
        }

        /// What a submitter does: push, and if that made it the owner,
        /// drain (standing in for the runner it would start).
        fn submit(&self, item: Item) {
            match self.queue.push(item) {
                Pushed::Queued => {}
                Pushed::Owned => self.drain(),
            }
        }

        /// Runs a section that logs `entry`.
        ///
        /// # Safety
        ///
        /// The caller owns the strand.
        unsafe fn section(&self, entry: (usize, usize)) {
            assert_eq!(self.in_section.swap(1, Relaxed), 0, "two owners");
            // SAFETY: the caller owns the strand.
            unsafe { self.log.with_mut(|l| l.push(entry)) };
            self.ran.fetch_add(1, Relaxed);
            assert_eq!(self.in_section.swap(0, Relaxed), 1);
        }

        /// The runner: batches until the queue says the strand is idle.
        fn drain(&self) {
            loop {
                match self.queue.take() {
                    Taken::Released => return,
                    Taken::Covered => unreachable!("nothing here covers"),
                    Taken::Batch(list, _, _) => {
                        for Item(node) in list {
                            // SAFETY: inside `drain` this thread owns the strand.
                            unsafe { self.section((node.producer, node.seq)) };
                            if node.again {
                                // Re-submitted while the strand is owned: queued.
                                match self.queue.push(item(node.producer, node.seq + 10, false)) {
                                    Pushed::Queued => {}
                                    _ => unreachable!("pushed while owned"),
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// A section taken on the spot (`try_acquire(true)`) is released while
    /// another thread submits: the release either gives the strand up
    /// (and the submitter owns it) or finds the item and drains it; either
    /// way the item runs once, never beside the section, and the strand
    /// ends idle.
    #[test]
    fn quick_release_vs_submit() {
        loom::model(|| {
            let strand = Strand::new();
            let other = {
                let strand = strand.clone();
                thread::spawn(move || strand.submit(item(1, 0, false)))
            };
            let acquired = strand.queue.try_acquire(true);
            if acquired {
                // SAFETY: the acquire made this thread the owner.
                unsafe { strand.section((0, 0)) };
                if !strand.queue.release_if_empty() {
                    strand.drain();
                }
            }
            other.join().unwrap();
            let sections = usize::from(acquired) + 1;
            assert_eq!(strand.ran.load(SeqCst), sections, "the item ran once");
            assert_eq!(strand.queue.head.load(SeqCst), 0, "idle and empty");
        });
    }

    /// Two submitters race each other and the drain; one item re-submits
    /// itself while being drained. Every item runs exactly once, each
    /// producer's items in order, never two owners at once, and the strand
    /// ends idle and empty.
    #[test]
    fn submit_drain_resubmit() {
        loom::model(|| {
            let strand = Strand::new();
            let other = {
                let strand = strand.clone();
                thread::spawn(move || {
                    strand.submit(item(1, 0, false));
                    strand.submit(item(1, 1, false));
                })
            };
            strand.submit(item(0, 0, true));
            strand.submit(item(0, 1, false));
            other.join().unwrap();
            assert_eq!(strand.ran.load(SeqCst), 5);
            assert_eq!(strand.queue.head.load(SeqCst), 0, "idle and empty");
            // SAFETY: the strand is idle and every thread has finished.
            let log = unsafe { strand.log.with_mut(std::mem::take) };
            for p in 0..2 {
                let mine: Vec<usize> = log.iter().filter(|e| e.0 == p).map(|e| e.1).collect();
                let want: &[usize] = if p == 0 { &[0, 1, 10] } else { &[0, 1] };
                // Producer 0's re-submission comes after its own item 0;
                // item 1 may run before or after it.
                let mut sorted = mine.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, want, "every item once");
                let pos = |s| mine.iter().position(|&x| x == s).unwrap();
                assert!(pos(0) < pos(1), "FIFO per producer: {mine:?}");
                if p == 0 {
                    assert!(pos(0) < pos(10));
                }
            }
        });
    }

    /// A stand-in admission: counts how many are alive.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_sub(1, SeqCst);
        }
    }

    /// A strand whose posts are covered by an admission (see `cover`).
    struct Posts {
        queue: Queue<Item>,
        cover: super::super::cover::Cover<Counted>,
        /// Admissions alive.
        live: Arc<AtomicUsize>,
        ran: AtomicUsize,
    }

    impl Posts {
        fn new() -> Arc<Posts> {
            Arc::new(Posts {
                queue: Queue::new(),
                cover: super::super::cover::Cover::new(),
                live: Arc::new(AtomicUsize::new(0)),
                ran: AtomicUsize::new(0),
            })
        }

        /// Posts an item, asking for an admission if the strand is not
        /// covered (`refused`: the executor refuses it); drains if the push
        /// made this thread the owner. Whether the item was queued.
        fn post(&self, producer: usize, refused: bool) -> bool {
            let admit = || {
                if refused {
                    return Err(());
                }
                self.live.fetch_add(1, SeqCst);
                Ok(Counted(self.live.clone()))
            };
            match self
                .queue
                .push_covered(item(producer, 0, false), || self.cover.hold(admit))
            {
                Ok(Pushed::Owned) => {
                    self.drain();
                    true
                }
                Ok(Pushed::Queued) => true,
                Err(((), _)) => false,
            }
        }

        /// The owner: runs batches, checking that an admission covers each
        /// item, until it gives the strand up (dropping the admission if it
        /// was covered).
        fn drain(&self) {
            loop {
                match self.queue.take() {
                    Taken::Released => return,
                    Taken::Covered => {
                        if self.cover.drop_if(|| self.queue.uncover(true)) {
                            return;
                        }
                    }
                    Taken::Batch(list, _, _) => {
                        for _ in list {
                            assert!(self.live.load(SeqCst) >= 1, "a queued post is covered");
                            self.ran.fetch_add(1, SeqCst);
                        }
                    }
                }
            }
        }
    }

    /// Two posters race each other and the owner that drains and gives
    /// the strand up (the second one's admission refused, if `refuse`):
    /// every queued post is covered when it runs (briefly by two
    /// admissions, while a poster that lost the race drops its spare),
    /// and when all ran the strand is idle, uncovered, and no admission is
    /// left.
    fn posts_race(refuse: bool, hold_first: bool) {
        loom::model(move || {
            let strand = Posts::new();
            // Holding the strand, as a guard would: the posts queue behind
            // it with no runner, covered all the same.
            let held = hold_first && strand.queue.try_acquire(false);
            let posters: Vec<_> = (0..2)
                .map(|p| {
                    let strand = strand.clone();
                    thread::spawn(move || strand.post(p, refuse && p == 1))
                })
                .collect();
            if held {
                strand.drain();
            }
            let queued = posters
                .into_iter()
                .map(|p| p.join().unwrap())
                .filter(|&q| q)
                .count();
            assert!(queued == 2 || refuse);
            assert_eq!(strand.ran.load(SeqCst), queued, "every queued post ran");
            assert_eq!(strand.queue.head.load(SeqCst), 0, "idle and uncovered");
            assert_eq!(strand.live.load(SeqCst), 0, "the admission was dropped");
        });
    }

    #[test]
    fn covered_posts_race_the_owner_that_gives_the_strand_up() {
        posts_race(false, false);
    }

    #[test]
    fn a_refused_post_is_handed_back_and_the_others_stay_covered() {
        posts_race(true, false);
    }

    #[test]
    fn posts_queued_behind_a_holder_are_covered_until_they_run() {
        posts_race(false, true);
    }

    /// The owner grants a lock, after the posts before it ran, while a
    /// post races in: it takes the stack to see whether any post is in
    /// line, and if none is, drops the admission, keeping the strand (as
    /// `Core::uncover_if_nothing_covered` does). The racing post is covered
    /// when it runs whichever comes first, and when the owner gives the
    /// strand up no admission is left.
    #[test]
    fn a_grant_with_no_post_in_line_uncovers_while_a_post_races_in() {
        loom::model(|| {
            let strand = Posts::new();
            assert!(strand.queue.try_acquire(false), "a fresh strand is idle");
            // A post queued behind the owner, and run: the strand stays
            // covered with nothing left in line.
            assert!(strand.post(0, false));
            for _ in strand.queue.take_stack().0 {
                strand.ran.fetch_add(1, SeqCst);
            }
            let poster = {
                let strand = strand.clone();
                thread::spawn(move || strand.post(1, false))
            };
            // Lets the model run the poster before the grant, too.
            thread::yield_now();
            // The grant: the owner's batch is empty, so what is in line is
            // what the stack holds.
            let mut batch = List::default();
            if strand.queue.is_covered() {
                let (list, _, covered) = strand.queue.take_stack();
                batch.append(list);
                if covered == 0 {
                    strand.cover.drop_if(|| strand.queue.uncover(false));
                }
            }
            for _ in batch {
                assert!(strand.live.load(SeqCst) >= 1, "a queued post is covered");
                strand.ran.fetch_add(1, SeqCst);
            }
            // The guard drops: the owner runs what came since and gives the
            // strand up.
            strand.drain();
            // A post that came after drains the strand itself.
            assert!(poster.join().unwrap());
            assert_eq!(strand.ran.load(SeqCst), 2, "each post ran once");
            assert_eq!(strand.queue.head.load(SeqCst), 0, "idle and uncovered");
            assert_eq!(strand.live.load(SeqCst), 0, "the admission was dropped");
        });
    }
}
