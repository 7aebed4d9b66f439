//! [`check`]: a program run under many seeds, the first failure named,
//! told apart from one that escapes the simulation, and shrunk.

use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::{schedule, shrink, Config, SimError, Simulation, DEFAULT_MAX_STEPS};

/// Runs `program` in a fresh [`Simulation`] for each seed, in order, and
/// panics on the first run that fails (a [`SimError`], or `program`
/// panicking as it builds the future), with a message that names the seed
/// and how to replay it.
///
/// The worlds use the default strategy: PCT at depth 3
/// ([`Strategy::Pct`](super::Strategy::Pct)), drawing its preemption points over the length
/// of a run learned from the runs before. [`Simulation::check`] runs
/// worlds made like a given one instead (other workers, a strategy,
/// jitter).
///
/// Before panicking it runs the failing seed once more, to tell a
/// deterministic failure (same error, same [trace](Simulation::trace_hash))
/// from a program that escapes the simulation (see the [module
/// docs](super)). Errors are compared up to task ids, which are
/// process-wide: a deadlock by its shape, a panic message up to its
/// numbers. A deterministic failure is then shrunk: the message gives the
/// fewest preemptions it found the failure to need, and a string for
/// [`Simulation::replay`] that runs that schedule.
///
/// Each seed's world is ended when its run is over, even if the program
/// moved a clone of the [`Simulation`] into a task.
///
/// # Panics
///
/// On the first failing seed, as above.
///
/// # Examples
///
/// ```
/// use viaduct::prelude::*;
/// use viaduct::Guarded;
///
/// // Increments in sections never lose an update, whatever the schedule.
/// viaduct::sim::check(0..200, |sim| {
///     let ex = sim.executor();
///     async move {
///         let n = Guarded::new(ex.clone(), 0u32);
///         let tasks: Vec<_> = (0..4)
///             .map(|_| {
///                 let n = n.clone();
///                 ex.spawn(async move { n.with(|v| *v += 1).await.unwrap() })
///             })
///             .collect();
///         for t in tasks {
///             t.await.unwrap();
///         }
///         assert_eq!(n.with(|v| *v).await.unwrap(), 4);
///     }
/// });
/// ```
#[track_caller]
pub fn check<P, F>(seeds: impl IntoIterator<Item = u64>, program: P)
where
    P: FnMut(&Simulation) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    check_like(&Config::new(0), seeds, program);
}

impl Simulation {
    /// [`check`], with each seed's world made like this one: its workers,
    /// [strategy](Simulation::strategy) and [jitter](Simulation::jitter),
    /// from its own seed. This world itself does not run.
    ///
    /// # Panics
    ///
    /// On the first failing seed, as [`check`] does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct::prelude::*;
    /// use viaduct::sim::Simulation;
    ///
    /// // A reply that takes 10 ms, awaited for 11: with exact time it is
    /// // never late; with a little jitter in the server's work, it is.
    /// let late = std::panic::catch_unwind(|| {
    ///     Simulation::new(0).jitter(Duration::from_millis(2)).check(0..200, |sim| {
    ///         let (t, ex) = (sim.timer(), sim.executor());
    ///         async move {
    ///             let (tx, rx) = futures::channel::oneshot::channel();
    ///             let work = t.clone();
    ///             drop(ex.spawn(async move {
    ///                 work.sleep(Duration::from_millis(10)).await;
    ///                 viaduct::coop::consume_budget().await; // and a little more work
    ///                 let _ = tx.send(42);
    ///             }));
    ///             let reply = t.timeout(Duration::from_millis(11), rx).await;
    ///             assert!(reply.is_ok(), "the reply came too late");
    ///         }
    ///     })
    /// });
    /// let msg = late.unwrap_err();
    /// assert!(msg.downcast_ref::<String>().unwrap().contains("too late"));
    /// ```
    #[track_caller]
    pub fn check<P, F>(&self, seeds: impl IntoIterator<Item = u64>, program: P)
    where
        P: FnMut(&Simulation) -> F,
        F: Future<Output = ()> + Send + 'static,
    {
        let template = Config {
            replay: None,
            ..self.shared.config.clone()
        };
        check_like(&template, seeds, program);
    }
}

