//! A hierarchical timing wheel with nanosecond slots (Varghese and Lauck,
//! "Hashed and hierarchical timing wheels", SOSP 1987).
//!
//! Eleven levels of 64 slots cover all 64 bits of a nanosecond deadline:
//! level `L` slots are `64^L` ns wide. An entry goes to the level of the
//! highest bit in which its deadline differs from the wheel's time
//! (`elapsed`), in the slot that bit group names. Each slot is an intrusive
//! doubly linked FIFO list, and each level keeps a bitmap of its non-empty
//! slots, so insert, cancel and "which slot is next" are O(1).
//!
//! # Ground rules
//!
//! 1. Every linked entry has `deadline > elapsed` and shares with `elapsed`
//!    all bits above its level; its slot index is therefore strictly greater
//!    than `elapsed`'s at that level. The lists never wrap around, the first
//!    non-empty level holds the earliest slot, and its lowest set bit is
//!    the earliest slot of that level.
//! 2. `elapsed` moves only forward, and only to the start of the earliest
//!    non-empty slot or to a time before it, which keeps (1) for all entries.
//!    It never passes the clock, so "`deadline <= elapsed`" means due.
//! 3. Processing a slot moves `elapsed` to its start and re-inserts each
//!    entry, which lands on a lower level, or on the expired list if its
//!    deadline is exactly that start. Level 0 slots are one nanosecond wide,
//!    so everything fires from the expired list, in deadline order.
//! 4. A slot being drained (the `cursor`) is finished before any other slot
//!    is looked at, so draining may stop half-way (to bound the time the lock
//!    is held) without reordering anything.
//! 5. A deadline of `NEVER` (what `Duration::MAX` saturates to) waits on a
//!    list of its own, outside the levels: no slot ever comes due for it,
//!    so [`Wheel::next_expiration`] does not report it (a simulation that
//!    jumps to the next expiration would otherwise walk its clock to the
//!    end), and it fires only when the clock reads `NEVER` itself.
//! 6. The wheel owns no entry. Whoever inserts one promises it stays in
//!    place until it is unlinked (see [`Wheel::insert`]); firing one ends
//!    with the store of [`FIRED`], after which the wheel never touches it,
//!    so its owner may free it once it reads that state.

use super::clock::NEVER;
use super::entry::{Action, Entry, FIRED, IDLE, LINKED};
use crate::task_id::TaskId;

const LEVEL_BITS: u32 = 6;
const SLOTS: usize = 1 << LEVEL_BITS;
/// `ceil(64 / LEVEL_BITS)`: enough levels for any `u64` deadline.
const LEVELS: usize = 11;
/// The list of entries that are due and not yet fired.
const EXPIRED: u16 = (LEVELS * SLOTS) as u16;
/// The list of entries due at `NEVER` (ground rule 5).
const AT_NEVER: u16 = EXPIRED + 1;

#[derive(Clone, Copy)]
struct List {
    head: *const Entry,
    tail: *const Entry,
}

impl List {
    const EMPTY: List = List {
        head: std::ptr::null(),
        tail: std::ptr::null(),
    };
}

/// One shard's timers.
pub(crate) struct Wheel {
    /// The shard this wheel serves; entries of other shards never come here.
    id: usize,
    elapsed: u64,
    occupied: [u64; LEVELS],
    lists: Box<[List; LEVELS * SLOTS + 2]>,
    cursor: Option<u16>,
    len: usize,
}

// SAFETY: the raw pointers point at linked entries, which stay alive while
// linked (ground rule 6) and are `Send + Sync`; the wheel is only reached
// through its shard's mutex.
unsafe impl Send for Wheel {}

/// What [`Wheel::insert`] did.
#[must_use]
pub(crate) enum Inserted {
    /// Linked; the wheel will fire it.
    Linked,
    /// The deadline has passed already: here is the action back, fire it.
    Due(Action),
    /// The timer has stopped for good (see `Timer::stop`): here is the
    /// action back, to drop; it will never fire.
    Stopped(Action),
}

impl Wheel {
    pub(crate) fn new(id: usize) -> Wheel {
        Wheel {
            id,
            elapsed: 0,
            occupied: [0; LEVELS],
            lists: Box::new([List::EMPTY; LEVELS * SLOTS + 2]),
            cursor: None,
            len: 0,
        }
    }

