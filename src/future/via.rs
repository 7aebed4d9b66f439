//! [`ViaExt`]: `fut.via(&ex)` for every future.

use std::future::Future;

use crate::spawn::ExecutorExt;
use crate::task::JoinHandle;

mod sealed {
    pub trait Sealed {}
    impl<F: std::future::Future> Sealed for F {}
}

/// `via` for every future: spawn it on an executor and get its handle, to
/// await or to chain continuations on (folly `via(ex)` on a future).
///
/// Implemented for every [`Future`]; sealed. On a [`JoinHandle`] the
/// inherent [`JoinHandle::via`] is called instead: it picks the executor
/// for the continuations, since the handle's task is already running.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ThreadPool, ViaExt};
///
/// let cpu = ThreadPool::builder().threads(1).name("cpu").build().unwrap();
/// let io = ThreadPool::builder().threads(1).name("io").build().unwrap();
/// let thread = || std::thread::current().name().unwrap().to_owned();
/// let where_ = async move { vec![thread()] }
///     .via(&cpu)
///     .then(move |mut v| { v.push(thread()); v })
///     .via(&io)
///     .then(move |mut v| { v.push(thread()); v });
/// assert_eq!(block_on(where_).unwrap(), ["cpu-0", "cpu-0", "io-0"]);
/// ```
pub trait ViaExt: Future + sealed::Sealed {
    /// Spawns this future on `ex`; the same as `ex.spawn(self)`.
    ///
    /// Never panics: on a closed executor the handle resolves to
    /// [`TaskError::Rejected`](crate::TaskError::Rejected).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, Inline, ViaExt};
    ///
    /// let h = async { 6 * 7 }.via(&Inline);
    /// assert_eq!(block_on(h).unwrap(), 42);
    /// ```
    fn via<E: ExecutorExt>(self, ex: &E) -> JoinHandle<Self::Output>
    where
        Self: Sized + Send + 'static,
        Self::Output: Send + 'static,
    {
        ex.spawn(self)
    }
}

impl<F: Future> ViaExt for F {}
