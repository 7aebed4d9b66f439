//! A schedule a simulation replays, and its text form.
//!
//! A schedule is a short list of *departures* from a default order: poll
//! the task that ran last while it can run, else the task queued longest,
//! each poll with the whole budget. A departure either switches to another
//! task after a given poll, or starts a given poll with a small budget, so
//! that it yields at its first await points. Both name tasks by key (the
//! order the world first saw them in) and polls by their count, never by
//! step number or spawn location: a departure keeps its meaning when
//! other tasks poll more or less, or the code moves.
//!
//! The text form, which [`Simulation::replay`](super::Simulation::replay)
//! reads:
//!
//! ```text
//! v1;seed=42;workers=4;run=>1,0.1=0,0.2>1;check=5be1
//! ```
//!
//! A simulation with jitter adds `jitter=` (nanoseconds) before `run=`.
//!
//! `>1` polls task 1 first; `0.1=0` starts task 0's first poll with a
//! budget of 0; `0.2>1` polls task 1 after task 0's second poll. `check`
//! is a hash of the rest, so a string damaged in a copy is refused.

use std::collections::HashMap;
use std::fmt;

/// Where a switch at the very start of a run is keyed: before any poll.
pub(super) const START: (u32, u32) = (u32::MAX, 0);

/// One departure from the default order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Deviation {
    /// After the poll `at` (task key, its poll count; or [`START`]), poll
    /// task `to` next.
    Switch { at: (u32, u32), to: u32 },
    /// The poll `poll` (task key, its poll count) starts with `budget`.
    Budget { poll: (u32, u32), budget: u32 },
}

/// What a replay follows.
#[derive(Clone, Debug, Default)]
pub(super) struct Schedule {
    switches: HashMap<(u32, u32), u32>,
    budgets: HashMap<(u32, u32), u32>,
    /// A departure that names a task not queued then is an error, not
    /// skipped (a user's replay; shrinking tries schedules that may not
    /// fit).
    strict: bool,
}

impl Schedule {
    pub(super) fn new(departures: &[Deviation], strict: bool) -> Schedule {
        let mut schedule = Schedule {
            strict,
            ..Schedule::default()
        };
        for d in departures {
            match *d {
                Deviation::Switch { at, to } => schedule.switches.insert(at, to),
                Deviation::Budget { poll, budget } => schedule.budgets.insert(poll, budget),
            };
        }
        schedule
    }

    /// The schedule that polls exactly as `log` (each poll's task key and
    /// budget) did, in full: a run replayed under it shows which of its
    /// choices were departures.
    pub(super) fn pinned(log: &[(u32, u32)]) -> Schedule {
        let mut polls: HashMap<u32, u32> = HashMap::new();
        let mut departures = Vec::with_capacity(log.len() * 2);
        let mut at = START;
        for &(key, budget) in log {
            departures.push(Deviation::Switch { at, to: key });
            let n = polls.entry(key).or_insert(0);
            *n += 1;
            if budget != crate::coop::BUDGET {
                departures.push(Deviation::Budget {
                    poll: (key, *n),
                    budget,
                });
            }
            at = (key, *n);
        }
        Schedule::new(&departures, false)
    }

    pub(super) fn switch_at(&self, at: (u32, u32)) -> Option<u32> {
        self.switches.get(&at).copied()
    }

    pub(super) fn budget_at(&self, poll: (u32, u32)) -> Option<u32> {
        self.budgets.get(&poll).copied()
    }

    pub(super) fn strict(&self) -> bool {
        self.strict
    }

    /// How many departures it names.
    pub(super) fn len(&self) -> usize {
        self.switches.len() + self.budgets.len()
    }
}

/// Why a replay string was refused by
/// [`Simulation::replay`](super::Simulation::replay).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayError {
    message: String,
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "not a replay string of viaduct's simulation: {} (copy the whole string that \
             `viaduct::sim::check` printed, from `v1;` to the `check=` field)",
            self.message
        )
    }
}

impl std::error::Error for ReplayError {}

fn refuse(message: impl Into<String>) -> ReplayError {
    ReplayError {
        message: message.into(),
    }
}

