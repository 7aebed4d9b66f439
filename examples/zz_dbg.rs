use std::time::Duration;
fn main() {
    let sim = viaduct::sim::Simulation::new(5);
    let o = sim.block_on(viaduct::time::sleep(Duration::MAX));
    println!("{:?} {:?} steps {}", o.is_err(), sim.elapsed(), sim.steps());
    let o = sim.block_on(viaduct::time::timeout(
        Duration::MAX,
        std::future::pending::<()>(),
    ));
    println!("{:?} {:?} steps {}", o, sim.elapsed(), sim.steps());
}
