//! [`Sleep`] (wait for a deadline) and [`Timeout`] (race a future against
//! one).

use std::fmt;
use std::future::Future;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use pin_project::pin_project;

use super::entry::{Action, Entry, FIRED, IDLE, LINKED};
use super::wheel::Inserted;
use super::Timer;
use crate::task::current_task;

/// A future that completes at a deadline: made by [`sleep`](super::sleep),
/// [`sleep_until`](super::sleep_until) or the [`Timer`] methods of the same
/// names.
///
/// It registers with its timer when first polled and unregisters when
/// dropped, so a dropped sleep leaves nothing behind. It works under any
/// executor and wakes whatever waker it was last polled with. The timer
/// entry lives inside the future (no allocation per sleep), so it is
/// `!Unpin`: pin it (`std::pin::pin!`, `Box::pin`) to poll it by hand.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use viaduct::time::sleep;
///
/// let s = sleep(Duration::from_millis(2));
/// let deadline = s.deadline();
/// viaduct::block_on(s);
/// assert!(Instant::now() >= deadline);
///
/// fn send_sync<T: Send + Sync>(_: &T) {}
/// send_sync(&sleep(Duration::from_secs(1)));
/// ```
///
/// It cannot be moved once polled, so it is not `Unpin`:
///
/// ```compile_fail
/// fn unpin<T: Unpin>() {}
/// unpin::<viaduct::time::Sleep>();
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    pub(super) timer: Timer,
    /// Nanoseconds on `timer`'s clock.
    pub(super) deadline: u64,
    /// A reading of the clock taken when the deadline was set: a deadline
    /// at or before it is over without registering. (One taken later would
    /// catch more, but costs a clock read per registration; the wheel's own
    /// time catches the rest, never early.)
    seen: u64,
    entry: Entry,
    /// For a sleep made by the free functions on the ambient timer: its
    /// duration, until its first poll binds it to the timer that is
    /// ambient there (a simulation's clock, if made outside and awaited
    /// inside it).
    unbound: Option<u64>,
    /// The wheel points at `entry` while it is linked.
    _pinned: PhantomPinned,
}

impl Sleep {
    pub(super) fn new(timer: Timer, deadline: u64, now: u64) -> Sleep {
        Sleep {
            entry: timer.entry(),
            timer,
            deadline,
            seen: now,
            unbound: None,
            _pinned: PhantomPinned,
        }
    }

    /// A sleep of `duration` on the ambient timer: the one where it is
    /// first polled, if that is not where it was made.
    pub(super) fn ambient(duration: Duration) -> Sleep {
        let mut sleep = Timer::ambient().sleep(duration);
        sleep.unbound = Some(super::clock::nanos(duration));
        sleep
    }

    /// At the first poll of an [`ambient`](Sleep::ambient) sleep: moves it
    /// to the timer ambient here, if another, from now.
    #[cold]
    fn bind(self: Pin<&mut Self>) {
        // SAFETY: only written while its entry is IDLE, which no wheel
        // points at; nothing else is moved.
        let this = unsafe { self.get_unchecked_mut() };
        let Some(duration) = this.unbound.take() else {
            return;
        };
        if this.entry.state() != IDLE || this.timer.is_ambient() {
            return;
        }
        let here = Timer::ambient();
        let now = here.now_ns();
        this.entry = here.entry();
        this.timer = here;
        this.deadline = now.saturating_add(duration);
        this.seen = now;
    }

    /// The timer whose wheel and clock this sleep is on.
    #[cfg(feature = "hyper")]
    pub(crate) fn timer(&self) -> &Timer {
        &self.timer
    }

    /// When this sleep completes. A deadline too far away for the clock
    /// reads as the furthest instant the platform can represent.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::manual();
    /// let s = timer.sleep(Duration::from_secs(1));
    /// assert_eq!(s.deadline() - timer.now(), Duration::from_secs(1));
    /// ```
    pub fn deadline(&self) -> Instant {
        self.timer.instant(self.deadline)
    }

