//! What every bench reads the same way: how many timed rounds to run, and
//! the median of a round's times.

use std::time::Duration;

/// The rounds `BENCH_ROUNDS` asks for, else `default`; at least one, so
/// that there is a median.
pub fn rounds(default: usize) -> usize {
    std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
        .max(1)
}

/// The middle time (the upper one of two, for an even count).
pub fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}
