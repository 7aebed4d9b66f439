//! A `with` section queued on a busy strand, as a node of the strand's
//! queue: the closure and its [`Completion`] in one allocation, run by the
//! runner between its other items, which writes the result in place and
//! wakes the waiting handle once. The strand's outstanding work covers it
//! for a closing executor, as it covers posts, so it takes no admission of
//! its own.

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::ptr::NonNull;

use super::queue::{Header, Item, Node, NodeVTable, Ran, SectionAbout};
use crate::admission::Sink;
use crate::dump::lock::{LockBook, LockKind};
use crate::error::PanicPayload;
use crate::task::completion::{Common, Completion};

/// The allocation: the queue's header first, so that a node's header
/// pointer is the allocation's; then the completion, which the handle
/// points at; then the closure.
#[repr(C)]
struct SectionNode<F, R> {
    header: Header,
    done: Completion<R>,
    /// Taken once: by the run, or by the discard.
    f: UnsafeCell<Option<F>>,
}

impl<F, R> SectionNode<F, R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    const VTABLE: NodeVTable = NodeVTable {
        run: Self::run,
        discard: Self::discard,
        grants: false,
        about: Some(Self::about),
    };

    /// # Safety
    ///
    /// `header` is a live node of this type.
    unsafe fn get<'a>(header: NonNull<Header>) -> &'a Self {
        // SAFETY: the caller's contract; the header is at the start.
        unsafe { header.cast::<Self>().as_ref() }
    }

    /// Takes the closure out, once.
    ///
    /// # Safety
    ///
    /// The caller holds the queue's share of the node (its `Node`).
    unsafe fn take_f(&self) -> F {
        // SAFETY: only the queue's holder touches the closure, once.
        unsafe { (*self.f.get()).take() }.expect("a queued section runs once")
    }

    /// # Safety
    ///
    /// `header` came from [`section`] with this `F` and `R`, and the
    /// queue's share of it is consumed.
    unsafe fn run(header: NonNull<Header>, sink: &dyn Fn() -> Option<Sink>) -> Ran {
        // SAFETY: the caller's contract: the queue's reference keeps the
        // node alive until the release below.
        let node = unsafe { Self::get(header) };
        // SAFETY: the caller holds the queue's share.
        let f = unsafe { node.take_f() };
        if node.done.start(crate::task::current_task()) {
            let result = catch_unwind(AssertUnwindSafe(f));
            node.done.finish(result, sink);
        } else {
            // Aborted while queued: dropped unrun, and only then does its
            // handle say so.
            let dropped = catch_unwind(AssertUnwindSafe(move || drop(f)));
            node.done.finish_cancelled();
            if let Err(payload) = dropped {
                crate::task::report(sink().as_ref(), payload);
            }
        }
        // SAFETY: the queue's reference, given up once; `node` is not
        // touched after.
        unsafe { Common::release(Self::common(header)) };
        Ran::Done
    }

    /// The node's completion, as a pointer with the whole node's
    /// provenance: the last release frees the node from it.
    ///
    /// # Safety
    ///
    /// `header` is a live node of this type.
    unsafe fn common(header: NonNull<Header>) -> NonNull<Common> {
        let node = header.cast::<Self>().as_ptr();
        // SAFETY: `done` is a field of the live node; `Common` is first in
        // the `repr(C)` completion.
        unsafe { NonNull::new_unchecked(std::ptr::addr_of_mut!((*node).done)).cast() }
    }

    /// # Safety
    ///
    /// As for [`run`](Self::run).
    unsafe fn discard(header: NonNull<Header>) -> Option<PanicPayload> {
        // SAFETY: as in `run`.
        let node = unsafe { Self::get(header) };
        // SAFETY: as in `run`.
        let f = unsafe { node.take_f() };
        let dropped = catch_unwind(AssertUnwindSafe(move || drop(f)));
        node.done.finish_cancelled();
        // SAFETY: as in `run`.
        unsafe { Common::release(Self::common(header)) };
        dropped.err()
    }

    /// # Safety
    ///
    /// `header` is a live node of this type.
    unsafe fn about(header: NonNull<Header>) -> SectionAbout {
        // SAFETY: the caller's contract.
        let common = unsafe { &Self::get(header).done.common };
        (common.id, common.location)
    }

    /// Frees the node, given its completion's address.
    ///
    /// # Safety
    ///
    /// `common` is the completion of a node made by [`section`] with this
    /// `F` and `R`, whose last reference was just given up.
    unsafe fn free(common: NonNull<Common>) {
        let offset = std::mem::offset_of!(Self, done);
        // SAFETY: the completion sits `offset` bytes into the node's box
        // (`Common` is first in the `repr(C)` completion), and nothing
        // reaches the node any more.
        drop(unsafe { Box::from_raw(common.as_ptr().cast::<u8>().sub(offset).cast::<Self>()) });
    }
}

/// `f` as a section queued on a strand whose book is `book`: the queue's
/// item, and the completion its handle reads. `book` must outlive the
/// handle (the handle holds the strand).
pub(super) fn section<F, R>(
    f: F,
    location: &'static Location<'static>,
    book: &LockBook,
    kind: fn() -> LockKind,
) -> (Item, NonNull<Completion<R>>)
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let node = Box::new(SectionNode {
        header: Header::new(&SectionNode::<F, R>::VTABLE),
        // SAFETY: `free` frees this node's box and drops only its cells
        // (the closure was taken by then, the result is never dropped
        // there); the caller keeps `book` alive as long as the handle.
        done: unsafe { Completion::new(location, book, kind, SectionNode::<F, R>::free) },
        f: UnsafeCell::new(Some(f)),
    });
    let node = NonNull::from(Box::leak(node));
    // SAFETY: `done` is a field of the live node.
    let done = unsafe { NonNull::new_unchecked(std::ptr::addr_of_mut!((*node.as_ptr()).done)) };
    // SAFETY: the node starts with its header, whose vtable is this
    // type's; its functions consume the queue's reference once.
    let item = Item::Node(unsafe { Node::from_header(node.cast()) });
    (item, done)
}
