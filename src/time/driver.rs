//! The thread that fires the global timer's due timers: `viaduct-timer`.
//!
//! It sleeps until the earliest slot of any shard, fires what is due, and
//! goes back to sleep. An insert with a deadline earlier than the one the
//! driver sleeps towards must wake it; every other insert leaves it alone, so inserting costs one
//! shared load on the common path and no syscall.
//!
//! # The wake protocol
//!
//! `wake_at` is the time the driver will next look at the shards, [`NEVER`]
//! while it is scanning them.
//!
//! 1. The driver stores [`NEVER`] (SeqCst), then locks each shard in turn,
//!    fires what is due and reads the shard's next expiration.
//! 2. It lowers `wake_at` to the earliest of those (`fetch_min`, SeqCst);
//!    the value it replaced may be lower still (an insert came in during
//!    the scan). Until its next scan only inserters write `wake_at`, and
//!    only to lower it.
//! 3. An inserter links its entry under the shard lock, then loads
//!    `wake_at`; if its deadline is earlier, it lowers `wake_at` with
//!    `fetch_min` and, if that lowered it, unparks the driver.
//! 4. The driver sleeps until `wake_at`, re-reading it whenever it wakes,
//!    and scans again (step 1) only once the clock has reached it. An
//!    unpark for a far deadline thus costs it a wake-up and no scan, and an
//!    insert that is cancelled before its deadline never makes it scan;
//!    the common insert (later than `wake_at`) writes nothing shared.
//!
//! No deadline is missed: an insert that took its shard's lock before the
//! driver scanned that shard is seen by the scan. One that took it after
//! sees, through that lock, the driver's [`NEVER`] store or a later value:
//! either it lowers `wake_at` and unparks (a park after an unpark returns at
//! once), or someone already lowered `wake_at` to no later than its
//! deadline, and the driver rescans by then. The loom model
//! `insert_during_scan_is_never_missed` checks this.

use std::thread::{self, Thread};
use std::time::Duration;

use crossbeam_utils::CachePadded;

use super::clock::NEVER;
use super::Inner;
use crate::loom::{AtomicU64, Ordering::SeqCst};

/// Waits shorter than this are spun rather than slept: the OS's sleep
/// granularity (Linux's default timer slack is 50 µs) would make them late.
const SPIN_NS: u64 = 10_000;

#[derive(Debug)]
pub(crate) struct Driver {
    wake_at: CachePadded<AtomicU64>,
    thread: std::sync::OnceLock<Thread>,
}

impl Driver {
    pub(crate) fn new() -> Driver {
        Driver {
            wake_at: CachePadded::new(AtomicU64::new(NEVER)),
            thread: std::sync::OnceLock::new(),
        }
    }

    /// Step 3: after linking a timer due at `deadline`, whether the driver
    /// must be woken to see it in time.
    pub(crate) fn must_wake(&self, deadline: u64) -> bool {
        deadline < self.wake_at.load(SeqCst) && self.wake_at.fetch_min(deadline, SeqCst) > deadline
    }

    /// Step 1.
    pub(crate) fn begin_scan(&self) {
        self.wake_at.store(NEVER, SeqCst);
    }

    /// Step 2: `next` is the earliest expiration the scan saw; returns when
    /// to look again.
    pub(crate) fn end_scan(&self, next: u64) -> u64 {
        self.wake_at.fetch_min(next, SeqCst).min(next)
    }

    /// Step 4: when to look again, as lowered by inserters since the scan.
    fn planned(&self) -> u64 {
        self.wake_at.load(SeqCst)
    }

    /// Wakes the driver of the global timer, starting it on first use.
    ///
    /// # Panics
    ///
    /// If the OS refuses to start the `viaduct-timer` thread.
    pub(crate) fn wake(&self, inner: &'static Inner) {
        self.thread
            .get_or_init(|| {
                thread::Builder::new()
                    .name("viaduct-timer".into())
                    .spawn(move || run(inner))
                    .expect("failed to spawn the viaduct-timer thread")
                    .thread()
                    .clone()
            })
            .unpark();
    }
}

/// The driver's loop; never returns (the global timer lives as long as the
/// process).
fn run(inner: &'static Inner) {
    let driver = inner
        .driver
        .as_ref()
        .expect("the global timer has a driver");
    let mut fired = Vec::new();
    loop {
        driver.begin_scan();
        let now = inner.clock.now();
        // A panicking waker was reported by the panic hook; the driver
        // carries on with the other timers.
        let (next, _panic) = inner.fire_due(now, &mut fired);
        let mut target = driver.end_scan(next);
        loop {
            let now = inner.clock.now();
            if target <= now {
                break;
            }
            if target == NEVER {
                thread::park();
            } else if target - now <= SPIN_NS {
                std::hint::spin_loop();
            } else {
                thread::park_timeout(Duration::from_nanos(target - now));
            }
            target = driver.planned();
        }
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom::{Arc, AtomicBool, Mutex};
    use loom::thread;

    /// One shard's earliest deadline, the driver's scan of it, and an
    /// insert racing the scan: afterwards the driver either plans to look
    /// no later than the new deadline or has been unparked.
    #[test]
    fn insert_during_scan_is_never_missed() {
        loom::model(|| {
            let driver = Arc::new(Driver::new());
            let shard = Arc::new(Mutex::new(NEVER));
            let unparked = Arc::new(AtomicBool::new(false));
            // The driver is asleep towards 100 from an earlier scan.
            driver.end_scan(100);

            let inserter = {
                let (driver, shard, unparked) = (driver.clone(), shard.clone(), unparked.clone());
                thread::spawn(move || {
                    let mut earliest = shard.lock().unwrap();
                    *earliest = (*earliest).min(50);
                    drop(earliest);
                    if driver.must_wake(50) {
                        unparked.store(true, SeqCst);
                    }
                })
            };

            driver.begin_scan();
            let next = *shard.lock().unwrap();
            let target = driver.end_scan(next);

            inserter.join().unwrap();
            assert!(
                target <= 50 || unparked.load(SeqCst),
                "lost wakeup: target {target}"
            );
        });
    }
}
