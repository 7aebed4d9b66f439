//! A global allocator that counts live heap bytes while counting is on:
//! for the benches' memory figures, measured single-threaded (elsewhere a
//! shared counter would skew the timings).

// Each bench that includes this module uses part of it.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering::Relaxed};

pub struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static HEAP: AtomicIsize = AtomicIsize::new(0);

// SAFETY: defers to `System` for every operation; the counters have no
// bearing on the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Relaxed) {
            HEAP.fetch_add(layout.size() as isize, Relaxed);
        }
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Relaxed) {
            HEAP.fetch_sub(layout.size() as isize, Relaxed);
        }
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Heap bytes per item that `make` keeps alive: it makes `n` of them and
/// returns them held; they are dropped after the count is read.
pub fn heap_per_item<T>(n: usize, make: impl FnOnce(usize) -> T) -> f64 {
    COUNTING.store(true, Relaxed);
    let before = HEAP.load(Relaxed);
    let held = make(n);
    let bytes = HEAP.load(Relaxed) - before;
    drop(held);
    COUNTING.store(false, Relaxed);
    bytes as f64 / n as f64
}

/// Leaves `bytes` out of the current count (a container the measurement
/// holds its items in).
pub fn uncount(bytes: usize) {
    HEAP.fetch_sub(bytes as isize, Relaxed);
}
