//! [`Interval`]: ticks on a fixed period, and what to do about missed ones.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;

use super::clock::nanos;
use super::sleep::Sleep;
use super::Timer;

/// What an [`Interval`] does about ticks it could not deliver on time.
///
/// A tick is *missed* when it is taken at or after the deadline of the tick
/// that follows it: the consumer stalled for a whole period or more. (A tick
/// taken late but before that keeps the schedule: the next one is one period
/// after it was due.) Take an interval with period `p`, ticks due at `0, p,
/// 2p, ...`, whose consumer takes the tick at `0`, stalls, and comes back at
/// `3.5p`:
///
/// | behaviour | ticks it then gives, with the time each is for |
/// |---|---|
/// | [`Burst`](Self::Burst) | `p`, `2p`, `3p` at once, then `4p`, `5p`, ... on time |
/// | [`Delay`](Self::Delay) | `p` at once, then `4.5p`, `5.5p`, ...: the schedule restarts from now |
/// | [`Skip`](Self::Skip) | `p` at once, then `4p`, `5p`, ...: the missed ticks are dropped, the grid kept |
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use viaduct::time::{MissedTickBehavior, Timer};
///
/// let timer = Timer::manual();
/// let p = Duration::from_secs(1);
/// let mut every = timer.interval(p);
/// every.set_missed_tick_behavior(MissedTickBehavior::Skip);
/// let t0 = viaduct::block_on(every.tick());
/// timer.advance(p * 7 / 2); // stall for 3.5 periods
/// assert_eq!(viaduct::block_on(every.tick()), t0 + p);
/// timer.advance(p / 2);
/// assert_eq!(viaduct::block_on(every.tick()), t0 + p * 4);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MissedTickBehavior {
    /// Deliver every missed tick, back to back, until caught up.
    #[default]
    Burst,
    /// Deliver one late tick, then tick every period from then on.
    Delay,
    /// Deliver one late tick, then the next tick of the original schedule
    /// that is still ahead.
    Skip,
}

impl MissedTickBehavior {
    /// The deadline after a tick due at `tick`, taken at `now`, with
    /// `period` (all nanoseconds, `period > 0`). Saturates.
    fn next(self, tick: u64, now: u64, period: u64) -> u64 {
        let on_time = tick.saturating_add(period);
        if now < on_time {
            return on_time;
        }
        match self {
            MissedTickBehavior::Burst => on_time,
            MissedTickBehavior::Delay => now.saturating_add(period),
            MissedTickBehavior::Skip => {
                let periods = (now - tick) / period + 1;
                tick.saturating_add(periods.saturating_mul(period))
            }
        }
    }
}

/// Ticks every period: made by [`interval`](super::interval),
/// [`interval_at`](super::interval_at) or the [`Timer`] methods of the same
/// names.
///
/// Take ticks with [`tick`](Interval::tick) or as a [`Stream`] (which never
/// ends). Each tick yields the instant it was due, not the one it was
/// taken. A zero period is raised to one nanosecond, the timer's
/// resolution; such an interval is always behind, so each tick is ready at
/// once. Missed ticks are handled as [`MissedTickBehavior`] says.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use futures::StreamExt;
/// use viaduct::time::Timer;
///
/// let timer = Timer::manual();
/// let mut every = timer.interval(Duration::from_secs(1));
/// let t0 = viaduct::block_on(every.next()).unwrap();
/// timer.advance(Duration::from_secs(1));
/// assert_eq!(viaduct::block_on(every.next()), Some(t0 + Duration::from_secs(1)));
/// ```
#[must_use = "an interval does nothing unless ticked"]
pub struct Interval {
    sleep: Pin<Box<Sleep>>,
    /// Nanoseconds, at least 1.
    period: u64,
    missed: MissedTickBehavior,
}

impl Interval {
    /// An interval on the ambient timer whose first tick is at once,
    /// where it is first polled: bound to that clock then, as
    /// [`Sleep::ambient`] is.
    pub(super) fn ambient(period: Duration) -> Interval {
        Interval {
            sleep: Box::pin(Sleep::ambient(Duration::ZERO)),
            period: nanos(period).max(1),
            missed: MissedTickBehavior::default(),
        }
    }

