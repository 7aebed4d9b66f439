//! Where memory goes back to the allocator: a chain of continuations
//! awaited outside its pool frees its tasks on the thread that awaited it,
//! which usually allocated them. glibc's malloc takes a lock both threads
//! share for a block freed on another thread than its own, once the
//! freeing thread's cache is full (0.2 to 0.56 futex calls per message in
//! `benches/offload.rs`, when it was measured).
//!
//! A global allocator puts a header before every block that says which
//! thread allocated it, and counts the blocks a watched thread allocated
//! that another thread frees. The count is process-wide, so this file
//! holds one `#[test]` that runs the checks in turn.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll};
use std::time::Duration;

#[allow(dead_code)] // only `within` is used here
mod support;

use viaduct::{block_on, ExecutorExt, Guarded, ThreadPool};

struct Tagging;

/// The header: the allocating thread's tag in the 8 bytes just before the
/// block, in a prefix as large as the block's alignment (at least 16).
fn prefix(layout: Layout) -> usize {
    layout.align().max(16)
}

/// `None` if the block and its header do not fit in a layout (no panic:
/// an allocator must not unwind).
fn with_prefix(layout: Layout) -> Option<Layout> {
    let size = layout.size().checked_add(prefix(layout))?;
    Layout::from_size_align(size, prefix(layout)).ok()
}

static NEXT_TAG: AtomicU64 = AtomicU64::new(1);
/// The thread whose blocks are watched; 0 for none.
static WATCHED: AtomicU64 = AtomicU64::new(0);
/// The watched thread's blocks freed on other threads.
static CROSSED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static TAG: Cell<u64> = const { Cell::new(0) };
}

/// This thread's tag, given on first use; 0 while the thread is going
/// away, which no watched thread is.
fn tag() -> u64 {
    TAG.try_with(|t| {
        if t.get() == 0 {
            t.set(NEXT_TAG.fetch_add(1, SeqCst));
        }
        t.get()
    })
    .unwrap_or(0)
}

// SAFETY: every block handed out is a block from `System` of the caller's
// size and alignment plus a prefix that is a multiple of that alignment,
// offset by that prefix: it is suitably aligned and large enough, and
// `dealloc` undoes the offset with the same layout arithmetic. The header
// lies inside the `System` block, before the caller's part.
unsafe impl GlobalAlloc for Tagging {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(outer) = with_prefix(layout) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `outer` has a non-zero size (at least the prefix).
        let base = unsafe { System.alloc(outer) };
        if base.is_null() {
            return base;
        }
        // SAFETY: the prefix is at least 16 bytes inside the block, and
        // its last 8 bytes are aligned for a `u64` (the prefix is a
        // multiple of 16 from an address aligned to at least 16).
        unsafe {
            let block = base.add(prefix(layout));
            block.cast::<u64>().sub(1).write(tag());
            block
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above with this layout, so the
        // header is just before it and the block starts a prefix before.
        unsafe {
            let owner = ptr.cast::<u64>().sub(1).read();
            let watched = WATCHED.load(SeqCst);
            if watched != 0 && owner == watched && tag() != watched {
                CROSSED.fetch_add(1, SeqCst);
            }
            // `alloc` made this block with it; no unwinding out of here.
            let outer = with_prefix(layout).unwrap_or_else(|| std::process::abort());
            System.dealloc(ptr.sub(prefix(layout)), outer);
        }
    }
}

#[global_allocator]
static GLOBAL: Tagging = Tagging;

/// How many blocks this thread allocated (in `f`, or before it) that
/// other threads free while `f` runs, or in the 50 ms after it.
fn crossed_frees(f: impl FnOnce()) -> usize {
    CROSSED.store(0, SeqCst);
    WATCHED.store(tag(), SeqCst);
    f();
    // A pool worker may still be dropping what the last round left.
    std::thread::sleep(Duration::from_millis(50));
    WATCHED.store(0, SeqCst);
    CROSSED.load(SeqCst)
}

/// `block_on` without its waker, which is allocated per call and freed by
/// whichever thread drops it last: polls `fut` with a waker that
/// allocates nothing, yielding in between.
fn wait<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

const CHAINS: u64 = 2_000;

#[test]
fn chains_awaited_outside_the_pool_free_their_tasks_on_the_awaiting_thread() {
    support::within("chains", || {
        let pool = ThreadPool::builder().threads(2).build().unwrap();
        let room = Guarded::new(pool.clone(), 0u64);
        let warm_up = || wait(pool.run(|| 1).then(|n| n + 1)).unwrap();
        for _ in 0..100 {
            warm_up();
        }

        let crossed = crossed_frees(|| {
            for i in 0..CHAINS {
                assert_eq!(wait(pool.run(move || i).then(|n| n + 1)).unwrap(), i + 1);
            }
        });
        // What may still cross: the pool's shared queue, pushed twice a
        // chain, frees a block of 63 slots on the worker that empties it.
        assert!(
            crossed < (CHAINS / 10) as usize,
            "then: {crossed} blocks of {CHAINS} chains freed on other threads"
        );

        let crossed = crossed_frees(|| {
            for i in 0..CHAINS {
                let room = room.clone();
                let total = pool
                    .run(move || i)
                    .and_then(move |n| room.with(move |t| *t += n));
                wait(total).unwrap();
            }
        });
        assert!(
            crossed < (CHAINS / 10) as usize,
            "and_then: {crossed} blocks of {CHAINS} chains freed on other threads"
        );
        assert_eq!(*block_on(room.lock()), CHAINS * (CHAINS - 1) / 2);
    });
}
