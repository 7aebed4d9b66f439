//! The traits whose methods you call on executors, handles and futures:
//! `use viaduct::prelude::*;` and every executor has `spawn`, `run`,
//! `execute_after`, and every future `.via(&ex)`.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use viaduct::prelude::*;
//! use viaduct::{block_on, ThreadPool};
//!
//! let pool = ThreadPool::builder().threads(1).build().unwrap();
//! let spawned = pool.spawn(async { 1 });                          // ExecutorExt
//! let later = pool.execute_after(Duration::from_millis(1), || 2); // TimedExt
//! let moved = async { 3 }.via(&pool);                             // ViaExt
//! let sum = block_on(spawned).unwrap() + block_on(later).unwrap() + block_on(moved).unwrap();
//! assert_eq!(sum, 6);
//! assert!(!pool.is_closed());                                     // Executor
//! ```

pub use crate::executor::Executor;
pub use crate::future::ViaExt;
pub use crate::spawn::ExecutorExt;
pub use crate::time::TimedExt;
