//! A strong reference of one word to a value in an `Arc`, through a
//! header the value embeds: the header's vtable finds the whole value
//! from the header's address, so the reference needs no second word for
//! the type. An executor handle (`Exec`) and a pool's count of a task
//! (`admission`) are both one.

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::{Arc, Weak};

/// A header type: its vtable holds the [`Counts`] of the value it is
/// embedded in.
pub(crate) trait Header: 'static {
    fn counts(&self) -> &'static Counts;
}

/// A value that embeds an `H`.
///
/// # Safety
///
/// `OFFSET` is the offset, in `Self`, of a field holding the `H` made for
/// `Self` (whose functions expect a `Self` around it), and `Self` lives in
/// an `Arc` whenever a [`HeaderPtr`] is made of it.
pub(crate) unsafe trait Embeds<H: Header>: Send + Sync + Sized + 'static {
    /// `std::mem::offset_of!` the header field.
    const OFFSET: usize;
}

/// A header's functions that take and give back a strong or a weak count
/// of the `Arc` around it.
pub(crate) struct Counts {
    clone: unsafe fn(NonNull<()>),
    drop: unsafe fn(NonNull<()>),
    downgrade: unsafe fn(NonNull<()>),
    /// Takes a strong count if the value is alive; whether it did.
    upgrade: unsafe fn(NonNull<()>) -> bool,
    drop_weak: unsafe fn(NonNull<()>),
}

/// The [`Counts`] of a `T` around an `H`.
pub(crate) struct CountsOf<T, H>(PhantomData<(T, H)>);

impl<H: Header, T: Embeds<H>> CountsOf<T, H> {
    pub(crate) const COUNTS: Counts = Counts {
        clone: |h| {
            // SAFETY: `h` comes from a live `HeaderPtr` of a `T`, whose
            // strong count it holds; the clone owns the count added.
            unsafe { Arc::increment_strong_count(whole::<T, H>(h.cast()).as_ptr()) }
        },
        drop: |h| {
            // SAFETY: the pointer gives up the strong count it held.
            unsafe { Arc::decrement_strong_count(whole::<T, H>(h.cast()).as_ptr()) }
        },
        downgrade: |h| {
            // SAFETY: `h` comes from a live `HeaderPtr` of a `T`, so its
            // value pointer is a live `Arc`'s, borrowed here; the weak
            // count added is the new `WeakHeaderPtr`'s.
            let arc = ManuallyDrop::new(unsafe { Arc::from_raw(whole::<T, H>(h.cast()).as_ptr()) });
            std::mem::forget(Arc::downgrade(&arc));
        },
        upgrade: |h| {
            // SAFETY: `h` comes from a live `WeakHeaderPtr` of a `T`, whose
            // weak count it holds (borrowed here); a strong count taken is
            // the new `HeaderPtr`'s.
            let weak =
                ManuallyDrop::new(unsafe { Weak::from_raw(whole::<T, H>(h.cast()).as_ptr()) });
            weak.upgrade().map(Arc::into_raw).is_some()
        },
        drop_weak: |h| {
            // SAFETY: the pointer gives up the weak count it held.
            drop(unsafe { Weak::from_raw(whole::<T, H>(h.cast()).as_ptr()) })
        },
    };
}

/// The `T` around the header at `header`.
///
/// # Safety
///
/// `header` points at the `H` field of a live `T`, and came from a pointer
/// to the whole `T`.
pub(crate) unsafe fn whole<T: Embeds<H>, H: Header>(header: NonNull<H>) -> NonNull<T> {
    // SAFETY: the header is `T::OFFSET` bytes into the `T` (the trait's
    // contract).
    unsafe { header.byte_sub(T::OFFSET).cast() }
}

/// A strong reference to a value that embeds an `H`, pointing at the `H`.
pub(crate) struct HeaderPtr<H: Header>(NonNull<H>);

// SAFETY: a `HeaderPtr` is an `Arc<T>` of a `T: Embeds<H>`, which is `Send +
// Sync`.
unsafe impl<H: Header> Send for HeaderPtr<H> {}
// SAFETY: as above.
unsafe impl<H: Header> Sync for HeaderPtr<H> {}

