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

use std::time::{Duration, Instant};

use super::schedule::{Deviation, Replay, Schedule};

/// The most runs one shrink takes, and the longest it takes: a schedule
/// that is still long after these is reported as it is.
const MAX_RUNS: u32 = 4_000;
const MAX_TIME: Duration = Duration::from_secs(20);

/// A failing run at its smallest.
pub(super) struct Shrunk {
    pub(super) replay: Replay,
    pub(super) preemptions: u32,
    pub(super) runs: u32,
}

/// Shrinks the failing run of `seed` on `workers` whose polls were `log`.
/// `fails` runs the program under a schedule: the departures it took and
/// how many were preemptions, if it failed the same way, else `None`.
pub(super) fn shrink(
    seed: u64,
    workers: usize,
    jitter: u64,
    log: &[(u32, u32)],
    fails: &mut dyn FnMut(Schedule) -> Option<(Vec<Deviation>, u32)>,
) -> Option<Shrunk> {
    let started = Instant::now();
    let mut runs = 1;
    let (mut best, mut preemptions) = fails(Schedule::pinned(log))?;
    let mut parts = 2;
    while !best.is_empty() && runs < MAX_RUNS && started.elapsed() < MAX_TIME {
        let chunk = best.len().div_ceil(parts);
        let mut cut = false;
        for start in (0..best.len()).step_by(chunk) {
            let mut rest = best[..start].to_vec();
            rest.extend_from_slice(&best[(start + chunk).min(best.len())..]);
            runs += 1;
            if let Some((taken, p)) = fails(Schedule::new(&rest, false)) {
                // What the run took, not what it was offered: a departure
                // that no longer came up is gone too.
                if taken.len() < best.len() {
                    best = taken;
                    preemptions = p;
                    parts = (parts - 1).max(2);
                    cut = true;
                    break;
                }
            }
            if runs >= MAX_RUNS {
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
    Some(Shrunk {
        replay: Replay {
            seed,
            workers,
            jitter,
            departures: best,
        },
        preemptions,
        runs,
    })
}
