//! Compile-time promises about the public types: which are `Send`, `Sync`
//! and `Unpin`, which are not, and that `Executor` makes a trait object.
//! If a change breaks one, this file stops compiling.

use std::rc::Rc;

use viaduct::pool::{BuildError, Builder, Metrics, WaitError};
use viaduct::{
    Exec, Executor, Inline, JoinHandle, ManualExecutor, Panic, PanicPayload, RejectReason,
    Rejected, Runnable, TaskError, TaskInfo, ThreadPerTask, ThreadPool,
};

fn send<T: Send>() {}
fn sync<T: Sync>() {}
fn send_sync<T: Send + Sync>() {}
fn unpin<T: Unpin>() {}
fn spawn<T: futures::task::Spawn>() {}

/// Fails to compile if `$ty` implements `$trait`: with an impl, the call
/// below has two candidates and cannot be inferred (static_assertions'
/// `assert_not_impl_any`, written out to avoid a dependency).
macro_rules! assert_not_impl {
    ($ty:ty: $trait:path) => {
        const _: fn() = || {
            trait AmbiguousIfImpl<A> {
                fn some_item() {}
            }
            impl<T: ?Sized> AmbiguousIfImpl<()> for T {}
            #[allow(dead_code)]
            struct Invalid;
            impl<T: ?Sized + $trait> AmbiguousIfImpl<Invalid> for T {}
            let _ = <$ty as AmbiguousIfImpl<_>>::some_item;
        };
    };
}

// A handle sends its result across threads, so it is `Send` exactly when
// the result is.
assert_not_impl!(JoinHandle<Rc<u8>>: Send);
assert_not_impl!(Rejected<Rc<u8>>: Send);
// An owned guard hands out `&T`: `Sync` only for a `Sync` value, though
// the handle inside it is `Sync` for any `Send` value.
assert_not_impl!(viaduct::strand::OwnedGuard<std::cell::Cell<u8>>: Sync);

#[test]
fn executors_and_their_handles_go_anywhere() {
    send_sync::<ThreadPool>();
    send_sync::<Builder>();
    send_sync::<Exec>();
    send_sync::<Inline>();
    send_sync::<ManualExecutor>();
    send_sync::<ThreadPerTask>();
    send_sync::<Box<dyn Executor>>();
    send_sync::<std::sync::Arc<dyn Executor>>();
    unpin::<ThreadPool>();
}

#[test]
fn every_executor_is_a_futures_spawner() {
    spawn::<ThreadPool>();
    spawn::<Exec>();
    spawn::<Inline>();
    spawn::<ManualExecutor>();
    spawn::<ThreadPerTask>();
}

#[test]
fn tasks_and_their_outcomes_cross_threads() {
    send_sync::<JoinHandle<u8>>();
    send_sync::<viaduct::AbortHandle>();
    send_sync::<viaduct::strand::OwnedGuard<u8>>();
    send::<viaduct::strand::OwnedGuard<std::cell::Cell<u8>>>();
    // `Sync` whatever the result: `&JoinHandle` only asks whether it is done.
    sync::<JoinHandle<Rc<u8>>>();
    unpin::<JoinHandle<Rc<u8>>>();
    send_sync::<Runnable>();
    send_sync::<TaskInfo>();
    // `Sync` too, so it fits `Box<dyn Error + Send + Sync>`: the payload is
    // reachable only by value.
    send_sync::<TaskError>();
    send_sync::<Panic>();
    send::<PanicPayload>();
    send_sync::<RejectReason>();
    send_sync::<Rejected<u8>>();
}

#[test]
fn structured_work_crosses_threads() {
    send_sync::<viaduct::cancel::CancellationToken>();
    send_sync::<viaduct::cancel::WaitForCancellation>();
    unpin::<viaduct::cancel::WaitForCancellation>();
    send_sync::<viaduct::JoinSet<u8>>();
    sync::<viaduct::Scope<'static, 'static>>();
    send_sync::<viaduct::ScopedJoinHandle<'static, u8>>();
    unpin::<viaduct::ScopedJoinHandle<'static, u8>>();
}

// A scoped handle sends its result across threads, as a `JoinHandle`.
assert_not_impl!(viaduct::ScopedJoinHandle<'static, Rc<u8>>: Send);
assert_not_impl!(viaduct::JoinSet<Rc<u8>>: Send);

#[test]
fn errors_and_metrics_are_plain_data() {
    send_sync::<BuildError>();
    send_sync::<WaitError>();
    send_sync::<Metrics>();
    fn error<E: std::error::Error + Send + Sync + 'static>() {}
    error::<BuildError>();
    error::<WaitError>();
    error::<TaskError>();
    error::<RejectReason>();
    error::<Rejected<u8>>();
}