/// A replay: the world it runs in, and its departures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Replay {
    pub(super) seed: u64,
    pub(super) workers: usize,
    /// The simulation's jitter, in nanoseconds (0: none).
    pub(super) jitter: u64,
    pub(super) departures: Vec<Deviation>,
}

/// The hash the `check` field holds: FNV-1a over the text before it,
/// folded to 16 bits.
fn checksum(text: &str) -> u16 {
    let h = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    (h ^ h >> 16 ^ h >> 32 ^ h >> 48) as u16
}

impl fmt::Display for Replay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = format!("v1;seed={};workers={};", self.seed, self.workers);
        if self.jitter > 0 {
            text += &format!("jitter={};", self.jitter);
        }
        text += "run=";
        for (i, d) in self.departures.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            match *d {
                Deviation::Switch { at, to } if at == START => text += &format!(">{to}"),
                Deviation::Switch { at, to } => text += &format!("{}.{}>{to}", at.0, at.1),
                Deviation::Budget { poll, budget } => {
                    text += &format!("{}.{}={budget}", poll.0, poll.1)
                }
            }
        }
        let sum = checksum(&text);
        write!(f, "{text};check={sum:04x}")
    }
}

fn number<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, ReplayError> {
    text.parse()
        .map_err(|_| refuse(format!("{what} `{text}` is not a number")))
}

/// `key.poll`, as a departure names a poll.
fn poll(text: &str) -> Result<(u32, u32), ReplayError> {
    let (key, n) = text
        .split_once('.')
        .ok_or_else(|| refuse(format!("`{text}` is not a poll (`task.count`)")))?;
    let n: u32 = number(n, "a poll count")?;
    if n == 0 {
        return Err(refuse(format!("`{text}`: polls count from 1")));
    }
    Ok((number(key, "a task")?, n))
}

impl std::str::FromStr for Replay {
    type Err = ReplayError;

