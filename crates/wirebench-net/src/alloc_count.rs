//! A counting global allocator for tests (feature `fake`): counts the allocations made by
//! each thread, so a test can prove that a measured loop allocates nothing per message.
//! It lives here because this is the one crate allowed `unsafe`.
//!
//! ```text
//! #[global_allocator]
//! static GLOBAL: wirebench_net::alloc_count::Counting = wirebench_net::alloc_count::Counting;
//! let before = wirebench_net::alloc_count::thread_allocations();
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

/// Allocations (and reallocations) made so far by the calling thread.
pub fn thread_allocations() -> u64 {
    ALLOCS.with(Cell::get)
}

/// The system allocator, counting per thread.
#[derive(Debug, Clone, Copy)]
pub struct Counting;

#[expect(unsafe_code, reason = "a GlobalAlloc is an unsafe trait")]
// SAFETY: every method defers to the system allocator with the caller's arguments; the
// only addition is a thread-local counter, whose const initialiser does not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: as for `dealloc`, and `new_size` is the caller's, per the contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
