//! Stall detection: a watcher thread that reports a task poll running
//! longer than the pool's threshold, once, while it still runs.
//!
//! The watcher reads each worker's record of the task it polls (see
//! `dump::records::Running`) every eighth of the threshold; a record that has not
//! changed since it was first seen belongs to one poll, which has run at
//! least that long. Workers do nothing more for it: when stall detection
//! is off there is no watcher and no cost.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use super::Shared;
use crate::admission::Tracker;
use crate::dump::TaskKind;
use crate::task_id::TaskId;

/// A poll that has run longer than its pool's
/// [`stall_threshold`](super::Builder::stall_threshold): handed to the
/// pool's [`on_stall`](super::Builder::on_stall) while the poll still runs.
///
/// # Examples
///
/// ```
/// use std::sync::mpsc;
/// use std::sync::Mutex;
/// use std::time::Duration;
/// use viaduct::{block_on, ExecutorExt, ThreadPool};
///
/// let (tx, rx) = mpsc::channel();
/// let tx = Mutex::new(tx);
/// let pool = ThreadPool::builder()
///     .threads(1)
///     .name("svc")
///     .stall_threshold(Duration::from_millis(20))
///     .on_stall(move |stall| tx.lock().unwrap().send(stall.clone()).unwrap())
///     .build()
///     .unwrap();
/// let line = line!() + 1;
/// let stuck = pool.run(|| std::thread::sleep(Duration::from_millis(200)));
/// let stall = rx.recv().unwrap(); // while the task still sleeps
/// assert_eq!(Some(stall.task()), stuck.id());
/// assert_eq!(stall.worker(), "svc-0");
/// assert_eq!(stall.location().line(), line);
/// assert!(stall.elapsed() >= Duration::from_millis(20));
/// assert!(stall.to_string().ends_with("without yielding")); // task #3 spawned at src/main.rs:12:19 has run on svc-0 for 22 ms without yielding
/// block_on(stuck).unwrap();
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Stall {
    task: TaskId,
    kind: TaskKind,
    worker: String,
    location: &'static Location<'static>,
    elapsed: Duration,
}

impl Stall {
    /// The task whose poll stalls.
    pub fn task(&self) -> TaskId {
        self.task
    }

    /// The name of the worker thread it runs on.
    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// Where the task was spawned; for viaduct's own tasks, where the
    /// strand or executor they serve was created (see
    /// [`kind`](Stall::kind)).
    pub fn location(&self) -> &'static Location<'static> {
        self.location
    }

    /// What runs in the task: a user's future, or a strand's runner (then
    /// the stalling code is a section or a post of that strand).
    pub fn kind(&self) -> TaskKind {
        self.kind
    }

    /// How long the poll had run when it was reported: at least this long,
    /// and at most an eighth of the threshold longer.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} at {} has run on {} for {} ms without yielding",
            self.kind,
            self.task,
            match self.kind {
                TaskKind::StrandRunner => "of the strand created",
                TaskKind::PriorityPump => "of the executor created",
                _ => "spawned",
            },
            self.location,
            self.worker,
            self.elapsed.as_millis()
        )
    }
}

impl fmt::Debug for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stall")
            .field("task", &self.task)
            .field("kind", &self.kind)
            .field("worker", &self.worker)
            .field("location", &format_args!("{}", self.location))
            .field("elapsed", &self.elapsed)
            .finish()
    }
}

pub(super) type StallHandler = Arc<dyn Fn(&Stall) + Send + Sync>;

/// The settings of a pool's stall detection.
pub(super) struct StallWatch {
    pub(super) threshold: Duration,
    pub(super) on_stall: Option<StallHandler>,
}

/// The watcher reads the workers' records this often: often enough that a
/// stall is reported within an eighth of the threshold of crossing it,
/// rarely enough to cost nothing (and at least every 250 ms, so that it
/// notices its pool is gone).
fn period(threshold: Duration) -> Duration {
    (threshold / 8).clamp(Duration::from_micros(500), Duration::from_millis(250))
}

/// Starts the watcher of `shared`'s workers.
pub(super) fn start(
    shared: &Arc<Shared>,
    watch: StallWatch,
) -> std::io::Result<thread::JoinHandle<()>> {
    let weak = Arc::downgrade(shared);
    thread::Builder::new()
        .name(format!("{}-watch", shared.name))
        .spawn(move || watch_workers(weak, watch))
}

/// A worker's record as the watcher last saw it change.
struct Last {
    seq: u64,
    since: Instant,
    reported: bool,
}

fn watch_workers(shared: Weak<Shared>, watch: StallWatch) {
    let period = period(watch.threshold);
    let mut last: Vec<Last> = Vec::new();
    loop {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if shared.terminated.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let now = Instant::now();
        for (index, book) in shared.books.workers().enumerate() {
            let seen = book.running.read();
            if last.len() == index {
                last.push(Last {
                    seq: seen.seq,
                    since: now,
                    reported: false,
                });
                continue;
            }
            let last = &mut last[index];
            if seen.seq != last.seq {
                *last = Last {
                    seq: seen.seq,
                    since: now,
                    reported: false,
                };
                continue;
            }
            let elapsed = now.saturating_duration_since(last.since);
            if let Some((task, location, kind)) = seen.task {
                if !last.reported && elapsed >= watch.threshold {
                    last.reported = true;
                    let stall = Stall {
                        task,
                        kind,
                        worker: shared.worker_name(index),
                        location,
                        elapsed,
                    };
                    report(&shared, &watch, &stall);
                }
            }
        }
        drop(shared);
        thread::park_timeout(period);
    }
}

fn report(shared: &Shared, watch: &StallWatch, stall: &Stall) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "viaduct",
        task = stall.task.as_u64(),
        worker = stall.worker.as_str(),
        location = %stall.location,
        elapsed_ms = stall.elapsed.as_millis() as u64,
        "stall"
    );
    match &watch.on_stall {
        Some(handler) => {
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| handler(stall))) {
                shared.unobserved_panic(payload);
            }
        }
        None => eprintln!("viaduct: {stall}"),
    }
}
