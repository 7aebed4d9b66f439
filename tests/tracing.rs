//! The `tracing` feature: a span per task poll, events for parks, steals,
//! strand batches and timer fires. Run with `--features tracing` (CI uses
//! `--all-features`).
#![cfg(feature = "tracing")]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use std::time::Duration;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};
use viaduct::time::Timer;
use viaduct::{block_on, ExecutorExt, ManualExecutor, Strand, ThreadPool};

/// A span's name and its fields as `name=value`.
type SpanRecord = (String, Vec<String>);

/// Records the names of spans and the messages of events it sees.
#[derive(Default, Clone)]
struct Recorder {
    spans: Arc<Mutex<Vec<SpanRecord>>>,
    events: Arc<Mutex<Vec<String>>>,
    next_id: Arc<AtomicU64>,
}

struct FieldNames<'a>(&'a mut Vec<String>);

impl tracing::field::Visit for FieldNames<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push(format!("{}={value:?}", field.name()));
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("viaduct")
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut fields = Vec::new();
        span.record(&mut FieldNames(&mut fields));
        self.spans
            .lock()
            .unwrap()
            .push((span.metadata().name().to_owned(), fields));
        Id::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Vec::new();
        event.record(&mut FieldNames(&mut fields));
        self.events.lock().unwrap().push(fields.join(" "));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn spans_per_poll_and_park_events() {
    let recorder = Recorder::default();
    tracing::subscriber::set_global_default(recorder.clone()).unwrap();

    let pool = ThreadPool::builder()
        .threads(2)
        .name("traced")
        .build()
        .unwrap();
    let handles: Vec<_> = (0..10).map(|i| pool.spawn(async move { i })).collect();
    for h in handles {
        block_on(h).unwrap();
    }
    // A join whose first half waits for its second: only the other worker,
    // stealing the second half, can let it finish.
    let p = pool.clone();
    let stolen = block_on(pool.run(move || {
        let other = std::sync::atomic::AtomicBool::new(false);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let (waited, _) = p.join(
            || {
                while !other.load(Ordering::SeqCst) {
                    assert!(std::time::Instant::now() < deadline, "nobody stole");
                    std::hint::spin_loop();
                }
                std::thread::current().name().unwrap().to_owned()
            },
            || {
                other.store(true, Ordering::SeqCst);
                std::thread::current().name().unwrap().to_owned()
            },
        );
        waited
    }))
    .unwrap();
    // A worker may find the pool closed before it ever idles: wait for an
    // idle worker to park (it counts the park right before the event, and
    // `shutdown` joins it after).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pool.metrics().parked == 0 {
        assert!(std::time::Instant::now() < deadline, "no worker parked");
        std::thread::sleep(Duration::from_millis(1));
    }
    pool.shutdown().unwrap();

    let spans = recorder.spans.lock().unwrap();
    let polls: Vec<_> = spans.iter().filter(|(name, _)| name == "poll").collect();
    assert!(
        polls.len() >= 10,
        "one poll span per task poll, got {}",
        polls.len()
    );
    let mut ids = std::collections::HashSet::new();
    for (_, fields) in &polls {
        let id = fields
            .iter()
            .find_map(|f| f.strip_prefix("task="))
            .unwrap_or_else(|| panic!("no task id: {fields:?}"));
        ids.insert(id.to_owned());
        assert!(
            fields.iter().any(|f| f.starts_with("worker=\"traced-")),
            "{fields:?}"
        );
        assert!(
            fields.iter().any(|f| f == "executor=\"traced\""),
            "{fields:?}"
        );
    }
    // Ten tasks polled once each, and the join's task: ids never reused.
    assert_eq!(ids.len(), 11, "one id per task: {ids:?}");
    let events = recorder.events.lock().unwrap();
    assert!(
        events.iter().any(|e| e.contains("message=park")),
        "idle workers park and say so: {events:?}"
    );
    let thief = events
        .iter()
        .find(|e| e.contains("message=steal join half"))
        .unwrap_or_else(|| panic!("the stolen half is traced: {events:?}"));
    assert!(thief.contains("victim="), "{thief}");
    assert!(stolen.starts_with("traced-"));
}

impl Recorder {
    /// The values of `field` in the events whose message is `message`, in
    /// the order they were emitted.
    fn values(&self, message: &str, field: &str) -> Vec<u64> {
        let message = format!("message={message}");
        let prefix = format!("{field}=");
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| {
                // Fields are space-separated and the message has spaces:
                // match it whole, at either end.
                e.as_str() == message
                    || e.starts_with(&format!("{message} "))
                    || e.ends_with(&format!(" {message}"))
            })
            .map(|e| {
                let value = e
                    .split(' ')
                    .find_map(|f| f.strip_prefix(&prefix))
                    .unwrap_or_else(|| panic!("no {field} in {e}"));
                value.parse().unwrap()
            })
            .collect()
    }
}

// The tests below run everything on the test's own thread (a manual
// executor, a manual timer) inside `with_default`, so a subscriber set for
// that thread alone sees every event, the counts are exact, and none of it
// reaches the global subscriber of the test above.

#[test]
fn strand_batch_events_carry_the_batch_size() {
    let recorder = Recorder::default();
    let batches = tracing::subscriber::with_default(recorder.clone(), || {
        let manual = ManualExecutor::new();
        let strand = Strand::new(manual.clone());
        for _ in 0..5 {
            strand.post(|| ());
        }
        manual.run_until_idle();
        for _ in 0..2 {
            strand.post(|| ());
        }
        manual.run_until_idle();
        strand.metrics().batches
    });
    assert_eq!(recorder.values("strand batch", "batch"), [5, 2]);
    assert_eq!(batches, 2);
}

#[test]
fn timer_fire_events_count_the_timers_fired() {
    let recorder = Recorder::default();
    let ran = tracing::subscriber::with_default(recorder.clone(), || {
        let timer = Timer::manual();
        let ex = ManualExecutor::new();
        let second = Duration::from_secs(1);
        let _soon: Vec<_> = (0..3)
            .map(|_| timer.execute_after(&ex, second, || ()))
            .collect();
        let _later = timer.execute_after(&ex, 2 * second, || ());
        timer.advance(second / 2); // nothing due: no event
        timer.advance(second / 2);
        timer.advance(second);
        ex.run_until_idle()
    });
    assert_eq!(recorder.values("timers fired", "fired"), [3, 1]);
    assert_eq!(ran, 4);
}
