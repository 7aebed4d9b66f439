//! Sleeping and waking workers.
//!
//! # Ground rules
//!
//! - A worker is in one of three states: *busy* (running or about to run a
//!   task it found), *searching* (out of local work, looking at the injector
//!   and the other workers' queues) or *sleeping* (on the sleepers list,
//!   parked). A searcher that finds nothing looks again a few dozen
//!   times, yielding its thread in between, before it goes to sleep
//!   (`IDLE_ROUNDS` in `worker.rs`): it stays searching all the while.
//!   Only as many searchers as the machine has cores look again
//!   ([`Idle::may_spin`]); the rest go to sleep after one look. Each look
//!   visits every worker's queues, so with every idle worker looking
//!   again, a pool of N idle workers did N² work per round, and threads
//!   past the cores only took turns yielding to each other.
//! - `searching` counts searching workers; `sleeping` counts workers on the
//!   sleepers list and changes only under the list's lock.
//! - Whoever makes work visible to other workers calls [`Idle::notify_one`]
//!   after the push. It wakes a sleeper only when nobody is searching: a
//!   searcher will find the work, and the last searcher to stop (having
//!   found work, or leaving to end a wait or exit) wakes a successor if
//!   work is in sight (see [`Idle::stop_searching`]), so a burst of pushes
//!   costs one wake-up, not one per push.
//! - A notifier that wakes a sleeper counts it as searching *for* it, under
//!   the lock, so two notifiers never both see "nobody searching" and wake
//!   two workers for one task.
//!
//! # Why no wake-up is lost
//!
//! A worker goes to sleep in this order: put itself on the sleepers list
//! (`sleeping += 1`), stop searching (`searching -= 1`), then look at every
//! queue once more. A notifier pushes, then reads `searching` and
//! `sleeping`. All four accesses are `SeqCst`, so in their single total
//! order either the worker's last look comes after the push (it sees the
//! work and does not park), or the notifier's reads come after the worker's
//! updates: it sees `searching == 0` (or another searcher, who re-checks the
//! same way) and `sleeping > 0`, and wakes someone. The loom models at the
//! end of this module check this.
//!
//! Parking itself is a flag per worker plus std's thread parking: the flag
//! makes an unpark that comes before the park count.

use crate::loom::{
    fence, thread, AtomicBool, AtomicUsize, Mutex,
    Ordering::{Relaxed, SeqCst},
    SetOnce,
};

pub(crate) struct Idle {
    /// How many searchers may look again before they sleep: the cores,
    /// or the workers if fewer.
    spinners: usize,
    searching: AtomicUsize,
    sleeping: AtomicUsize,
    sleepers: Mutex<Vec<usize>>,
    parkers: Box<[Parker]>,
}

impl Idle {
    pub(crate) fn new(workers: usize, cores: usize) -> Idle {
        Idle {
            spinners: workers.min(cores).max(1),
            searching: AtomicUsize::new(0),
            sleeping: AtomicUsize::new(0),
            sleepers: Mutex::new(Vec::with_capacity(workers)),
            parkers: (0..workers).map(|_| Parker::new()).collect(),
        }
    }

