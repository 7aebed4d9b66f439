//! The strand itself: its ownership protocol (the ground rules in the
//! module docs of `strand`), its runner, and what its owners do.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crossbeam_utils::CachePadded;

use super::cover::Cover;
use super::queue::{Item, List, OwnerCell, Peek, Pushed, Queue, Ran, Taken};
use super::{Shared, StrandMetrics};
use crate::admission::{past_limit, Admission, Sink};
use crate::dump::lock::{BookExt, LockBook};
use crate::dump::records;
use crate::error::{PanicPayload, RejectReason};
use crate::executor::{admit, hold_open, let_go, try_admit, Exec, ExecHeader, Executor, WeakExec};
use crate::loom::SetOnce;
use crate::section::Frame;
use crate::task::report;
use crate::task::{
    create_daemon, current_task, current_task_id, task_id, with_current_task, Daemon,
};
use crate::task_id::{TaskId, TaskKind};
use crate::trace::trace_event;

/// How many items the runner handles in one poll before it wakes itself
/// and returns, so that the rest of its executor's work runs in between.
/// tokio's task budget; small under loom, so the models yield too.
const BUDGET: usize = if cfg!(loom) { 2 } else { 128 };

/// How many times [`Core::acquire_briefly`] looks at a strand that runs a
/// section on the spot before giving up: such a section is short, and a
/// little spinning is much cheaper than queueing a task and sleeping (none
/// at all let contended `with` calls fall back to queueing half the time,
/// at three times the cost). Loom models do not spin.
const SPINS: usize = if cfg!(loom) { 0 } else { 10 };

/// The most pauses between two looks are `2^BACKOFF`: in all at most about
/// 220 pauses (a few microseconds) before a `with` queues instead.
const BACKOFF: usize = 5;

/// The strand itself, whatever it guards: four words (five with the
/// header), so that an idle strand costs little; what only a strand that
/// queues needs is in its [`Ext`], made when it first queues.
///
/// `repr(C)`, the header first: the core's address is the strand's (the
/// `Shared` around it starts with the core), which an `Exec` of the
/// strand points at, and the fields a section run on the spot touches
/// (the queue word, the book) sit right after the `Arc`'s counts, on one
/// or two cache lines.
#[repr(C)]
pub(crate) struct Core {
    /// What an `Exec` of this strand points to.
    header: ExecHeader,
    queue: Queue<Item>,
    /// Who holds the strand, for task dumps; the owner writes it.
    pub(crate) book: LockBook,
    pub(super) inner: Exec,
}

/// What only a strand that queues needs: made by the first item queued
/// (before it is pushed, so an owner that finds an item finds this), by a
/// close, or by the book's first wrap; freed with the strand.
///
/// What every submitter reads and counts is on a cache line of its own,
/// apart from what only the owner writes (the batch, the book's
/// sequence), so that an owner running a batch does not take the line
/// the submitters contend for, nor they its.
#[repr(C)]
struct Ext {
    submit: CachePadded<Submit>,
    /// The book's part; the book points here.
    book: BookExt,
    /// Owner only: the rest of the batch being run, oldest first.
    batch: OwnerCell<List<Item>>,
    /// Owner only: how many items of `batch` the admission covers (posts
    /// and queued sections).
    covered: OwnerCell<usize>,
    /// The runner's waker, and its handle, which cancels it when the
    /// strand goes. Made by the first owner that starts the runner: a
    /// strand that is only ever locked, or whose sections all run on the
    /// spot, never makes one. Never changed once made.
    runner: SetOnce<(Waker, Daemon)>,
    /// Owner only: the strand, held strongly while the runner owns it (from
    /// `start_runner` until it gives the strand up), so that what is queued
    /// keeps the strand alive without a reference per item.
    held: OwnerCell<Option<Exec>>,
    queued: AtomicU64,
    batches: AtomicU64,
}

/// The part of the extension that submitters touch.
struct Submit {
    closed: AtomicBool,
    /// Set once, by the runner's drop as owner: the strand has no runner
    /// any more (Shutdown step 2).
    dead: AtomicBool,
    /// The one admission of `inner` that covers the posts and queued
    /// sections (see `cover`).
    posts: Cover<Admission>,
}

impl Submit {
    /// Closed itself, or dead.
    #[inline]
    fn refuses(&self) -> bool {
        self.closed.load(SeqCst) || self.dead.load(Acquire)
    }
}

