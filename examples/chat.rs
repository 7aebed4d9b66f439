//! A TCP chat server on tokio's I/O with viaduct inside: the integration
//! story in one program.
//!
//! - tokio owns the sockets: its reactor, the clients' tasks, and one tokio
//!   task per connection, where a socket's wake-up costs what it costs in
//!   any tokio server. The accept loop is a viaduct task on tokio's threads,
//!   through the shipped adapter, [`TokioExecutor`] (feature `tokio`).
//! - Each room's state is a [`Guarded`].
//! - Each message's digest is computed on a viaduct pool, with a
//!   continuation ([`and_then`](viaduct::JoinHandle::and_then)) into the
//!   room's strand.
//! - Each connection has an idle timeout on viaduct's timer.
//! - A periodic stats job on the pool prints progress.
//! - The connections live in a [`JoinSet`], and one [`CancellationToken`]
//!   stops them all at shutdown: each says `BYE` and ends.
//!
//! It starts, drives 50 loopback clients (and one that stays silent until
//! its idle timeout closes it) for about 3 s, prints messages/s and the
//! count of each room, and ends by itself. `--compare` also runs the same
//! server written in plain tokio twice, with a `tokio::sync::Mutex` per
//! room and the digest on `spawn_blocking`, then on a rayon pool; the three
//! take turns, three rounds each (`--rounds` to change), and it prints the
//! median of each, since a shared machine is fast and slow by turns, and
//! the median of viaduct's rate over the better plain one round by round.
//!
//! ```sh
//! cargo run --release --features tokio --example chat                       # 3 s
//! cargo run --release --features tokio --example chat -- --secs 0.5         # shorter (CI)
//! cargo run --release --features tokio --example chat -- --compare          # against plain tokio
//! cargo run --release --features tokio --example chat -- --compare --rounds 5
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use futures::{pin_mut, select, FutureExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use viaduct::cancel::CancellationToken;
use viaduct::compat::tokio::TokioExecutor;
use viaduct::prelude::*;
use viaduct::{block_on, Guarded, JoinSet, ThreadPool};

const CLIENTS: usize = 50;
const ROOMS: usize = 5;
/// Digest rounds: about 20 us of CPU per message, enough that computing
/// it on tokio's I/O threads would hold them up.
const ROUNDS: u64 = 400;

/// A message's digest: FNV-1a over the text, `ROUNDS` times.
fn digest(text: &str) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for round in 0..ROUNDS {
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= round;
    }
    h
}

/// A room: how many messages it has had, and the digest of the last.
#[derive(Default)]
struct Room {
    messages: u64,
    last: u64,
}

impl Room {
    /// Records a message; the reply's digest and room count.
    fn record(&mut self, digest: u64) -> (u64, u64) {
        self.messages += 1;
        self.last = digest;
        (digest, self.messages)
    }
}

/// A tokio task in a viaduct [`JoinSet`]: the set awaits it as it awaits
/// its own tasks, and aborting or dropping the set asks tokio to cancel
/// it. Unlike a viaduct task's, that cancel is not waited for: tokio drops
/// the task later, on one of its workers, so when the set's `shutdown`
/// returns the connection may still hold its socket. This server stops
/// its connections with a token and joins them instead.
///
/// Why not run the connection as a viaduct task on [`TokioExecutor`]: each
/// wake-up of such a task is a tokio task of its own (an allocation and
/// tokio's task bookkeeping), which for a connection woken twice per
/// message costs 5-8 % of this server's throughput (BENCHMARKS.md, issue
/// 33); serving it on a viaduct pool that entered tokio's runtime costs as
/// much, in the hop from tokio's reactor thread to the pool.
struct OnTokio<T>(tokio::task::JoinHandle<T>);