    /// Timers linked and not yet fired.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Links `entry` to fire `action` at `deadline`, unless that has passed.
    ///
    /// # Safety
    ///
    /// - `entry` belongs to this wheel's shard and is not [`LINKED`];
    /// - it stays allocated, at this address, until it is unlinked: until
    ///   [`remove`](Wheel::remove) takes it out, or its state reads
    ///   [`FIRED`], or the wheel is dropped.
    pub(crate) unsafe fn insert(
        &mut self,
        entry: &Entry,
        deadline: u64,
        action: Action,
    ) -> Inserted {
        debug_assert_eq!(entry.shard(), self.id, "entry of another shard");
        debug_assert_ne!(entry.state(), LINKED, "entry linked twice");
        if deadline <= self.elapsed {
            return Inserted::Due(action);
        }
        let e: *const Entry = entry;
        // SAFETY: we hold this shard's lock (we have `&mut self`, and the
        // wheel is only reached through it) and `e` is of this shard.
        let core = unsafe { entry.core() };
        core.deadline = deadline;
        core.action = Some(action);
        let loc = self.location_for(deadline);
        self.push_back(loc, e);
        entry.set_state(LINKED);
        self.len += 1;
        Inserted::Linked
    }

    /// Unlinks `entry` if it is still linked, handing back its action (to be
    /// dropped outside the lock: dropping a runnable drops a future).
    pub(crate) fn remove(&mut self, entry: &Entry) -> Option<Action> {
        debug_assert_eq!(entry.shard(), self.id, "entry of another shard");
        if entry.state() != LINKED {
            return None;
        }
        let e: *const Entry = entry;
        self.unlink(e);
        // SAFETY: we hold the shard lock; the entry is ours to edit.
        let action = unsafe { entry.core() }.action.take();
        entry.set_state(IDLE);
        self.len -= 1;
        action
    }

    /// Replaces the waker of a linked entry. Returns `false` if the entry
    /// is no longer linked (it fired or was cancelled).
    pub(crate) fn update_waker(&mut self, entry: &Entry, waker: &std::task::Waker) -> bool {
        if entry.state() != LINKED {
            return false;
        }
        // SAFETY: we hold the shard lock.
        let core = unsafe { entry.core() };
        match &mut core.action {
            Some(Action::Wake(w)) => w.clone_from(waker),
            other => *other = Some(Action::Wake(waker.clone())),
        }
        true
    }

    /// When the wheel next has work: the start of its earliest slot, or
    /// `elapsed` if something is due already. `None` when empty.
    pub(crate) fn next_expiration(&self) -> Option<u64> {
        if !self.lists[EXPIRED as usize].head.is_null() {
            return Some(self.elapsed);
        }
        self.next_slot().map(|(_, start)| start)
    }

    /// Moves the wheel to `now`, pushing the actions of due timers onto
    /// `out` in deadline order. Stops after `budget` steps (an entry fired
    /// or moved down a level) and returns `true` if it stopped early; call
    /// again (after firing `out`, outside the lock) to go on.
    pub(crate) fn poll(&mut self, now: u64, out: &mut Vec<Action>, budget: usize) -> bool {
        let mut work = 0;
        loop {
            while let Some(e) = self.pop_front(EXPIRED) {
                out.push(self.fire(e));
                work += 1;
                if work >= budget {
                    return true;
                }
            }
            match self.next_slot() {
                Some((loc, start)) if start <= now => {
                    self.elapsed = start;
                    self.cursor = Some(loc);
                    while let Some(e) = self.pop_front(loc) {
                        // SAFETY: we hold the shard lock; `e` was linked
                        // here, so it is alive (the wheel holds a count).
                        let deadline = unsafe { (*e).core() }.deadline;
                        let to = self.location_for(deadline);
                        self.push_back(to, e);
                        work += 1;
                        if work >= budget {
                            return true;
                        }
                    }
                    self.cursor = None;
                }
                _ => {
                    self.elapsed = self.elapsed.max(now);
                    if now < NEVER || self.lists[AT_NEVER as usize].head.is_null() {
                        return false;
                    }
                    // The clock's very end: what waits for it is due, after
                    // everything else (ground rule 5).
                    while let Some(e) = self.pop_front(AT_NEVER) {
                        self.push_back(EXPIRED, e);
                    }
                }
            }
        }
    }

    /// Takes the action of an unlinked, due entry and lets go of it.
    fn fire(&mut self, e: *const Entry) -> Action {
        self.len -= 1;
        // SAFETY: `e` was linked until just now, under the lock we hold, so
        // its owner has not freed it (ground rule 6).
        let entry = unsafe { &*e };
        // SAFETY: as above, we hold the shard lock.
        let action = unsafe { entry.core() }.action.take();
        // The last touch: from here the owner may free the entry.
        entry.set_state(FIRED);
        action.expect("a linked entry has an action")
    }

