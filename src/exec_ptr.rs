//! A strong reference to an executor in one word: what an
//! [`Exec`](crate::Exec) is, and so what every task keeps of the executor
//! it runs on. An `Arc<dyn Executor>` took two words in every task.
//!
//! The executor's type embeds an [`ExecHeader`] (see `embedded`). Every
//! type behind an `Exec` is one of viaduct's own: a user's executor is
//! boxed in one (`Exec::new`).

use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::embedded::{whole, Counts, CountsOf, Embeds, Header, HeaderPtr};
use crate::executor::{Executor, Runnable};

/// A field of an executor that [`Embeds`] it: what its [`ExecPtr`]s find
/// the executor through.
pub(crate) struct ExecHeader(&'static ExecVTable);

struct ExecVTable {
    counts: Counts,
    /// The executor whose header this is.
    get: unsafe fn(NonNull<ExecHeader>) -> NonNull<dyn Executor>,
    /// Its `schedule`, called directly: the one call every wake-up makes.
    schedule: unsafe fn(NonNull<ExecHeader>, Runnable),
}

impl Header for ExecHeader {
    fn counts(&self) -> &'static Counts {
        &self.0.counts
    }
}

struct VTableOf<T>(PhantomData<T>);

impl<T: Executor + Embeds<ExecHeader>> VTableOf<T> {
    const VTABLE: ExecVTable = ExecVTable {
        counts: CountsOf::<T, ExecHeader>::COUNTS,
        get: |h| {
            // SAFETY: `h` comes from a live `ExecPtr` of a `T`.
            let whole: NonNull<dyn Executor> = unsafe { whole::<T, ExecHeader>(h) };
            whole
        },
        schedule: |h, runnable| {
            // SAFETY: as for `get`.
            unsafe { whole::<T, ExecHeader>(h).as_ref() }.schedule(runnable)
        },
    };
}

impl ExecHeader {
    /// The header a `T` holds at its offset.
    pub(crate) const fn of<T: Executor + Embeds<ExecHeader>>() -> ExecHeader {
        ExecHeader(&VTableOf::<T>::VTABLE)
    }
}

/// A strong reference to an executor, one word wide.
#[derive(Clone)]
pub(crate) struct ExecPtr(HeaderPtr<ExecHeader>);

impl ExecPtr {
    /// Takes over `executor`'s strong reference.
    pub(crate) fn new<T: Executor + Embeds<ExecHeader>>(executor: std::sync::Arc<T>) -> ExecPtr {
        ExecPtr(HeaderPtr::new(executor))
    }

    /// A new strong reference to `executor`.
    ///
    /// # Safety
    ///
    /// `executor` is borrowed through the `Arc` it lives in.
    pub(crate) unsafe fn of_ref<T: Executor + Embeds<ExecHeader>>(executor: &T) -> ExecPtr {
        // SAFETY: the caller's contract.
        ExecPtr(unsafe { HeaderPtr::of_ref(executor) })
    }

    /// The executor.
    #[inline]
    pub(crate) fn get(&self) -> &dyn Executor {
        // SAFETY: the header is live and its vtable is its executor's; the
        // executor lives as long as `self` does.
        unsafe { (self.0.header().0.get)(self.0.as_ptr()).as_ref() }
    }

    /// Hands `runnable` to the executor.
    #[inline]
    pub(crate) fn schedule(&self, runnable: Runnable) {
        // SAFETY: as in `get`.
        unsafe { (self.0.header().0.schedule)(self.0.as_ptr(), runnable) }
    }

    /// The executor's address: the same for every pointer to it.
    pub(crate) fn addr(&self) -> *const () {
        self.0.as_ptr().as_ptr() as *const ()
    }
}
