//! How tasks end and why work is refused: [`TaskError`], [`RejectReason`],
//! [`Panic`]. The bottom of the crate: every other module may use these.

use std::any::Any;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The payload of a panic, as [`std::panic::catch_unwind`] returns it.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, Inline, PanicPayload, TaskError};
///
/// let err = block_on(Inline.run(|| -> u8 { panic!("boom") })).unwrap_err();
/// let TaskError::Panicked(panic) = err else { unreachable!() };
/// let payload: PanicPayload = panic.into_payload();
/// assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
/// ```
pub type PanicPayload = Box<dyn Any + Send + 'static>;

/// How a task ended, as its handle reports it.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, Inline, ManualExecutor, RejectReason, TaskError};
///
/// let panicked = block_on(Inline.run(|| -> u8 { panic!("boom") })).unwrap_err();
/// assert!(matches!(panicked, TaskError::Panicked(_)));
///
/// let ex = ManualExecutor::new();
/// let queued = ex.spawn(async { 1 });
/// queued.abort();
/// ex.run_until_idle(); // drops the aborted task's future
/// assert!(matches!(block_on(queued), Err(TaskError::Cancelled)));
///
/// ex.close();
/// let refused = block_on(ex.spawn(async { 2 })).unwrap_err();
/// assert!(matches!(refused, TaskError::Rejected(RejectReason::Closed)));
/// assert_eq!(refused.to_string(), "task was rejected: the executor is closed");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum TaskError {
    /// The task panicked; [`Panic`] holds the payload and its message.
    Panicked(Panic),
    /// The task was cancelled before it finished: aborted through its handle,
    /// or dropped by `shutdown_now`, or its executor shut down with it queued.
    Cancelled,
    /// The executor did not accept the task.
    Rejected(RejectReason),
}

/// Why an executor refused work.
///
/// # Examples
///
/// ```
/// use viaduct::{ExecutorExt, ManualExecutor, RejectReason};
///
/// let ex = ManualExecutor::new();
/// ex.close();
/// let rejected = ex.try_spawn(async {}).unwrap_err();
/// assert_eq!(rejected.reason(), RejectReason::Closed);
/// assert_eq!(RejectReason::Closed.to_string(), "the executor is closed");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The executor is closed (or shut down).
    Closed,
    /// The executor is bounded and full.
    Full,
}

impl TaskError {
    /// The panic message, if the task panicked with a `&str` or `String`.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, Inline};
    ///
    /// let err = block_on(Inline.run(|| -> u8 { panic!("bad input: {}", 7) })).unwrap_err();
    /// assert_eq!(err.panic_message(), Some("bad input: 7"));
    /// ```
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            TaskError::Panicked(p) => p.message(),
            _ => None,
        }
    }

    /// `true` for [`TaskError::Cancelled`].
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, ManualExecutor};
    ///
    /// let ex = ManualExecutor::new();
    /// let handle = ex.run(|| 1);
    /// handle.abort();
    /// ex.run_until_idle(); // drops the aborted task's future
    /// let err = block_on(handle).unwrap_err();
    /// assert!(err.is_cancelled());
    /// assert!(!err.is_panic());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self, TaskError::Cancelled)
    }

    /// `true` for [`TaskError::Panicked`].
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, Inline};
    ///
    /// let err = block_on(Inline.run(|| -> u8 { panic!("boom") })).unwrap_err();
    /// assert!(err.is_panic());
    /// assert!(!err.is_cancelled());
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self, TaskError::Panicked(_))
    }
}

pub(crate) fn panic_message(p: &(dyn Any + Send)) -> Option<&str> {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::Panicked(_) => match self.panic_message() {
                Some(m) => write!(f, "task panicked: {m}"),
                None => f.write_str("task panicked"),
            },
            TaskError::Cancelled => f.write_str("task was cancelled"),
            TaskError::Rejected(r) => write!(f, "task was rejected: {r}"),
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RejectReason::Closed => "the executor is closed",
            RejectReason::Full => "the executor is full",
        })
    }
}

impl std::error::Error for TaskError {}
impl std::error::Error for RejectReason {}

/// A task's panic: its message, and the payload to resume it with.
///
/// `Sync` although a panic payload is not: the payload is reachable only
/// by value ([`into_payload`](Panic::into_payload)), so a `&Panic` shares
/// nothing but the message. That makes [`TaskError`] fit in
/// `Box<dyn Error + Send + Sync>`.
///
/// # Examples
///
/// ```
/// use viaduct::{block_on, ExecutorExt, Inline, TaskError};
///
/// let err = block_on(Inline.run(|| -> u8 { panic!("boom") })).unwrap_err();
/// let TaskError::Panicked(panic) = err else { unreachable!() };
/// assert_eq!(panic.message(), Some("boom"));
/// let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(TaskError::Panicked(panic));
/// assert_eq!(boxed.to_string(), "task panicked: boom");
/// ```
pub struct Panic {
    message: Option<String>,
    payload: ByValue<PanicPayload>,
}

impl Panic {
    pub(crate) fn new(payload: PanicPayload) -> Panic {
        Panic {
            message: panic_message(payload.as_ref()).map(str::to_owned),
            payload: ByValue(payload),
        }
    }

    /// The panic message, if the payload was a `&str` or a `String`.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, Inline, TaskError};
    ///
    /// let err = block_on(Inline.run(|| -> u8 { std::panic::panic_any(7u32) })).unwrap_err();
    /// let TaskError::Panicked(panic) = err else { unreachable!() };
    /// assert_eq!(panic.message(), None); // not a string payload
    /// ```
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// The payload, as [`std::panic::catch_unwind`] returned it.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, Inline, TaskError};
    ///
    /// let err = block_on(Inline.run(|| -> u8 { std::panic::panic_any(7u32) })).unwrap_err();
    /// let TaskError::Panicked(panic) = err else { unreachable!() };
    /// assert_eq!(panic.into_payload().downcast_ref::<u32>(), Some(&7));
    /// ```
    pub fn into_payload(self) -> PanicPayload {
        self.payload.0
    }

    /// Resumes the panic on the calling thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, ExecutorExt, Inline, TaskError};
    ///
    /// let err = block_on(Inline.run(|| -> u8 { panic!("boom") })).unwrap_err();
    /// let TaskError::Panicked(panic) = err else { unreachable!() };
    /// let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| panic.resume()));
    /// assert_eq!(caught.unwrap_err().downcast_ref::<&str>(), Some(&"boom"));
    /// ```
    pub fn resume(self) -> ! {
        std::panic::resume_unwind(self.into_payload())
    }
}

impl fmt::Debug for Panic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Panic")
            .field("message", &self.message)
            .finish_non_exhaustive()
    }
}

/// A value reachable only by value, never through `&`.
pub(crate) struct ByValue<T>(pub(crate) T);

// SAFETY: `Sync` lets threads share `&ByValue<T>`, and no code reads or
// writes the `T` through a shared reference (it is only ever moved out, by
// whoever owns the `ByValue`), so sharing the reference shares nothing of
// `T`, whatever `T` is (std's `Exclusive` makes the same argument).
unsafe impl<T> Sync for ByValue<T> {}

/// Drops a panic payload whose own `Drop` may panic; the second payload
/// is leaked rather than dropped, since its `Drop` may panic as well.
pub(crate) fn drop_payload(payload: PanicPayload) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}
