//! A strong reference to an executor in one word: what an
//! [`Exec`](crate::Exec) is, and so what every task keeps of the executor
//! it runs on. An `Arc<dyn Executor>` took two words in every task.
//!
//! It works the way a `Sink` holds a pool (see `admission`): the
//! executor's type embeds an [`ExecHeader`], whose vtable finds the whole
//! executor from the header's address, and the pointer points at the
//! header. Every type behind an `Exec` is one of viaduct's own: a user's
//! executor is boxed in one (`Exec::new`).

use std::ptr::NonNull;
use std::sync::Arc;

use crate::executor::{Executor, Runnable};

/// An executor type that embeds an [`ExecHeader`].
///
/// # Safety
///
/// `HEADER` is the offset, in `Self`, of a field holding
/// `ExecHeader::of::<Self>()`, and `Self` lives in an `Arc` whenever an
/// [`ExecPtr`] is made of it.
pub(crate) unsafe trait Embeds: Executor + Sized + 'static {
    /// `std::mem::offset_of!` the header field.
    const HEADER: usize;
}

/// A field of an [`Embeds`] executor: what its [`ExecPtr`]s find the
/// executor through.
pub(crate) struct ExecHeader(&'static ExecVTable);

struct ExecVTable {
    /// The executor whose header this is.
    get: unsafe fn(NonNull<ExecHeader>) -> NonNull<dyn Executor>,
    /// Its `schedule`, called directly: the one call every wake-up makes.
    schedule: unsafe fn(NonNull<ExecHeader>, Runnable),
    /// One strong count more, one less.
    clone: unsafe fn(NonNull<ExecHeader>),
    drop: unsafe fn(NonNull<ExecHeader>),
}

struct VTableOf<T>(std::marker::PhantomData<T>);

impl<T: Embeds> VTableOf<T> {
    const VTABLE: ExecVTable = ExecVTable {
        get: |h| {
            // SAFETY: `h` comes from a live `ExecPtr` of a `T`.
            let whole: NonNull<dyn Executor> = unsafe { Self::whole(h) };
            whole
        },
        schedule: |h, runnable| {
            // SAFETY: as for `get`.
            unsafe { Self::whole(h).as_ref() }.schedule(runnable)
        },
        clone: |h| {
            // SAFETY: the pointer holds a strong count of the `Arc<T>`,
            // which is therefore live; the clone owns the count added.
            unsafe { Arc::increment_strong_count(Self::whole(h).as_ptr()) }
        },
        drop: |h| {
            // SAFETY: the pointer gives up the strong count it held.
            unsafe { Arc::decrement_strong_count(Self::whole(h).as_ptr()) }
        },
    };

    /// # Safety
    ///
    /// `header` points at the header field of a live `T`.
    unsafe fn whole(header: NonNull<ExecHeader>) -> NonNull<T> {
        // SAFETY: the header is `T::HEADER` bytes into the `T` (the
        // trait's contract), and the pointer came from one to the whole `T`.
        unsafe { header.byte_sub(T::HEADER).cast() }
    }
}

impl ExecHeader {
    /// The header a `T` holds at `T::HEADER`.
    pub(crate) const fn of<T: Embeds>() -> ExecHeader {
        ExecHeader(&VTableOf::<T>::VTABLE)
    }
}

/// A strong reference to an executor, one word wide.
pub(crate) struct ExecPtr(NonNull<ExecHeader>);

// SAFETY: an `ExecPtr` is an `Arc<T>` of a `T: Executor`, which is `Send +
// Sync`.
unsafe impl Send for ExecPtr {}
// SAFETY: as above.
unsafe impl Sync for ExecPtr {}

impl ExecPtr {
    /// Takes over `executor`'s strong reference.
    pub(crate) fn new<T: Embeds>(executor: Arc<T>) -> ExecPtr {
        let whole = NonNull::new(Arc::into_raw(executor).cast_mut()).expect("an `Arc` is not null");
        // SAFETY: the header is `T::HEADER` bytes into the `T` (the trait's
        // contract), within its allocation.
        ExecPtr(unsafe { whole.byte_add(T::HEADER).cast() })
    }

    /// A new strong reference to `executor`.
    ///
    /// # Safety
    ///
    /// `executor` is borrowed through the `Arc` it lives in.
    pub(crate) unsafe fn of_ref<T: Embeds>(executor: &T) -> ExecPtr {
        let whole = NonNull::from(executor);
        // SAFETY: `whole` is the value pointer of a live `Arc<T>` (the
        // caller's contract), whose strong count may grow; the new
        // pointer's drop gives the count back.
        unsafe { Arc::increment_strong_count(whole.as_ptr()) };
        // SAFETY: as in `new`.
        ExecPtr(unsafe { whole.byte_add(T::HEADER).cast() })
    }

    fn vtable(&self) -> &'static ExecVTable {
        // SAFETY: the pointer keeps its executor, and so the header, alive.
        unsafe { self.0.as_ref() }.0
    }

    /// The executor.
    #[inline]
    pub(crate) fn get(&self) -> &dyn Executor {
        // SAFETY: the header is live and its vtable is its executor's; the
        // executor lives as long as `self` does.
        unsafe { (self.vtable().get)(self.0).as_ref() }
    }

    /// Hands `runnable` to the executor.
    #[inline]
    pub(crate) fn schedule(&self, runnable: Runnable) {
        // SAFETY: as in `get`.
        unsafe { (self.vtable().schedule)(self.0, runnable) }
    }

    /// The executor's address: the same for every pointer to it.
    pub(crate) fn addr(&self) -> *const () {
        self.0.as_ptr() as *const ()
    }
}

impl Clone for ExecPtr {
    fn clone(&self) -> ExecPtr {
        // SAFETY: as in `get`; the new pointer owns the count added.
        unsafe { (self.vtable().clone)(self.0) };
        ExecPtr(self.0)
    }
}

impl Drop for ExecPtr {
    fn drop(&mut self) {
        // SAFETY: as in `get`; this gives up the pointer's own count.
        unsafe { (self.vtable().drop)(self.0) }
    }
}
