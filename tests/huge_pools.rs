//! Pools asked for more threads than the machine will start: `build`
//! returns an error promptly, never aborts or hangs. A test binary of its
//! own, with a single test, so that the thousands of threads it starts
//! (and the OS's refusal) cannot starve another test of threads.

#[allow(dead_code)] // only `within` is used here
mod support;

use std::time::Instant;

use support::within;
use viaduct::pool::{BuildError, MAX_THREADS};
use viaduct::ThreadPool;

/// 100,000 workers is under the pool's limit but over what this kind of
/// machine lets a process start (its `vm.max_map_count` of 65,530 maps
/// room for about 16,000 threads): the refusal comes back as `Spawn`
/// within seconds. (Before, the build ran for minutes, and std aborted
/// the process when a started thread could not map its signal stack.)
#[test]
fn more_threads_than_the_os_allows_is_a_prompt_spawn_error() {
    let n = 100_000;
    assert!(n <= MAX_THREADS);
    within("a pool of 100,000 workers", move || {
        let started = Instant::now();
        let built = ThreadPool::builder()
            .threads(n)
            .stack_size(viaduct::pool::MIN_STACK_SIZE)
            .build();
        println!(
            "threads({n}): {:?} after {:?}",
            built.as_ref().err(),
            started.elapsed()
        );
        match built {
            Err(BuildError::Spawn(e)) => assert!(!e.to_string().is_empty()),
            Err(e) => panic!("threads({n}) under MAX_THREADS: {e}"),
            // A machine that runs this many threads: the pool works.
            Ok(pool) => {
                assert_eq!(pool.threads(), n);
                pool.shutdown().unwrap();
            }
        }
    });
}