    /// `true` once the timer's clock has reached the deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::manual();
    /// let s = timer.sleep(Duration::from_secs(1));
    /// assert!(!s.is_elapsed());
    /// timer.advance(Duration::from_secs(1));
    /// assert!(s.is_elapsed());
    /// ```
    pub fn is_elapsed(&self) -> bool {
        self.timer.now_ns() >= self.deadline
    }

    /// Moves the deadline to `deadline` (earlier or later), as if the sleep
    /// had been made for it. A sleep that had completed waits again.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::manual();
    /// let mut s = Box::pin(timer.sleep(Duration::from_secs(60)));
    /// s.as_mut().reset(timer.now() + Duration::from_secs(1));
    /// timer.advance(Duration::from_secs(1));
    /// viaduct::block_on(s);
    /// ```
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        let clock = &self.timer.inner().clock;
        let (deadline, now) = (clock.at(deadline), clock.now());
        self.reset_ns(deadline, now);
    }

    /// Sets a new deadline; `now` is a clock reading no later than now.
    pub(super) fn reset_ns(self: Pin<&mut Self>, deadline: u64, now: u64) {
        // SAFETY: only `deadline` and `seen` are written; the entry is not
        // moved.
        let this = unsafe { self.get_unchecked_mut() };
        this.unbound = None;
        this.cancel();
        if this.entry.state() == FIRED {
            // The wheel let go of it when it fired: ours alone again.
            this.entry.set_state(IDLE);
        }
        this.deadline = deadline;
        this.seen = now;
    }

    /// Unregisters from the timer, if registered and not yet fired.
    pub(super) fn cancel(&self) {
        if self.entry.state() == LINKED {
            self.timer.remove(&self.entry);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        std::task::ready!(crate::coop::poll_proceed(cx));
        if self.unbound.is_some() {
            self.as_mut().bind();
        }
        let elapsed = self.poll_elapsed(cx);
        if elapsed.is_ready() {
            crate::coop::spend();
        }
        elapsed
    }
}

impl Sleep {
    fn poll_elapsed(&self, cx: &mut Context<'_>) -> Poll<()> {
        match self.entry.state() {
            LINKED
                if self
                    .timer
                    .update_waker(&self.entry, cx.waker(), current_task()) =>
            {
                Poll::Pending
            }
            // No longer linked: it fired, or the timer stopped, which
            // unlinks it IDLE (read again: `update_waker` took the lock
            // after the stop). `cancel` is ours, never concurrent.
            LINKED | FIRED if self.entry.state() == FIRED => Poll::Ready(()),
            _ if self.deadline <= self.seen => Poll::Ready(()),
            _ => {
                let action = Action::Wake(cx.waker().clone());
                let waiter = current_task();
                // SAFETY: the entry was made by `timer.entry()`, is IDLE,
                // and is pinned inside this sleep, whose `Drop` unlinks it
                // before it can move or be freed.
                let inserted = unsafe {
                    self.timer
                        .insert(&self.entry, self.deadline, action, waiter)
                };
                match inserted {
                    Inserted::Linked => Poll::Pending,
                    Inserted::Due(_) => Poll::Ready(()),
                    // Never fires: the clock will not move again.
                    Inserted::Stopped(_) => Poll::Pending,
                }
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline())
            .field("registered", &(self.entry.state() == LINKED))
            .finish()
    }
}

/// The error of a [`Timeout`] whose deadline came first.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use viaduct::time::{timeout, Elapsed};
///
/// let r = viaduct::block_on(timeout(Duration::ZERO, futures::future::pending::<()>()));
/// assert_eq!(r, Err(Elapsed::new()));
/// assert_eq!(Elapsed::new().to_string(), "deadline has elapsed");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Elapsed(());

impl Elapsed {
    /// The error value (for comparisons in tests and matches).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(viaduct::time::Elapsed::new(), Default::default());
    /// ```
    pub fn new() -> Elapsed {
        Elapsed(())
    }
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// A future run against a deadline: made by [`timeout`](super::timeout),
/// [`timeout_at`](super::timeout_at) or the [`Timer`] methods of the same
/// names. It resolves to the future's output, or to [`Elapsed`] once the
/// deadline has come while the future was still pending. The future is
/// polled first, so an output ready at the deadline wins.
///
/// Its timer is cancelled as soon as the future wins, or when it is
/// dropped.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use viaduct::time::{timeout, Elapsed};
///
/// let slow = timeout(Duration::from_millis(1), viaduct::time::sleep(Duration::from_secs(60)));
/// assert_eq!(viaduct::block_on(slow), Err(Elapsed::new()));
/// ```
#[must_use = "futures do nothing unless polled"]
#[pin_project]
pub struct Timeout<F> {
    #[pin]
    future: F,
    #[pin]
    sleep: Sleep,
}

impl<F> Timeout<F> {
    pub(super) fn new(future: F, sleep: Sleep) -> Timeout<F> {
        Timeout { future, sleep }
    }

