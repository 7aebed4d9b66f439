//! Helpers shared by the integration tests: a deadline so a hang fails the
//! test instead of stalling CI, and a panic hook that keeps the tests'
//! intentional panics out of the output.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Once;
use std::thread;
use std::time::Duration;

/// Generous on a loaded 2-core machine; a correct run takes a fraction.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// The prefix of every panic message the tests raise on purpose.
pub const TEST_PANIC: &str = "test panic";

/// Runs `f` on a fresh thread named `what` and returns its result, failing
/// the test if it has not finished within [`DEADLINE`]. A panic in `f` is
/// passed on as is.
pub fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = thread::Builder::new()
        .name(what.to_owned())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .expect("start the test thread");
    match rx.recv_timeout(DEADLINE) {
        Ok(v) => {
            worker.join().expect("the test thread returned");
            v
        }
        Err(RecvTimeoutError::Disconnected) => match worker.join() {
            Err(payload) => std::panic::resume_unwind(payload),
            Ok(()) => unreachable!("the test thread sends before it returns"),
        },
        Err(RecvTimeoutError::Timeout) => panic!("{what}: still running after {DEADLINE:?}, hung"),
    }
}

/// Silences std's panic message for panics whose message starts with
/// [`TEST_PANIC`]; every other panic is reported as usual.
pub fn quiet_test_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let msg = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
            if !msg.is_some_and(|m| m.starts_with(TEST_PANIC)) {
                default(info);
            }
        }));
    });
}

/// A 2-worker tokio runtime with I/O and timers, its threads named
/// `thread_name`.
#[allow(dead_code)] // used by the test binaries that meet tokio
pub fn tokio_runtime(thread_name: &str) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(thread_name)
        .enable_all()
        .build()
        .unwrap()
}

/// fib(n) by `pool.join` recursion: the fork-join workload of the tests.
#[allow(dead_code)] // used by some of the test binaries that include this
pub fn fib(pool: &viaduct::ThreadPool, n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = pool.join(|| fib(pool, n - 1), || fib(pool, n - 2));
    a + b
}

/// A pool of `threads` workers named `{name}-N`.
#[allow(dead_code)] // used by some of the test binaries that include this
pub fn pool(name: &str, threads: usize) -> viaduct::ThreadPool {
    viaduct::ThreadPool::builder()
        .threads(threads)
        .name(name)
        .build()
        .unwrap()
}

/// Sets its flag when dropped: tells whether a task's future is gone.
#[allow(dead_code)] // used by some of the test binaries that include this
pub struct DropFlag(pub std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Panics (with a [`TEST_PANIC`] message) when dropped.
#[allow(dead_code)] // used by some of the test binaries that include this
pub struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("{TEST_PANIC}: drop");
    }
}

/// Two tasks on `ex` that lock two values in opposite orders, sleeping
/// a millisecond in between: each ends up waiting for the other.
#[allow(dead_code)] // used by some of the test binaries that include this
pub fn crossed_locks(ex: &viaduct::Exec) -> [viaduct::JoinHandle<()>; 2] {
    use viaduct::ExecutorExt;
    let (a, b) = (
        viaduct::Guarded::new(ex.clone(), 0),
        viaduct::Guarded::new(ex.clone(), 0),
    );
    let lock_in_turn = |first: viaduct::Guarded<i32>, second: viaduct::Guarded<i32>| async move {
        let _first = first.lock().await;
        viaduct::time::sleep(Duration::from_millis(1)).await;
        let _second = second.lock().await;
    };
    [
        ex.spawn(lock_in_turn(a.clone(), b.clone())),
        ex.spawn(lock_in_turn(b, a)),
    ]
}