impl Ext {
    /// The batch's oldest item, counted out of `covered`.
    ///
    /// # Safety
    ///
    /// The caller owns the strand.
    unsafe fn pop_front(&self) -> Option<Item> {
        // SAFETY: the caller owns the strand.
        let item = unsafe { self.batch.with_mut(List::pop_front) }?;
        if item.covered() {
            // SAFETY: as above.
            unsafe { self.covered.with_mut(|c| *c -= 1) };
        }
        Some(item)
    }

    /// Links `list` (`n` items, `covered` of them covered) after the
    /// batch; how many items of the batch are covered now.
    ///
    /// # Safety
    ///
    /// The caller owns the strand.
    unsafe fn absorb(&self, list: List<Item>, n: usize, covered: usize) -> usize {
        bump(&self.queued, n as u64);
        // SAFETY: the caller owns the strand.
        unsafe {
            self.batch.with_mut(|b| b.append(list));
            self.covered.with_mut(|c| {
                *c += covered;
                *c
            })
        }
    }

    /// Puts `item`, taken with [`pop_front`](Ext::pop_front), back.
    ///
    /// # Safety
    ///
    /// The caller owns the strand.
    unsafe fn push_front(&self, item: Item) {
        // SAFETY: the caller owns the strand.
        unsafe {
            if item.covered() {
                self.covered.with_mut(|c| *c += 1);
            }
            self.batch.with_mut(|b| b.push_front(item));
        }
    }

    /// The extension whose book part the book points at, with the
    /// provenance of its box.
    ///
    /// # Safety
    ///
    /// `book` is the book part of an extension installed by `make_ext`.
    unsafe fn of_book(book: NonNull<BookExt>) -> NonNull<Ext> {
        // SAFETY: `book` points `offset_of!(Ext, book)` bytes into an
        // `Ext`, with its box's provenance (see `make_ext`).
        unsafe { book.byte_sub(std::mem::offset_of!(Ext, book)).cast() }
    }
}

/// A post or a queued section that [`Core::accept_queued`] accepted:
/// queue it with [`Core::submit_covered`].
/// It also says that the extension is made.
pub(crate) struct Accepted<'a>(PhantomData<&'a Core>);

/// A pointer to a strand's core with the provenance of the strand's whole
/// allocation (from an `Arc` or an `Exec` of it, not from a reference):
/// what an owner that may start the runner hands in, for the runner to
/// hold the strand by.
#[derive(Clone, Copy)]
pub(crate) struct Whole(NonNull<ExecHeader>);

impl Whole {
    /// The strand `shared` holds.
    pub(crate) fn of<D>(shared: &Arc<Shared<D>>) -> Whole {
        // `Shared` and `Core` are `repr(C)`, each starting with the next,
        // and the header comes first.
        Whole(
            NonNull::new(Arc::as_ptr(shared).cast_mut())
                .expect("an `Arc` is not null")
                .cast(),
        )
    }

    /// The strand an `Exec` of it points at.
    ///
    /// # Safety
    ///
    /// `header` comes from a live `Exec` of a strand.
    pub(crate) unsafe fn at(header: NonNull<ExecHeader>) -> Whole {
        Whole(header)
    }

    /// The core.
    ///
    /// # Safety
    ///
    /// The strand is alive for `'a`.
    pub(crate) unsafe fn core<'a>(self) -> &'a Core {
        // SAFETY: the header is the core's first field (`repr(C)`), and the
        // caller keeps the strand alive.
        unsafe { self.0.cast::<Core>().as_ref() }
    }
}

impl Core {
    /// A strand over `inner`, for the shared state whose `Exec` vtable
    /// `header` is.
    pub(super) fn new(header: ExecHeader, inner: Exec, book: LockBook) -> Core {
        Core {
            header,
            queue: Queue::new(),
            book,
            inner,
        }
    }

    /// The extension, made if need be.
    #[inline]
    fn ext(&self) -> &Ext {
        match self.book.ext() {
            // SAFETY: an installed extension is an `Ext`'s (see
            // `make_ext`), freed only with the strand.
            Some(ext) => unsafe { Ext::of_book(ext).as_ref() },
            None => self.make_ext(),
        }
    }