    fn sleepers(&self) -> crate::loom::MutexGuard<'_, Vec<usize>> {
        crate::loom::lock(&self.sleepers)
    }

    /// Called after making work visible to all workers: wakes a sleeping
    /// worker unless one is already searching or none is asleep.
    pub(crate) fn notify_one(&self) {
        fence(SeqCst);
        if self.searching.load(SeqCst) != 0 || self.sleeping.load(SeqCst) == 0 {
            return;
        }
        let mut sleepers = self.sleepers();
        if self.searching.load(SeqCst) != 0 {
            return;
        }
        if let Some(i) = sleepers.pop() {
            self.sleeping.fetch_sub(1, SeqCst);
            self.searching.fetch_add(1, SeqCst);
            drop(sleepers);
            self.parkers[i].unpark();
        }
    }

    /// [`notify_one`](Idle::notify_one) for a `join` half just pushed on
    /// the pushing worker's own deque, without the fence while nobody
    /// seems asleep: such a half is run by its owner if nobody steals it,
    /// so a sleeper missed in a race costs parallelism (at worst the half
    /// runs after the other, on the owner), never progress (rayon makes the
    /// same trade). Everything else that makes
    /// work visible needs `notify_one`'s guarantee.
    #[inline]
    pub(crate) fn notify_for_fork(&self) {
        if self.sleeping.load(Relaxed) != 0 {
            self.notify_one();
        }
    }

    /// Wakes every sleeping worker (close, shutdown): each re-checks whether
    /// it should exit.
    pub(crate) fn notify_all(&self) {
        let mut sleepers = self.sleepers();
        let woken: Vec<usize> = sleepers.drain(..).collect();
        self.sleeping.fetch_sub(woken.len(), SeqCst);
        self.searching.fetch_add(woken.len(), SeqCst);
        drop(sleepers);
        for i in woken {
            self.parkers[i].unpark();
        }
    }

    /// Whether the calling searcher, having found nothing, may yield and
    /// look again: only while no more searchers than cores are.
    pub(crate) fn may_spin(&self) -> bool {
        self.searching.load(Relaxed) <= self.spinners
    }

    /// The calling worker ran out of local work and starts looking.
    pub(crate) fn start_searching(&self) {
        self.searching.fetch_add(1, SeqCst);
    }

    /// The calling worker stops searching (it found work, or leaves for
    /// a wait's condition or to exit). The last searcher to stop passes
    /// the search on if `work_in_sight()`: work pushed while it searched
    /// woke nobody. Only then: waking a worker for an empty queue costs a
    /// syscall and buys a sleep.
    pub(crate) fn stop_searching(&self, work_in_sight: impl FnOnce() -> bool) {
        if self.searching.fetch_sub(1, SeqCst) == 1 {
            fence(SeqCst);
            if work_in_sight() {
                self.notify_one();
            }
        }
    }

    /// Searching worker `i`, having found nothing, goes on the sleepers
    /// list and stops searching. It must then look at every queue once
    /// more, and either [`cancel_sleep`](Idle::cancel_sleep) or
    /// [`park`](Idle::park).
    pub(crate) fn announce_sleep(&self, i: usize) {
        let mut sleepers = self.sleepers();
        debug_assert!(!sleepers.contains(&i), "worker {i} is already asleep");
        sleepers.push(i);
        self.sleeping.fetch_add(1, SeqCst);
        drop(sleepers);
        self.searching.fetch_sub(1, SeqCst);
        // Pairs with the fence in `notify_one`: the last look at the queues
        // (plain acquire loads inside crossbeam) must not be ordered before
        // the updates above.
        fence(SeqCst);
    }

    /// Takes worker `i` off the sleepers list. Returns [`Woken::ByNotify`]
    /// if a notifier took it off first: the notifier counted it as
    /// searching, so it is searching now.
    pub(crate) fn cancel_sleep(&self, i: usize) -> Woken {
        let mut sleepers = self.sleepers();
        match sleepers.iter().position(|&j| j == i) {
            Some(at) => {
                sleepers.swap_remove(at);
                self.sleeping.fetch_sub(1, SeqCst);
                Woken::Directly
            }
            None => Woken::ByNotify,
        }
    }

    /// Parks worker `i` until it is unparked (by a notifier, or directly).
    pub(crate) fn park(&self, i: usize) {
        self.parkers[i].park();
    }

    /// [`park`](Idle::park), in `reactor`'s driver if no other worker is
    /// in it (`true`: it was; work its sockets woke may be in this
    /// worker's own queues).
    #[cfg(feature = "tokio")]
    pub(crate) fn park_in(&self, i: usize, reactor: &super::reactor::Reactor) -> bool {
        if self.parkers[i].park_in(reactor) {
            return true;
        }
        self.parkers[i].park();
        false
    }

    /// Wakes worker `i` whether or not it is on the sleepers list (the
    /// waker of a `block_on` future, the latch of a stolen `join` half).
    pub(crate) fn unpark(&self, i: usize) {
        self.parkers[i].unpark();
    }

    /// `(searching, sleeping)`, for the loom models.
    #[cfg(all(loom, test))]
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.searching.load(SeqCst), self.sleeping.load(SeqCst))
    }
}

/// How a worker left the sleepers list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum Woken {
    /// It took itself off: it is not searching.
    Directly,
    /// A notifier took it off and counted it as searching.
    ByNotify,
}