impl<T> Future for OnTokio<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match ready!(Pin::new(&mut self.0).poll(cx)) {
            Ok(value) => Poll::Ready(value),
            // The set reports it as the task's panic.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Nothing else can cancel it: its `JoinHandle` never leaves
            // this wrapper, and dropping the wrapper ends the poll too.
            Err(_) => panic!("tokio cancelled the task: its runtime shut down"),
        }
    }
}

impl<T> Drop for OnTokio<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What one connection did.
#[derive(Default)]
struct Conn {
    messages: u64,
    idled: bool,
}

/// What differs between the three servers: where the digest is computed
/// and the room updated, the idle timer, and the stop signal.
trait Stack: Clone + Send + Sync + 'static {
    /// Digests `text` off the I/O threads and records it in `room`.
    fn post(&self, room: usize, text: String) -> impl Future<Output = (u64, u64)> + Send;
    /// `f`'s output, or `None` if it took longer than `idle`.
    fn idle<F: Future + Send>(
        &self,
        idle: Duration,
        f: F,
    ) -> impl Future<Output = Option<F::Output>> + Send;
    /// Completes at shutdown.
    fn stopped(&self) -> impl Future<Output = ()> + Send;
}

/// One connection: `JOIN room-N`, then a line per message, each answered
/// `OK <digest> <room count>`; `IDLE` and `BYE` end it. Each answer is
/// counted in `posted`, for the stats job.
async fn connection<S: Stack>(
    stack: S,
    stream: TcpStream,
    idle: Duration,
    posted: Arc<AtomicU64>,
) -> Conn {
    let mut conn = Conn::default();
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let Ok(Some(join)) = lines.next_line().await else {
        return conn;
    };
    let room = join
        .strip_prefix("JOIN room-")
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0)
        % ROOMS;
    let stopped = stack.stopped().fuse();
    pin_mut!(stopped);
    loop {
        let next = stack.idle(idle, lines.next_line()).fuse();
        pin_mut!(next);
        let line = select! {
            () = stopped => {
                let _ = write.write_all(b"BYE\n").await;
                break;
            }
            line = next => line,
        };
        let text = match line {
            None => {
                conn.idled = true;
                let _ = write.write_all(b"IDLE\n").await;
                break;
            }
            Some(Ok(Some(text))) => text,
            Some(_) => break, // the client left
        };
        let (digest, count) = stack.post(room, text).await;
        let reply = format!("OK {digest:016x} {count}\n");
        if write.write_all(reply.as_bytes()).await.is_err() {
            break;
        }
        conn.messages += 1;
        posted.fetch_add(1, Ordering::Relaxed);
    }
    conn
}

// The viaduct server.

#[derive(Clone)]
struct Viaduct {
    pool: ThreadPool,
    rooms: Arc<Vec<Guarded<Room>>>,
    stop: CancellationToken,
}

impl Stack for Viaduct {
    fn post(&self, room: usize, text: String) -> impl Future<Output = (u64, u64)> + Send {
        let room = self.rooms[room].clone();
        self.pool
            .run(move || digest(&text))
            .and_then(move |d| room.with(move |r| r.record(d)))
            .map(|r| r.expect("the pool and the rooms outlive the server"))
    }

    fn idle<F: Future + Send>(
        &self,
        idle: Duration,
        f: F,
    ) -> impl Future<Output = Option<F::Output>> + Send {
        viaduct::time::timeout(idle, f).map(Result::ok)
    }

    fn stopped(&self) -> impl Future<Output = ()> + Send {
        self.stop.cancelled()
    }
}