    /// The extension, if it was made.
    #[inline]
    fn ext_if_made(&self) -> Option<&Ext> {
        // SAFETY: as in `ext`.
        self.book
            .ext()
            .map(|ext| unsafe { Ext::of_book(ext).as_ref() })
    }

    #[cold]
    fn make_ext(&self) -> &Ext {
        let ext = Box::into_raw(Box::new(Ext {
            submit: CachePadded::new(Submit {
                closed: AtomicBool::new(false),
                dead: AtomicBool::new(false),
                posts: Cover::new(),
            }),
            book: self.book.new_ext(),
            batch: OwnerCell::new(List::default()),
            covered: OwnerCell::new(0),
            runner: SetOnce::new(),
            held: OwnerCell::new(None),
            queued: AtomicU64::new(0),
            batches: AtomicU64::new(0),
        }));
        // SAFETY: a field of the box just made; the pointer keeps the
        // box's provenance, for `Ext::of_book` and the drop.
        let book = unsafe { NonNull::new_unchecked(std::ptr::addr_of_mut!((*ext).book)) };
        match self.book.install(book) {
            // SAFETY: installed, the extension lives as long as the strand.
            Ok(()) => unsafe { &*ext },
            Err(installed) => {
                // SAFETY: ours was not installed, so nothing else has it.
                drop(unsafe { Box::from_raw(ext) });
                // SAFETY: as in `ext`.
                unsafe { Ext::of_book(installed).as_ref() }
            }
        }
    }

    /// Queues `item`; `me` is this strand, for the runner, should the
    /// push make the caller the owner.
    #[inline]
    pub(super) fn submit(&self, me: Whole, item: Item) {
        // Made before the push: an owner that finds an item finds it.
        self.ext();
        self.push_and_start(me, item);
    }

    /// Queues `item`, a post or a section that [`accept_queued`]
    /// accepted (which made the extension), covered by the strand's
    /// admission of its executor (see `cover`). If no admission is held
    /// and the executor refuses one, the item comes back with the reason.
    ///
    /// [`accept_queued`]: Core::accept_queued
    #[inline]
    pub(super) fn submit_covered(
        &self,
        _: Accepted<'_>,
        me: Whole,
        item: Item,
    ) -> Result<(), (RejectReason, Item)> {
        let ext = self.ext();
        let cover = || ext.submit.posts.hold(|| self.admit());
        match self.queue.push_covered(item, cover)? {
            Pushed::Queued => {}
            // SAFETY: the push made this thread the owner.
            Pushed::Owned => unsafe { self.start_runner(me) },
        }
        Ok(())
    }

    #[inline]
    fn push_and_start(&self, me: Whole, item: Item) {
        match self.queue.push(item) {
            Pushed::Queued => {}
            // SAFETY: the push made this thread the owner.
            Pushed::Owned => unsafe { self.start_runner(me) },
        }
    }

    /// Hands the strand to the runner.
    ///
    /// # Safety
    ///
    /// The caller owns the strand, gives ownership up by this call, and
    /// `me` is this strand.
    unsafe fn start_runner(&self, me: Whole) {
        let ext = self.ext();
        // Acquire: the owner that marked the strand dead released it since.
        if ext.submit.dead.load(Acquire) {
            // SAFETY: the caller owns the strand.
            return unsafe { self.drain_dead() };
        }
        // SAFETY: `me` is this strand (the caller's contract), alive: the
        // caller reached it through a strong reference (a handle, a task
        // of the strand, a guard, the runner's poll).
        let me = unsafe { Exec::of_header(me.0) };
        // The runner holds the strand weakly: the strand holds its waker.
        let first = ext
            .runner
            .with(|runner| runner.is_none())
            .then(|| me.downgrade());
        // Held before the runner is woken: once polled, it may give the
        // strand up, and what it holds with it.
        // SAFETY: the caller owns the strand, and is not the runner (which
        // keeps the strand by waking itself), so nothing is held yet.
        unsafe {
            ext.held.with_mut(|held| {
                debug_assert!(held.is_none(), "only the runner holds the strand");
                *held = Some(me);
            })
        };
        match first {
            None => ext.runner.with(|runner| {
                if let Some((waker, _)) = runner {
                    waker.wake_by_ref();
                }
            }),
            Some(strand) => {
                // The first start. Only an owner gets here, one at a time,
                // so the runner is made once.
                let (runnable, daemon) = create_daemon(
                    self.inner.clone(),
                    Runner { strand },
                    TaskKind::StrandRunner,
                    self.book.location(),
                );
                // A second runner would be dropped here, and dropping its
                // daemon handle would cancel it while scheduled: the
                // strand would die. The ownership rules make it
                // unreachable.
                let made = ext.runner.init(|| (runnable.waker(), daemon));
                debug_assert!(made, "only an owner starts the runner, one at a time");
                runnable.schedule();
            }
        }
    }

