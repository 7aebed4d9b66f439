//! Clocks: where a timer reads the time, in nanoseconds since it started.
//!
//! Every deadline inside the timer is a `u64` count of nanoseconds since the
//! clock's origin. That covers about 584 years; anything further away
//! saturates to [`NEVER`], a deadline the clock never reaches. Converting an
//! [`Instant`] rounds up, so a deadline is never earlier than asked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A deadline no clock reaches: where `Duration::MAX` and far instants land.
pub(crate) const NEVER: u64 = u64::MAX;

/// The real monotonic clock, or a virtual one moved by hand.
#[derive(Debug)]
pub(crate) struct Clock {
    origin: Instant,
    /// `None` for the real clock; the virtual time otherwise.
    manual: Option<AtomicU64>,
}

impl Clock {
    pub(crate) fn real() -> Clock {
        Clock {
            origin: Instant::now(),
            manual: None,
        }
    }

    pub(crate) fn manual() -> Clock {
        Clock {
            origin: Instant::now(),
            manual: Some(AtomicU64::new(0)),
        }
    }

    pub(crate) fn is_manual(&self) -> bool {
        self.manual.is_some()
    }

    /// Nanoseconds since the origin.
    pub(crate) fn now(&self) -> u64 {
        match &self.manual {
            // Acquire pairs with the Release in `advance`: whoever sees the
            // new time also sees what the advancing thread did before.
            Some(t) => t.load(Ordering::Acquire),
            None => nanos(self.origin.elapsed()),
        }
    }

    /// Moves a manual clock forward by `by`, saturating at [`NEVER`]; returns
    /// the new time. `None` for the real clock.
    pub(crate) fn advance(&self, by: Duration) -> Option<u64> {
        let t = self.manual.as_ref()?;
        let by = nanos(by);
        let prev = t
            .fetch_update(Ordering::Release, Ordering::Relaxed, |t| {
                Some(t.saturating_add(by))
            })
            .unwrap_or_else(|t| t);
        Some(prev.saturating_add(by))
    }

    /// The deadline `d` after now.
    pub(crate) fn after(&self, d: Duration) -> u64 {
        self.now().saturating_add(nanos(d))
    }

    /// The deadline for `t`: 0 if `t` is before the origin (already due).
    pub(crate) fn at(&self, t: Instant) -> u64 {
        let since = t.saturating_duration_since(self.origin);
        // `Instant` counts whole nanoseconds on every platform std supports,
        // so this is exact; were it finer, truncating would only make the
        // comparison `now >= deadline` hold later, never earlier.
        nanos(since)
    }

    /// The instant of deadline `ns`. [`NEVER`] and other instants the
    /// platform cannot represent saturate to the furthest one it can.
    pub(crate) fn instant(&self, ns: u64) -> Instant {
        let mut d = Duration::from_nanos(ns);
        loop {
            if let Some(t) = self.origin.checked_add(d) {
                return t;
            }
            d /= 2;
        }
    }
}

/// `d` in nanoseconds, saturating at [`NEVER`].
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(NEVER)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn far_deadlines_saturate() {
        let c = Clock::real();
        assert_eq!(c.after(Duration::MAX), NEVER);
        assert_eq!(nanos(Duration::from_secs(u64::MAX)), NEVER);
        let far = c.instant(NEVER);
        assert!(far > Instant::now() + Duration::from_secs(100 * 365 * 86_400));
        assert_eq!(c.at(c.origin), 0);
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = Clock::manual();
        assert_eq!(c.now(), 0);
        assert_eq!(c.advance(Duration::from_nanos(5)), Some(5));
        assert_eq!(c.now(), 5);
        assert_eq!(c.advance(Duration::MAX), Some(NEVER));
        assert_eq!(c.now(), NEVER);
        assert_eq!(Clock::real().advance(Duration::from_secs(1)), None);
    }
}