fn run_viaduct(settings: &Settings) -> Report {
    let rt = tokio_runtime();
    let tokio_ex = TokioExecutor::new(rt.handle().clone());
    let pool = ThreadPool::builder()
        .threads(2)
        .name("digest")
        .build()
        .unwrap();
    let stack = Viaduct {
        rooms: Arc::new(
            (0..ROOMS)
                .map(|_| Guarded::new(pool.clone(), Room::default()))
                .collect(),
        ),
        pool: pool.clone(),
        stop: CancellationToken::new(),
    };
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let posted = Arc::new(AtomicU64::new(0));
    let stats = pool.execute_every(settings.stats_period(), stats_job(posted.clone()));

    // The accept loop: a viaduct task on tokio's threads. The connections
    // are tokio tasks, held in a JoinSet, all stopped by one token.
    let (s, on_tokio, tokio) = (stack.clone(), tokio_ex.clone(), rt.handle().clone());
    let idle = settings.idle();
    let server = tokio_ex.spawn(async move {
        let mut connections = JoinSet::new();
        let stopped = s.stop.cancelled().fuse();
        pin_mut!(stopped);
        loop {
            select! {
                accepted = listener.accept().fuse() => {
                    let (stream, _) = accepted.unwrap();
                    stream.set_nodelay(true).unwrap();
                    let served = connection(s.clone(), stream, idle, posted.clone());
                    connections.spawn_on(OnTokio(tokio.spawn(served)), &on_tokio);
                }
                () = stopped => break,
            }
        }
        connections.join_all().await
    });
    let stop = stack.stop.clone();
    let load = drive(&rt, addr, settings, move || stop.cancel());
    let connections = rt.block_on(server).unwrap();
    stats.cancel();
    let rooms = stack
        .rooms
        .iter()
        .map(|r| block_on(r.lock()).messages)
        .collect();
    Report::new("viaduct", load, &connections, rooms)
}

// The same server in plain tokio: a tokio Mutex per room, the digest on
// `spawn_blocking` or on a rayon pool, tokio's timeout, JoinSet and a
// watch channel for shutdown.

#[derive(Clone, Copy)]
enum Offload {
    SpawnBlocking,
    Rayon,
}

#[derive(Clone)]
struct Tokio {
    offload: Offload,
    rayon: Arc<rayon::ThreadPool>,
    rooms: Arc<Vec<tokio::sync::Mutex<Room>>>,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl Stack for Tokio {
    fn post(&self, room: usize, text: String) -> impl Future<Output = (u64, u64)> + Send {
        let this = self.clone();
        async move {
            let d = match this.offload {
                Offload::SpawnBlocking => tokio::task::spawn_blocking(move || digest(&text))
                    .await
                    .unwrap(),
                Offload::Rayon => {
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    this.rayon.spawn(move || {
                        let _ = tx.send(digest(&text));
                    });
                    rx.await.unwrap()
                }
            };
            this.rooms[room].lock().await.record(d)
        }
    }

    fn idle<F: Future + Send>(
        &self,
        idle: Duration,
        f: F,
    ) -> impl Future<Output = Option<F::Output>> + Send {
        tokio::time::timeout(idle, f).map(Result::ok)
    }

    fn stopped(&self) -> impl Future<Output = ()> + Send {
        let mut stop = self.stop.clone();
        async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
        }
    }
}

fn run_tokio(settings: &Settings, offload: Offload) -> Report {
    let rt = tokio_runtime();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stack = Tokio {
        offload,
        rayon: Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .build()
                .unwrap(),
        ),
        rooms: Arc::new((0..ROOMS).map(|_| Default::default()).collect()),
        stop: stop_rx,
    };
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let posted = Arc::new(AtomicU64::new(0));
    let (period, job) = (settings.stats_period(), stats_job(posted.clone()));
    let stats = rt.spawn(async move {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            ticks.tick().await;
            job();
        }
    });
    let (s, idle) = (stack.clone(), settings.idle());
    let server = rt.spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        let stopped = s.stopped().fuse();
        pin_mut!(stopped);
        loop {
            select! {
                accepted = listener.accept().fuse() => {
                    let (stream, _) = accepted.unwrap();
                    stream.set_nodelay(true).unwrap();
                    connections.spawn(connection(s.clone(), stream, idle, posted.clone()));
                }
                () = stopped => break,
            }
        }
        connections.join_all().await
    });
    let load = drive(&rt, addr, settings, move || {
        stop_tx.send_replace(true);
    });
    let connections = rt.block_on(server).unwrap();
    stats.abort();
    let rooms = stack
        .rooms
        .iter()
        .map(|r| rt.block_on(r.lock()).messages)
        .collect();
    let name = match offload {
        Offload::SpawnBlocking => "tokio + spawn_blocking",
        Offload::Rayon => "tokio + rayon",
    };
    Report::new(name, load, &connections, rooms)
}