    /// The next item for the runner, granting lock requests on the way
    /// and skipping cancelled ones. `None` means the caller no longer owns
    /// the strand: it granted a lock request (the strand is parked), or
    /// found nothing queued (the strand is idle).
    ///
    /// # Safety
    ///
    /// The caller owns the strand.
    unsafe fn next(&self) -> Option<Item> {
        loop {
            let ext = self.ext_if_made();
            // SAFETY: the caller owns the strand.
            let item = match ext.and_then(|ext| unsafe { ext.pop_front() }) {
                Some(item) => item,
                None => {
                    // Taken out while still the owner: a release gives up
                    // the cell. Dropping it cannot free the strand under
                    // our feet: every caller holds a strong reference of
                    // its own (the runner's poll and drop upgrade theirs;
                    // a guard or an on-the-spot section has its handle).
                    // Without the extension, nothing was queued: no post,
                    // nothing held.
                    // Whatever the runner ran last lets go (see `run`).
                    self.book.released();
                    // SAFETY: the caller owns the strand.
                    let held = ext.and_then(|ext| unsafe { ext.held.with_mut(Option::take) });
                    match self.queue.take() {
                        Taken::Released => {
                            drop(held);
                            return None;
                        }
                        Taken::Covered => {
                            // Covered means something was queued: the
                            // extension is made.
                            let ext = self.ext();
                            if ext.submit.posts.drop_if(|| self.queue.uncover(true)) {
                                drop(held);
                                return None;
                            }
                            // Pushed meanwhile: still the owner, to take it.
                            // SAFETY: the caller owns the strand.
                            unsafe { ext.held.with_mut(|h| *h = held) };
                            continue;
                        }
                        Taken::Batch(list, n, covered) => {
                            // Made before its items were pushed.
                            let ext = self.ext();
                            // SAFETY: still the owner (the take returned a
                            // batch).
                            unsafe {
                                ext.held.with_mut(|h| *h = held);
                                ext.absorb(list, n, covered);
                            }
                            bump(&ext.batches, 1);
                            trace_event!(batch = n, "strand batch");
                            continue;
                        }
                    }
                }
            };
            match item {
                Item::Node(node) if node.grants() => {
                    let ext = self.ext();
                    // A granted request owns the strand (it is parked); its
                    // lock future or guard borrows the `Guarded`, which
                    // keeps the strand alive meanwhile.
                    // SAFETY: the caller owns the strand.
                    unsafe { self.uncover_if_nothing_covered(ext) };
                    self.book.released();
                    // SAFETY: the caller owns the strand until the grant.
                    let held = unsafe { ext.held.with_mut(Option::take) };
                    if let Ran::Granted = node.run(&|| None) {
                        drop(held);
                        return None;
                    }
                    // SAFETY: not granted (the request was given up), so
                    // the caller still owns the strand.
                    unsafe { ext.held.with_mut(|h| *h = held) };
                }
                item => return Some(item),
            }
        }
    }

    /// For the owner granting a lock: if no post or queued section is left
    /// in line (in its batch, or in the stack, which it takes into the
    /// batch to see), the admission that covers them goes now, not when
    /// the strand next goes idle: a pool closing meanwhile need not wait
    /// for a guard held outside it, however many lock requests follow.
    ///
    /// # Safety
    ///
    /// The caller owns the strand.
    unsafe fn uncover_if_nothing_covered(&self, ext: &Ext) {
        // SAFETY: the caller owns the strand.
        if !self.queue.is_covered() || unsafe { ext.covered.with_mut(|c| *c) } > 0 {
            return;
        }
        let (list, n, covered) = self.queue.take_stack();
        // SAFETY: as above.
        if unsafe { ext.absorb(list, n, covered) } == 0 {
            // Fails if a post came meanwhile: it stays covered.
            ext.submit.posts.drop_if(|| self.queue.uncover(false));
        }
    }

