//! Which strand sections run on this thread, and which `block_on` calls
//! wait inside them.
//!
//! A strand's runner, and a [`Guarded::with`](crate::Guarded::with) section
//! run on the spot, push a [`Frame`] while a section runs. Frames of
//! nested strands form a stack, and each says which task is running in it,
//! so that [`inside`] can tell a section of the strand from another task
//! that a section's `block_on` runs meanwhile. Strands and tasks are named
//! by address only: this module sits below both.

use std::cell::Cell;

/// A section-running mark on this thread's stack.
pub(crate) struct Frame {
    /// The strand, by the address of its shared state (what a task's
    /// executor handle of it points at).
    strand: *const (),
    /// The task running in the strand now.
    task: Cell<*const ()>,
    /// The task that was being polled when the frame was entered (a
    /// runner's own task; for a section run on the spot, its caller).
    outer: *const (),
    /// How many `block_on` calls were running on this thread when the
    /// frame was entered.
    blocking: usize,
    parent: Cell<*const Frame>,
}

#[cfg(not(loom))]
std::thread_local! {
    static FRAME: Cell<*const Frame> = const { Cell::new(std::ptr::null()) };
    static BLOCKING: Cell<usize> = const { Cell::new(0) };
}

#[cfg(loom)]
loom::thread_local! {
    static FRAME: Cell<*const Frame> = Cell::new(std::ptr::null());
    static BLOCKING: Cell<usize> = Cell::new(0);
}

/// Pops its frame, even if a section unwinds.
pub(crate) struct Entered<'a>(&'a Frame);

impl Frame {
    /// A frame for `strand`, entered while `outer` is being polled, with
    /// `task` running in it first.
    #[inline]
    pub(crate) fn new(strand: *const (), task: *const (), outer: *const ()) -> Frame {
        Frame {
            strand,
            task: Cell::new(task),
            outer,
            blocking: BLOCKING.with(Cell::get),
            parent: Cell::new(std::ptr::null()),
        }
    }

    #[inline]
    pub(crate) fn enter(&self) -> Entered<'_> {
        self.parent.set(FRAME.with(|f| f.replace(self)));
        Entered(self)
    }

    /// The task running in the strand from now on.
    #[inline]
    pub(crate) fn set_task(&self, task: *const ()) {
        self.task.set(task);
    }

    /// The task the frame was entered in.
    #[inline]
    pub(crate) fn outer(&self) -> *const () {
        self.outer
    }
}

impl Drop for Entered<'_> {
    #[inline]
    fn drop(&mut self) {
        FRAME.with(|f| f.set(self.0.parent.get()));
    }
}

/// The frame of `strand` that `current` (the task being polled) runs
/// inside: follow the frames down while each frame's task is the one
/// polled above it.
fn find(strand: *const (), current: *const ()) -> Option<&'static Frame> {
    let mut task = current;
    let mut frame = FRAME.with(Cell::get);
    // SAFETY: frames live on the stacks of calls further up this thread's
    // stack, and each is unlinked (by `Entered`) before its call returns;
    // so every frame reachable from `FRAME` is alive while this thread is
    // below it, which covers every use of the reference returned here
    // (none outlives the caller's frame).
    while let Some(f) = unsafe { frame.as_ref() } {
        if task.is_null() || f.task.get() != task {
            return None;
        }
        if f.strand == strand {
            return Some(f);
        }
        task = f.outer;
        frame = f.parent.get();
    }
    None
}

/// `true` if `current`, the task being polled on this thread, runs inside
/// a section of `strand`.
pub(crate) fn inside(strand: *const (), current: *const ()) -> bool {
    find(strand, current).is_some()
}

/// Panics if the task being polled runs inside a section of a strand and
/// blocks in a `block_on` it called there, on `what`, which only that
/// strand can provide: the strand runs one section at a time, so that wait
/// could never end. `ids` gives the strand and the task being polled; it is
/// called only when a section runs on this thread, so a pending poll
/// elsewhere costs one thread-local read.
pub(crate) fn check_not_blocking_on(what: &str, ids: impl FnOnce() -> (*const (), *const ())) {
    if FRAME.with(Cell::get).is_null() {
        return;
    }
    let (strand, current) = ids();
    if find(strand, current).is_some_and(|f| BLOCKING.with(Cell::get) > f.blocking) {
        panic!(
            "viaduct: a section of a strand called block_on on {what} of that same strand; the \
             strand runs one section at a time, so the wait could never end. Await it in a task \
             instead of blocking, or submit the work without waiting for it (post, execute)"
        );
    }
}

/// Counts a running `block_on` on this thread, for
/// [`check_not_blocking_on`].
pub(crate) struct Blocking(());

impl Blocking {
    pub(crate) fn enter() -> Blocking {
        BLOCKING.with(|b| b.set(b.get() + 1));
        Blocking(())
    }
}

impl Drop for Blocking {
    fn drop(&mut self) {
        BLOCKING.with(|b| b.set(b.get() - 1));
    }
}
