//! Tasks: how a future becomes an `async-task` runnable, and what is left
//! of it for whoever waits.
//!
//! - [`info`]: a task's metadata, beside its future in one allocation;
//! - [`raw`]: creating a task, its schedule function, and the poll wrapper;
//! - [`current`]: the task being polled on this thread;
//! - [`fault`]: where a panic goes that must not unwind (an executor's
//!   `schedule`, a future's or a value's `Drop`);
//! - [`handle`]: [`JoinHandle`] and [`AbortHandle`];
//! - [`completion`]: work completed in place, with no task (a strand's
//!   queued `with` section), whose result a `JoinHandle` reads.
//!
//! `README.md` beside this file states the lifecycle as a protocol.

pub(crate) mod completion;
mod current;
pub(crate) mod fault;
mod handle;
pub(crate) mod info;
pub(crate) mod raw;

pub use handle::{AbortHandle, JoinHandle};
pub(crate) use info::Metadata;

pub(crate) use current::{
    current_task, current_task_id, current_task_sink, list_current_while_blocked, note_wait,
    reporting_panics, task_id, with_current_task, with_task_polled_by,
};
pub(crate) use fault::{report, DropOnce};
pub(crate) use handle::{abort_chain, AbortStep, Upstream};
pub(crate) use raw::{
    admitted_or_rejected, create_admitted, create_daemon, create_fallible, spawn_admitted,
    spawn_or_reject, Daemon,
};
