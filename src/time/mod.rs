//! Time: a timer service, runtime-agnostic timer futures, and timed tasks
//! on every executor.
//!
//! - [`sleep`], [`sleep_until`], [`timeout`], [`timeout_at`], [`interval`]
//!   and [`interval_at`] make futures (and a `Stream`) that work under any
//!   executor: viaduct's, tokio's, `futures::executor::block_on`.
//! - [`TimedExt`] gives every executor `execute_after`, `execute_at`,
//!   `spawn_after`, `spawn_at` and `execute_every`, each returning a handle
//!   that cancels ([`Scheduled`], [`Periodic`]).
//! - [`Timer`] is the service behind them: [`Timer::global`] (what the free
//!   functions and [`TimedExt`] use) or [`Timer::manual`], a virtual clock
//!   for deterministic tests, with the same methods.
//!
//! ```
//! use std::time::Duration;
//! use viaduct::time::{self, Timer};
//! use viaduct::{block_on, Inline, ManualExecutor, TimedExt};
//!
//! // Real time, on the global timer.
//! block_on(time::sleep(Duration::from_millis(1)));
//! let slow = time::timeout(Duration::from_millis(1), futures::future::pending::<()>());
//! assert!(block_on(slow).is_err());
//! assert_eq!(block_on(Inline.execute_after(Duration::from_millis(1), || 5)).unwrap(), 5);
//!
//! // Virtual time: nothing happens until the clock is moved.
//! let timer = Timer::manual();
//! let ex = ManualExecutor::new();
//! let job = timer.execute_after(&ex, Duration::from_secs(60), || "done");
//! timer.advance(Duration::from_secs(59));
//! assert_eq!(ex.run_until_idle(), 0);
//! timer.advance(Duration::from_secs(1));
//! assert_eq!(ex.run_until(job).unwrap(), "done");
//! ```
//!
//! # Guarantees
//!
//! - Every future and handle here is `Send` and `Sync` (when what it
//!   wraps is); [`Sleep`] and [`Timeout`] are `!Unpin`, as the timer entry
//!   lives inside them.
//! - Nothing fires early: a timer fires once its clock reads its deadline
//!   or later, and a [`Sleep`] completes only then.
//! - Resolution is one nanosecond: deadlines are not rounded to a tick.
//!   How late a timer fires on the real clock is up to the OS waking the
//!   `viaduct-timer` thread (tens of microseconds on an idle Linux box).
//! - `Duration::MAX` and instants too far away for the clock (about 584
//!   years) saturate to a deadline that never comes; no arithmetic overflows
//!   and nothing panics. A zero period is raised to one nanosecond.
//!
//! # How it works
//!
//! Timers live in hierarchical timing wheels (`wheel.rs`): O(1) insert,
//! O(1) cancel, nanosecond slots. The global timer keeps several wheels
//! (shards), each behind its own lock; a thread inserts into the shard its
//! index picks, so threads do not contend on one lock, and cancelling
//! locks only the shard that holds the timer. One thread, `viaduct-timer`,
//! started on first use, sleeps until the earliest slot and fires what is
//! due (`driver.rs`). A manual timer has one wheel and no thread: whoever
//! calls [`Timer::advance`] fires the due timers, in deadline order.
//!
//! # Ground rules
//!
//! - A wheel is only touched under its shard's lock; wakers are woken and
//!   tasks scheduled after the lock is released, so a waker may insert or
//!   cancel timers.
//! - Each timer's state machine (`entry.rs`) makes "fired" and "cancelled"
//!   mutually exclusive; a timed task's claim word does the same for "ran"
//!   and "cancelled" (`scheduled.rs`).
//!
//! # Shutdown
//!
//! 1. The global timer lives as long as the process; its thread is never
//!    joined.
//! 2. A manual timer is dropped with the last thing that refers to it: a
//!    [`Timer`] handle, a [`Sleep`], [`Timeout`] or [`Interval`] on it, a
//!    [`Scheduled`] or [`Periodic`] handle it made, or the task of a
//!    periodic job (which times its runs with it: cancel the job to let
//!    the timer go). A task dump reads every live manual timer's wheel
//!    and holds the timer while it does: if every other reference goes
//!    meanwhile, the timer is dropped by the thread that took the dump.
//! 3. Dropping it drops what its wheel still holds: detached timed tasks
//!    that never fired (a live handle would have kept the timer) are
//!    cancelled, their futures dropped unrun.