    fn from_str(text: &str) -> Result<Replay, ReplayError> {
        let text = text.trim();
        let (body, sum) = text
            .rsplit_once(";check=")
            .ok_or_else(|| refuse("it has no `check=` field at its end"))?;
        let hex = sum.len() == 4 && sum.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex || u16::from_str_radix(sum, 16).ok() != Some(checksum(body)) {
            return Err(refuse(
                "its check does not match the rest: it was changed or cut",
            ));
        }
        let mut fields = body.split(';');
        if fields.next() != Some("v1") {
            return Err(refuse("it does not start with `v1;`"));
        }
        let (mut seed, mut workers, mut jitter, mut run) = (None, None, None, None);
        for field in fields {
            let (name, value) = field
                .split_once('=')
                .ok_or_else(|| refuse(format!("field `{field}` has no `=`")))?;
            let slot = match name {
                "seed" => &mut seed,
                "workers" => &mut workers,
                "jitter" => &mut jitter,
                "run" => &mut run,
                _ => return Err(refuse(format!("unknown field `{name}`"))),
            };
            if slot.replace(value).is_some() {
                return Err(refuse(format!("field `{name}` is given twice")));
            }
        }
        fn field<'a>(v: Option<&'a str>, name: &str) -> Result<&'a str, ReplayError> {
            v.ok_or_else(|| refuse(format!("it has no `{name}=` field")))
        }
        let seed = number(field(seed, "seed")?, "the seed")?;
        let workers: usize = number(field(workers, "workers")?, "the worker count")?;
        if workers == 0 || workers > super::MAX_WORKERS {
            return Err(refuse(format!(
                "{workers} workers: a simulation has 1 to {}",
                super::MAX_WORKERS
            )));
        }
        let jitter = match jitter {
            Some(j) => number(j, "the jitter")?,
            None => 0,
        };
        if u128::from(jitter) > super::MAX_JITTER.as_nanos() {
            return Err(refuse(format!(
                "a jitter of {jitter} ns is past the most a simulation takes ({:?})",
                super::MAX_JITTER
            )));
        }
        let run = field(run, "run")?;
        let mut departures = Vec::new();
        for item in run.split(',').filter(|i| !i.is_empty()) {
            let d = if let Some((at, to)) = item.split_once('>') {
                let at = if at.is_empty() { START } else { poll(at)? };
                Deviation::Switch {
                    at,
                    to: number(to, "a task")?,
                }
            } else if let Some((p, budget)) = item.split_once('=') {
                Deviation::Budget {
                    poll: poll(p)?,
                    budget: number(budget, "a budget")?,
                }
            } else {
                return Err(refuse(format!(
                    "`{item}` is neither `a.n>b` nor `a.n=budget`"
                )));
            };
            let again = departures.iter().any(|e| match (e, &d) {
                (Deviation::Switch { at: a, .. }, Deviation::Switch { at: b, .. }) => a == b,
                (Deviation::Budget { poll: a, .. }, Deviation::Budget { poll: b, .. }) => a == b,
                _ => false,
            });
            if again {
                return Err(refuse(format!(
                    "`{item}` departs where another one already does"
                )));
            }
            departures.push(d);
        }
        Ok(Replay {
            seed,
            workers,
            jitter,
            departures,
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn sample() -> Replay {
        Replay {
            seed: 42,
            workers: 4,
            jitter: 0,
            departures: vec![
                Deviation::Switch { at: START, to: 1 },
                Deviation::Budget {
                    poll: (0, 1),
                    budget: 0,
                },
                Deviation::Switch { at: (0, 2), to: 1 },
            ],
        }
    }

    #[test]
    fn a_replay_reads_back_what_it_wrote() {
        let text = sample().to_string();
        assert!(
            text.starts_with("v1;seed=42;workers=4;run=>1,0.1=0,0.2>1;check="),
            "{text}"
        );
        assert_eq!(text.parse::<Replay>(), Ok(sample()));
        let empty = Replay {
            departures: Vec::new(),
            ..sample()
        };
        assert_eq!(empty.to_string().parse::<Replay>(), Ok(empty));
        let jittery = Replay {
            jitter: 1_500_000,
            ..sample()
        };
        let text = jittery.to_string();
        assert!(text.contains(";jitter=1500000;run="), "{text}");
        assert_eq!(text.parse::<Replay>(), Ok(jittery));
    }

    #[test]
    fn a_damaged_replay_is_refused_saying_why() {
        let text = sample().to_string();
        let refused = |t: &str| t.parse::<Replay>().unwrap_err().to_string();
        assert!(refused(&text.replace("seed=42", "seed=43")).contains("does not match"));
        assert!(refused(&text[..text.len() - 2]).contains("does not match"));
        assert!(refused("v1;seed=1;workers=4;run=").contains("no `check=`"));
        assert!(refused("").contains("no `check=`"));
        let signed = |body: &str| format!("{body};check={:04x}", checksum(body));
        assert!(refused(&signed("v2;seed=1;workers=4;run=")).contains("v1"));
        assert!(refused(&signed("v1;seed=1;workers=0;run=")).contains("1 to"));
        assert!(refused(&signed("v1;seed=x;workers=4;run=")).contains("not a number"));
        assert!(refused(&signed("v1;seed=1;workers=4")).contains("no `run=`"));
        assert!(refused(&signed("v1;seed=1;workers=4;run=0.0>1")).contains("count from 1"));
        assert!(refused(&signed("v1;seed=1;workers=4;run=1")).contains("neither"));
        assert!(refused(&signed("v1;seed=1;seed=2;workers=4;run=")).contains("twice"));
        assert!(refused(&signed("v1;seed=1;workers=4;run=;nul=\0")).contains("unknown"));
        assert!(refused(&signed("v1;seed=1;workers=4;run=>1,>2")).contains("already"));
        let huge = format!("v1;seed=1;workers=4;jitter={};run=", u64::MAX);
        assert!(refused(&signed(&huge)).contains("past the most"));
        let plus = format!(
            "v1;seed=1;workers=4;run=;check=+{:03x}",
            checksum("v1;seed=1;workers=4;run=") & 0xfff
        );
        assert!(refused(&plus).contains("does not match"));
    }
}
