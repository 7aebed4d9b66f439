//! The simulated pool's queues and its choices: which task is polled next,
//! on which virtual worker, with what budget.
//!
//! Three plans make the choices:
//!
//! - **Random** mirrors the real pool (see `src/pool/README.md`): a LIFO
//!   slot and a FIFO queue per worker, one global queue, stealing half a
//!   victim's queue. What the real pool decides by timing, the generator
//!   decides, sometimes against the pool's habits (outside work before the
//!   local queue, the queue before the slot), since code that is correct
//!   on any executor must not depend on them.
//! - **PCT** keeps every queued task in one order, by priority, and polls
//!   the highest; each poll runs to the next await point of a viaduct
//!   future, so every such point is one where a task can be preempted.
//! - **Replay** follows a [`Schedule`]: by default it polls the task that
//!   ran last while it can run, else the one queued longest; the schedule
//!   names where to do otherwise. `check` shrinks a failing run to the
//!   fewest such departures, and a replay string spells them out.
//!
//! Every plan names tasks by their *key*: the order the world first saw
//! them in. Unlike task ids (process-wide) or spawn locations (which move
//! with every edit), keys are the same in every run of the same program
//! and schedule, so a trace and a replay survive unrelated edits.

use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use super::schedule::{Deviation, Schedule, START};
use super::Strategy;
use crate::executor::Runnable;
use crate::task_id::TaskId;

/// How many times in a row a worker runs its slot's task before that
/// task goes to the back of its queue (the real pool's number).
const SLOT_RUNS: u8 = 3;

/// Polls in a row a task may end still runnable, by yields PCT injects,
/// before it counts as spinning (a loop on `consume_budget` waiting for
/// another task) and drops to the lowest priority, so the task it waits
/// for gets to run.
const SPIN_POLLS: u32 = 1_000;

/// The budget of a poll that runs to the next await point of a viaduct
/// future: the await the task stopped at passes, the next one yields.
const ONE_AWAIT: u32 = 1;

/// The budget of a task's first poll under PCT: it yields at its first
/// await point, so even that one is a place to be preempted.
const NO_AWAIT: u32 = 0;

/// PCT's guess at the decisions (polls picked among more than one queued
/// task) a run makes, when it has not seen the program run: its change
/// points are drawn among the first this many or twice as many, then as
/// many again in each doubling of the run past them. Small, because
/// tests are: a guess too long puts the points past the end of the run.
const PCT_SPAN: u64 = 4;

/// Runs logged for shrinking, at most: a longer run is not shrunk.
const LOG_CAP: usize = 1 << 20;

/// One virtual worker's queues (Random).
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
    /// Picked out of one order of every queued task (PCT, Replay).
    Chosen = 5,
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

/// Hashes a task id (already unique and well spread) with one multiply.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type Fast<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Task ids to keys, in blocks of consecutive ids: a world's tasks are
/// mostly spawned on its thread, whose ids come in runs (`TaskId::next`),
/// so a lookup is one small map's and an array's, not a hash table's as
/// large as the world.
#[derive(Default)]
struct Keys {
    blocks: Fast<u64, Box<[u32; KEY_BLOCK]>>,
}

const KEY_BLOCK: usize = 1024;

/// No key yet, in a block of [`Keys`].
const NO_KEY: u32 = u32::MAX;

impl Keys {
    fn get(&self, id: TaskId) -> Option<u32> {
        let id = id.as_u64();
        let key = self.blocks.get(&(id / KEY_BLOCK as u64))?[id as usize % KEY_BLOCK];
        (key != NO_KEY).then_some(key)
    }

    fn get_or_insert(&mut self, id: TaskId, new: impl FnOnce() -> u32) -> u32 {
        let id = id.as_u64();
        let block = self
            .blocks
            .entry(id / KEY_BLOCK as u64)
            .or_insert_with(|| Box::new([NO_KEY; KEY_BLOCK]));
        let slot = &mut block[id as usize % KEY_BLOCK];
        if *slot == NO_KEY {
            *slot = new();
        }
        *slot
    }
}

/// What the world knows of a task it has queued, by the task's key.
struct Known {
    /// Polls so far.
    polls: u32,
    /// PCT's priority (higher runs first; unique: the key is its low
    /// half).
    priority: u64,
    /// Polls in a row that ended with the task still runnable.
    spins: u32,
}