    /// Where an entry with `deadline` goes: a wheel slot, or the expired
    /// list if it is due at `elapsed`.
    fn location_for(&self, deadline: u64) -> u16 {
        if deadline <= self.elapsed {
            return EXPIRED;
        }
        if deadline == NEVER {
            return AT_NEVER;
        }
        let masked = (self.elapsed ^ deadline) | (SLOTS as u64 - 1);
        let level = (63 - masked.leading_zeros()) / LEVEL_BITS;
        let slot = (deadline >> (level * LEVEL_BITS)) as usize % SLOTS;
        (level as usize * SLOTS + slot) as u16
    }

    /// The earliest non-empty slot and its start (ground rules 1 and 4).
    fn next_slot(&self) -> Option<(u16, u64)> {
        if let Some(loc) = self.cursor {
            return Some((loc, self.elapsed));
        }
        let level = self.occupied.iter().position(|&bits| bits != 0)?;
        let slot = self.occupied[level].trailing_zeros() as usize;
        let shift = level as u32 * LEVEL_BITS;
        let above = shift + LEVEL_BITS;
        let prefix = if above >= 64 {
            0
        } else {
            self.elapsed >> above << above
        };
        Some((
            (level * SLOTS + slot) as u16,
            prefix | (slot as u64) << shift,
        ))
    }

    fn push_back(&mut self, loc: u16, e: *const Entry) {
        let list = &mut self.lists[loc as usize];
        let tail = list.tail;
        // SAFETY: we hold the shard lock; `e` is alive (the wheel owns a
        // count of it) and in no list.
        let core = unsafe { (*e).core() };
        core.location = loc;
        core.prev = tail;
        core.next = std::ptr::null();
        if tail.is_null() {
            list.head = e;
        } else {
            // SAFETY: `tail` is a linked entry of this wheel (alive, ours
            // under the lock) and not `e`.
            unsafe { (*tail).core() }.next = e;
        }
        list.tail = e;
        if loc < EXPIRED {
            self.occupied[loc as usize / SLOTS] |= 1 << (loc as usize % SLOTS);
        }
    }

    fn pop_front(&mut self, loc: u16) -> Option<*const Entry> {
        let head = self.lists[loc as usize].head;
        if head.is_null() {
            return None;
        }
        self.unlink(head);
        Some(head)
    }

    fn unlink(&mut self, e: *const Entry) {
        let (loc, prev, next) = {
            // SAFETY: we hold the shard lock; `e` is linked in this wheel.
            let core = unsafe { (*e).core() };
            (core.location, core.prev, core.next)
        };
        let list = &mut self.lists[loc as usize];
        if prev.is_null() {
            list.head = next;
        } else {
            // SAFETY: `prev` is linked in the same list, so alive and ours.
            unsafe { (*prev).core() }.next = next;
        }
        if next.is_null() {
            list.tail = prev;
        } else {
            // SAFETY: `next` is linked in the same list, so alive and ours.
            unsafe { (*next).core() }.prev = prev;
        }
        if list.head.is_null() && loc < EXPIRED {
            self.occupied[loc as usize / SLOTS] &= !(1 << (loc as usize % SLOTS));
        }
    }
}

impl Wheel {
    /// Each linked entry's waiting task with its deadline, for dumps.
    pub(crate) fn waiters(&self, out: &mut Vec<(TaskId, u64)>) {
        for list in self.lists.iter() {
            let mut e = list.head;
            while !e.is_null() {
                // SAFETY: linked entries are alive (ground rule 6), and we
                // hold the shard lock, under which their cores are read.
                let core = unsafe { (*e).core() };
                out.extend(core.waiter.map(|task| (task, core.deadline)));
                e = core.next;
            }
        }
    }

    /// Unlinks every entry, as if each were removed, and hands back their
    /// actions (to be dropped outside the lock, as in `remove`).
    pub(crate) fn take_all(&mut self) -> Vec<Action> {
        let mut actions = Vec::with_capacity(self.len);
        for loc in 0..=AT_NEVER {
            while let Some(e) = self.pop_front(loc) {
                // SAFETY: it was linked until just now, so it is alive
                // (ground rule 6), and we hold the shard lock.
                let entry = unsafe { &*e };
                // SAFETY: as above.
                actions.extend(unsafe { entry.core() }.action.take());
                entry.set_state(IDLE);
            }
        }
        self.len = 0;
        actions
    }
}

impl Drop for Wheel {
    /// Lets go of every linked entry. Their actions are dropped: futures
    /// waiting on them never wake (they hold the timer, so there are none
    /// when a wheel is dropped), and timed tasks are cancelled.
    fn drop(&mut self) {
        // Dropped after every entry is unlinked: an action may own its
        // entry (a timed task's does).
        drop(self.take_all());
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }

    fn waker() -> Action {
        Action::Wake(Waker::from(Arc::new(Noop)))
    }