impl<H: Header> HeaderPtr<H> {
    /// Takes over `value`'s strong reference.
    pub(crate) fn new<T: Embeds<H>>(value: Arc<T>) -> HeaderPtr<H> {
        let whole = NonNull::new(Arc::into_raw(value).cast_mut()).expect("an `Arc` is not null");
        // SAFETY: the header is `T::OFFSET` bytes into the `T` (the trait's
        // contract), within its allocation.
        HeaderPtr(unsafe { whole.byte_add(T::OFFSET).cast() })
    }

    /// A new strong reference to `value`.
    ///
    /// # Safety
    ///
    /// `value` is the value pointer of a live `Arc<T>`, with the
    /// provenance of its whole allocation (`Weak::as_ptr` of a `Weak` of
    /// it, while its strong count is not zero).
    pub(crate) unsafe fn of_ref<T: Embeds<H>>(value: *const T) -> HeaderPtr<H> {
        // SAFETY: `value` is the value pointer of a live `Arc<T>` (the
        // caller's contract), whose strong count may grow; the new
        // pointer's drop gives the count back.
        unsafe { Arc::increment_strong_count(value) };
        // SAFETY: as in `new`; an `Arc`'s value pointer is not null.
        HeaderPtr(unsafe {
            NonNull::new_unchecked(value.cast_mut())
                .byte_add(T::OFFSET)
                .cast()
        })
    }

    /// The header.
    #[inline]
    pub(crate) fn header(&self) -> &H {
        // SAFETY: the pointer keeps its value, and so the header, alive.
        unsafe { self.0.as_ref() }
    }

    /// The header's address: the same for every pointer to the value.
    #[inline]
    pub(crate) fn as_ptr(&self) -> NonNull<H> {
        self.0
    }

    /// A new strong reference to the value whose header `header` points
    /// at.
    ///
    /// # Safety
    ///
    /// `header` points at the header of a live value, with the provenance
    /// of its whole allocation (it comes from a `HeaderPtr`, or from an
    /// `Arc` of the value, not from a reference).
    pub(crate) unsafe fn of_header(header: NonNull<H>) -> HeaderPtr<H> {
        // SAFETY: the value is live (the caller's contract), so its header
        // and counts are; the new pointer owns the count added.
        unsafe { (header.as_ref().counts().clone)(header.cast()) };
        HeaderPtr(header)
    }

    /// A weak reference to the value: it keeps the allocation, not the
    /// value.
    pub(crate) fn downgrade(&self) -> WeakHeaderPtr<H> {
        let counts = self.header().counts();
        // SAFETY: the value is live while `self` is; the weak pointer owns
        // the count added.
        unsafe { (counts.downgrade)(self.0.cast()) };
        WeakHeaderPtr {
            ptr: self.0,
            counts,
        }
    }
}

/// A weak reference to a value that embeds an `H`: it keeps the
/// allocation, and a strong reference can be had from it while the value
/// lives. It keeps the header's counts itself: once the value is dropped,
/// the header is not read.
pub(crate) struct WeakHeaderPtr<H: Header> {
    ptr: NonNull<H>,
    counts: &'static Counts,
}

// SAFETY: as for `HeaderPtr`: a `Weak<T>` of a `Send + Sync` `T`.
unsafe impl<H: Header> Send for WeakHeaderPtr<H> {}
// SAFETY: as above.
unsafe impl<H: Header> Sync for WeakHeaderPtr<H> {}

impl<H: Header> WeakHeaderPtr<H> {
    /// A strong reference, if the value is alive.
    pub(crate) fn upgrade(&self) -> Option<HeaderPtr<H>> {
        // SAFETY: `ptr` holds a weak count of the value's allocation.
        unsafe { (self.counts.upgrade)(self.ptr.cast()) }.then(|| HeaderPtr(self.ptr))
    }
}

impl<H: Header> Drop for WeakHeaderPtr<H> {
    fn drop(&mut self) {
        // SAFETY: this gives up the pointer's own weak count.
        unsafe { (self.counts.drop_weak)(self.ptr.cast()) }
    }
}

impl<H: Header> Clone for HeaderPtr<H> {
    fn clone(&self) -> HeaderPtr<H> {
        // SAFETY: the header is live and its counts are its value's; the
        // new pointer owns the count added.
        unsafe { (self.header().counts().clone)(self.0.cast()) };
        HeaderPtr(self.0)
    }
}

impl<H: Header> Drop for HeaderPtr<H> {
    fn drop(&mut self) {
        // SAFETY: as in `clone`; this gives up the pointer's own count.
        unsafe { (self.header().counts().drop)(self.0.cast()) }
    }
}