/// A queued task in PCT's or Replay's one order.
struct Entry {
    key: u32,
    /// The worker that woke it, which polls it.
    worker: usize,
    runnable: Runnable,
}

/// Every queued task, in one order: highest rank first (PCT: its
/// priority; Replay: queued longest). A heap of `(rank, key)`, the tasks
/// by key beside it: a task taken out by key, or ranked anew, leaves its
/// old heap entry behind, which no longer matches and is skipped.
#[derive(Default)]
struct Ordered {
    heap: BinaryHeap<(u64, u32)>,
    /// By key: the queued task, if it is queued, and its rank.
    slots: Vec<Option<(u64, Entry)>>,
    len: usize,
}

impl Ordered {
    fn insert(&mut self, rank: u64, entry: Entry) {
        let key = entry.key as usize;
        if self.slots.len() <= key {
            self.slots.resize_with(key + 1, || None);
        }
        debug_assert!(self.slots[key].is_none(), "a task is queued once at a time");
        self.slots[key] = Some((rank, entry));
        self.heap.push((rank, key as u32));
        self.len += 1;
    }

    fn remove(&mut self, key: u32) -> Option<Entry> {
        let (_, entry) = self.slots.get_mut(key as usize)?.take()?;
        self.len -= 1;
        Some(entry)
    }

    fn contains(&self, key: u32) -> bool {
        self.slots.get(key as usize).is_some_and(Option::is_some)
    }

    fn rerank(&mut self, key: u32, rank: u64) {
        if let Some(Some((old, _))) = self.slots.get_mut(key as usize) {
            *old = rank;
            self.heap.push((rank, key));
        }
    }

    /// The highest-ranked queued task, its stale heap entries dropped.
    fn best(&mut self) -> Option<&Entry> {
        loop {
            let &(rank, key) = self.heap.peek()?;
            if matches!(&self.slots[key as usize], Some((r, _)) if *r == rank) {
                break;
            }
            self.heap.pop();
        }
        let &(_, key) = self.heap.peek()?;
        self.slots[key as usize].as_ref().map(|(_, e)| e)
    }

    fn pop_best(&mut self) -> Option<Entry> {
        let key = self.best()?.key;
        self.heap.pop();
        self.remove(key)
    }

    fn drain(&mut self) -> Vec<Runnable> {
        self.heap.clear();
        self.len = 0;
        self.slots
            .iter_mut()
            .filter_map(|slot| slot.take().map(|(_, e)| e.runnable))
            .collect()
    }
}

/// PCT's state: its change points and the priorities it hands out.
struct Pct {
    depth: u32,
    /// Decisions (polls picked among more than one queued task) so far.
    decisions: u64,
    /// The change points of the current span, ascending.
    points: Vec<u64>,
    /// The span the points were drawn in ends here; past it, the next
    /// span (as long again) gets `depth - 1` points of its own.
    span_end: u64,
    /// The next priority a demoted task gets, below every earlier one.
    next_low: u64,
    /// Whether a span past the last gets points of its own (when the
    /// run's length is not known).
    refresh: bool,
}

enum Plan {
    Random {
        workers: Box<[Local]>,
        global: VecDeque<Runnable>,
    },
    Pct {
        state: Pct,
        queued: Ordered,
    },
    Replay {
        schedule: Schedule,
        queued: Ordered,
        /// The next rank: queued longest is lowest.
        seq: u64,
        /// Where this run departed from the default, as it went.
        taken: Vec<Deviation>,
        /// How many of those switched away from a task that could run.
        preemptions: u32,
        /// Departures of the schedule that came up (some may name what
        /// the default does anyway).
        used: usize,
    },
}

/// What one step polls.
pub(super) struct Picked {
    pub(super) worker: usize,
    pub(super) runnable: Runnable,
    pub(super) source: Source,
    pub(super) key: u32,
    /// The task's polls, this one included.
    pub(super) polls: u32,
    /// What the poll's budget starts from.
    pub(super) budget: u32,
}

