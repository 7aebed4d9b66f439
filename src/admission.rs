//! Who counts a task: an executor that counts its live tasks (a pool, to
//! close only once they are over, and to bound how many it holds) holds
//! an [`Admission`] in each task until the task's future is dropped.
//!
//! An admission is one word: a [`Sink`], a strong reference to the
//! counting executor through the [`Tracker`] header it embeds. A task a
//! user's executor admitted is uncounted; a pool it reaches counts it in
//! there (`Metadata::adopt`). Work queued on a strand is admitted past a
//! bounded pool's limit ([`past_limit`]), since the room it would wait for
//! may be held by the very backlog it waits behind.

use std::fmt;
use std::ptr::NonNull;

use crate::embedded::{whole, Counts, CountsOf, Embeds, Header, HeaderPtr};
use crate::error::PanicPayload;

/// Who counts a task, held in the task until its future is dropped: an
/// executor that counts its live tasks, told when the task is over; or
/// nobody (a user executor admitted it, and a pool it reaches counts it
/// in, see `Metadata::adopt`). One word, so that it is passed in a register: it
/// travels through every spawn.
pub struct Admission(Option<Sink>);

/// What an executor that counts its tasks learns from an [`Admission`].
/// It embeds a [`TrackerHeader`] (see `embedded`), which its sinks point to.
pub(crate) trait Tracker: Embeds<TrackerHeader> {
    /// The task's future was dropped (it finished, panicked or was cancelled).
    fn release(&self);
    /// A detached task panicked; nobody will read the payload.
    fn unobserved_panic(&self, payload: PanicPayload);
}

/// A field of a [`Tracker`]: what its [`Sink`]s find the tracker's
/// functions through.
pub(crate) struct TrackerHeader(&'static TrackerVTable);

struct TrackerVTable {
    counts: Counts,
    release: unsafe fn(NonNull<TrackerHeader>),
    unobserved_panic: unsafe fn(NonNull<TrackerHeader>, PanicPayload),
}

impl Header for TrackerHeader {
    fn counts(&self) -> &'static Counts {
        &self.0.counts
    }
}

struct VTableOf<T>(std::marker::PhantomData<T>);

impl<T: Tracker> VTableOf<T> {
    const VTABLE: TrackerVTable = TrackerVTable {
        counts: CountsOf::<T, TrackerHeader>::COUNTS,
        release: |h| {
            // SAFETY: `h` comes from a live `Sink` of a `T`.
            unsafe { whole::<T, TrackerHeader>(h).as_ref() }.release()
        },
        unobserved_panic: |h, payload| {
            // SAFETY: as for `release`.
            unsafe { whole::<T, TrackerHeader>(h).as_ref() }.unobserved_panic(payload)
        },
    };
}

impl TrackerHeader {
    /// The header a `T` holds at its offset.
    pub(crate) const fn of<T: Tracker>() -> TrackerHeader {
        TrackerHeader(&VTableOf::<T>::VTABLE)
    }
}

/// An executor that counts its tasks (a pool), as a strong reference of
/// one word. A fat `Arc<dyn Tracker>` made an admission three words,
/// passed through memory on every spawn.
#[derive(Clone)]
pub(crate) struct Sink(HeaderPtr<TrackerHeader>);

impl Sink {
    /// A new strong reference to the tracker `me` points to.
    ///
    /// # Safety
    ///
    /// The tracker must be alive: its strong count is not zero for the
    /// whole call (the caller borrows the `T` through an `Arc` it holds).
    pub(crate) unsafe fn new<T: Tracker>(me: &std::sync::Weak<T>) -> Sink {
        debug_assert!(me.strong_count() > 0, "a sink of a dropped tracker");
        // SAFETY: `Weak::as_ptr` of a `Weak` made by `Arc::downgrade` (or
        // `Arc::new_cyclic`) is the pointer `Arc::into_raw` would give, of
        // a live `Arc` (the caller's contract).
        Sink(unsafe { HeaderPtr::of_ref(me.as_ptr()) })
    }

    fn vtable(&self) -> &'static TrackerVTable {
        self.0.header().0
    }

    /// See [`Tracker::release`].
    pub(crate) fn release(&self) {
        // SAFETY: the header is live and its vtable is its tracker's.
        unsafe { (self.vtable().release)(self.0.as_ptr()) }
    }

    /// See [`Tracker::unobserved_panic`].
    pub(crate) fn unobserved_panic(&self, payload: PanicPayload) {
        // SAFETY: as in `release`.
        unsafe { (self.vtable().unobserved_panic)(self.0.as_ptr(), payload) }
    }
}

impl Admission {
    /// Counted by nobody (yet).
    pub(crate) const UNCOUNTED: Admission = Admission(None);

    /// Whether the tracker whose header is at address `header` counts it.
    pub(crate) fn counted_by(&self, header: usize) -> bool {
        self.0
            .as_ref()
            .is_some_and(|sink| sink.0.as_ptr().as_ptr() as usize == header)
    }

    /// Counted by `tracker`.
    pub(crate) fn counted(tracker: Sink) -> Admission {
        Admission(Some(tracker))
    }

    /// `true` if nobody counts the task.
    pub(crate) fn is_uncounted(&self) -> bool {
        self.0.is_none()
    }

    /// Where a panic of this task goes if its handle was dropped. Without
    /// a tracker the payload is dropped: std's panic hook has already
    /// printed the message by the time it is caught.
    pub(crate) fn sink(&self) -> Option<Sink> {
        self.0.clone()
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(t) = &self.0 {
            t.release();
        }
    }
}

impl fmt::Debug for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            None => "Admission(uncounted)",
            Some(_) => "Admission(counted)",
        })
    }
}

/// Runs `f` with the admissions it asks for on this thread let past a
/// bounded executor's limit instead of waiting for room. For work queued on
/// a strand: it may wait behind a section or a guard that is waiting for
/// its submitter, and the room the submitter would wait for may be held by
/// that very backlog, so the wait could never end. A flag rather than an
/// `Executor` method, so that it reaches the pool through every decorator
/// in between.
pub(crate) fn past_limit<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            crate::context::with(|c| c.past_limit.set(self.0));
        }
    }
    let _restore = Restore(crate::context::with(|c| c.past_limit.replace(true)));
    f()
}

/// `true` inside [`past_limit`]: a full bounded executor admits anyway.
pub(crate) fn admitting_past_limit() -> bool {
    crate::context::with(|c| c.past_limit.get())
}