/// One worker's park/unpark: a flag, so an unpark that comes first is not
/// lost, and the worker's thread to wake. The loom models run this very
/// code, on loom's thread parking.
///
/// It sleeps on std's thread parking (a futex on Linux), not on an
/// `event-listener` event: an event wakes its listener while holding the
/// lock of its list, which the woken thread must take too, so on a busy CPU
/// every wake-up cost three context switches instead of one. That tripled
/// the cost of every hand-off between executors (BENCHMARKS.md,
/// continuations).
///
/// A worker of a pool that drives its own tokio reactor may wait in the
/// reactor's driver instead (`reactor.rs`): it sets `in_reactor`, then
/// registers the waker that ends that wait and looks at the flag, on each
/// poll; `unpark` sets the flag, then wakes a registered waker if it sees
/// `in_reactor`. With both sides sequentially consistent, either the
/// unpark sees `in_reactor` (and the waker, or the worker's look at the
/// flag comes after it: the slot's lock orders them), or the worker's look
/// sees the flag. `loom_model::unpark_ends_a_wait_in_the_reactor` checks it.
struct Parker {
    notified: AtomicBool,
    /// The worker's thread, set by its first `park`.
    thread: SetOnce<thread::Thread>,
    /// The worker waits in the reactor's driver, not on its thread.
    #[cfg(any(feature = "tokio", all(test, loom)))]
    in_reactor: AtomicBool,
    /// The waker of that wait, while it lasts.
    #[cfg(any(feature = "tokio", all(test, loom)))]
    waker: Mutex<Option<std::task::Waker>>,
}

impl Parker {
    fn new() -> Parker {
        Parker {
            notified: AtomicBool::new(false),
            thread: SetOnce::new(),
            #[cfg(any(feature = "tokio", all(test, loom)))]
            in_reactor: AtomicBool::new(false),
            #[cfg(any(feature = "tokio", all(test, loom)))]
            waker: Mutex::new(None),
        }
    }

    fn unpark(&self) {
        self.notified.store(true, SeqCst);
        // Pairs with the fence in `park`: either this sees the thread, or
        // the worker's first look at `notified` comes after the store.
        fence(SeqCst);
        #[cfg(any(feature = "tokio", all(test, loom)))]
        if self.in_reactor.load(SeqCst) {
            // Taken under the lock, woken after it: a waker's `wake` may
            // do anything.
            let waker = crate::loom::lock(&self.waker).take();
            if let Some(waker) = waker {
                waker.wake();
            }
        }
        self.thread.with(|thread| {
            if let Some(thread) = thread {
                thread.unpark();
            }
        });
    }

    /// For a wait in the reactor: registers `waker` as the one `unpark`
    /// wakes, then takes the flag if it is set (`true`: the wait is over).
    #[cfg(any(feature = "tokio", all(test, loom)))]
    fn register_or_take(&self, waker: &std::task::Waker) -> bool {
        let mut slot = crate::loom::lock(&self.waker);
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
        drop(slot);
        self.take_notified()
    }

    /// Waits for an `unpark` in the reactor's driver if no other worker is
    /// in it; `false` if one is (nothing waited).
    #[cfg(feature = "tokio")]
    fn park_in(&self, reactor: &super::reactor::Reactor) -> bool {
        self.in_reactor.store(true, SeqCst);
        // Pairs with the fence in `unpark` (a store, then a look at the
        // other's flag, on each side).
        fence(SeqCst);
        let waited = reactor.wait(|waker| self.register_or_take(waker));
        self.in_reactor.store(false, SeqCst);
        // The old waker must not be woken (or kept) past the wait.
        let stale = crate::loom::lock(&self.waker).take();
        drop(stale);
        waited
    }

    fn park(&self) {
        self.thread.init(thread::current);
        self.thread.with(|thread| {
            debug_assert!(
                thread.is_some_and(|t| t.id() == thread::current().id()),
                "a worker parks only itself"
            );
        });
        fence(SeqCst);
        // A `park` may return spuriously; the flag tells.
        while !self.take_notified() {
            thread::park();
        }
    }

