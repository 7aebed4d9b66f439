//! Adapters to the rest of the ecosystem, each behind a feature of its own
//! (all off by default, so the default build pulls in none of them):
//!
//! | feature | module | what it gives |
//! |---|---|---|
//! | `tokio` | [`tokio`] | [`TokioExecutor`](self::tokio::TokioExecutor): viaduct tasks on a tokio runtime; [`Builder::enter_tokio`](crate::pool::Builder::enter_tokio): tokio's sockets, timers and `tokio::spawn` inside a pool's tasks; [`block_on`](crate::block_on) that refuses the thread of a current-thread runtime, where it could only hang |
//! | `hyper` | [`hyper`] | [`HyperExecutor`](self::hyper::HyperExecutor) and [`HyperTimer`](self::hyper::HyperTimer): hyper's connections on any viaduct executor, its timeouts on viaduct's timer wheel |
//! | `rayon` | [`rayon`] | [`RayonExecutor`](self::rayon::RayonExecutor): viaduct tasks as jobs of a rayon pool |
//!
//! Each executor here is a handle: clones share one runtime and one
//! closed flag, and [`close`](crate::Executor::close) makes every clone
//! refuse new tasks (handles of tasks already accepted still resolve).

#[cfg(any(feature = "tokio", feature = "rayon"))]
use std::sync::atomic::{AtomicBool, Ordering};

#[cfg(feature = "hyper")]
pub mod hyper;
#[cfg(feature = "rayon")]
pub mod rayon;
#[cfg(feature = "tokio")]
pub mod tokio;

/// The closed flag an adapter's clones share: what [`Executor::close`]
/// sets and [`Executor::is_closed`] reads, for a runtime that has no such
/// state of its own.
///
/// [`Executor::close`]: crate::Executor::close
/// [`Executor::is_closed`]: crate::Executor::is_closed
#[cfg(any(feature = "tokio", feature = "rayon"))]
#[derive(Default, Debug)]
struct Gate(AtomicBool);

#[cfg(any(feature = "tokio", feature = "rayon"))]
impl Gate {
    fn close(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    fn is_closed(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}