mod clock;
mod driver;
mod entry;
mod interval;
mod periodic;
mod scheduled;
mod sleep;
mod timed;
mod wheel;

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicUsize as StdAtomicUsize;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use self::clock::Clock;
use self::driver::Driver;
use self::entry::{Action, Entry};
use self::wheel::{Inserted, Wheel};
use crate::loom::{lock, lock_std, AtomicBool, Mutex, Ordering};
use crate::task_id::TaskId;

pub use self::interval::{Interval, MissedTickBehavior, Tick};
pub use self::periodic::{Pacing, Periodic};
pub use self::scheduled::Scheduled;
pub use self::sleep::{Elapsed, Sleep, Timeout};
pub use self::timed::TimedExt;

/// How many due timers are fired per lock acquisition: bounds how long an
/// inserter on the same shard may wait behind the driver.
const BATCH: usize = 256;

/// A timer service: the clock and the wheels that timers wait in.
///
/// [`Timer::global`] is the one the free functions ([`sleep`], [`timeout`],
/// ...) and [`TimedExt`] use; [`Timer::manual`] makes a virtual clock that
/// moves only when [`advance`](Timer::advance)d, for deterministic tests.
/// Both offer the same methods. A `Timer` is a cheap handle: clones share
/// the service.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use viaduct::block_on;
/// use viaduct::time::Timer;
///
/// let timer = Timer::manual();
/// let start = timer.now();
/// let sleep = timer.sleep(Duration::from_millis(10));
/// let t = timer.clone();
/// let mover = std::thread::spawn(move || {
///     while t.pending() == 0 {
///         std::thread::yield_now(); // wait until the sleep is registered
///     }
///     t.advance(Duration::from_millis(10));
/// });
/// block_on(sleep); // completes when the other thread moves the clock
/// mover.join().unwrap();
/// assert_eq!(timer.now() - start, Duration::from_millis(10));
/// ```
#[derive(Clone)]
pub struct Timer {
    inner: TimerRef,
}

/// The global timer is reached through a `&'static`: cloning it into every
/// `Sleep` would make all threads bump one reference count.
#[derive(Clone)]
enum TimerRef {
    Global(&'static Inner),
    Shared(Arc<Inner>),
}

pub(crate) struct Inner {
    clock: Clock,
    /// A power of two of them, so picking one is a mask.
    shards: Box<[CachePadded<Mutex<Wheel>>]>,
    /// The real clock's driver thread; `None` on a manual timer.
    driver: Option<Driver>,
    /// Serialises `advance` on a manual timer, so timers fire in order.
    advancing: Mutex<()>,
    /// Stopped for good (a simulation's world has ended): nothing fires,
    /// and a timer set now is cancelled at once. Read under a shard lock
    /// by inserts, so none slips past [`Timer::stop`].
    stopped: AtomicBool,
}

static GLOBAL: OnceLock<Inner> = OnceLock::new();

/// Every manual timer still alive, for dumps to read their waiting tasks
/// (the global timer is read through [`GLOBAL`]).
static MANUAL: std::sync::Mutex<Vec<Weak<Inner>>> = std::sync::Mutex::new(Vec::new());

fn registered(inner: Inner) -> Arc<Inner> {
    let inner = Arc::new(inner);
    let mut all = lock_std(&MANUAL);
    all.retain(|t| t.strong_count() > 0);
    all.push(Arc::downgrade(&inner));
    inner
}

/// Every task waiting on a timer's sleep, with that sleep's deadline, on
/// every timer: what a task dump lists as its timer waits.
pub(crate) fn waiting_tasks() -> Vec<(TaskId, Instant)> {
    let manual: Vec<Arc<Inner>> = lock_std(&MANUAL).iter().filter_map(Weak::upgrade).collect();
    let mut out = Vec::new();
    let mut found = Vec::new();
    for inner in GLOBAL.get().into_iter().chain(manual.iter().map(|t| &**t)) {
        for shard in inner.shards.iter() {
            let wheel = lock(shard);
            found.reserve(wheel.len());
            wheel.waiters(&mut found);
        }
        out.extend(
            found
                .drain(..)
                .map(|(task, ns)| (task, inner.clock.instant(ns))),
        );
    }
    out
}

/// Each thread's pick of shard (taken modulo the shard count): round-robin
/// in order of first use, so the threads of a pool land on different shards.
static NEXT_SHARD: StdAtomicUsize = StdAtomicUsize::new(0);

fn shard_hint() -> usize {
    crate::context::with(|c| match c.timer_shard.get() {
        usize::MAX => {
            let h =
                NEXT_SHARD.fetch_add(1, std::sync::atomic::Ordering::Relaxed) & (usize::MAX >> 1);
            c.timer_shard.set(h);
            h
        }
        h => h,
    })
}

impl Inner {
    fn new(clock: Clock, shards: usize, driver: Option<Driver>) -> Inner {
        Inner {
            clock,
            shards: (0..shards)
                .map(|i| CachePadded::new(Mutex::new(Wheel::new(i))))
                .collect(),
            driver,
            advancing: Mutex::new(()),
            stopped: AtomicBool::new(false),
        }
    }