    pub(super) fn new(timer: Timer, start: u64, period: Duration) -> Interval {
        let now = timer.now_ns();
        Interval {
            sleep: Box::pin(Sleep::new(timer, start, now)),
            period: nanos(period).max(1),
            missed: MissedTickBehavior::default(),
        }
    }

    /// Waits for the next tick; resolves to the instant it was due.
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future before it completes loses no tick.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let mut every = viaduct::time::interval(Duration::from_millis(1));
    /// let a = viaduct::block_on(every.tick());
    /// let b = viaduct::block_on(every.tick());
    /// assert_eq!(b - a, Duration::from_millis(1));
    /// ```
    pub fn tick(&mut self) -> Tick<'_> {
        Tick { interval: self }
    }

    /// Polls for the next tick: `Ready(instant it was due)`, or `Pending`
    /// with `cx`'s waker registered.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::task::Context;
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::manual();
    /// let mut every = timer.interval(Duration::from_secs(1));
    /// let waker = futures::task::noop_waker();
    /// let mut cx = Context::from_waker(&waker);
    /// assert!(every.poll_tick(&mut cx).is_ready()); // the first tick is at once
    /// assert!(every.poll_tick(&mut cx).is_pending());
    /// ```
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        if self.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let tick = self.sleep.deadline;
        let now = self.sleep.timer.now_ns();
        let next = self.missed.next(tick, now, self.period);
        self.sleep.as_mut().reset_ns(next, now);
        Poll::Ready(self.sleep.timer.instant(tick))
    }

    /// Restarts the schedule: the next tick is one period from now.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::manual();
    /// let mut every = timer.interval(Duration::from_secs(10));
    /// timer.advance(Duration::from_secs(3));
    /// every.reset();
    /// timer.advance(Duration::from_secs(10));
    /// assert_eq!(viaduct::block_on(every.tick()), timer.now());
    /// ```
    pub fn reset(&mut self) {
        let now = self.sleep.timer.now_ns();
        self.sleep
            .as_mut()
            .reset_ns(now.saturating_add(self.period), now);
    }

    /// The period (at least one nanosecond).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// assert_eq!(viaduct::time::interval(Duration::ZERO).period(), Duration::from_nanos(1));
    /// ```
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// What happens to missed ticks; [`Burst`](MissedTickBehavior::Burst)
    /// unless set.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::{interval, MissedTickBehavior};
    ///
    /// assert_eq!(interval(Duration::from_secs(1)).missed_tick_behavior(), MissedTickBehavior::Burst);
    /// ```
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.missed
    }

    /// Sets what happens to missed ticks from now on.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::{interval, MissedTickBehavior};
    ///
    /// let mut every = interval(Duration::from_secs(1));
    /// every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    /// assert_eq!(every.missed_tick_behavior(), MissedTickBehavior::Delay);
    /// ```
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed = behavior;
    }
}

impl Stream for Interval {
    type Item = Instant;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.get_mut().poll_tick(cx).map(Some)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}

impl fmt::Debug for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interval")
            .field("next", &self.sleep.deadline())
            .field("period", &self.period())
            .field("missed", &self.missed)
            .finish()
    }
}

/// The future of [`Interval::tick`]: resolves to the instant the tick was
/// due.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let mut every = viaduct::time::interval(Duration::from_millis(1));
/// let tick: viaduct::time::Tick<'_> = every.tick();
/// viaduct::block_on(tick);
/// ```
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Tick<'a> {
    interval: &'a mut Interval,
}

impl Future for Tick<'_> {
    type Output = Instant;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Instant> {
        self.get_mut().interval.poll_tick(cx)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::MissedTickBehavior::*;

    #[test]
    fn next_deadline_per_behaviour() {
        // Tick due at 10, period 10.
        for b in [Burst, Delay, Skip] {
            assert_eq!(
                b.next(10, 12, 10),
                20,
                "{b:?} keeps the grid when not missed"
            );
        }
        assert_eq!(Burst.next(10, 35, 10), 20);
        assert_eq!(Delay.next(10, 35, 10), 45);
        assert_eq!(Skip.next(10, 35, 10), 40);
        assert_eq!(Skip.next(10, 40, 10), 50);
        assert_eq!(Skip.next(u64::MAX - 5, u64::MAX, 10), u64::MAX);
        assert_eq!(Delay.next(0, u64::MAX, u64::MAX), u64::MAX);
    }
}
