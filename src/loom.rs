//! The std/loom facade: synchronisation that loom models must see goes
//! through here, so `RUSTFLAGS="--cfg loom"` swaps it for loom's checked
//! versions without touching the protocols that use it.

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering},
    Mutex, MutexGuard,
};

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering},
    Mutex, MutexGuard,
};

/// A pause in a loop that waits for another thread's store; under loom, a
/// yield, so that the model runs the thread it waits for.
#[inline]
pub(crate) fn spin_loop() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// What only the loom models themselves use.
#[cfg(all(loom, test))]
pub(crate) use loom::sync::{Arc, Condvar};

/// For the models: a waker that counts its wakes.
#[cfg(all(loom, test))]
pub(crate) mod wakes {
    use super::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    pub(crate) struct Count(AtomicUsize);

    impl Count {
        pub(crate) fn get(&self) -> usize {
            self.0.load(SeqCst)
        }
    }

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// A counter and a waker that bumps it.
    pub(crate) fn counter() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }
}

/// Thread parking, which the pool's idle workers sleep on.
#[cfg(not(loom))]
pub(crate) mod thread {
    pub(crate) use std::thread::{current, park, Thread};
}

#[cfg(loom)]
pub(crate) mod thread {
    pub(crate) use loom::thread::{current, park, Thread};
}

/// An `UnsafeCell` whose accesses loom checks under `--cfg loom`: the
/// protocol that hands it between threads is the user's to prove.
pub(crate) struct UnsafeCell<T> {
    #[cfg(not(loom))]
    cell: std::cell::UnsafeCell<T>,
    #[cfg(loom)]
    cell: loom::cell::UnsafeCell<T>,
}

impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        UnsafeCell {
            #[cfg(not(loom))]
            cell: std::cell::UnsafeCell::new(value),
            #[cfg(loom)]
            cell: loom::cell::UnsafeCell::new(value),
        }
    }

    /// Runs `f` on the value.
    ///
    /// # Safety
    ///
    /// Nothing else touches the value until `f` returns, and what touched
    /// it before happened-before this call.
    #[inline]
    pub(crate) unsafe fn with_mut<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        #[cfg(not(loom))]
        // SAFETY: the caller's contract.
        return f(unsafe { &mut *self.cell.get() });
        #[cfg(loom)]
        // SAFETY: as above; loom checks it.
        return self.cell.with_mut(|p| f(unsafe { &mut *p }));
    }
}

/// A cell written once and read without a lock after: std's `OnceLock`.
/// Under loom (which has no `OnceLock`), the same thing built the way
/// `OnceLock` is: a state word published with release and read with
/// acquire, so SeqCst fences around it order as they do around the real
/// one. Only one thread may call `init` at a time.
pub(crate) struct SetOnce<T> {
    #[cfg(not(loom))]
    cell: std::sync::OnceLock<T>,
    #[cfg(loom)]
    set: AtomicBool,
    #[cfg(loom)]
    value: loom::cell::UnsafeCell<Option<T>>,
}

#[cfg(not(loom))]
impl<T> SetOnce<T> {
    pub(crate) fn new() -> Self {
        SetOnce {
            cell: std::sync::OnceLock::new(),
        }
    }

    /// Sets the value to `f()` unless it is set already; `true` if this
    /// call set it.
    pub(crate) fn init(&self, f: impl FnOnce() -> T) -> bool {
        let mut set = false;
        self.cell.get_or_init(|| {
            set = true;
            f()
        });
        set
    }

    /// Runs `f` with the value, if it is set.
    pub(crate) fn with<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        f(self.cell.get())
    }
}

// SAFETY: as `OnceLock<T>`: the value is written once, before `set` is
// published, and only read (shared) after; so sharing needs `T: Send + Sync`.
#[cfg(loom)]
unsafe impl<T: Send + Sync> Sync for SetOnce<T> {}

#[cfg(loom)]
impl<T> SetOnce<T> {
    pub(crate) fn new() -> Self {
        SetOnce {
            set: AtomicBool::new(false),
            value: loom::cell::UnsafeCell::new(None),
        }
    }

    pub(crate) fn init(&self, f: impl FnOnce() -> T) -> bool {
        if self.set.load(Ordering::Acquire) {
            return false;
        }
        // SAFETY: one initialising thread at a time (the type's rule),
        // and no reader touches the value before `set` is published.
        self.value.with_mut(|v| unsafe { *v = Some(f()) });
        self.set.store(true, Ordering::Release);
        true
    }

    pub(crate) fn with<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        if self.set.load(Ordering::Acquire) {
            // SAFETY: `set` was published after the value's only write,
            // and the acquire load orders this read after it.
            self.value.with(|v| f(unsafe { (*v).as_ref() }))
        } else {
            f(None)
        }
    }
}

/// Locks `m`, ignoring poison: every structure we guard stays valid if a
/// holder unwinds.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Locks a std mutex (one loom never sees), ignoring poison for the same
/// reason as [`lock`].
pub(crate) fn lock_std<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