    /// Inserts entries at `deadlines`, then polls to `now` in steps of
    /// `budget`; returns the deadlines that fired (sorted) and how many
    /// entries are still linked.
    fn fire(deadlines: &[u64], now: u64, budget: usize) -> (Vec<u64>, usize) {
        let entries: Vec<_> = deadlines.iter().map(|_| Arc::new(Entry::new(0))).collect();
        let mut w = Wheel::new(0);
        for (e, &d) in entries.iter().zip(deadlines) {
            // SAFETY: of shard 0, not linked, and kept in `entries`
            // (boxed, so in place), which outlives the wheel.
            let inserted = unsafe { w.insert(e, d, waker()) };
            assert!(matches!(inserted, Inserted::Linked));
        }
        let mut out = Vec::new();
        while w.poll(now, &mut out, budget) {}
        let mut fired: Vec<_> = entries
            .iter()
            .filter(|e| e.state() == FIRED)
            // SAFETY: the wheel has let go of fired entries, and this test
            // is the only thread.
            .map(|e| unsafe { e.core() }.deadline)
            .collect();
        assert_eq!(fired.len(), out.len());
        fired.sort_unstable();
        let linked = entries.iter().filter(|e| e.state() == LINKED).count();
        assert_eq!(linked, w.len());
        (fired, linked)
    }

    #[test]
    fn levels_cover_all_deadlines() {
        let w = Wheel::new(0);
        assert_eq!(w.location_for(1), 1);
        assert_eq!(w.location_for(63), 63);
        assert_eq!(w.location_for(64), SLOTS as u16 + 1);
        assert_eq!(w.location_for(u64::MAX - 1), (10 * SLOTS + 15) as u16);
        assert_eq!(w.location_for(u64::MAX), AT_NEVER);
    }

    #[test]
    fn fires_everything_due_and_nothing_else() {
        let ds = [1, 5, 64, 65, 4096, 1 << 20, (1 << 40) + 3, u64::MAX];
        for budget in [1, 3, usize::MAX] {
            let (fired, linked) = fire(&ds, 1 << 20, budget);
            assert_eq!(fired, vec![1, 5, 64, 65, 4096, 1 << 20]);
            assert_eq!(linked, 2);
        }
    }

    #[test]
    fn a_never_deadline_is_no_expiration_and_fires_last_at_the_end() {
        let ds = [u64::MAX, 70, u64::MAX - 1];
        let entries: Vec<_> = ds.iter().map(|_| Arc::new(Entry::new(0))).collect();
        let mut w = Wheel::new(0);
        for (e, &d) in entries.iter().zip(&ds) {
            // SAFETY: as in `fire`.
            let inserted = unsafe { w.insert(e, d, waker()) };
            assert!(matches!(inserted, Inserted::Linked));
        }
        let mut out = Vec::new();
        assert!(!w.poll(u64::MAX - 1, &mut out, usize::MAX));
        assert_eq!(out.len(), 2);
        assert_eq!(w.len(), 1);
        assert_eq!(
            w.next_expiration(),
            None,
            "nothing comes due before the end"
        );
        assert_eq!(entries[0].state(), LINKED);
        for budget in [1, usize::MAX] {
            let (fired, linked) = fire(&ds, u64::MAX, budget);
            assert_eq!((fired, linked), (vec![70, u64::MAX - 1, u64::MAX], 0));
        }
    }

    #[test]
    fn remove_unlinks_and_empties() {
        let es: Vec<_> = (0..100).map(|_| Arc::new(Entry::new(0))).collect();
        let mut w = Wheel::new(0);
        for (i, e) in es.iter().enumerate() {
            // SAFETY: as in `fire`.
            let inserted = unsafe { w.insert(e, 1000 + i as u64 * 7, waker()) };
            assert!(matches!(inserted, Inserted::Linked));
        }
        for e in es.iter().step_by(2) {
            assert!(w.remove(e).is_some());
            assert!(w.remove(e).is_none());
        }
        assert_eq!(w.len(), 50);
        let mut out = Vec::new();
        assert!(!w.poll(u64::MAX - 1, &mut out, usize::MAX));
        assert_eq!(out.len(), 50);
        assert_eq!(w.len(), 0);
        assert!(w.next_expiration().is_none());
    }

    #[test]
    fn due_on_insert() {
        let e = Arc::new(Entry::new(0));
        let mut w = Wheel::new(0);
        let mut out = Vec::new();
        assert!(!w.poll(100, &mut out, usize::MAX));
        // SAFETY: as in `fire`.
        let inserted = unsafe { w.insert(&e, 100, waker()) };
        assert!(matches!(inserted, Inserted::Due(_)));
        // SAFETY: as in `fire`.
        let inserted = unsafe { w.insert(&e, 101, waker()) };
        assert!(matches!(inserted, Inserted::Linked));
        assert_eq!(w.next_expiration(), Some(101));
    }
}