/// A replay that does not fit the program it runs: the task it names is
/// not queued where it says.
#[derive(Debug)]
pub(super) struct Misfit {
    pub(super) after: Option<(u32, u32)>,
    pub(super) wanted: u32,
}

/// The queues of every virtual worker, the generator and the trace of the
/// choices made.
pub(super) struct World {
    plan: Plan,
    workers: usize,
    /// Each task's key: its index in `known`.
    keys: Keys,
    known: Vec<Known>,
    /// The task polled last: its key and polls so far.
    last: Option<(u32, u32)>,
    /// The task being polled (its key), and whether it woke itself
    /// meanwhile.
    polling: Option<(u32, bool)>,
    rng: Rng,
    /// A running hash of every choice and clock move (FNV-1a over words).
    pub(super) trace: u64,
    /// Steps taken so far: task polls and clock moves.
    pub(super) steps: u64,
    /// Moves of the clock so far (what keys the order of timers due
    /// together, and their lateness).
    pub(super) advances: u64,
    /// The step count at which the `block_on` running now stops.
    pub(super) limit: u64,
    /// No simulation handle is left: tasks scheduled now are dropped
    /// (cancelled), since nobody will ever run them.
    pub(super) orphaned: bool,
    /// Every poll so far, as a replay names it (up to `LOG_CAP`), if
    /// asked for (`check` shrinks from it).
    log: Vec<(u32, u32)>,
    log_full: bool,
    logging: bool,
}

impl World {
    /// A world of `workers` whose choices come from `seed` by `strategy`.
    /// `span`: how many decisions PCT should expect a run to make, if
    /// earlier runs of the program showed it.
    pub(super) fn new(seed: u64, workers: usize, strategy: Strategy, span: Option<u64>) -> World {
        let mut rng = Rng::new(seed);
        let plan = match strategy {
            Strategy::Random => Plan::Random {
                workers: (0..workers).map(|_| Local::default()).collect(),
                global: VecDeque::new(),
            },
            Strategy::Pct { depth } => {
                let mut state = Pct {
                    depth,
                    decisions: 0,
                    points: Vec::new(),
                    span_end: 0,
                    next_low: (1 << 31) - 1,
                    refresh: true,
                };
                match span {
                    // A length learned from earlier runs: the points fall
                    // anywhere in it, as in PCT proper.
                    Some(decisions) => {
                        state.refresh = false;
                        state.draw_points(&mut rng, decisions.max(2));
                    }
                    None => {
                        let first = PCT_SPAN << rng.below(2);
                        state.draw_points(&mut rng, first);
                    }
                }
                Plan::Pct {
                    state,
                    queued: Ordered::default(),
                }
            }
        };
        World {
            plan,
            workers,
            keys: Keys::default(),
            known: Vec::new(),
            last: None,
            polling: None,
            rng,
            trace: 0xcbf2_9ce4_8422_2325,
            steps: 0,
            advances: 0,
            limit: u64::MAX,
            orphaned: false,
            log: Vec::new(),
            log_full: false,
            logging: false,
        }
    }

    /// A world that follows `schedule`.
    pub(super) fn replaying(seed: u64, workers: usize, schedule: Schedule) -> World {
        let mut world = World::new(seed, workers, Strategy::Random, None);
        world.plan = Plan::Replay {
            schedule,
            queued: Ordered::default(),
            seq: 0,
            taken: Vec::new(),
            preemptions: 0,
            used: 0,
        };
        world
    }

