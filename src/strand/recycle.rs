//! Memory a thread recycles for what it queues on strands, so that a post
//! allocates nothing of its own.
//!
//! - **Slots.** A posted closure's node is placed in the next slot of a
//!   4 KiB chunk that the posting thread carves up in order, each slot as
//!   large as its node (rounded up to 16 bytes: a closure that captures
//!   nothing takes 16). Whoever runs (or discards) the node gives its slot
//!   back; the chunk is freed by whoever gives back its last slot once the
//!   thread has moved on to another chunk. So a thread's posts cost one
//!   allocation per chunk, lie next to each other in memory (the runner
//!   walks them in order), take half of what a boxed node took, and the
//!   allocator never sees a small block freed on another thread than the
//!   one that made it, which is what made a post's box cost as much as its
//!   queueing. Nodes over 256 bytes are boxed. A thread keeps the chunk it
//!   is carving for its whole life (4 KiB).
//! - **A spare lock request** per thread, which `Guarded::lock` reuses.
//!
//! A chunk counts the slots not given back in its head: it starts at
//! [`CARVING`], which stands for every slot the thread may still carve;
//! when the thread moves on it gives back [`CARVING`] less the slots it
//! carved ([`Chunk::retire`]), and each slot is given back once by whoever
//! takes its node. The subtraction that brings the count to zero frees the
//! chunk. The carving thread never touches the count until it moves on,
//! so the runner's give-backs do not contend with its posts.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::loom::{fence, AtomicUsize, Ordering::*};

/// A chunk's size and alignment: a slot's address rounded down to it is
/// its chunk's head.
const CHUNK: usize = 4096;
/// Slots are carved in multiples of this, which is also the most a slot's
/// value may be aligned to.
const GRAIN: usize = 16;
/// The largest value placed in a slot.
const LARGEST: usize = 256;
/// Where a chunk's first slot starts: after the head.
const FIRST: usize = GRAIN;
/// A chunk's count while its thread carves it: more than it could ever
/// carve.
const CARVING: usize = CHUNK;

/// Whether a `T` is placed in a slot (otherwise it is boxed). Under loom
/// nodes are boxed: the models check the strand's protocols, and
/// [`loom_models`] checks the chunk's count on its own.
pub(super) const fn fits<T>() -> bool {
    !cfg!(loom) && size_of::<T>() <= LARGEST && align_of::<T>() <= GRAIN
}

/// The slot size of a `T`.
const fn slot_size<T>() -> usize {
    // A zero-sized `T` still takes a slot: every slot counts once.
    if size_of::<T>() == 0 {
        GRAIN
    } else {
        size_of::<T>().next_multiple_of(GRAIN)
    }
}

/// Moves `value` to a slot if it [`fits`], else to a box; [`take`] gives it
/// back and frees the memory.
#[inline]
pub(super) fn place<T>(value: T) -> NonNull<T> {
    if !fits::<T>() {
        return NonNull::from(Box::leak(Box::new(value)));
    }
    let slot = carve(slot_size::<T>()).cast::<T>();
    // SAFETY: the slot is `slot_size::<T>()` bytes aligned to 16, which
    // `T` fits in, and is this caller's alone until given back.
    unsafe { slot.as_ptr().write(value) };
    slot
}

/// Moves the value out of what [`place`] gave, and frees that.
///
/// # Safety
///
/// `ptr` came from [`place::<T>`](place) and is taken once; nothing reads
/// the value through it after.
#[inline]
pub(super) unsafe fn take<T>(ptr: NonNull<T>) -> T {
    if !fits::<T>() {
        // SAFETY: `place` boxed it (`T` does not fit), and it is taken once.
        return *unsafe { Box::from_raw(ptr.as_ptr()) };
    }
    // SAFETY: `place` wrote a `T` there, and it is read once.
    let value = unsafe { ptr.as_ptr().read() };
    let offset = ptr.as_ptr() as usize % CHUNK;
    // SAFETY: the slot lies `offset` bytes into its chunk (chunks are
    // aligned to their size), whose head stays alive until this slot is
    // given back; the pointer keeps the whole chunk's provenance, as
    // `Chunk::carve` made it from the chunk's.
    let head = unsafe { NonNull::new_unchecked(ptr.as_ptr().cast::<u8>().sub(offset)) };
    // SAFETY: this slot was carved from that chunk and not yet given back.
    unsafe { give_back(head.cast(), 1) };
    value
}