    fn shard_for_this_thread(&self) -> usize {
        debug_assert!(self.shards.len().is_power_of_two());
        shard_hint() & (self.shards.len() - 1)
    }

    /// Fires everything due at `now`, shard by shard, in batches. Returns
    /// the earliest expiration left and the first panic a waker raised.
    fn fire_due(&self, now: u64, out: &mut Vec<Action>) -> (u64, Option<Box<dyn Any + Send>>) {
        let mut next = clock::NEVER;
        let mut panic = None;
        for shard in self.shards.iter() {
            loop {
                let mut wheel = lock(shard);
                let more = wheel.poll(now, out, BATCH);
                if !more {
                    next = next.min(wheel.next_expiration().unwrap_or(clock::NEVER));
                }
                drop(wheel);
                if !out.is_empty() {
                    crate::trace::trace_event!(fired = out.len(), "timers fired");
                }
                for action in out.drain(..) {
                    if let Err(p) = catch_unwind(AssertUnwindSafe(|| action.fire())) {
                        panic.get_or_insert(p);
                    }
                }
                if !more {
                    break;
                }
            }
        }
        (next, panic)
    }
}

impl Timer {
    /// The global timer, started on first use. Its clock is
    /// [`Instant::now`]; a thread named `viaduct-timer` fires its timers.
    ///
    /// # Panics
    ///
    /// When the first timer is inserted, if the OS refuses to start the
    /// `viaduct-timer` thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::global();
    /// let before = timer.now();
    /// viaduct::block_on(timer.sleep(Duration::from_millis(2)));
    /// assert!(timer.now() >= before + Duration::from_millis(2));
    /// ```
    pub fn global() -> Timer {
        let inner = GLOBAL.get_or_init(|| {
            let shards = std::thread::available_parallelism()
                .map_or(1, usize::from)
                .saturating_mul(4)
                .next_power_of_two();
            Inner::new(Clock::real(), shards, Some(Driver::new()))
        });
        Timer {
            inner: TimerRef::Global(inner),
        }
    }

    /// A timer with a virtual clock that starts at [`Instant::now`] and
    /// moves only when [`advance`](Timer::advance)d. Nothing fires on its
    /// own: `advance` fires what is due, on the calling thread, in deadline
    /// order. No thread is started.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::manual();
    /// let t0 = timer.now();
    /// std::thread::sleep(Duration::from_millis(1));
    /// assert_eq!(timer.now(), t0); // real time does not move it
    /// timer.advance(Duration::from_secs(3600));
    /// assert_eq!(timer.now() - t0, Duration::from_secs(3600));
    /// ```
    pub fn manual() -> Timer {
        Timer {
            inner: TimerRef::Shared(registered(Inner::new(Clock::manual(), 1, None))),
        }
    }

