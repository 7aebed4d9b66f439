use std::time::Duration;
use viaduct::{block_on, ExecutorExt, ThreadPool};
fn main() {
    let pool = ThreadPool::builder()
        .threads(1)
        .stall_threshold(Duration::from_millis(20))
        .build()
        .unwrap();
    let h = pool.run(|| std::thread::sleep(Duration::from_millis(300)));
    block_on(h).unwrap();
    println!("done");
}
