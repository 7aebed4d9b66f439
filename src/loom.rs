//! The std/loom facade: synchronisation that loom models must see goes
//! through here, so `RUSTFLAGS="--cfg loom"` swaps it for loom's checked
//! versions without touching the protocols that use it.

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering},
    Mutex, MutexGuard,
};

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, MutexGuard,
};

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