    /// The timer the free functions and [`TimedExt`] use: the running
    /// simulation's clock on its thread, the global timer elsewhere.
    pub(crate) fn ambient() -> Timer {
        let timer: *const Timer = crate::context::with(|c| c.timer.get()).cast();
        // SAFETY: set only by `replace_ambient`, whose callers keep the
        // timer alive until they put back what it replaced.
        unsafe { timer.as_ref() }.map_or_else(Timer::global, Timer::clone)
    }

    /// `true` if this is the timer [`ambient`](Timer::ambient) gives on
    /// this thread now (without a handle's clone).
    pub(crate) fn is_ambient(&self) -> bool {
        let timer: *const Timer = crate::context::with(|c| c.timer.get()).cast();
        // SAFETY: as in `ambient`.
        match unsafe { timer.as_ref() } {
            Some(ambient) => self.same_as(ambient),
            None => matches!(self.inner, TimerRef::Global(_)),
        }
    }

    /// Makes `timer` (null: none) the one [`ambient`](Timer::ambient)
    /// gives on this thread, and returns the one before, to be put back.
    ///
    /// # Safety
    ///
    /// `timer` stays alive until the one returned is put back.
    pub(crate) unsafe fn replace_ambient(timer: *const Timer) -> *const Timer {
        crate::context::with(|c| c.timer.replace(timer.cast())).cast()
    }

    /// The earliest time a waiting timer may be due (nanoseconds since the
    /// clock's origin), `None` if none waits: where a simulation moves its
    /// clock when nothing else can run. It may be a slot's start before
    /// any deadline in it; moving there fires nothing, and asking again
    /// gives a later time.
    pub(crate) fn next_expiration(&self) -> Option<u64> {
        self.inner()
            .shards
            .iter()
            .filter_map(|s| lock(s).next_expiration())
            .min()
    }

