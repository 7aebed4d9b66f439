//! Shrinking a failing run to the fewest departures from the default
//! order (see `schedule.rs`), so that what is left is the handful of
//! preemptions the bug needs.
//!
//! The failing run's polls are replayed pinned, one by one, which shows
//! which of its choices departed from the default order. Then departures
//! are taken away, in halves, quarters and so on down to one at a time
//! (delta debugging, Zeller and Hildebrandt, TSE 2002), keeping each cut
//! after which the program still fails the same way. A replay that tries
//! a cut follows what is left leniently: a departure that names a task
//! not waiting then is skipped, and what the run actually departed by is
//! what it keeps.
//!
//! Cutting alone stops where no single departure can go, which is not
//! always the fewest preemptions: a poll stopped at its first await point,
//! then a switch, may be what a poll stopped one await point later does
//! with no switch at all. So each small budget is also tried one larger,
//! and what fails is cut again; a result with fewer preemptions (then
//! fewer departures) wins.

use std::time::{Duration, Instant};

use super::schedule::{Deviation, Replay, Schedule};

/// The most runs one shrink takes, and the longest it takes: a schedule
/// that is still long after these is reported as it is.
const MAX_RUNS: u32 = 4_000;
const MAX_TIME: Duration = Duration::from_secs(20);

/// Budgets below this are tried one larger: a few await points into a
/// poll is where a preemption that matters sits.
const BUDGETS_TRIED: u32 = 4;

/// A failing run at its smallest.
pub(super) struct Shrunk {
    pub(super) replay: Replay,
    pub(super) preemptions: u32,
    pub(super) runs: u32,
}

/// A schedule that fails: its departures and how many are preemptions.
type Failing = (Vec<Deviation>, u32);

/// Runs tried so far, within the shrink's bounds.
struct Tries<'a> {
    fails: &'a mut dyn FnMut(Schedule) -> Option<Failing>,
    runs: u32,
    started: Instant,
}

impl Tries<'_> {
    fn spent(&self) -> bool {
        self.runs >= MAX_RUNS || self.started.elapsed() >= MAX_TIME
    }

    /// Whether the program fails under `departures` (followed leniently),
    /// and by what it actually departed.
    fn run(&mut self, departures: &[Deviation]) -> Option<Failing> {
        self.runs += 1;
        (self.fails)(Schedule::new(departures, false))
    }

    /// Delta debugging: cuts departures while the program still fails.
    fn cut(&mut self, (mut best, mut preemptions): Failing) -> Failing {
        let mut parts = 2;
        while !best.is_empty() && !self.spent() {
            let chunk = best.len().div_ceil(parts);
            let mut cut = false;
            for start in (0..best.len()).step_by(chunk) {
                let mut rest = best[..start].to_vec();
                rest.extend_from_slice(&best[(start + chunk).min(best.len())..]);
                if let Some((taken, p)) = self.run(&rest) {
                    // What the run took, not what it was offered: a
                    // departure that no longer came up is gone too.
                    if taken.len() < best.len() {
                        (best, preemptions) = (taken, p);
                        parts = (parts - 1).max(2);
                        cut = true;
                        break;
                    }
                }
                if self.spent() {
                    break;
                }
            }
            if !cut {
                if parts >= best.len() {
                    break;
                }
                parts = (parts * 2).min(best.len());
            }
        }
        (best, preemptions)
    }

    /// The first schedule with one small budget one larger that, cut,
    /// needs fewer preemptions (or as many and fewer departures).
    fn widen(&mut self, (best, preemptions): &Failing) -> Option<Failing> {
        for (i, d) in best.iter().enumerate() {
            let Deviation::Budget { poll, budget } = *d else {
                continue;
            };
            if budget >= BUDGETS_TRIED || self.spent() {
                continue;
            }
            let mut wider = best.clone();
            wider[i] = Deviation::Budget {
                poll,
                budget: budget + 1,
            };
            let Some(failing) = self.run(&wider) else {
                continue;
            };
            let cut = self.cut(failing);
            if (cut.1, cut.0.len()) < (*preemptions, best.len()) {
                return Some(cut);
            }
        }
        None
    }
}

/// Shrinks the failing run of `seed` on `workers` whose polls were `log`.
/// `fails` runs the program under a schedule: the departures it took and
/// how many were preemptions, if it failed the same way, else `None`.
pub(super) fn shrink(
    seed: u64,
    workers: usize,
    jitter: u64,
    log: &[(u32, u32)],
    fails: &mut dyn FnMut(Schedule) -> Option<Failing>,
) -> Option<Shrunk> {
    let mut tries = Tries {
        fails,
        runs: 1,
        started: Instant::now(),
    };
    let pinned = (tries.fails)(Schedule::pinned(log))?;
    let mut best = tries.cut(pinned);
    while let Some(better) = tries.widen(&best) {
        best = better;
    }
    Some(Shrunk {
        replay: Replay {
            seed,
            workers,
            jitter,
            departures: best.0,
        },
        preemptions: best.1,
        runs: tries.runs,
    })
}
