//! [`KeyedStrands<K>`]: a strand per key, made on demand and freed when
//! the key goes idle: work with the same key (a user, a connection, an
//! account) runs in order, work with other keys in parallel.
//!
//! Each key with work has an entry: its strand and how many of its tasks
//! are alive. Submitting counts the task in; the task counts itself out
//! when its future is dropped (after it finished, or was cancelled or
//! refused), and the last one out removes the entry. A key's next task
//! after that gets a fresh strand, which cannot overlap the old one: the
//! old one had nothing left to run.

use std::collections::hash_map::{HashMap, RandomState};
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hash};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use super::{Data, Shared};
use crate::dump::lock::LockKind;
use crate::executor::{Exec, Executor};
use crate::loom::lock_std as lock;
use crate::task::report;
use crate::task::{current_task_sink, reporting_panics, JoinHandle};

/// Shards of the key map: keys spread over several locks, so submitters
/// of different keys rarely meet.
const SHARDS: usize = 32;

/// A strand per key: tasks with the same key run one at a time, in
/// submission order; tasks with different keys run in parallel on the
/// executor. A key's strand exists only while the key has tasks, so any
/// number of distinct keys can pass through.
///
/// Cloning gives another handle to the same keys.
///
/// # Examples
///
/// Two keys: each key's tasks run in order, the two keys side by side.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use viaduct::{block_on, KeyedStrands, ThreadPool};
///
/// let pool = ThreadPool::builder().threads(4).build().unwrap();
/// let tags = KeyedStrands::new(pool);
/// let log = Arc::new(Mutex::new(Vec::new()));
/// let handles: Vec<_> = (0..4)
///     .flat_map(|i| ["A", "B"].map(|tag| {
///         let log = log.clone();
///         tags.spawn(tag, async move { log.lock().unwrap().push(format!("{tag}{i}")) })
///     }))
///     .collect();
/// for h in handles {
///     block_on(h).unwrap();
/// }
/// let log = log.lock().unwrap();
/// let a: Vec<_> = log.iter().filter(|s| s.starts_with('A')).collect();
/// assert_eq!(a, ["A0", "A1", "A2", "A3"]);
/// assert!(tags.is_empty()); // idle keys leave nothing behind
/// ```
pub struct KeyedStrands<K> {
    keys: Arc<Keys<K>>,
    /// Keeps the executor open while a handle lives, as for a strand.
    _owner: Exec,
}

struct Keys<K> {
    inner: Exec,
    hasher: RandomState,
    shards: Box<[Mutex<HashMap<K, Entry, RandomState>>]>,
}

/// What a key's strand guards: nothing; the type names it in dumps.
struct Keyed;

impl Data for Keyed {
    fn kind() -> LockKind {
        LockKind::Keyed
    }
}

struct Entry {
    strand: Arc<Shared<Keyed>>,
    /// Tasks of the key whose futures are alive.
    live: usize,
}

impl<K> KeyedStrands<K>
where
    K: Hash + Eq + Clone + Send + 'static,
{
    /// Strands over `executor`, one per key on demand.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{Inline, KeyedStrands};
    ///
    /// let keyed: KeyedStrands<u64> = KeyedStrands::new(Inline);
    /// assert!(keyed.is_empty());
    /// ```
    pub fn new<E: Executor + Clone>(executor: E) -> Self {
        let hasher = RandomState::new();
        KeyedStrands {
            keys: Arc::new(Keys {
                inner: crate::executor::home_of(&executor),
                shards: (0..SHARDS)
                    .map(|_| Mutex::new(HashMap::with_hasher(hasher.clone())))
                    .collect(),
                hasher,
            }),
            _owner: Exec::new(executor),
        }
    }

    /// Spawns `future` on the strand of `key`: it runs after the earlier
    /// tasks of `key` (each poll of it as one section), in parallel with
    /// other keys. The handle is as [`ExecutorExt::spawn`]'s.
    ///
    /// [`ExecutorExt::spawn`]: crate::ExecutorExt::spawn
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{block_on, KeyedStrands, ThreadPool};
    ///
    /// let keyed = KeyedStrands::new(ThreadPool::builder().threads(2).build().unwrap());
    /// assert_eq!(block_on(keyed.spawn("user-7", async { 7 })).unwrap(), 7);
    /// ```
    #[track_caller]
    pub fn spawn<F>(&self, key: K, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (shard, strand) = self.keys.enter(&key);
        let leave = Leave {
            keys: self.keys.clone(),
            shard,
            strand: Arc::as_ptr(&strand) as usize,
            key,
        };
        strand.spawn(async move {
            let _leave = leave;
            future.await
        })
    }

    /// Runs `f` on the strand of `key`, fire-and-forget.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use viaduct::{Inline, KeyedStrands};
    ///
    /// let keyed = KeyedStrands::new(Inline);
    /// let n = Arc::new(AtomicUsize::new(0));
    /// for key in 0..1000 {
    ///     let n = n.clone();
    ///     keyed.execute(key, move || { n.fetch_add(1, Ordering::Relaxed); });
    /// }
    /// assert_eq!(n.load(Ordering::Relaxed), 1000);
    /// assert!(keyed.is_empty());
    /// ```
    #[track_caller]
    pub fn execute<F>(&self, key: K, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        drop(self.spawn(key, async move { f() }));
    }

    /// How many keys have live tasks (and so a strand).
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{KeyedStrands, ManualExecutor};
    ///
    /// let manual = ManualExecutor::new();
    /// let keyed = KeyedStrands::new(manual.clone());
    /// keyed.execute("a", || ());
    /// keyed.execute("b", || ());
    /// assert_eq!(keyed.len(), 2);
    /// manual.run_until_idle();
    /// assert_eq!(keyed.len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.keys.shards.iter().map(|s| lock(s).len()).sum()
    }

    /// `true` if no key has live tasks.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{KeyedStrands, ManualExecutor};
    ///
    /// let manual = ManualExecutor::new();
    /// let keyed = KeyedStrands::new(manual.clone());
    /// assert!(keyed.is_empty());
    /// keyed.execute(7, || ());
    /// assert!(!keyed.is_empty());
    /// manual.run_until_idle();
    /// assert!(keyed.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of the keys and tasks alive, shard by shard.
    ///
    /// # Examples
    ///
    /// ```
    /// use viaduct::{KeyedStrands, ManualExecutor};
    ///
    /// let manual = ManualExecutor::new();
    /// let keyed = KeyedStrands::new(manual.clone());
    /// keyed.execute("user-1", || ());
    /// keyed.execute("user-1", || ());
    /// let m = keyed.metrics();
    /// assert_eq!((m.keys, m.tasks), (1, 2));
    /// manual.run_until_idle();
    /// assert_eq!(keyed.metrics().tasks, 0);
    /// ```
    pub fn metrics(&self) -> crate::metrics::KeyedMetrics {
        let mut m = crate::metrics::KeyedMetrics::default();
        for shard in self.keys.shards.iter() {
            let shard = lock(shard);
            m.keys += shard.len();
            m.tasks += shard.values().map(|e| e.live).sum::<usize>();
        }
        m
    }
}