    /// Passes the strand on, for an owner that is not the runner (a guard,
    /// a lock future, a lock request that found the strand idle): the book
    /// lets the owner go, lock requests next in line are granted right
    /// here, and at anything else the runner takes over.
    ///
    /// # Safety
    ///
    /// The caller owns the strand, gives ownership up by this call, and
    /// `me` is this strand.
    pub(crate) unsafe fn hand_on(&self, me: Whole) {
        // Here, not only where `next` finds the batch empty: a guard
        // granted from the runner's batch hands the rest of it on.
        self.book.released();
        // SAFETY: the caller owns the strand; `next` returning an item means
        // it still does, until `start_runner`.
        unsafe {
            if let Some(item) = self.next() {
                self.ext().push_front(item);
                self.start_runner(me);
            }
        }
    }

    /// Gives up a strand taken with [`acquire_briefly`](Core::acquire_briefly):
    /// the book lets the owner go, then one compare-and-swap when nothing
    /// was queued meanwhile, [`hand_on`](Core::hand_on) otherwise.
    ///
    /// What was queued is not run here (flat combining), though the caller
    /// is on the strand's executor: it would run other callers' sections
    /// under whatever the caller holds, and one that waits for a lock the
    /// caller holds (a guard, a mutex) would never return.
    /// `strand::queued_sections_never_run_inside_another_callers_with` keeps
    /// it so.
    ///
    /// # Safety
    ///
    /// The caller took the strand with `acquire_briefly`, still owns it,
    /// and gives ownership up by this call; `me` is this strand.
    #[inline]
    pub(crate) unsafe fn release_quick(&self, me: Whole) {
        self.book.released();
        // An owner that took an idle strand has no batch: a strand is idle
        // only once its batch is empty.
        if !self.queue.release_if_empty() {
            // SAFETY: the caller owns the strand.
            unsafe { self.hand_on(me) }
        }
    }

    /// The runner's poll: run up to [`BUDGET`] items.
    fn run(&self, cx: &mut Context<'_>) -> Poll<()> {
        let frame = Frame::new(self.id(), std::ptr::null(), current_task_id());
        let _entered = frame.enter();
        // Made before the first item was pushed, and the runner with it.
        let ext = self.ext();
        // The runner's own id, looked up at its first queued section.
        let mut runner = None;
        for _ in 0..BUDGET {
            // SAFETY: the runner is polled only after an owner handed the
            // strand over to it (ground rule 4).
            match unsafe { self.next() } {
                Some(Item::Task(runnable)) => {
                    frame.set_task(task_id(runnable.metadata()));
                    self.book.held_by(Some(runnable.metadata().id()), &ext.book);
                    runnable.run();
                    self.book.released();
                }
                Some(Item::Node(call)) => {
                    // A posted closure or a queued section runs in the
                    // runner's own task: what it waits on is noted in the
                    // runner, so the runner is the holder a dump names (a
                    // cycle through a section's wait goes through it). A
                    // section is also listed as running, by its own id and
                    // call site.
                    frame.set_task(frame.outer());
                    let about = call.about();
                    let holder = about.and_then(|_| *runner.get_or_insert_with(current_task));
                    self.book.held_by(holder, &ext.book);
                    let running =
                        about.and_then(|(id, location)| records::enter_section(id, location));
                    let ran = call.run(&|| self.sink());
                    drop(running);
                    // Still held, by the runner, until an item needs
                    // another holder or the strand is given up (`next`):
                    // posts back to back write the book once.
                    match ran {
                        Ran::Done => {}
                        Ran::Panicked(payload) => self.report_post_panic(payload),
                        Ran::Granted => debug_assert!(false, "lock requests are granted in `next`"),
                    }
                }
                // Given up: nothing of the strand is this poll's to touch.
                None => return Poll::Pending,
            }
        }
        self.book.released();
        // Still the owner: run again after the executor's other work.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Accepts a post or a queued section, unless the strand refuses it
    /// (closed, dead, or over a closed executor): the reason then, and the
    /// work is not queued.
    #[inline]
    pub(crate) fn accept_queued(&self) -> Result<Accepted<'_>, RejectReason> {
        let ext = self.ext();
        if ext.submit.refuses() || self.inner.is_closed() {
            return Err(RejectReason::Closed);
        }
        Ok(Accepted(PhantomData))
    }