// What the three servers share.

/// The periodic stats line.
fn stats_job(posted: Arc<AtomicU64>) -> impl Fn() + Send + Sync + 'static {
    move || println!("  [stats] {} messages", posted.load(Ordering::Relaxed))
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("io")
        .enable_all()
        .build()
        .unwrap()
}

/// What the clients saw.
struct Load {
    acked: u64,
    elapsed: Duration,
    idle_closed: bool,
}

/// Runs the clients against `addr` for the set time, then calls `stop`
/// (the server's shutdown) and waits for every client to hear it.
fn drive(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    settings: &Settings,
    stop: impl FnOnce(),
) -> Load {
    let start = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| rt.spawn(client(addr, i % ROOMS)))
        .collect();
    let silent = rt.spawn(silent_client(addr));
    std::thread::sleep(settings.duration());
    let elapsed = start.elapsed();
    stop();
    let acked = clients.into_iter().map(|c| rt.block_on(c).unwrap()).sum();
    Load {
        acked,
        elapsed,
        idle_closed: rt.block_on(silent).unwrap(),
    }
}

/// Sends a message, waits for its `OK`, and again, until the server says
/// `BYE`; returns how many were answered.
async fn client(addr: SocketAddr, room: usize) -> u64 {
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    write
        .write_all(format!("JOIN room-{room}\n").as_bytes())
        .await
        .unwrap();
    let mut acked = 0;
    loop {
        let message = format!("hello from a client of room {room}, message {acked}\n");
        if write.write_all(message.as_bytes()).await.is_err() {
            return acked;
        }
        match lines.next_line().await {
            Ok(Some(reply)) if reply.starts_with("OK ") => acked += 1,
            Ok(Some(reply)) => {
                assert_eq!(reply, "BYE", "a busy client is never idle");
                return acked;
            }
            _ => return acked,
        }
    }
}

/// Joins and says nothing: the idle timeout closes it. `true` if it was.
async fn silent_client(addr: SocketAddr) -> bool {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (read, mut write) = stream.into_split();
    write.write_all(b"JOIN room-0\n").await.unwrap();
    let mut lines = BufReader::new(read).lines();
    matches!(lines.next_line().await, Ok(Some(reply)) if reply == "IDLE")
}

struct Report {
    name: &'static str,
    per_sec: f64,
    acked: u64,
    rooms: Vec<u64>,
}

impl Report {
    fn new(name: &'static str, load: Load, connections: &[Conn], rooms: Vec<u64>) -> Report {
        let served: u64 = connections.iter().map(|c| c.messages).sum();
        let idled = connections.iter().filter(|c| c.idled).count();
        // Every answered message was counted in its room, once.
        assert_eq!(rooms.iter().sum::<u64>(), served, "{name}: room counts");
        assert_eq!(served, load.acked, "{name}: served and acknowledged");
        assert!(
            load.idle_closed && idled == 1,
            "{name}: the silent client is closed once idle"
        );
        assert_eq!(
            connections.len(),
            CLIENTS + 1,
            "{name}: every connection ended"
        );
        Report {
            name,
            per_sec: load.acked as f64 / load.elapsed.as_secs_f64(),
            acked: load.acked,
            rooms,
        }
    }

    fn print(&self) {
        println!(
            "{:<24} {:>9.0} messages/s ({} messages), per room: {:?}",
            self.name, self.per_sec, self.acked, self.rooms
        );
    }
}

