//! The simulated pool's queues and its seeded choices: which virtual
//! worker runs next, where it takes its task from, whom it steals from.
//!
//! The queues mirror the real pool's (see `src/pool/README.md`): a LIFO
//! slot and a FIFO queue per worker, one global queue, stealing half a
//! victim's queue. What the real pool decides by timing, the simulation
//! draws from its generator, and sometimes against the pool's habits
//! (outside work before the local queue, the queue before the slot), since
//! code that is correct on any executor must not depend on them.

use std::collections::VecDeque;

use crate::executor::Runnable;

/// How many times in a row a worker runs its slot's task before that
/// task goes to the back of its queue (the real pool's number).
const SLOT_RUNS: u8 = 3;

/// One virtual worker's queues.
#[derive(Default)]
struct Local {
    slot: Option<Runnable>,
    slot_runs: u8,
    queue: VecDeque<Runnable>,
}

/// Where a worker found the task it runs; part of the trace.
#[derive(Clone, Copy, Debug)]
pub(super) enum Source {
    Slot = 1,
    Queue = 2,
    Global = 3,
    Stolen = 4,
}

/// A small, fast generator (SplitMix64): every choice of a run comes from
/// it, so the seed alone decides the run.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (which is not 0).
    pub(super) fn below(&mut self, n: usize) -> usize {
        // Lemire's multiply-shift: no division, bias below 2^-32 for the
        // small `n` a simulation asks for.
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }

    /// `true` once in `n` times.
    pub(super) fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// The queues of every virtual worker, the global queue, the generator
/// and the trace of the choices made.
pub(super) struct World {
    workers: Box<[Local]>,
    global: VecDeque<Runnable>,
    pub(super) rng: Rng,
    /// A running hash of every choice and clock move (FNV-1a over words).
    pub(super) trace: u64,
    /// Steps taken so far: task polls and clock moves.
    pub(super) steps: u64,
    /// The step count at which the `block_on` running now stops.
    pub(super) limit: u64,
    /// No simulation handle is left: tasks scheduled now are dropped
    /// (cancelled), since nobody will ever run them.
    pub(super) orphaned: bool,
}

impl World {
    pub(super) fn new(seed: u64, workers: usize) -> World {
        World {
            workers: (0..workers).map(|_| Local::default()).collect(),
            global: VecDeque::new(),
            rng: Rng::new(seed),
            trace: 0xcbf2_9ce4_8422_2325,
            steps: 0,
            limit: u64::MAX,
            orphaned: false,
        }
    }

    /// Adds `words` to the trace.
    pub(super) fn record(&mut self, words: &[u64]) {
        for &w in words {
            self.trace = (self.trace ^ w).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// Queues `runnable`: woken by a task on virtual worker `on`, into
    /// that worker's slot (its old task to the back of its queue), or, if
    /// it woke itself (a yield), to the back of the queue; woken from
    /// anywhere else, into the global queue.
    pub(super) fn push(&mut self, on: Option<usize>, runnable: Runnable) {
        match on.and_then(|w| self.workers.get_mut(w)) {
            Some(local) if runnable.metadata().woken_while_running() => {
                local.queue.push_back(runnable)
            }
            Some(local) => {
                if let Some(old) = local.slot.replace(runnable) {
                    local.queue.push_back(old);
                }
            }
            None => self.global.push_back(runnable),
        }
    }

    /// Picks a worker that has something to run and the task it runs, or
    /// `None` when no task is queued anywhere.
    pub(super) fn pick(&mut self) -> Option<(usize, Runnable, Source)> {
        let shared_work =
            !self.global.is_empty() || self.workers.iter().any(|w| !w.queue.is_empty());
        // Without global or stealable work, only a worker with its own slot
        // can run; otherwise every worker can.
        let able = if shared_work {
            self.workers.len()
        } else {
            self.workers.iter().filter(|w| w.slot.is_some()).count()
        };
        if able == 0 {
            return None;
        }
        let nth = self.rng.below(able);
        let worker = if shared_work {
            nth
        } else {
            (0..self.workers.len())
                .filter(|&i| self.workers[i].slot.is_some())
                .nth(nth)
                .expect("counted above")
        };
        let (runnable, source) = self.take(worker);
        Some((worker, runnable, source))
    }

    /// What `worker` runs next. It has a slot task, or shared work exists.
    fn take(&mut self, worker: usize) -> (Runnable, Source) {
        let skip_slot = self.rng.one_in(8);
        let outside_first = self.rng.one_in(8);
        let local = &mut self.workers[worker];
        if local.slot.is_some() && local.slot_runs >= SLOT_RUNS {
            local.slot_runs = 0;
            let r = local.slot.take().expect("checked");
            local.queue.push_back(r);
        }
        let local = &mut self.workers[worker];
        let nothing_else = local.queue.is_empty() && self.global.is_empty();
        if local.slot.is_some() && (!skip_slot || nothing_else) {
            local.slot_runs += 1;
            return (local.slot.take().expect("checked"), Source::Slot);
        }
        local.slot_runs = 0;
        if !self.global.is_empty() && (local.queue.is_empty() || outside_first) {
            return (self.global.pop_front().expect("checked"), Source::Global);
        }
        if let Some(r) = local.queue.pop_front() {
            return (r, Source::Queue);
        }
        if let Some(r) = local.slot.take() {
            return (r, Source::Slot);
        }
        // Steal half of a random victim's queue.
        let victims: Vec<usize> = (0..self.workers.len())
            .filter(|&i| i != worker && !self.workers[i].queue.is_empty())
            .collect();
        let victim = victims[self.rng.below(victims.len())];
        let take = self.workers[victim].queue.len().div_ceil(2);
        let stolen: Vec<Runnable> = self.workers[victim].queue.drain(..take).collect();
        let local = &mut self.workers[worker];
        local.queue.extend(stolen);
        (
            local.queue.pop_front().expect("stole one at least"),
            Source::Stolen,
        )
    }

    /// Takes every queued task out, to be dropped outside the lock.
    pub(super) fn drain(&mut self) -> Vec<Runnable> {
        let mut all: Vec<Runnable> = self.global.drain(..).collect();
        for w in self.workers.iter_mut() {
            all.extend(w.slot.take());
            all.extend(w.queue.drain(..));
        }
        all
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Rng;

    #[test]
    fn the_generator_is_a_function_of_its_seed() {
        let draw = |seed| {
            let mut r = Rng::new(seed);
            (0..8).map(|_| r.below(10)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let mut r = Rng::new(1);
        let mut seen = [0u32; 4];
        for _ in 0..4000 {
            seen[r.below(4)] += 1;
        }
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
    }
}