    /// Adds `words` to the trace.
    pub(super) fn record(&mut self, words: &[u64]) {
        for &w in words {
            self.trace = (self.trace ^ w).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// The key of task `id`, given it now if it has none.
    fn know(&mut self, id: TaskId) -> u32 {
        let (known, rng, plan) = (&mut self.known, &mut self.rng, &self.plan);
        self.keys.get_or_insert(id, || {
            let key = known.len() as u32;
            // A new task takes a random place among the others' priorities
            // (above every demoted one).
            let priority = match plan {
                Plan::Pct { .. } => ((1 << 31) | (rng.next() >> 33)) << 32 | u64::from(key),
                _ => 0,
            };
            known.push(Known {
                polls: 0,
                priority,
                spins: 0,
            });
            key
        })
    }

    /// Queues `runnable`, woken by a task on virtual worker `on` (or from
    /// anywhere else).
    pub(super) fn push(&mut self, on: Option<usize>, runnable: Runnable) {
        let key = self.know(runnable.metadata().record.id);
        if let Some((polling, woke)) = &mut self.polling {
            *woke |= *polling == key;
        }
        let priority = self.known[key as usize].priority;
        let worker = on.filter(|&w| w < self.workers);
        match &mut self.plan {
            Plan::Random { workers, global } => match worker.map(|w| &mut workers[w]) {
                // Woken by a task on a worker: into that worker's slot (its
                // old task to the back of its queue), or, if it woke
                // itself (a yield), to the back of the queue.
                Some(local) if runnable.metadata().woken_while_running() => {
                    local.queue.push_back(runnable)
                }
                Some(local) => {
                    if let Some(old) = local.slot.replace(runnable) {
                        local.queue.push_back(old);
                    }
                }
                None => global.push_back(runnable),
            },
            Plan::Pct { queued, .. } => queued.insert(
                priority,
                Entry {
                    key,
                    worker: worker.unwrap_or(0),
                    runnable,
                },
            ),
            Plan::Replay { queued, seq, .. } => {
                *seq += 1;
                queued.insert(
                    u64::MAX - *seq,
                    Entry {
                        key,
                        worker: worker.unwrap_or(0),
                        runnable,
                    },
                )
            }
        }
    }

    /// Picks the task to poll next, or `None` when no task is queued.
    pub(super) fn pick(&mut self) -> Result<Option<Picked>, Misfit> {
        let picked = match &mut self.plan {
            Plan::Random { .. } => self.pick_random(),
            Plan::Pct { .. } => self.pick_pct(),
            Plan::Replay { .. } => self.pick_replay()?,
        };
        let Some(mut picked) = picked else {
            return Ok(None);
        };
        if let Plan::Random { .. } = self.plan {
            picked.key = self.know(picked.runnable.metadata().record.id);
        }
        let key = picked.key;
        let known = &mut self.known[key as usize];
        known.polls += 1;
        picked.polls = known.polls;
        let polls = known.polls;
        if let Plan::Pct { .. } = self.plan {
            picked.budget = if polls == 1 { NO_AWAIT } else { ONE_AWAIT };
        }
        self.last = Some((key, polls));
        self.polling = Some((key, false));
        if self.logging {
            if self.log.len() < LOG_CAP {
                self.log.push((key, picked.budget));
            } else {
                self.log_full = true;
            }
        }
        Ok(Some(picked))
    }

    /// The poll [`pick`](World::pick) chose has ended; `held_back`: a
    /// viaduct future in it answered `Pending` only because its budget was
    /// spent.
    pub(super) fn polled(&mut self, held_back: bool) {
        let Some((key, woke)) = self.polling.take() else {
            return;
        };
        let Plan::Pct { state, queued } = &mut self.plan else {
            return;
        };
        let known = &mut self.known[key as usize];
        known.spins = if woke { known.spins + 1 } else { 0 };
        // A task that yields of its own accord (a `yield_now`, a spin
        // loop) steps aside, as in shuttle's PCT; so does one PCT keeps
        // making yield but that never blocks.
        if woke && (!held_back || known.spins > SPIN_POLLS) {
            known.spins = 0;
            known.priority = state.demoted(key);
            queued.rerank(key, known.priority);
        }
    }

    fn pick_random(&mut self) -> Option<Picked> {
        let Plan::Random { workers, global } = &mut self.plan else {
            unreachable!("called for Random only")
        };
        let shared_work = !global.is_empty() || workers.iter().any(|w| !w.queue.is_empty());
        // Without global or stealable work, only a worker with its own slot
        // can run; otherwise every worker can.
        let able = if shared_work {
            workers.len()
        } else {
            workers.iter().filter(|w| w.slot.is_some()).count()
        };
        if able == 0 {
            return None;
        }
        let nth = self.rng.below(able);
        let worker = if shared_work {
            nth
        } else {
            (0..workers.len())
                .filter(|&i| workers[i].slot.is_some())
                .nth(nth)
                .expect("counted above")
        };
        let (runnable, source) = take(&mut self.rng, workers, global, worker);
        // Now and then a poll starts with a small budget: a ready viaduct
        // future in it answers `Pending`, as if the task had been
        // interrupted there.
        let budget = if self.rng.one_in(8) {
            self.rng.below(4) as u32
        } else {
            crate::coop::BUDGET
        };
        Some(Picked {
            worker,
            runnable,
            source,
            key: 0,
            polls: 0,
            budget,
        })
    }

    fn pick_pct(&mut self) -> Option<Picked> {
        let Plan::Pct { state, queued } = &mut self.plan else {
            unreachable!("called for PCT only")
        };
        if queued.len > 1 {
            // Only a choice among several counts: a change point where
            // one task could run anyway would change nothing.
            if state.decide(&mut self.rng) {
                if let Some((key, _)) = self.last {
                    let known = &mut self.known[key as usize];
                    known.priority = state.demoted(key);
                    queued.rerank(key, known.priority);
                }
            }
        }
        let entry = queued.pop_best()?;
        Some(Picked {
            worker: entry.worker,
            runnable: entry.runnable,
            source: Source::Chosen,
            key: entry.key,
            polls: 0,
            budget: 0,
        })
    }

    fn pick_replay(&mut self) -> Result<Option<Picked>, Misfit> {
        let Plan::Replay {
            schedule,
            queued,
            taken,
            preemptions,
            used,
            ..
        } = &mut self.plan
        else {
            unreachable!("called for Replay only")
        };
        let Some(oldest) = queued.best() else {
            return Ok(None);
        };
        let oldest = oldest.key;
        // By default: the task that ran last while it can run, else the
        // one queued longest.
        let after = self.last;
        let last_queued = after.is_some_and(|(key, _)| queued.contains(key));
        let default = match after {
            Some((key, _)) if last_queued => key,
            _ => oldest,
        };
        let at = after.unwrap_or(START);
        let key = match schedule.switch_at(at) {
            Some(wanted) if queued.contains(wanted) => {
                *used += 1;
                wanted
            }
            Some(wanted) if schedule.strict() => return Err(Misfit { after, wanted }),
            _ => default,
        };
        if key != default {
            taken.push(Deviation::Switch { at, to: key });
            if last_queued {
                *preemptions += 1;
            }
        }
        let polls = self.known[key as usize].polls;
        let budget = match schedule.budget_at((key, polls + 1)) {
            Some(budget) => {
                *used += 1;
                taken.push(Deviation::Budget {
                    poll: (key, polls + 1),
                    budget,
                });
                budget
            }
            None => crate::coop::BUDGET,
        };
        let entry = queued.remove(key).expect("queued, looked at above");
        Ok(Some(Picked {
            worker: entry.worker,
            runnable: entry.runnable,
            source: Source::Chosen,
            key,
            polls: 0,
            budget,
        }))
    }

    /// Keeps every poll from now on, for [`log`](World::log).
    pub(super) fn keep_log(&mut self) {
        self.logging = true;
    }

    /// Every poll of this run as `(key, budget)`, if kept and not too long
    /// to keep.
    pub(super) fn log(&self) -> Option<&[(u32, u32)]> {
        (self.logging && !self.log_full).then_some(&self.log[..])
    }

    /// Where a replay departed from its default, in order, and how many
    /// of those were preemptions.
    pub(super) fn departures(&self) -> Option<(&[Deviation], u32)> {
        match &self.plan {
            Plan::Replay {
                taken, preemptions, ..
            } => Some((taken, *preemptions)),
            _ => None,
        }
    }

    /// How many departures a strict replay names that have not come up.
    pub(super) fn unused_departures(&self) -> usize {
        match &self.plan {
            Plan::Replay { schedule, used, .. } if schedule.strict() => {
                schedule.len().saturating_sub(*used)
            }
            _ => 0,
        }
    }

    /// PCT's decisions so far: how long the program's runs are.
    pub(super) fn decisions(&self) -> u64 {
        match &self.plan {
            Plan::Pct { state, .. } => state.decisions,
            _ => 0,
        }
    }

    /// Takes task `id` out of the queues, if it is queued.
    pub(super) fn take(&mut self, id: Option<TaskId>) -> Option<Runnable> {
        let id = id?;
        let is = |r: &Runnable| r.metadata().record.id == id;
        match &mut self.plan {
            Plan::Random { workers, global } => {
                if let Some(i) = global.iter().position(is) {
                    return global.remove(i);
                }
                workers.iter_mut().find_map(|w| {
                    if w.slot.as_ref().is_some_and(is) {
                        return w.slot.take();
                    }
                    let i = w.queue.iter().position(is)?;
                    w.queue.remove(i)
                })
            }
            Plan::Pct { queued, .. } | Plan::Replay { queued, .. } => {
                let key = self.keys.get(id)?;
                queued.remove(key).map(|e| e.runnable)
            }
        }
    }

    /// Takes every queued task out, to be dropped outside the lock.
    pub(super) fn drain(&mut self) -> Vec<Runnable> {
        match &mut self.plan {
            Plan::Random { workers, global } => {
                let mut all: Vec<Runnable> = global.drain(..).collect();
                for w in workers.iter_mut() {
                    all.extend(w.slot.take());
                    all.extend(w.queue.drain(..));
                }
                all
            }
            Plan::Pct { queued, .. } | Plan::Replay { queued, .. } => queued.drain(),
        }
    }
}

impl Pct {
    /// Draws `depth - 1` change points in the span after the current one,
    /// which ends at `end`.
    fn draw_points(&mut self, rng: &mut Rng, end: u64) {
        let start = self.span_end;
        self.span_end = end;
        self.points.clear();
        let width = end - start;
        let want = (u64::from(self.depth) - 1).min(width);
        // Floyd's sampling: `want` distinct points in as many draws, for
        // any depth.
        let mut chosen = std::collections::HashSet::new();
        for j in width - want..width {
            let t = rng.below(j as usize + 1) as u64;
            let point = if chosen.contains(&t) { j } else { t };
            chosen.insert(point);
            self.points.push(start + 1 + point);
        }
        self.points.sort_unstable();
    }

    /// One more decision: whether it is a change point.
    fn decide(&mut self, rng: &mut Rng) -> bool {
        self.decisions += 1;
        if self.refresh && self.decisions > self.span_end {
            self.draw_points(rng, self.span_end * 2);
        }
        self.points.binary_search(&self.decisions).is_ok()
    }

    /// A priority below every one handed out so far, for task `key`.
    fn demoted(&mut self, key: u32) -> u64 {
        self.next_low = self.next_low.saturating_sub(1);
        self.next_low << 32 | u64::from(key)
    }
}

/// What `worker` runs next (Random). It has a slot task, or shared work
/// exists.
fn take(
    rng: &mut Rng,
    workers: &mut [Local],
    global: &mut VecDeque<Runnable>,
    worker: usize,
) -> (Runnable, Source) {
    let skip_slot = rng.one_in(8);
    let outside_first = rng.one_in(8);
    let local = &mut workers[worker];
    if local.slot.is_some() && local.slot_runs >= SLOT_RUNS {
        local.slot_runs = 0;
        let r = local.slot.take().expect("checked");
        local.queue.push_back(r);
    }
    let nothing_else = local.queue.is_empty() && global.is_empty();
    if local.slot.is_some() && (!skip_slot || nothing_else) {
        local.slot_runs += 1;
        return (local.slot.take().expect("checked"), Source::Slot);
    }
    local.slot_runs = 0;
    if !global.is_empty() && (local.queue.is_empty() || outside_first) {
        return (global.pop_front().expect("checked"), Source::Global);
    }
    if let Some(r) = local.queue.pop_front() {
        return (r, Source::Queue);
    }
    if let Some(r) = local.slot.take() {
        return (r, Source::Slot);
    }
    // Steal half of a random victim's queue.
    let victims: Vec<usize> = (0..workers.len())
        .filter(|&i| i != worker && !workers[i].queue.is_empty())
        .collect();
    let victim = victims[rng.below(victims.len())];
    let half = workers[victim].queue.len().div_ceil(2);
    let stolen: Vec<Runnable> = workers[victim].queue.drain(..half).collect();
    let local = &mut workers[worker];
    local.queue.extend(stolen);
    (
        local.queue.pop_front().expect("stole one at least"),
        Source::Stolen,
    )
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