    /// Moves a manual clock to `at` (never back) and fires what is due,
    /// all of it, in the order `below` picks: `below(n)` is an index less
    /// than `n`, and the due timers are shuffled with it before any fires
    /// (a simulation draws it from its seed). Returns the first panic a
    /// waker raised, after every due timer has fired.
    pub(crate) fn advance_to_shuffled(
        &self,
        at: u64,
        below: &mut dyn FnMut(usize) -> usize,
    ) -> Option<Box<dyn Any + Send>> {
        let inner = self.inner();
        let _turn = lock(&inner.advancing);
        let now = inner.clock.now();
        let now = inner
            .clock
            .advance(Duration::from_nanos(at.saturating_sub(now)))
            .expect("a simulation's timer is manual");
        let mut due = Vec::new();
        for shard in inner.shards.iter() {
            while lock(shard).poll(now, &mut due, usize::MAX) {}
        }
        // Fired with no lock held: a job run where it fires (on `Inline`)
        // may `block_on`, which moves this clock again.
        drop(_turn);
        for i in (1..due.len()).rev() {
            due.swap(i, below(i + 1));
        }
        let mut panic = None;
        for action in due {
            // What fired before may have ended the world: the rest is
            // cancelled, as `stop` cancels what waits.
            if inner.stopped.load(Ordering::SeqCst) {
                drop(action);
                continue;
            }
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| action.fire())) {
                panic.get_or_insert(p);
            }
        }
        panic
    }

    /// Stops the timer for good (a simulation's world has ended; its
    /// clock will not move again): every waiting timer is cancelled, and
    /// so is every timer set from now on. Wakers are dropped unwoken;
    /// timed tasks are cancelled.
    pub(crate) fn stop(&self) {
        let inner = self.inner();
        inner.stopped.store(true, Ordering::SeqCst);
        for shard in inner.shards.iter() {
            let actions = lock(shard).take_all();
            drop(actions);
        }
    }

    fn inner(&self) -> &Inner {
        match &self.inner {
            TimerRef::Global(inner) => inner,
            TimerRef::Shared(inner) => inner,
        }
    }

    /// `true` if `other` is a handle of this same timer.
    pub(crate) fn same_as(&self, other: &Timer) -> bool {
        std::ptr::eq(self.inner(), other.inner())
    }

    /// `true` for a timer made by [`Timer::manual`].
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::time::Timer;
    ///
    /// assert!(Timer::manual().is_manual());
    /// assert!(!Timer::global().is_manual());
    /// ```
    pub fn is_manual(&self) -> bool {
        self.inner().clock.is_manual()
    }

    /// The timer's current time.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    /// use viaduct::time::Timer;
    ///
    /// let before = Instant::now();
    /// assert!(Timer::global().now() >= before);
    /// ```
    pub fn now(&self) -> Instant {
        let inner = self.inner();
        inner.clock.instant(inner.clock.now())
    }

    /// Moves a manual clock forward by `by` (saturating far in the future)
    /// and fires every timer that is due, on the calling thread, in deadline
    /// order.
    /// Wakers are woken and timed tasks handed to their executors before
    /// this returns; what runs then is up to the executors.
    ///
    /// Concurrent calls take turns, so calling `advance` from a waker it
    /// wakes (or a job it runs inline) deadlocks.
    ///
    /// # Panics
    ///
    /// On a real-clock timer (the global one): real time cannot be moved.
    /// If a waker panics, the other due timers still fire, then the first
    /// panic is resumed here.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::manual();
    /// let mut sleep = Box::pin(timer.sleep(Duration::from_secs(5)));
    /// let waker = futures::task::noop_waker();
    /// let mut cx = std::task::Context::from_waker(&waker);
    /// assert!(sleep.as_mut().poll(&mut cx).is_pending());
    /// timer.advance(Duration::from_secs(4));
    /// assert!(sleep.as_mut().poll(&mut cx).is_pending());
    /// timer.advance(Duration::from_secs(1));
    /// assert!(sleep.as_mut().poll(&mut cx).is_ready());
    /// # use std::future::Future;
    /// ```
    pub fn advance(&self, by: Duration) {
        let inner = self.inner();
        let _turn = lock(&inner.advancing);
        let now = inner.clock.advance(by).expect(
            "Timer::advance needs a manual timer (Timer::manual); real time cannot be moved",
        );
        let (_, panic) = inner.fire_due(now, &mut Vec::new());
        if let Some(p) = panic {
            std::panic::resume_unwind(p);
        }
    }

    /// How many timers are waiting: registered and neither fired nor
    /// cancelled. A [`Sleep`] counts once it has been polled; a timed task
    /// until it is handed to its executor.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    /// use viaduct::ManualExecutor;
    ///
    /// let timer = Timer::manual();
    /// let ex = ManualExecutor::new();
    /// let job = timer.execute_after(&ex, Duration::from_secs(1), || ());
    /// assert_eq!(timer.pending(), 1);
    /// assert!(job.cancel());
    /// assert_eq!(timer.pending(), 0);
    /// ```
    pub fn pending(&self) -> usize {
        self.inner().shards.iter().map(|s| lock(s).len()).sum()
    }

    /// A future that completes `duration` from now, by this timer's clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::global();
    /// let start = timer.now();
    /// viaduct::block_on(timer.sleep(Duration::from_millis(3)));
    /// assert!(timer.now() - start >= Duration::from_millis(3));
    /// ```
    pub fn sleep(&self, duration: Duration) -> Sleep {
        let now = self.now_ns();
        Sleep::new(
            self.clone(),
            now.saturating_add(clock::nanos(duration)),
            now,
        )
    }

    /// A future that completes at `deadline`, by this timer's clock (at
    /// once if it has passed).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::global();
    /// let at = timer.now() + Duration::from_millis(2);
    /// viaduct::block_on(timer.sleep_until(at));
    /// assert!(timer.now() >= at);
    /// ```
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        let clock = &self.inner().clock;
        Sleep::new(self.clone(), clock.at(deadline), clock.now())
    }

    /// Runs `future` for at most `duration`: its output, or [`Elapsed`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::global();
    /// let quick = timer.timeout(Duration::from_secs(5), async { 7 });
    /// assert_eq!(viaduct::block_on(quick), Ok(7));
    /// ```
    pub fn timeout<F: Future>(&self, duration: Duration, future: F) -> Timeout<F> {
        Timeout::new(future, self.sleep(duration))
    }

    /// Runs `future` until `deadline` at most: its output, or [`Elapsed`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::global();
    /// let at = timer.now() + Duration::from_millis(1);
    /// let never = timer.timeout_at(at, futures::future::pending::<()>());
    /// assert!(viaduct::block_on(never).is_err());
    /// ```
    pub fn timeout_at<F: Future>(&self, deadline: Instant, future: F) -> Timeout<F> {
        Timeout::new(future, self.sleep_until(deadline))
    }

    /// An [`Interval`] that ticks at once, then every `period` (a zero
    /// period is raised to one nanosecond). Missed ticks burst by default.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::manual();
    /// let mut every = timer.interval(Duration::from_secs(1));
    /// let first = viaduct::block_on(every.tick());
    /// timer.advance(Duration::from_secs(1));
    /// assert_eq!(viaduct::block_on(every.tick()) - first, Duration::from_secs(1));
    /// ```
    pub fn interval(&self, period: Duration) -> Interval {
        Interval::new(self.clone(), self.inner().clock.now(), period)
    }

    /// An [`Interval`] whose first tick is at `start`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    ///
    /// let timer = Timer::manual();
    /// let start = timer.now() + Duration::from_secs(10);
    /// let mut every = timer.interval_at(start, Duration::from_secs(1));
    /// timer.advance(Duration::from_secs(10));
    /// assert_eq!(viaduct::block_on(every.tick()), start);
    /// ```
    pub fn interval_at(&self, start: Instant, period: Duration) -> Interval {
        Interval::new(self.clone(), self.inner().clock.at(start), period)
    }

    /// The clock's reading, in nanoseconds since its origin.
    pub(crate) fn now_ns(&self) -> u64 {
        self.inner().clock.now()
    }

    fn instant(&self, ns: u64) -> Instant {
        self.inner().clock.instant(ns)
    }

    /// Links `entry` to fire `action` at `deadline`, waking the driver if
    /// it must see this one sooner than planned.
    ///
    /// # Safety
    ///
    /// As [`Wheel::insert`]: `entry` was made by [`Timer::entry`] of this
    /// timer, is not linked, and stays in place until it is unlinked.
    unsafe fn insert(
        &self,
        entry: &Entry,
        deadline: u64,
        action: Action,
        waiter: Option<TaskId>,
    ) -> Inserted {
        let inner = self.inner();
        let mut wheel = lock(&inner.shards[entry.shard()]);
        if inner.stopped.load(Ordering::SeqCst) {
            return Inserted::Stopped(action);
        }
        // SAFETY: the entry is not linked (the caller's promise) and we
        // hold its shard's lock.
        unsafe { entry.core() }.waiter = waiter;
        // SAFETY: the caller's promise; `entry.shard()` picked this wheel.
        let inserted = unsafe { wheel.insert(entry, deadline, action) };
        drop(wheel);
        if let (Inserted::Linked, TimerRef::Global(global)) = (&inserted, &self.inner) {
            let driver = global
                .driver
                .as_ref()
                .expect("the global timer has a driver");
            if driver.must_wake(deadline) {
                driver.wake(global);
            }
        }
        inserted
    }

    /// Cancels `entry` if it is still waiting. Its action is dropped after
    /// the lock is released: dropping a parked runnable drops a future,
    /// whose `Drop` may use the timer.
    fn remove(&self, entry: &Entry) {
        let action = lock(&self.inner().shards[entry.shard()]).remove(entry);
        drop(action);
    }

    /// Gives a waiting entry a new waker and waiting task; `false` if it
    /// has fired.
    fn update_waker(
        &self,
        entry: &Entry,
        waker: &std::task::Waker,
        waiter: Option<TaskId>,
    ) -> bool {
        let mut wheel = lock(&self.inner().shards[entry.shard()]);
        let linked = wheel.update_waker(entry, waker);
        if linked {
            // SAFETY: linked in this shard, whose lock we hold.
            unsafe { entry.core() }.waiter = waiter;
        }
        linked
    }

    /// A new entry on this thread's shard.
    fn entry(&self) -> Entry {
        Entry::new(self.inner().shard_for_this_thread())
    }

    /// A snapshot of the timer's gauges.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::time::Timer;
    /// use viaduct::ManualExecutor;
    ///
    /// let timer = Timer::manual();
    /// let ex = ManualExecutor::new();
    /// let _job = timer.execute_after(&ex, Duration::from_secs(1), || ());
    /// assert_eq!(timer.metrics().pending, 1);
    /// timer.advance(Duration::from_secs(1)); // fires: the job leaves the wheel
    /// assert_eq!(timer.metrics().pending, 0);
    /// ```
    pub fn metrics(&self) -> crate::metrics::TimerMetrics {
        crate::metrics::TimerMetrics {
            pending: self.pending(),
        }
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer")
            .field("manual", &self.is_manual())
            .field("shards", &self.inner().shards.len())
            .finish_non_exhaustive()
    }
}