    /// Takes the flag if it is set. Only the worker clears it, so a load
    /// that sees it set means the swap will take it. (The load first is
    /// also what loom 0.7 needs: its `swap` after an unpark can read a
    /// value older than the unparker's store, a false deadlock.)
    fn take_notified(&self) -> bool {
        self.notified.load(SeqCst) && self.notified.swap(false, SeqCst)
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom::Arc;

    /// One worker goes to sleep while a producer pushes one unit of work:
    /// the work is always found, never stranded with the worker asleep.
    #[test]
    fn no_lost_wakeup() {
        loom::model(|| {
            let idle = Arc::new(Idle::new(1, 1));
            let work = Arc::new(AtomicUsize::new(0));
            idle.start_searching();

            // The worker is a thread of its own and the main thread the
            // producer: loom 0.7 aborts when a thread blocked in `join` is
            // unparked (tokio-rs/loom#249), which std allows.
            let worker = {
                let (idle, work) = (idle.clone(), work.clone());
                loom::thread::spawn(move || {
                    // One search, then the sleep protocol, until it has
                    // taken the unit of work.
                    let mut searching = true;
                    loop {
                        if work.swap(0, SeqCst) == 1 {
                            if searching {
                                idle.stop_searching(|| work.load(SeqCst) != 0);
                            }
                            break;
                        }
                        if !searching {
                            idle.start_searching();
                            searching = true;
                            continue;
                        }
                        idle.announce_sleep(0);
                        searching = false;
                        if work.load(SeqCst) != 0 {
                            if idle.cancel_sleep(0) == Woken::ByNotify {
                                searching = true;
                            }
                            continue;
                        }
                        idle.park(0);
                        if idle.cancel_sleep(0) == Woken::ByNotify {
                            searching = true;
                        }
                    }
                })
            };
            work.fetch_add(1, SeqCst);
            idle.notify_one();
            worker.join().unwrap();
            assert_eq!(idle.counts(), (0, 0));
        });
    }

    /// Two sleepers and two producers: both units of work are taken.
    #[test]
    fn two_workers_two_pushes() {
        loom::model(|| {
            let idle = Arc::new(Idle::new(2, 2));
            let work = Arc::new(AtomicUsize::new(0));
            let done = Arc::new(AtomicUsize::new(0));
            let producer = {
                let (idle, work) = (idle.clone(), work.clone());
                loom::thread::spawn(move || {
                    work.fetch_add(1, SeqCst);
                    idle.notify_one();
                })
            };
            let worker =
                |i: usize, idle: Arc<Idle>, work: Arc<AtomicUsize>, done: Arc<AtomicUsize>| {
                    idle.start_searching();
                    let mut searching = true;
                    while done.load(SeqCst) < 2 {
                        let n = work.load(SeqCst);
                        if n > 0 && work.compare_exchange(n, n - 1, SeqCst, SeqCst).is_ok() {
                            done.fetch_add(1, SeqCst);
                            // As the pool does: the last searcher to find
                            // work wakes another only if more work is visible.
                            if searching {
                                idle.stop_searching(|| work.load(SeqCst) > 0);
                            }
                            searching = false;
                            continue;
                        }
                        if !searching {
                            idle.start_searching();
                            searching = true;
                            continue;
                        }
                        idle.announce_sleep(i);
                        if work.load(SeqCst) != 0 || done.load(SeqCst) == 2 {
                            searching = idle.cancel_sleep(i) == Woken::ByNotify;
                            continue;
                        }
                        idle.park(i);
                        searching = idle.cancel_sleep(i) == Woken::ByNotify;
                    }
                    if searching {
                        idle.stop_searching(|| work.load(SeqCst) > 0);
                    }
                    // Whoever takes the last unit wakes the other worker to exit.
                    idle.notify_all();
                };
            // Both workers are threads of their own: loom 0.7 aborts when a
            // thread blocked in `join` is unparked (tokio-rs/loom#249), which
            // std allows and a worker's `notify_all` would do to the main
            // thread. The main thread is the second producer.
            let workers: Vec<_> = (0..2)
                .map(|i| {
                    let (idle, work, done) = (idle.clone(), work.clone(), done.clone());
                    loom::thread::spawn(move || worker(i, idle, work, done))
                })
                .collect();
            work.fetch_add(1, SeqCst);
            idle.notify_one();
            producer.join().unwrap();
            for w in workers {
                w.join().unwrap();
            }
            assert_eq!(done.load(SeqCst), 2);
        });
    }

    /// A worker waits in the reactor (the wait's polls register a waker
    /// and look at the flag, as `Parker::park_in` does) while another
    /// thread unparks it: the wait always ends, whichever comes first.
    /// Fails if `unpark` reads `in_reactor` before its store of the flag,
    /// or if the look at the flag comes before the waker is registered.
    #[test]
    fn unpark_ends_a_wait_in_the_reactor() {
        use std::task::{Wake, Waker};
        struct Flag(AtomicBool);
        impl Wake for Flag {
            fn wake(self: std::sync::Arc<Self>) {
                self.0.store(true, SeqCst);
            }
        }
        loom::model(|| {
            let parker = Arc::new(Parker::new());
            let p = parker.clone();
            let unparker = loom::thread::spawn(move || p.unpark());
            loom::thread::yield_now();
            let woken = std::sync::Arc::new(Flag(AtomicBool::new(false)));
            let waker = Waker::from(woken.clone());
            parker.in_reactor.store(true, SeqCst);
            fence(SeqCst);
            // tokio's `block_on`: poll, and poll again once woken.
            while !parker.register_or_take(&waker) {
                // The load first, as in `Parker::park` (loom 0.7).
                while !(woken.0.load(SeqCst) && woken.0.swap(false, SeqCst)) {
                    loom::thread::yield_now();
                }
            }
            parker.in_reactor.store(false, SeqCst);
            unparker.join().unwrap();
        });
    }
}