/// A chunk's head, at its start.
struct Head {
    /// See the module docs.
    out: AtomicUsize,
}

fn layout() -> Layout {
    // A power of two no larger than `isize::MAX`: cannot fail.
    Layout::from_size_align(CHUNK, CHUNK).expect("a valid chunk layout")
}

/// A chunk being carved: its head, where the next slot starts, and how
/// many were carved.
#[derive(Clone, Copy)]
struct Chunk {
    head: NonNull<Head>,
    next: usize,
    carved: usize,
}

impl Chunk {
    fn new() -> Chunk {
        let layout = layout();
        // SAFETY: the layout has a non-zero size.
        let Some(base) = NonNull::new(unsafe { alloc(layout) }) else {
            handle_alloc_error(layout)
        };
        let head = base.cast::<Head>();
        // SAFETY: the chunk is fresh, aligned to 4096, and starts with a
        // `Head`.
        unsafe {
            head.as_ptr().write(Head {
                out: AtomicUsize::new(CARVING),
            })
        };
        Chunk {
            head,
            next: FIRST,
            carved: 0,
        }
    }

    /// Hands out a slot of `size` bytes (a multiple of [`GRAIN`], at most
    /// [`LARGEST`]), moving on to a new chunk if this one has no room.
    /// Returns the chunk to carve next.
    #[inline]
    fn carve(self, size: usize) -> (NonNull<u8>, Chunk) {
        let mut chunk = if self.next + size <= CHUNK {
            self
        } else {
            self.retire();
            Chunk::new()
        };
        // SAFETY: the slot lies inside the chunk (checked above; a new
        // chunk has room for the largest slot); the pointer is derived from
        // the chunk's own.
        let slot = unsafe { chunk.head.cast::<u8>().add(chunk.next) };
        chunk.next += size;
        chunk.carved += 1;
        (slot, chunk)
    }

    /// The carving thread moves on: gives back the count of the slots it
    /// did not carve. `true` if that freed the chunk.
    fn retire(self) -> bool {
        // SAFETY: the thread holds `CARVING` less what it carved (each
        // carved slot's holder holds one), and gives it back once, here.
        unsafe { give_back(self.head, CARVING - self.carved) }
    }
}

/// Gives back `n` of the chunk's count; the last frees it (`true`).
///
/// # Safety
///
/// The caller holds `n` of the count.
unsafe fn give_back(head: NonNull<Head>, n: usize) -> bool {
    // SAFETY: the count held keeps the chunk alive.
    let out = unsafe { &head.as_ref().out };
    // Release: what this side did with its slots happens before the free.
    let before = out.fetch_sub(n, Release);
    // Giving back more than was held would free the chunk under a slot
    // still in use: stop rather than go on.
    assert!(before >= n, "a chunk's count was given back twice");
    if before != n {
        return false;
    }
    // Acquire: and so does what every other side did with theirs.
    fence(Acquire);
    // SAFETY: the count reached zero: nothing uses the chunk. Its head is
    // dropped (under loom, the atomic is an object of the model).
    unsafe {
        head.as_ptr().drop_in_place();
        dealloc(head.as_ptr().cast(), layout());
    }
    true
}

/// What this thread keeps.
#[cfg(not(loom))]
#[derive(Default)]
struct Recycled {
    carving: std::cell::Cell<Option<Chunk>>,
    spare: std::cell::Cell<Option<Arc<dyn Any + Send + Sync>>>,
}

#[cfg(not(loom))]
impl Drop for Recycled {
    fn drop(&mut self) {
        if let Some(chunk) = self.carving.take() {
            chunk.retire();
        }
    }
}

#[cfg(not(loom))]
std::thread_local! {
    static RECYCLED: Recycled = Recycled::default();
}

/// A slot of `size` bytes of this thread's chunk.
#[inline]
fn carve(size: usize) -> NonNull<u8> {
    #[cfg(not(loom))]
    if let Ok(slot) = RECYCLED.try_with(|r| {
        let (slot, rest) = r.carving.get().unwrap_or_else(Chunk::new).carve(size);
        r.carving.set(Some(rest));
        slot
    }) {
        return slot;
    }
    // The thread is being torn down (or under loom): a chunk of one slot.
    let (slot, rest) = Chunk::new().carve(size);
    rest.retire();
    slot
}