/// The value after `name` in `args`, if `name` is there; `what` says what
/// the value must be.
fn arg<T: std::str::FromStr>(args: &[String], name: &str, what: &str) -> Option<T> {
    let i = args.iter().position(|a| a == name)?;
    let value = args.get(i + 1).and_then(|s| s.parse().ok());
    Some(value.unwrap_or_else(|| panic!("{name} takes {what}")))
}

struct Settings {
    secs: f64,
    compare: bool,
    /// With `--compare`: how many times each server runs, taking turns.
    rounds: usize,
}

impl Settings {
    fn from_args() -> Settings {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let secs: f64 = arg(&args, "--secs", "a number of seconds").unwrap_or(3.0);
        assert!(secs > 0.0, "--secs must be positive");
        let rounds: usize = arg(&args, "--rounds", "a whole number").unwrap_or(3);
        assert!(rounds > 0, "--rounds must be at least 1");
        let compare = args.iter().any(|a| a == "--compare");
        assert!(
            compare || !args.iter().any(|a| a == "--rounds"),
            "--rounds counts the rounds of --compare: add --compare"
        );
        Settings {
            secs,
            compare,
            rounds,
        }
    }

    fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.secs)
    }

    /// Short enough that the silent client is closed well before the end.
    fn idle(&self) -> Duration {
        self.duration() / 3
    }

    fn stats_period(&self) -> Duration {
        self.duration() / 3
    }
}

fn main() {
    let settings = Settings::from_args();
    println!(
        "chat: {CLIENTS} clients in {ROOMS} rooms for {:.1} s, plus one silent client",
        settings.secs
    );
    if !settings.compare {
        run_viaduct(&settings).print();
        return;
    }
    // The servers take turns, round after round, so that each sees the
    // machine's fast and slow spells alike, and each round starts with
    // the next server, so that each takes every place in the order in
    // turn; each is judged by its median.
    let servers: [&dyn Fn() -> Report; 3] = [
        &|| run_viaduct(&settings),
        &|| run_tokio(&settings, Offload::SpawnBlocking),
        &|| run_tokio(&settings, Offload::Rayon),
    ];
    let mut runs: Vec<Vec<Report>> = servers.iter().map(|_| Vec::new()).collect();
    for round in 0..settings.rounds {
        println!("round {} of {}", round + 1, settings.rounds);
        for turn in 0..servers.len() {
            let i = (round + turn) % servers.len();
            let report = servers[i]();
            report.print();
            runs[i].push(report);
        }
    }
    println!("median of {} rounds:", settings.rounds);
    let medians: Vec<f64> = runs
        .iter()
        .map(|reports| {
            let mut rates: Vec<f64> = reports.iter().map(|r| r.per_sec).collect();
            let m = median(&mut rates);
            println!("{:<24} {m:>9.0} messages/s", reports[0].name);
            m
        })
        .collect();
    let best = medians[1..].iter().copied().fold(0.0, f64::max);
    println!(
        "viaduct / best plain tokio: {:.2} (medians of messages/s; target >= 1.0)",
        medians[0] / best
    );
    // The same, round by round: each round's viaduct rate over the better
    // plain tokio rate of the same round.
    let mut paired: Vec<f64> = (0..settings.rounds)
        .map(|r| runs[0][r].per_sec / runs[1][r].per_sec.max(runs[2][r].per_sec))
        .collect();
    let mid = median(&mut paired); // sorts them
    println!(
        "round by round: median {mid:.2} (from {:.2} to {:.2})",
        paired[0],
        paired[paired.len() - 1]
    );
}

fn median(rates: &mut [f64]) -> f64 {
    rates.sort_by(f64::total_cmp);
    let mid = rates.len() / 2;
    if rates.len() % 2 == 1 {
        rates[mid]
    } else {
        (rates[mid - 1] + rates[mid]) / 2.0
    }
}
