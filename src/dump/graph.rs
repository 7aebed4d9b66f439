//! The wait-for graph of a dump, and its cycles.

use std::collections::HashMap;

use super::{Deadlock, DeadlockStep, TaskDump, TaskEntry, WaitsOn};
use crate::task_id::TaskId;

impl TaskDump {
    /// The cycles of the wait-for graph: tasks that wait, through locks,
    /// handles and scopes, on each other, so none of them will ever go on.
    /// Each cycle is reported once, and only if every wait in it held at
    /// one moment (see the [module docs](crate::dump)): a dump of a busy
    /// pool reports no cycle that cannot exist.
    pub fn deadlocks(&self) -> Vec<Deadlock> {
        // Edges, of steady waits only (see `collect`): a task waits on a
        // task (a handle, the holder of a lock or of the lock a section is
        // queued on, each task of a scope).
        let index = |id: &TaskId| self.tasks.binary_search_by_key(id, TaskEntry::id).ok();
        let edges: Vec<Vec<(usize, &WaitsOn)>> = self
            .tasks
            .iter()
            .map(|t| {
                let mut edges = Vec::new();
                for (w, _) in t.waits.iter().zip(&t.steady).filter(|(_, &s)| s) {
                    let next = match w {
                        WaitsOn::Lock(lock) | WaitsOn::Section { lock, .. } => lock.holder(),
                        WaitsOn::Task(id) => Some(*id),
                        WaitsOn::Scope { tasks } => {
                            edges.extend(tasks.iter().filter_map(index).map(|i| (i, w)));
                            None
                        }
                        WaitsOn::Timer { .. } => None,
                    };
                    edges.extend(next.as_ref().and_then(index).map(|i| (i, w)));
                }
                edges
            })
            .collect();
        strongly_connected(&edges)
            .into_iter()
            .filter_map(|scc| {
                let cycle = cycle_within(&edges, &scc)?;
                Some(Deadlock {
                    steps: cycle
                        .into_iter()
                        .map(|(i, w)| DeadlockStep {
                            task: self.tasks[i].id,
                            location: self.tasks[i].location,
                            waits_on: w.clone(),
                        })
                        .collect(),
                })
            })
            .collect()
    }
}

/// Tarjan's strongly connected components, iteratively (a dump may hold
/// many thousands of tasks).
fn strongly_connected(edges: &[Vec<(usize, &WaitsOn)>]) -> Vec<Vec<usize>> {
    let n = edges.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut sccs = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, position in its edge list)
        let mut work = vec![(root, 0)];
        while let Some(&mut (v, ref mut pos)) = work.last_mut() {
            if *pos == 0 {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&(w, _)) = edges[v].get(*pos) {
                *pos += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut scc = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    scc.push(w);
                    if w == v {
                        break;
                    }
                }
                sccs.push(scc);
            }
        }
    }
    sccs
}

/// One cycle inside a strongly connected component, starting at its
/// smallest task; `None` for a single task that does not wait on itself.
fn cycle_within<'a>(
    edges: &[Vec<(usize, &'a WaitsOn)>],
    scc: &[usize],
) -> Option<Vec<(usize, &'a WaitsOn)>> {
    let start = *scc.iter().min()?;
    let members: std::collections::HashSet<usize> = scc.iter().copied().collect();
    let inside = |i: usize| members.contains(&i);
    // Breadth-first from `start` inside the component back to `start`: the
    // shortest cycle through it.
    let mut came_from: HashMap<usize, (usize, &'a WaitsOn)> = HashMap::new();
    let mut frontier = vec![start];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for &v in &frontier {
            for &(w, how) in &edges[v] {
                if !inside(w) {
                    continue;
                }
                if w == start {
                    let mut cycle = vec![(v, how)];
                    let mut at = v;
                    while at != start {
                        let (prev, how) = came_from[&at];
                        cycle.push((prev, how));
                        at = prev;
                    }
                    cycle.reverse();
                    return Some(cycle);
                }
                if let std::collections::hash_map::Entry::Vacant(e) = came_from.entry(w) {
                    e.insert((v, how));
                    next.push(w);
                }
            }
        }
        frontier = next;
    }
    None
}