/// Waits for `duration` on the [global timer](Timer::global) (the
/// simulated clock inside a [simulation](crate::sim)).
///
/// The sleep takes its clock where it is first polled: one made outside a
/// simulation and awaited inside runs on the simulated clock, `duration`
/// from its first poll there. Until that poll, [`Sleep::deadline`] reads
/// the clock it was made on, and a [`Sleep::reset`] keeps it there.
/// [`timeout`] and [`interval`] do the same.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let start = Instant::now();
/// viaduct::block_on(viaduct::time::sleep(Duration::from_millis(5)));
/// assert!(start.elapsed() >= Duration::from_millis(5));
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    Sleep::ambient(duration)
}

/// Waits until `deadline` on the [global timer](Timer::global) (the
/// simulated clock inside a [simulation](crate::sim)).
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let at = Instant::now() + Duration::from_millis(5);
/// viaduct::block_on(viaduct::time::sleep_until(at));
/// assert!(Instant::now() >= at);
/// ```
pub fn sleep_until(deadline: Instant) -> Sleep {
    Timer::ambient().sleep_until(deadline)
}

/// Runs `future` for at most `duration` on the [global timer](Timer::global)
/// (the simulated clock inside a [simulation](crate::sim)).
///
/// The inner future is polled first, so if both are ready its output wins.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use viaduct::time::{timeout, Elapsed};
///
/// let late = timeout(Duration::from_millis(1), futures::future::pending::<u8>());
/// assert_eq!(viaduct::block_on(late), Err(Elapsed::new()));
/// assert_eq!(viaduct::block_on(timeout(Duration::from_secs(1), async { 1 })), Ok(1));
/// ```
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout::new(future, Sleep::ambient(duration))
}