impl<K: Hash + Eq> Keys<K> {
    fn shard_of(&self, key: &K) -> usize {
        self.hasher.hash_one(key) as usize % self.shards.len()
    }
}

impl<K: Hash + Eq + Clone> Keys<K> {
    /// Counts a task of `key` in; returns the key's shard and strand. A
    /// panic of `K`'s `Hash` or `Eq` here reaches the caller of `spawn`,
    /// and leaves the map as it was.
    #[track_caller]
    fn enter(&self, key: &K) -> (usize, Arc<Shared<Keyed>>) {
        let location = std::panic::Location::caller();
        let i = self.shard_of(key);
        let mut shard = lock(&self.shards[i]);
        let entry = shard.entry(key.clone()).or_insert_with(|| Entry {
            strand: Shared::new(self.inner.clone(), Keyed, location, false),
            live: 0,
        });
        entry.live += 1;
        (i, entry.strand.clone())
    }
}

/// Counts a task out when its future is dropped.
struct Leave<K: Hash + Eq> {
    keys: Arc<Keys<K>>,
    /// Where the key's entry is, and which one it is, found at `enter`:
    /// cleanup must work even if `K`'s `Hash` or `Eq` panics now.
    shard: usize,
    /// The entry's strand, by address (never dereferenced): unique while
    /// the task lives, since the task's home holds that strand.
    strand: usize,
    key: K,
}

/// What counting a task out of its key's entry did.
enum Left<K> {
    /// Other tasks of the key are alive.
    Counted,
    /// It was the key's last task: the entry, taken out of the map.
    Last(Option<(K, Entry)>),
    /// The entry was not found this way.
    NotFound,
}

impl<K: Hash + Eq> Leave<K> {
    fn is_ours(&self, entry: &Entry) -> bool {
        Arc::as_ptr(&entry.strand) as usize == self.strand
    }

    /// Counts the task out of its entry, found by key: calls `K`'s `Hash`
    /// and `Eq`.
    fn leave_by_key(&self, shard: &mut HashMap<K, Entry, RandomState>) -> Left<K> {
        match shard.get_mut(&self.key) {
            Some(entry) if self.is_ours(entry) => {
                if entry.live > 1 {
                    entry.live -= 1;
                    Left::Counted
                } else {
                    // Counted out by the removal itself: if hashing the
                    // key panics now, the entry is as it was, and the
                    // fallback counts the task out once.
                    Left::Last(shard.remove_entry(&self.key))
                }
            }
            _ => Left::NotFound,
        }
    }

    /// The same, found by strand: calls no user code but the key's
    /// `Drop`, and looks at every entry of the shard. The entry is not
    /// the strand's last reference (the task counting out holds one).
    fn leave_by_strand(&self, shard: &mut HashMap<K, Entry, RandomState>) {
        if let Some(entry) = shard.values_mut().find(|e| self.is_ours(e)) {
            entry.live -= 1;
            if entry.live == 0 {
                shard.retain(|_, e| !self.is_ours(e));
            }
        }
    }
}

impl<K: Hash + Eq> Drop for Leave<K> {
    fn drop(&mut self) {
        let gone = {
            let mut shard = lock(&self.keys.shards[self.shard]);
            match catch_unwind(AssertUnwindSafe(|| self.leave_by_key(&mut shard))) {
                Ok(Left::Counted) => None,
                Ok(Left::Last(gone)) => gone,
                // `K`'s `Hash` or `Eq` panicked, or disagrees with itself:
                // find the entry by its strand instead.
                failed => {
                    if let Err(payload) = failed {
                        report(current_task_sink().as_ref(), payload);
                    }
                    reporting_panics(|| self.leave_by_strand(&mut shard));
                    None
                }
            }
        };
        // The key and strand are dropped outside the lock; a panic of the
        // key's `Drop` is reported, not raised in the task that ran.
        reporting_panics(move || drop(gone));
    }
}

impl<K> Clone for KeyedStrands<K> {
    fn clone(&self) -> Self {
        KeyedStrands {
            keys: self.keys.clone(),
            _owner: self._owner.clone(),
        }
    }
}

impl<K> fmt::Debug for KeyedStrands<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedStrands")
            .field("executor", &self.keys.inner)
            .finish_non_exhaustive()
    }
}