/// This thread's spare `T`, if it keeps one.
pub(super) fn take_spare<T: Any + Send + Sync>() -> Option<Arc<T>> {
    #[cfg(not(loom))]
    // `try_with`: not during the thread's teardown.
    if let Ok(Some(spare)) = RECYCLED.try_with(|r| r.spare.take()) {
        return spare.downcast().ok();
    }
    None
}

/// Keeps `spare` for this thread's next [`take_spare`].
pub(super) fn keep_spare(spare: Arc<dyn Any + Send + Sync>) {
    #[cfg(not(loom))]
    // `try_with`: not during the thread's teardown.
    let _ = RECYCLED.try_with(|r| r.spare.set(Some(spare)));
    #[cfg(loom)]
    drop(spare);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_carves_its_slots_in_order_and_frees_each_chunk_once() {
        // 64-byte values: 63 to a chunk, so these span four chunks.
        let placed: Vec<_> = (0..200u64).map(|i| place([i; 8])).collect();
        // Slots of one chunk are adjacent, in order.
        for pair in placed.windows(2) {
            let next = pair[1].as_ptr() as usize;
            let gap = next.wrapping_sub(pair[0].as_ptr() as usize);
            assert!(gap == 64 || next % CHUNK == FIRST, "gap {gap}");
        }
        // A closure that captures nothing takes a 16-byte slot.
        let (a, b) = (place(()), place(()));
        assert_eq!(b.as_ptr() as usize - a.as_ptr() as usize, GRAIN);
        // Given back from another thread, out of order: each value intact.
        let words: Vec<usize> = placed.iter().map(|p| p.as_ptr() as usize).collect();
        let sum = std::thread::spawn(move || {
            words
                .into_iter()
                .rev()
                // SAFETY: each came from `place::<[u64; 8]>` and is taken
                // once.
                .map(|w| unsafe { take(NonNull::new(w as *mut [u64; 8]).unwrap()) }[7])
                .sum::<u64>()
        })
        .join()
        .unwrap();
        assert_eq!(sum, (0..200).sum::<u64>());
        // SAFETY: from `place`, taken once.
        unsafe { (take(a), take(b)) };
    }

    #[test]
    fn what_does_not_fit_is_boxed() {
        let big = place([7u8; LARGEST + 1]);
        // SAFETY: from `place`, taken once.
        assert_eq!(unsafe { take(big) }, [7u8; LARGEST + 1]);
        #[repr(align(32))]
        struct Aligned;
        assert!(fits::<[u8; LARGEST]>() && fits::<()>());
        assert!(!fits::<[u8; LARGEST + 1]>() && !fits::<Aligned>());
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::thread;

    /// The carving thread retires its chunk while a runner gives back the
    /// slots it was handed: the chunk is freed exactly once, by whichever
    /// comes last; no give-back finds less than it holds; and whatever the
    /// runner did with a slot happens before the free (the cell stands for
    /// the slots' memory, which the free touches).
    #[test]
    fn a_chunk_is_freed_once_by_whoever_gives_back_last() {
        loom::model(|| {
            let memory = crate::loom::Arc::new(loom::cell::UnsafeCell::new(0u32));
            let chunk = Chunk::new();
            let (a, rest) = chunk.carve(GRAIN);
            let (b, rest) = rest.carve(GRAIN);
            let words = [a.as_ptr() as usize, b.as_ptr() as usize];
            let runner = {
                let memory = memory.clone();
                thread::spawn(move || {
                    let mut freed = 0;
                    for w in words {
                        // SAFETY: the runner holds the slot.
                        memory.with_mut(|m| unsafe { *m += 1 });
                        let head = (w - w % CHUNK) as *mut Head;
                        // SAFETY: each slot is given back once.
                        if unsafe { give_back(NonNull::new(head).unwrap(), 1) } {
                            freed += 1;
                        }
                    }
                    freed
                })
            };
            let mut freed = 0;
            if rest.retire() {
                // SAFETY: the chunk is this thread's to free.
                memory.with_mut(|m| unsafe { *m = 0 });
                freed += 1;
            }
            assert_eq!(runner.join().unwrap() + freed, 1, "freed once");
        });
    }
}