    /// Where a panic of queued work goes that nobody reads (a post's, a
    /// detached section's): where a detached task's would (a pool's
    /// `on_unobserved_panic`), through the admission that covers it.
    fn sink(&self) -> Option<Sink> {
        self.ext_if_made()?
            .submit
            .posts
            .with_held(|a| a.and_then(Admission::sink))
    }

    /// A posted closure has no handle to report a panic to: it goes to the
    /// strand's sink, and the strand goes on.
    fn report_post_panic(&self, payload: PanicPayload) {
        report(self.sink().as_ref(), payload);
    }

    /// Marks the strand dead (Shutdown step 2) and drains it.
    ///
    /// # Safety
    ///
    /// The caller owns the strand: the runner, being dropped.
    unsafe fn kill(&self) {
        trace_event!("strand dead: its runner was dropped");
        self.ext().submit.dead.store(true, Release);
        // SAFETY: the caller owns the strand.
        unsafe { self.drain_dead() };
    }

    /// What a dead strand's owner does instead of starting the runner:
    /// drop the tasks and posted closures in line (cancelling them) and
    /// grant the lock requests, until the strand is parked by a grant or
    /// idle. Every caller holds a strong reference of its own (the
    /// runner's drop, a handle, a guard, a task of the strand), so
    /// dropping what is queued cannot free the strand under it.
    ///
    /// # Safety
    ///
    /// The caller owns the strand, and gives ownership up by this call.
    unsafe fn drain_dead(&self) {
        // SAFETY: the caller owns the strand while `next` returns items.
        while let Some(item) = unsafe { self.next() } {
            match item {
                Item::Task(runnable) => drop(runnable),
                Item::Node(call) => {
                    if let Some(payload) = call.discard() {
                        self.report_post_panic(payload);
                    }
                }
            }
        }
    }

    /// `true` once the strand's executor threw its runner away.
    #[inline]
    pub(crate) fn is_dead(&self) -> bool {
        self.ext_if_made()
            .is_some_and(|ext| ext.submit.dead.load(Acquire))
    }

    pub(super) fn close(&self) {
        self.ext().submit.closed.store(true, SeqCst);
    }

