//! boost's `loop_executor`: an executor with a queue and no
//! thread of its own, driven by a thread you donate, or run on demand.
//!
//! `cargo run --release --example loop_executor`

use viaduct::prelude::*;
use viaduct::ManualExecutor;

fn here() -> String {
    std::thread::current()
        .name()
        .unwrap_or("<unnamed>")
        .to_owned()
}

fn main() {
    let ex = ManualExecutor::new();

    // run_queued runs what is queued now; what those closures queue waits.
    let inner = ex.clone();
    ex.execute(move || {
        println!("first batch, on {}: queues one more", here());
        inner.execute(|| println!("second batch, on {}", here()));
    });
    println!(
        "run_queued ran {} closure(s); {} left queued",
        ex.run_queued(),
        ex.len()
    );

    // A donated thread loops over the queue until the executor is closed.
    let looper = {
        let ex = ex.clone();
        std::thread::Builder::new()
            .name("donated".into())
            .spawn(move || ex.run_until_closed())
            .unwrap()
    };
    for i in 0..3 {
        ex.execute(move || println!("hello {i} from {}", here()));
    }
    let answer = ex.run(|| 6 * 7);
    println!("the loop computed {}", viaduct::block_on(answer).unwrap());
    ex.close();
    println!(
        "the donated thread ran {} closure(s) and returned",
        looper.join().unwrap()
    );
}