/// Runs `future` until `deadline` at most, on the [global
/// timer](Timer::global) (the simulated clock inside a
/// [simulation](crate::sim)).
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use viaduct::time::timeout_at;
///
/// let at = Instant::now() + Duration::from_millis(1);
/// assert!(viaduct::block_on(timeout_at(at, futures::future::pending::<()>())).is_err());
/// ```
pub fn timeout_at<F: Future>(deadline: Instant, future: F) -> Timeout<F> {
    Timer::ambient().timeout_at(deadline, future)
}

/// An [`Interval`] on the [global timer](Timer::global) (the simulated
/// clock inside a [simulation](crate::sim)) that ticks at once, then every
/// `period`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use futures::StreamExt;
///
/// let ticks = viaduct::time::interval(Duration::from_millis(1)).take(3);
/// let ticks: Vec<_> = viaduct::block_on(ticks.collect());
/// assert!(ticks[2] - ticks[0] == Duration::from_millis(2));
/// ```
pub fn interval(period: Duration) -> Interval {
    Interval::ambient(period)
}

/// An [`Interval`] on the [global timer](Timer::global) (the simulated
/// clock inside a [simulation](crate::sim)) whose first tick is at `start`.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let start = Instant::now() + Duration::from_millis(2);
/// let mut every = viaduct::time::interval_at(start, Duration::from_millis(1));
/// assert_eq!(viaduct::block_on(every.tick()), start);
/// ```
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    Timer::ambient().interval_at(start, period)
}
