//! Which strand sections run on this thread, and which `block_on` calls
//! wait inside them.
//!
//! A strand's runner, and a [`Guarded::with`](crate::Guarded::with) section
//! run on the spot, push a [`Frame`] while a section runs. Frames of
//! nested strands form a stack, and each says which task is running in it,
//! so that [`inside`] can tell a section of the strand from another task
//! that a section's `block_on` runs meanwhile. A task of a scope opened
//! inside sections pushes a frame too while it is polled, naming the
//! strands those sections hold until the scope ends: waiting on one of
//! them could never end either. Strands and tasks are named by address
//! only: this module sits below both.

use std::cell::Cell;

/// A section-running mark on this thread's stack.
pub(crate) struct Frame {
    /// The strand, by the address of its shared state (what a task's
    /// executor handle of it points at); null for a scope task's frame.
    strand: *const (),
    /// For a scope task's frame: the strands held by the sections the
    /// scope was opened in (see [`Frame::for_scope_task`]).
    held: *const [*const ()],
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

/// This thread's innermost frame, in its context.
#[inline]
fn frame<R>(f: impl FnOnce(&Cell<*const ()>) -> R) -> R {
    crate::context::with(|c| f(&c.frame))
}

/// How many `block_on` calls run on this thread, in its context.
#[inline]
fn blocking<R>(f: impl FnOnce(&Cell<usize>) -> R) -> R {
    crate::context::with(|c| f(&c.blocking))
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
            held: &[],
            task: Cell::new(task),
            outer,
            blocking: blocking(Cell::get),
            parent: Cell::new(std::ptr::null()),
        }
    }

    /// A frame for `task`, a task of a scope opened inside sections that
    /// hold the strands `held` (from [`held_strands`]), while it is
    /// polled. `held` must outlive the frame (the scope keeps it).
    pub(crate) fn for_scope_task(task: *const (), held: &Held) -> Frame {
        Frame {
            strand: std::ptr::null(),
            held: &*held.0,
            task: Cell::new(task),
            outer: std::ptr::null(),
            blocking: 0,
            parent: Cell::new(std::ptr::null()),
        }
    }

    #[inline]
    pub(crate) fn enter(&self) -> Entered<'_> {
        self.parent
            .set(frame(|f| f.replace(self as *const Frame as *const ())).cast());
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
        frame(|f| f.set(self.0.parent.get().cast()));
    }
}

/// What `current`, the task being polled, runs inside that holds a strand.
enum Holding {
    /// A section of the strand: this frame's.
    Section(&'static Frame),
    /// A scope opened inside a section of the strand: the section waits
    /// for the task to end.
    Scope,
}

/// Visits the frames `current` (the task being polled) runs inside,
/// innermost first: follow the frames down while each frame's task is the
/// one polled above it, and stop at a scope task's frame (the task was
/// polled by whatever helps the pool, not by the frame below). `visit`
/// returns `Some` to stop.
fn walk<R>(current: *const (), mut visit: impl FnMut(&'static Frame) -> Option<R>) -> Option<R> {
    let mut task = current;
    let mut frame: *const Frame = self::frame(Cell::get).cast();
    // SAFETY: frames live on the stacks of calls further up this thread's
    // stack, and each is unlinked (by `Entered`) before its call returns;
    // so every frame reachable from the context's is alive while this thread is
    // below it, which covers every use of the reference visited here
    // (none outlives the caller's frame).
    while let Some(f) = unsafe { frame.as_ref() } {
        if task.is_null() || f.task.get() != task {
            return None;
        }
        if let Some(found) = visit(f) {
            return Some(found);
        }
        if f.strand.is_null() {
            return None;
        }
        task = f.outer;
        frame = f.parent.get();
    }
    None
}

impl Frame {
    /// The strands a scope task's frame names.
    fn held(&self) -> &[*const ()] {
        // SAFETY: `held` is empty, or the slice the scope passed to
        // `for_scope_task`, which outlives the frame.
        unsafe { &*self.held }
    }
}

fn find(strand: *const (), current: *const ()) -> Option<Holding> {
    walk(current, |f| {
        if f.strand == strand {
            Some(Holding::Section(f))
        } else if f.strand.is_null() && f.held().contains(&strand) {
            Some(Holding::Scope)
        } else {
            None
        }
    })
}

/// `true` if `current`, the task being polled on this thread, runs inside
/// a section of `strand`.
pub(crate) fn inside(strand: *const (), current: *const ()) -> bool {
    matches!(find(strand, current), Some(Holding::Section(_)))
}

/// Strands, by address: compared, never dereferenced.
pub(crate) struct Held(Box<[*const ()]>);

// SAFETY: the addresses are only compared, never dereferenced.
unsafe impl Send for Held {}
// SAFETY: as above.
unsafe impl Sync for Held {}

impl Held {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The strands held by the sections `current` (the task being polled)
/// runs inside, as a scope it opens records them for its tasks: a scope
/// opened by a scope's task inherits its scope's.
pub(crate) fn held_strands(current: *const ()) -> Held {
    if frame(Cell::get).is_null() {
        return Held(Box::new([]));
    }
    let mut held = Vec::new();
    walk(current, |f| {
        if f.strand.is_null() {
            held.extend_from_slice(f.held());
        } else {
            held.push(f.strand);
        }
        None::<()>
    });
    Held(held.into_boxed_slice())
}

/// Panics if the task being polled waits on `what`, which only `strand`
/// can provide, where that wait could never end: it runs inside a section
/// of that strand and blocks in a `block_on` it called there (the strand
/// runs one section at a time), or it is a task of a scope opened inside
/// such a section (the section holds the strand until the scope's tasks
/// end). `ids` gives the strand and the task being polled; it is called
/// only when a frame is on this thread, so a pending poll elsewhere costs
/// one thread-local read.
pub(crate) fn check_not_blocking_on(what: &str, ids: impl FnOnce() -> (*const (), *const ())) {
    if frame(Cell::get).is_null() {
        return;
    }
    let (strand, current) = ids();
    match find(strand, current) {
        Some(Holding::Section(f)) if blocking(Cell::get) > f.blocking => panic!(
            "viaduct: a section of a strand called block_on on {what} of that same strand; the \
             strand runs one section at a time, so the wait could never end. Await it in a task \
             instead of blocking, or submit the work without waiting for it (post, execute)"
        ),
        Some(Holding::Scope) => panic!(
            "viaduct: a task of a scope opened inside a section of a strand waits on {what} of \
             that same strand; the section holds the strand until every task of its scope has \
             ended, so the wait could never end. Open the scope after the section, or submit \
             the work to the strand without waiting for it (post, execute)"
        ),
        _ => {}
    }
}

/// Counts a running `block_on` on this thread, for
/// [`check_not_blocking_on`].
pub(crate) struct Blocking(());

impl Blocking {
    pub(crate) fn enter() -> Blocking {
        blocking(|b| b.set(b.get() + 1));
        Blocking(())
    }
}

impl Drop for Blocking {
    fn drop(&mut self) {
        blocking(|b| b.set(b.get() - 1));
    }
}