    /// The deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::manual();
    /// let t = timer.timeout(Duration::from_secs(2), async {});
    /// assert_eq!(t.deadline() - timer.now(), Duration::from_secs(2));
    /// ```
    pub fn deadline(&self) -> Instant {
        self.sleep.deadline()
    }

    /// Gives the future back, deadline dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let t = viaduct::time::timeout(Duration::from_secs(1), async { 5 });
    /// assert_eq!(viaduct::block_on(t.into_inner()), 5);
    /// ```
    pub fn into_inner(self) -> F {
        // By value means never pinned, so never polled: the sleep was
        // never registered.
        self.future
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.future.poll(cx) {
            // Not left waiting until the `Timeout` is dropped.
            this.sleep.cancel();
            return Poll::Ready(Ok(v));
        }
        // Without a budget: a future that spends the budget every poll
        // would otherwise hold its own deadline back forever.
        let _lifted = crate::coop::lifted();
        this.sleep.poll(cx).map(|()| Err(Elapsed(())))
    }
}

impl<F> fmt::Debug for Timeout<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("sleep", &self.sleep)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom::wakes::counter;
    use loom::thread;
    use std::time::Duration;

    /// Dropping a sleep while the timer fires it: at most one wake, and
    /// the timer is left empty.
    #[test]
    fn drop_against_fire() {
        loom::model(|| {
            let timer = Timer::manual();
            let (count, waker) = counter();
            let mut sleep = Box::pin(timer.sleep(Duration::from_nanos(10)));
            let pending = sleep.as_mut().poll(&mut Context::from_waker(&waker));
            assert!(pending.is_pending());
            let t = timer.clone();
            let firer = thread::spawn(move || t.advance(Duration::from_nanos(10)));
            drop(sleep);
            firer.join().unwrap();
            assert!(count.get() <= 1);
            assert_eq!(timer.pending(), 0);
        });
    }

    /// Re-polling with a new waker while the timer fires: if the poll says
    /// pending, the new waker is woken; no wake-up is lost or doubled.
    #[test]
    fn new_waker_against_fire() {
        loom::model(|| {
            let timer = Timer::manual();
            let (first, w1) = counter();
            let (second, w2) = counter();
            let mut sleep = Box::pin(timer.sleep(Duration::from_nanos(10)));
            assert!(sleep
                .as_mut()
                .poll(&mut Context::from_waker(&w1))
                .is_pending());
            let t = timer.clone();
            let firer = thread::spawn(move || t.advance(Duration::from_nanos(10)));
            let again = sleep.as_mut().poll(&mut Context::from_waker(&w2));
            firer.join().unwrap();
            let (a, b) = (first.get(), second.get());
            assert_eq!(a + b, 1, "exactly one wake");
            if again.is_pending() {
                assert_eq!(b, 1, "the latest waker is the one woken");
            }
            assert!(sleep
                .as_mut()
                .poll(&mut Context::from_waker(&w2))
                .is_ready());
        });
    }
}
