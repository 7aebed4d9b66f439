//! Finding a race by seed: a small bank-transfer service loses updates
//! under some schedules. The simulation finds a seed that shows it,
//! replays that seed exactly, lets `check` shrink the failing run to the
//! preemption it needs and replay that, and then runs the fixed service
//! under 10,000 seeds.
//!
//! Run it with `cargo run --release --example simulation`.

use std::future::Future;
use std::time::Instant;

use viaduct::prelude::*;
use viaduct::sim::{self, SimError, Simulation};
use viaduct::Guarded;

/// The buggy transfer: the balance is checked in one section and written
/// in another, so a transfer running in between is overwritten.
async fn transfer_racy(from: Guarded<i64>, to: Guarded<i64>, amount: i64) {
    let balance = from.with(|b| *b).await.unwrap();
    if balance < amount {
        return;
    }
    from.with(move |b| *b = balance - amount).await.unwrap(); // may be stale by now
    to.with(move |b| *b += amount).await.unwrap();
}

/// The fix: check and debit in one section.
async fn transfer_fixed(from: Guarded<i64>, to: Guarded<i64>, amount: i64) {
    let debited = from
        .with(move |b| {
            let ok = *b >= amount;
            if ok {
                *b -= amount;
            }
            ok
        })
        .await
        .unwrap();
    if debited {
        to.with(move |b| *b += amount).await.unwrap();
    }
}

/// Three accounts of 100, four concurrent transfers; money must be kept.
fn bank(sim: &Simulation, fixed: bool) -> impl Future<Output = ()> + Send + 'static {
    let ex = sim.executor();
    async move {
        let accounts: Vec<Guarded<i64>> = (0..3).map(|_| Guarded::new(ex.clone(), 100)).collect();
        let transfers = [(0, 1, 30), (1, 2, 50), (2, 0, 70), (0, 2, 20)];
        let running: Vec<_> = transfers
            .iter()
            .map(|&(from, to, amount)| {
                let (from, to) = (accounts[from].clone(), accounts[to].clone());
                if fixed {
                    ex.spawn(transfer_fixed(from, to, amount))
                } else {
                    ex.spawn(transfer_racy(from, to, amount))
                }
            })
            .collect();
        for t in running {
            t.await.unwrap();
        }
        let mut total = 0;
        for a in &accounts {
            total += a.with(|b| *b).await.unwrap();
        }
        assert!(
            total == 300,
            "money was created or lost: the bank holds {total}"
        );
    }
}

fn main() {
    // The racy runs panic on purpose: keep their messages to what we print.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let expected = ["money was created or lost", "viaduct::sim::check: seed"];
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map_or("", String::as_str);
        if !expected.iter().any(|e| msg.starts_with(e)) {
            default_hook(info);
        }
    }));

    // 1. Search: the first seed whose schedule breaks the racy service.
    let started = Instant::now();
    let (seed, error) = (0..)
        .find_map(|seed| {
            let sim = Simulation::new(seed);
            sim.block_on(bank(&sim, false)).err().map(|e| (seed, e))
        })
        .expect("some seed finds the race");
    let message = match &error {
        SimError::Panicked(p) => p.message().unwrap_or("?").to_owned(),
        other => other.to_string(),
    };
    println!(
        "found: seed {seed} fails after {} runs ({:.1?}): {message}",
        seed + 1,
        started.elapsed()
    );

    // 2. Replay: the same seed gives the same run, step for step.
    let replays: Vec<(u64, u64, bool)> = (0..2)
        .map(|_| {
            let sim = Simulation::new(seed);
            let failed = sim.block_on(bank(&sim, false)).is_err();
            (sim.trace_hash(), sim.steps(), failed)
        })
        .collect();
    for (i, (trace, steps, failed)) in replays.iter().enumerate() {
        println!(
            "replay {}: trace {trace:#018x}, {steps} polls, failed again: {failed}",
            i + 1
        );
    }
    assert_eq!(replays[0], replays[1]);
    assert!(replays[0].2);

    // `check` does both for you, shrinks the failing run to the
    // preemptions it needs, and says how to replay that:
    let report = std::panic::catch_unwind(|| sim::check(0.., |sim| bank(sim, false)))
        .expect_err("the racy bank fails");
    let report = report.downcast_ref::<String>().expect("check's message");
    println!("check on the racy bank: {report}");
    let replay = report
        .split("Simulation::replay(\"")
        .nth(1)
        .and_then(|rest| rest.split("\")").next())
        .expect("a replay string");
    let sim = Simulation::replay(replay).expect("check's own replay string");
    let again = sim.block_on(bank(&sim, false));
    assert!(again.is_err());
    println!("the shrunk replay fails again: {}", again.unwrap_err());

    // 3. The fixed service under 10,000 seeds.
    let started = Instant::now();
    sim::check(0..10_000, |sim| bank(sim, true));
    println!("fixed: 10000 seeds pass ({:.1?})", started.elapsed());
}