/// [`check`] over worlds made like `template`, each from its own seed.
#[track_caller]
fn check_like<P, F>(template: &Config, seeds: impl IntoIterator<Item = u64>, mut program: P)
where
    P: FnMut(&Simulation) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    // PCT draws its preemption points over the length of a run: learned
    // from the runs so far, as shuttle's PCT does.
    let mut span = None;
    for seed in seeds {
        let config = Config {
            seed,
            span,
            ..template.clone()
        };
        let first = run_once(&mut program, &config);
        if first.decisions > 0 {
            span = Some(span.unwrap_or(0).max(first.decisions));
        }
        // How to replay the whole run: by seed, in a world as
        // `Simulation::new` makes it and before anything was learned;
        // otherwise the runs before this one set PCT's expectation.
        let as_new = {
            let new = Config::new(seed);
            (config.workers, config.strategy, config.jitter)
                == (new.workers, new.strategy, new.jitter)
        };
        let whole = match (config.span, as_new) {
            (None, true) => format!("`Simulation::new({seed})`"),
            _ => "the same check over the same seeds".to_owned(),
        };
        let Err(failure) = first.result else { continue };
        let again = run_once(&mut program, &config);
        let escapes = "something escapes the simulation (real threads, the real clock, \
                       blocking calls, a real pool; see the viaduct::sim docs)";
        let replay = match again.result {
            Err(f) if f.same_as(&failure) && again.trace == first.trace => {
                let shrunk = first.log.as_deref().and_then(|log| {
                    shrink::shrink(seed, config.workers, config.jitter, log, &mut |schedule| {
                        let tried = run_once(
                            &mut program,
                            &Config {
                                replay: Some(schedule),
                                ..config.clone()
                            },
                        );
                        match tried.result {
                            Err(f) if f.same_kind(&failure) => tried.departures,
                            _ => None,
                        }
                    })
                });
                match shrunk {
                    Some(s) => format!(
                        "It fails the same way every time (trace {:#018x}). Shrunk to {} \
                         preemption(s), {} departure(s) from the default order, in {} runs: \
                         replay it with\n    Simulation::replay(\"{}\")\nand the same \
                         program, or the whole run with {whole}.",
                        first.trace,
                        s.preemptions,
                        s.replay.departures.len(),
                        s.runs,
                        s.replay
                    ),
                    None => format!(
                        "It fails the same way every time (trace {:#018x}), but the run was \
                         too long to shrink: replay it with {whole} and the same program.",
                        first.trace
                    ),
                }
            }
            Err(_) => format!("Run again, it failed differently: {escapes}."),
            Ok(()) => format!("Run again, it passed: {escapes}."),
        };
        panic!("viaduct::sim::check: seed {seed} failed: {failure}\n{replay}");
    }
}

/// One run of a program, as [`check`] sees it.
struct Outcome {
    result: Result<(), Failure>,
    trace: u64,
    /// PCT's decisions: the run's length.
    decisions: u64,
    /// Its polls, for shrinking (none if too long to keep).
    log: Option<Vec<(u32, u32)>>,
    /// Where a replay departed from the default order, and how many of
    /// those were preemptions.
    departures: Option<(Vec<schedule::Deviation>, u32)>,
}

/// Runs `program` once in a world made from `config`, and ends the world:
/// the program may have moved a handle into a task that will never run
/// again.
fn run_once<P, F>(program: &mut P, config: &Config) -> Outcome
where
    P: FnMut(&Simulation) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let sim = Simulation::build(config.clone(), DEFAULT_MAX_STEPS);
    sim.shared.world().keep_log();
    let result = match catch_unwind(AssertUnwindSafe(|| program(&sim))) {
        Ok(fut) => sim.block_on(fut).map_err(Failure::Sim),
        Err(p) => Err(Failure::Program(
            crate::error::panic_message(p.as_ref())
                .unwrap_or("(not a string)")
                .to_owned(),
        )),
    };
    let world = sim.shared.world();
    let outcome = Outcome {
        result,
        trace: world.trace,
        decisions: world.decisions(),
        log: world.log().map(<[_]>::to_vec),
        departures: world.departures().map(|(d, p)| (d.to_vec(), p)),
    };
    drop(world);
    sim.shared.end();
    outcome
}

/// How one run of [`check`] failed.
enum Failure {
    Sim(SimError),
    /// The program panicked before giving its future.
    Program(String),
}

impl Failure {
    /// The same failure, as far as a replay can tell. Task ids are
    /// process-wide and differ between runs, so a deadlock is compared by
    /// its shape and a message up to its numbers (a nested `block_on`'s
    /// deadlock panic carries a dump).
    fn same_as(&self, other: &Failure) -> bool {
        self.same_kind(other)
            && match (self, other) {
                (Failure::Sim(SimError::Deadlock(a)), Failure::Sim(SimError::Deadlock(b))) => {
                    a.tasks().len() == b.tasks().len() && a.deadlocks().len() == b.deadlocks().len()
                }
                _ => true,
            }
    }

    /// The same kind of failure, as shrinking keeps it: the same panic (up
    /// to numbers), any deadlock, the same other error. A shorter schedule
    /// may leave fewer tasks in a deadlock.
    fn same_kind(&self, other: &Failure) -> bool {
        match (self, other) {
            (Failure::Sim(SimError::Deadlock(_)), Failure::Sim(SimError::Deadlock(_))) => true,
            (Failure::Sim(SimError::Panicked(a)), Failure::Sim(SimError::Panicked(b))) => {
                a.message().map(numbers_masked) == b.message().map(numbers_masked)
            }
            (Failure::Sim(a), Failure::Sim(b)) => a.to_string() == b.to_string(),
            (Failure::Program(a), Failure::Program(b)) => numbers_masked(a) == numbers_masked(b),
            _ => false,
        }
    }
}

/// `text` with each run of digits replaced by `#`.
fn numbers_masked(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_number = false;
    for c in text.chars() {
        let digit = c.is_ascii_digit();
        if !digit {
            out.push(c);
        } else if !in_number {
            out.push('#');
        }
        in_number = digit;
    }
    out
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Sim(e) => e.fmt(f),
            Failure::Program(m) => write!(f, "the program panicked before it ran: {m}"),
        }
    }
}
