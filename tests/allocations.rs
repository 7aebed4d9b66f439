//! What the hot paths allocate, counted by a global allocator: `join`
//! allocates nothing (its jobs live on the callers' stacks), a strand
//! post allocates nothing of its own (its closure goes in a slot of a
//! chunk its thread carves, one allocation per 255 posts that capture
//! nothing), a spawn on a strand or a manual
//! executor exactly its task, and a strand's batches reuse its one runner
//! task (made at the first post, with no allocation per batch).
//!
//! The counter is process-wide, so this file holds one `#[test]` that runs
//! the checks in turn: the harness starts no other thread meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

#[allow(dead_code)] // only `fib` is used here
mod support;

use support::fib;
use viaduct::{block_on, ExecutorExt, ManualExecutor, Strand, ThreadPool};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counter is
// an atomic, which allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, SeqCst);
        // SAFETY: the caller upholds `alloc`'s contract, passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through `alloc` above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, SeqCst);
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made while `f` runs.
fn allocations<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = ALLOCATIONS.load(SeqCst);
    let r = f();
    (r, ALLOCATIONS.load(SeqCst) - before)
}

#[test]
fn hot_paths_allocate_what_they_must_and_nothing_more() {
    join_allocates_nothing();
    posts_allocate_a_chunk_of_slots_now_and_then_and_batches_reuse_the_runner();
    a_spawn_on_a_strand_allocates_its_task_only();
    a_manual_executor_queues_without_allocating();
}

fn join_allocates_nothing() {
    let pool = ThreadPool::builder().threads(2).build().unwrap();
    let p = pool.clone();
    let (value, count) = block_on(pool.run(move || {
        // Warm-up: the deques reach their size, and the other worker is
        // surely up (its start allocates) since it steals. Neither worker's
        // first steal may allocate while counted: each registers with
        // crossbeam's epoch as it starts (before, this one could find its
        // own work all along the warm-up, and steal for the first time
        // while counted: this test failed in about 1 run of 20 on a loaded
        // machine).
        let stolen = p.metrics().stolen;
        for round in 0..100_000 {
            fib(&p, 15);
            if round >= 20 && p.metrics().stolen >= stolen + 10 {
                break;
            }
        }
        allocations(|| fib(&p, 20))
    }))
    .unwrap();
    assert_eq!(value, 6765);
    assert_eq!(count, 0, "pool.join allocated on its hot path");
    // Workers exiting free their thread-locals: not while the next check
    // counts.
    pool.shutdown().unwrap();
}

fn posts_allocate_a_chunk_of_slots_now_and_then_and_batches_reuse_the_runner() {
    let manual = ManualExecutor::new();
    // The executor's first schedule allocates (its wake-up event's list):
    // done here, not counted below.
    drop(manual.spawn(async {}));
    manual.run_until_idle();
    let strand = Strand::new(manual.clone());
    // What only a strand that queues needs is made when something is
    // first queued: the first post allocates the strand's extension (its
    // queue's state) and the runner task, and this thread's first chunk
    // of slots for posted closures.
    let ((), first) = allocations(|| strand.post(|| ()));
    assert_eq!(
        first, 3,
        "the first post makes the extension, the runner and a chunk, once"
    );
    manual.run_until_idle();
    let ((), count) = allocations(|| {
        for _round in 0..10 {
            for _ in 0..100 {
                strand.post(|| ());
            }
            // One batch a round: the runner, queued once, takes all 100.
            assert_eq!(manual.run_until_idle(), 1);
        }
    });
    // A closure that captures nothing takes a 16-byte slot: 255 to a 4 KiB
    // chunk (its first 16 bytes count the slots out). The first post took
    // the first slot; the rest of 1,001 take three more chunks.
    assert_eq!(count, 3, "a chunk per 255 posts, none per batch");
    let m = strand.metrics();
    assert_eq!((m.queued, m.batches), (1001, 11));
}

fn a_spawn_on_a_strand_allocates_its_task_only() {
    let manual = ManualExecutor::new();
    let strand = Strand::new(manual.clone());
    drop(strand.run(|| ()));
    manual.run_until_idle();
    let (handles, count) = allocations(|| {
        let handles: Vec<_> = (0..100u32).map(|i| strand.run(move || i)).collect();
        manual.run_until_idle();
        handles
    });
    // The Vec of handles is the one allocation beyond the tasks.
    assert_eq!(count, 100 + 1, "one allocation per task, none per batch");
    let sum: u32 = handles.into_iter().map(|h| block_on(h).unwrap()).sum();
    assert_eq!(sum, (0..100).sum());
}

/// A `ManualExecutor` links its queue through the tasks themselves: 1,000
/// queued tasks cost their 1,000 allocations, none for a buffer that
/// grows (a `VecDeque` grew eleven times on the way).
fn a_manual_executor_queues_without_allocating() {
    let manual = ManualExecutor::new();
    drop(manual.spawn(async {}));
    manual.run_until_idle();
    let mut handles = Vec::with_capacity(1000);
    let ((), count) = allocations(|| {
        handles.extend((0..1000u32).map(|i| manual.spawn(async move { i })));
    });
    assert_eq!(count, 1000, "one allocation per task, none for the queue");
    assert_eq!(manual.len(), 1000);
    assert_eq!(manual.run_until_idle(), 1000);
    let sum: u32 = handles.into_iter().map(|h| block_on(h).unwrap()).sum();
    assert_eq!(sum, (0..1000).sum());
}