    /// `true` if the strand takes no new work: closed itself, dead, or
    /// over a closed executor.
    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.refused() || self.inner.is_closed()
    }

    /// Closed itself, or dead.
    #[inline]
    fn refused(&self) -> bool {
        self.ext_if_made().is_some_and(|ext| ext.submit.refuses())
    }

    pub(super) fn admission(&self, wait: bool) -> Result<Admission, RejectReason> {
        if self.refused() {
            return Err(RejectReason::Closed);
        }
        // Counted, but never made to wait for room: what is queued on a
        // strand may wait behind a section or a guard that is itself
        // waiting for the submitter (a section posting to its own strand,
        // a task calling `with` while it holds a guard), and the room the
        // submitter would wait for may be held by that very backlog.
        match try_admit(&self.inner) {
            Err(RejectReason::Full) if wait => past_limit(|| admit(&self.inner)),
            admitted => admitted,
        }
    }

    pub(crate) fn admit(&self) -> Result<Admission, RejectReason> {
        self.admission(true)
    }

    /// Takes the strand over if it is free, or becomes free within a short
    /// spin while another thread runs a section on the spot with nothing
    /// queued behind it; never queues. `quick` says the caller will run a
    /// section on the spot itself (so others may spin on it). The caller
    /// then notes itself with [`took`](Core::took).
    #[inline]
    pub(crate) fn acquire_briefly(&self, quick: bool) -> bool {
        let mut spins = 0;
        loop {
            match self.queue.peek() {
                Peek::Idle => {
                    if self.queue.try_acquire(quick) {
                        return true;
                    }
                }
                // Spin only on an owner known to be quick: a lock may be
                // held across `.await`, the runner may have a long batch
                // left, and every look at a busy strand is a cache miss.
                // Never on ourselves: a section run on the spot asking for
                // its own strand would wait for its own end.
                Peek::Quick
                    if spins < SPINS
                        && (spins > 0 || !crate::section::inside(self.id(), current_task_id())) => {
                }
                _ => return false,
            }
            spins += 1;
            // Exponential backoff: every look steals the line the owner
            // is about to write, so look less often the longer it takes.
            for _ in 0..1u32 << spins.min(BACKOFF) {
                std::hint::spin_loop();
            }
        }
    }

    /// The strand's identity for [`section`]: the address of its shared
    /// state, which a task's executor handle of the strand points at.
    #[inline]
    pub(crate) fn id(&self) -> *const () {
        // `Shared` is `repr(C)` with the core first: the same address,
        // without reading `me` (a field on a colder line).
        self as *const Core as *const ()
    }

    /// Takes the strand over if it is idle with nothing queued: FIFO order
    /// is kept, since nobody is waiting. The caller then notes itself with
    /// [`took`](Core::took).
    #[inline]
    pub(crate) fn try_acquire(&self) -> bool {
        self.queue.try_acquire(false)
    }

    /// Counts a user's handle of the strand: it keeps the strand's
    /// executor open if the handle the strand was made over did (a pool's
    /// handle does, its tasks' home does not), by the count the executor
    /// keeps of its handles, so that a strand's handle is one word.
    #[inline]
    pub(crate) fn hold_open(&self) {
        if self.book.holds_open() {
            hold_open(&self.inner);
        }
    }

    /// Gives back a count taken by [`hold_open`](Core::hold_open).
    #[inline]
    pub(crate) fn let_go(&self) {
        if self.book.holds_open() {
            let_go(&self.inner);
        }
    }

    /// Notes `holder` as the owner that just took the strand on the spot
    /// (with `acquire_briefly` or `try_acquire`), which counts it as a
    /// section that did not queue. Called by that owner.
    #[inline]
    pub(crate) fn took(&self, holder: Option<TaskId>) {
        if self.book.taken(holder).is_err() {
            self.book.taken_wrapping(holder, &self.ext().book);
        }
    }

    /// Notes `holder` as the owner a lock request granted from the queue
    /// made. Called by that owner.
    pub(crate) fn granted_to(&self, holder: Option<TaskId>) {
        self.book.held_by(holder, &self.ext().book);
    }

    /// The caller's task (its identity for `section`, and its id), if it
    /// is a task of the strand's executor, running on it: a section may
    /// run right here without leaving that executor.
    #[inline]
    pub(crate) fn caller_on_inner(&self) -> Option<(*const (), TaskId)> {
        with_current_task(|t| {
            t.filter(|t| t.with_executor(|ex| ex.same_as(&self.inner)))
                .map(|t| (task_id(t), t.record.id))
        })
    }

    /// Queues `item` without starting the runner: a lock request, which
    /// the caller passes the strand on to if the push made it the owner.
    #[inline]
    pub(crate) fn push(&self, item: Item) -> Pushed {
        // Made before the push: an owner that finds an item finds it.
        self.ext();
        self.queue.push(item)
    }

    pub(crate) fn metrics(&self) -> StrandMetrics {
        let (queued, batches) = self.ext_if_made().map_or((0, 0), |ext| {
            (ext.queued.load(Relaxed), ext.batches.load(Relaxed))
        });
        StrandMetrics {
            queued,
            batches,
            inline: self.book.taken_count(),
        }
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        if let Some(ext) = self.book.ext() {
            // SAFETY: an installed extension is a leaked `Box<Ext>` (see
            // `make_ext`), and the strand, which owned it, is going.
            drop(unsafe { Box::from_raw(Ext::of_book(ext).as_ptr()) });
        }
    }
}

/// Only the owner writes the counters, so a load and a store will do.
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed) + n, Relaxed);
}

/// The runner task's future.
struct Runner {
    strand: WeakExec,
}

impl Future for Runner {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.strand.upgrade() {
            // SAFETY: the `Exec` is the strand's, and keeps it alive.
            Some(strand) => unsafe { Whole::at(strand.header()).core() }.run(cx),
            // The strand is gone; this is async-task dropping the runner.
            None => Poll::Ready(()),
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Some(strand) = self.strand.upgrade() {
            // The strand lives on, so this is the executor throwing the
            // runner's runnable away: the runner was scheduled, so it owned
            // the strand (ground rule 4).
            // SAFETY: as just said; the `Exec` keeps the strand alive.
            unsafe { Whole::at(strand.header()).core().kill() };
        }
    }
}
