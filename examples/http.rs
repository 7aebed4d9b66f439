//! A real HTTP/1 server with hyper, tokio's I/O and viaduct's pool: the
//! integration story for a web service.
//!
//! - tokio does the I/O, in a reactor the viaduct pool drives itself
//!   ([`tokio_reactor`](viaduct::pool::Builder::tokio_reactor)): an idle
//!   worker waits on the sockets, and a socket's task runs on the worker
//!   that saw it ready.
//! - Connections are served on that pool through [`HyperExecutor`];
//!   header reads time out on viaduct's timer wheel ([`HyperTimer`]).
//! - Handlers offload their CPU work to the pool (`pool.run`) and count
//!   requests per route in a [`Guarded`].
//! - `GET /metrics` answers with the pool's metrics, the counters and a
//!   task dump, as text.
//!
//! Routes: `/hello` (no CPU work), `/work/{key}` (about 50 us of CPU: a
//! digest of `key`, which the client checks), `/metrics`.
//!
//! By default it serves a short load from a hyper client over loopback
//! (both routes), checks every answer, shows `/metrics` and that a client
//! too slow with its headers is cut off, and ends. `--compare` also runs
//! the same hyper server on plain tokio, once with the CPU work on
//! `spawn_blocking` and once on a rayon pool, round by round in turn, and
//! prints requests/s and p99 latency for each, and their ratios.
//!
//! ```sh
//! cargo run --release --features tokio,hyper --example http                       # a short run, checked
//! cargo run --release --features tokio,hyper --example http -- --secs 0.3         # shorter (CI)
//! cargo run --release --features tokio,hyper --example http -- --compare          # against plain tokio
//! cargo run --release --features tokio,hyper --example http -- --compare --rounds 7 --secs 2
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use viaduct::compat::hyper::{HyperExecutor, HyperTimer};
use viaduct::prelude::*;
use viaduct::time::Timer;
use viaduct::{block_on, Guarded, ThreadPool};

/// Keep-alive connections the load keeps busy, each one request at a time.
const CONNECTIONS: usize = 32;
/// Distinct keys of `/work/{key}`; the client knows every answer.
const KEYS: u64 = 256;
/// Requests one connection sends at most in a run (the run also ends by
/// time).
const MAX_PER_CONNECTION: usize = 1_000_000;
/// How long a client may take to send its headers.
const HEADER_TIMEOUT: Duration = Duration::from_millis(500);
/// CPU work per `/work` request.
const WORK: Duration = Duration::from_micros(50);

/// The CPU work of `/work/{key}`: FNV-1a over the key, `rounds` times.
#[derive(Clone, Copy)]
struct Work {
    rounds: u64,
}

impl Work {
    /// Rounds that take about `target` on this machine.
    fn calibrate(target: Duration) -> Work {
        let probe = Work { rounds: 10_000 };
        // Warmed up first (caches, the CPU's clock); the best of a few
        // timings, since the machine may be busy with something else.
        let per_round = (0..5)
            .map(|_| {
                let start = Instant::now();
                probe.chain(20);
                start.elapsed().as_secs_f64() / (20.0 * probe.rounds as f64)
            })
            .fold(f64::INFINITY, f64::min);
        Work {
            rounds: ((target.as_secs_f64() / per_round) as u64).max(1),
        }
    }

    /// What one digest takes now, on average.
    fn measure(&self) -> Duration {
        let start = Instant::now();
        self.chain(50);
        start.elapsed() / 50
    }

    /// `n` digests one after the other, each key made from the digest
    /// before, as requests come: independent ones would be interleaved
    /// by the compiler and the CPU, several times faster than any one.
    fn chain(&self, n: usize) {
        let mut key = 0;
        for _ in 0..n {
            key = self.digest(std::hint::black_box(key)) % KEYS;
        }
        std::hint::black_box(key);
    }

    fn digest(&self, key: u64) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for round in 0..self.rounds {
            for b in key.to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            h ^= round;
        }
        h
    }
}

/// Requests served, per route.
#[derive(Default, Debug)]
struct Counters {
    hello: u64,
    work: u64,
    metrics: u64,
    not_found: u64,
}

/// What a path asks for.
enum Route {
    Hello,
    Work(u64),
    Metrics,
    NotFound,
}

impl Route {
    fn of(path: &str) -> Route {
        match path {
            "/hello" => Route::Hello,
            "/metrics" => Route::Metrics,
            _ => match path.strip_prefix("/work/").map(str::parse) {
                Some(Ok(key)) => Route::Work(key),
                _ => Route::NotFound,
            },
        }
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}

// ---- the viaduct server ----

#[derive(Clone)]
struct Viaduct {
    pool: ThreadPool,
    counters: Guarded<Counters>,
    work: Work,
}

impl Viaduct {
    async fn handle(self, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        Ok(match Route::of(req.uri().path()) {
            Route::Hello => {
                // On the spot: the connection is a task of the pool.
                let _ = self.counters.with(|c| c.hello += 1).await;
                text(StatusCode::OK, "hello".into())
            }
            Route::Work(key) => {
                let work = self.work;
                let digest = self.pool.run(move || work.digest(key)).await.unwrap();
                let _ = self.counters.with(|c| c.work += 1).await;
                text(StatusCode::OK, digest.to_string())
            }
            Route::Metrics => {
                let counters = self.counters.with(|c| {
                    c.metrics += 1;
                    format!("{c:?}")
                });
                let counters = counters.await.unwrap();
                let body = format!(
                    "pool: {:?}\nrequests: {counters}\n\n{}",
                    self.pool.metrics(),
                    self.pool.dump()
                );
                text(StatusCode::OK, body)
            }
            Route::NotFound => {
                let _ = self.counters.with(|c| c.not_found += 1).await;
                text(StatusCode::NOT_FOUND, "no such route".into())
            }
        })
    }
}

/// A connection's future, as an executor is handed it.
type Connection = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// The accept loop every server runs: each connection served with HTTP/1
/// by `handle`, its header reads timed by `timer`, spawned on `executor`.
/// Only the timer and the executor differ between the three servers.
async fn serve<H, R, T, E>(listener: TcpListener, handle: H, timer: T, executor: E)
where
    H: Fn(Request<Incoming>) -> R + Clone + Send + Sync + 'static,
    R: std::future::Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send + 'static,
    T: hyper::rt::Timer + Clone + Send + Sync + 'static,
    E: hyper::rt::Executor<Connection>,
{
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        stream.set_nodelay(true).unwrap();
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(timer.clone())
            .header_read_timeout(HEADER_TIMEOUT)
            .serve_connection(
                TokioIo::new(stream),
                hyper::service::service_fn(handle.clone()),
            );
        executor.execute(Box::pin(async move {
            let _ = conn.await;
        }));
    }
}

/// A running server: where it listens, and how to stop it.
struct Running {
    addr: SocketAddr,
    stop: Box<dyn FnOnce() -> String>,
}

fn start_viaduct(work: Work) -> Running {
    // The pool is its own tokio reactor: its workers drive the sockets,
    // and a socket's task runs on the worker that saw it ready.
    let pool = ThreadPool::builder()
        .threads(2)
        .name("http")
        .tokio_reactor()
        .build()
        .unwrap();
    let server = Viaduct {
        pool: pool.clone(),
        counters: Guarded::new(pool.clone(), Counters::default()),
        work,
    };
    let tokio = pool.tokio_handle().unwrap();
    let listener = tokio.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let s = server.clone();
    let accept = pool.spawn(serve(
        listener,
        move |req| s.clone().handle(req),
        HyperTimer::new(Timer::global()),
        HyperExecutor::new(pool.clone()),
    ));
    Running {
        addr,
        stop: Box::new(move || {
            accept.abort();
            let _ = block_on(accept);
            let counters = format!("{:?}", *block_on(server.counters.lock()));
            drop(server);
            pool.shutdown_now()
                .expect("the pool stops: this is not one of its threads");
            counters
        }),
    }
}

// ---- the same server on plain tokio ----

#[derive(Clone, Copy, PartialEq)]
enum Offload {
    SpawnBlocking,
    Rayon,
}

#[derive(Clone)]
struct Plain {
    offload: Offload,
    rayon: Arc<rayon::ThreadPool>,
    counters: Arc<Mutex<Counters>>,
    work: Work,
}

impl Plain {
    async fn handle(self, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        let count = |f: fn(&mut Counters)| f(&mut self.counters.lock().unwrap());
        Ok(match Route::of(req.uri().path()) {
            Route::Hello => {
                count(|c| c.hello += 1);
                text(StatusCode::OK, "hello".into())
            }
            Route::Work(key) => {
                let work = self.work;
                let digest = match self.offload {
                    Offload::SpawnBlocking => tokio::task::spawn_blocking(move || work.digest(key))
                        .await
                        .unwrap(),
                    Offload::Rayon => {
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        self.rayon.spawn(move || {
                            let _ = tx.send(work.digest(key));
                        });
                        rx.await.unwrap()
                    }
                };
                count(|c| c.work += 1);
                text(StatusCode::OK, digest.to_string())
            }
            Route::Metrics => {
                count(|c| c.metrics += 1);
                let body = format!("requests: {:?}", self.counters.lock().unwrap());
                text(StatusCode::OK, body)
            }
            Route::NotFound => {
                count(|c| c.not_found += 1);
                text(StatusCode::NOT_FOUND, "no such route".into())
            }
        })
    }
}

fn start_plain(work: Work, offload: Offload) -> Running {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // As many threads for the CPU work as the other servers have
        // (tokio's default is 512: 32 digests at once on 2 cores).
        .max_blocking_threads(2)
        .thread_name("tokio")
        .enable_all()
        .build()
        .unwrap();
    let server = Plain {
        offload,
        rayon: Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .build()
                .unwrap(),
        ),
        counters: Arc::default(),
        work,
    };
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let s = server.clone();
    let accept = rt.spawn(serve(
        listener,
        move |req| s.clone().handle(req),
        TokioTimer::new(),
        hyper_util::rt::TokioExecutor::new(),
    ));
    Running {
        addr,
        stop: Box::new(move || {
            accept.abort();
            let counters = format!("{:?}", server.counters.lock().unwrap());
            rt.shutdown_background();
            counters
        }),
    }
}

// ---- the load: a hyper client over loopback ----

/// Which route the load asks for.
#[derive(Clone, Copy, PartialEq)]
enum Load {
    Hello,
    Work,
}

impl Load {
    fn name(self) -> &'static str {
        match self {
            Load::Hello => "hello",
            Load::Work => "work",
        }
    }
}

/// What the clients saw in one run.
struct Seen {
    requests: usize,
    elapsed: Duration,
    /// Sorted, in microseconds.
    latencies: Vec<u32>,
}

impl Seen {
    fn per_sec(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    fn p99_us(&self) -> u32 {
        let i = (self.latencies.len() * 99 / 100).min(self.latencies.len().saturating_sub(1));
        self.latencies.get(i).copied().unwrap_or(0)
    }
}

/// `CONNECTIONS` clients, each one request at a time, for `secs` (or
/// `MAX_PER_CONNECTION` requests); every answer is checked against
/// `answers` (the digest of each key).
fn drive(
    client: &tokio::runtime::Runtime,
    addr: SocketAddr,
    load: Load,
    secs: f64,
    answers: &Arc<Vec<String>>,
) -> Seen {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let started = Instant::now();
    let clients: Vec<_> = (0..CONNECTIONS)
        .map(|c| {
            let answers = answers.clone();
            client.spawn(async move {
                let stream = TcpStream::connect(addr).await.unwrap();
                stream.set_nodelay(true).unwrap();
                let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .unwrap();
                tokio::spawn(conn);
                let mut latencies = Vec::new();
                for i in 0..MAX_PER_CONNECTION {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let key = (c * 7919 + i) as u64 % KEYS;
                    let (path, expected) = match load {
                        Load::Hello => ("/hello".to_owned(), "hello"),
                        Load::Work => (format!("/work/{key}"), answers[key as usize].as_str()),
                    };
                    let sent = Instant::now();
                    let req = Request::get(path).body(Empty::<Bytes>::new()).unwrap();
                    let res = send.send_request(req).await.unwrap();
                    assert_eq!(res.status(), StatusCode::OK);
                    let body = res.into_body().collect().await.unwrap().to_bytes();
                    assert_eq!(body, expected.as_bytes(), "a wrong answer for key {key}");
                    latencies.push(sent.elapsed().as_micros() as u32);
                }
                latencies
            })
        })
        .collect();
    let mut latencies: Vec<u32> = client.block_on(async {
        let mut all = Vec::new();
        for c in clients {
            all.extend(c.await.unwrap());
        }
        all
    });
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    Seen {
        requests: latencies.len(),
        elapsed,
        latencies,
    }
}

/// One GET, its status and body.
fn get(client: &tokio::runtime::Runtime, addr: SocketAddr, path: &str) -> (StatusCode, String) {
    client.block_on(async {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        let req = Request::get(path).body(Empty::<Bytes>::new()).unwrap();
        let res = send.send_request(req).await.unwrap();
        let status = res.status();
        let body = res.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    })
}

/// A client that sends half its headers and then waits: the server must
/// cut it off after its header timeout. Returns how long that took.
fn slow_client(client: &tokio::runtime::Runtime, addr: SocketAddr) -> Duration {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    client.block_on(async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        let started = Instant::now();
        let mut rest = Vec::new();
        tokio::time::timeout(HEADER_TIMEOUT * 20, stream.read_to_end(&mut rest))
            .await
            .expect("a client that never finished its headers was never cut off")
            .unwrap();
        let reply = String::from_utf8_lossy(&rest);
        assert!(
            rest.is_empty() || reply.starts_with("HTTP/1.1 408"),
            "{reply}"
        );
        started.elapsed()
    })
}

// ---- running it ----

struct Settings {
    secs: f64,
    rounds: usize,
    compare: bool,
    /// The loads to run: both, or the one `--load` names.
    loads: Vec<Load>,
}

fn settings() -> Settings {
    let mut s = Settings {
        secs: 1.0,
        rounds: 3,
        compare: false,
        loads: vec![Load::Hello, Load::Work],
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--secs" => s.secs = value().parse().expect("--secs takes seconds, such as 0.5"),
            "--rounds" => s.rounds = value().parse().expect("--rounds takes a count"),
            "--compare" => s.compare = true,
            "--load" => {
                s.loads = match value().as_str() {
                    "hello" => vec![Load::Hello],
                    "work" => vec![Load::Work],
                    other => panic!("--load takes hello or work, not {other:?}"),
                }
            }
            other => panic!(
                "unknown argument {other:?}: use --secs S, --rounds N, --compare, --load hello|work"
            ),
        }
    }
    assert!(
        s.secs > 0.0 && s.rounds > 0,
        "--secs and --rounds must be above zero"
    );
    s
}

/// The servers `--compare` runs, in the order of the first round.
const SERVERS: [&str; 3] = ["viaduct", "tokio + spawn_blocking", "tokio + rayon"];

fn start(server: &str, work: Work) -> Running {
    match server {
        "viaduct" => start_viaduct(work),
        "tokio + spawn_blocking" => start_plain(work, Offload::SpawnBlocking),
        _ => start_plain(work, Offload::Rayon),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let settings = settings();
    let work = Work::calibrate(WORK);
    let answers: Arc<Vec<String>> =
        Arc::new((0..KEYS).map(|k| work.digest(k).to_string()).collect());
    let client = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("client")
        .enable_all()
        .build()
        .unwrap();
    println!(
        "/work: {} digest rounds, {} us of CPU measured (aiming at {} us); {CONNECTIONS} \
         keep-alive connections, {} s per load",
        work.rounds,
        work.measure().as_micros(),
        WORK.as_micros(),
        settings.secs
    );

    if !settings.compare {
        let server = start_viaduct(work);
        for &load in &settings.loads {
            let seen = drive(&client, server.addr, load, settings.secs, &answers);
            assert!(seen.requests > 0, "no request got through");
            println!(
                "viaduct  {:<5}  {:>8.0} requests/s  p99 {:>6} us  ({} requests, every answer checked)",
                load.name(),
                seen.per_sec(),
                seen.p99_us(),
                seen.requests
            );
        }
        assert_eq!(get(&client, server.addr, "/nope").0, StatusCode::NOT_FOUND);
        let (status, metrics) = get(&client, server.addr, "/metrics");
        assert_eq!(status, StatusCode::OK);
        assert!(
            metrics.contains("pool: Metrics") && metrics.contains("hello:"),
            "{metrics}"
        );
        println!("\nGET /metrics:\n{metrics}");
        let cut = slow_client(&client, server.addr);
        println!("a client too slow with its headers was cut off after {cut:.2?}");
        println!("counters at the end: {}", (server.stop)());
        return;
    }

    // Round by round, each server in turn (the first one changes every
    // round), both loads each: a shared machine is fast and slow by turns.
    let mut rates = vec![[Vec::new(), Vec::new()]; SERVERS.len()];
    let mut p99s = vec![[Vec::new(), Vec::new()]; SERVERS.len()];
    let mut ratios = [Vec::new(), Vec::new()];
    for round in 0..settings.rounds {
        let mut this_round = [[0.0; 2]; 3];
        for k in 0..SERVERS.len() {
            let s = (round + k) % SERVERS.len();
            let server = start(SERVERS[s], work);
            for (l, load) in [Load::Hello, Load::Work].into_iter().enumerate() {
                let seen = drive(&client, server.addr, load, settings.secs, &answers);
                println!(
                    "round {}  {:<24} {:<5} {:>8.0} requests/s  p99 {:>6} us",
                    round + 1,
                    SERVERS[s],
                    load.name(),
                    seen.per_sec(),
                    seen.p99_us()
                );
                this_round[s][l] = seen.per_sec();
                rates[s][l].push(seen.per_sec());
                p99s[s][l].push(f64::from(seen.p99_us()));
            }
            (server.stop)();
        }
        for (l, ratio) in ratios.iter_mut().enumerate() {
            ratio.push(this_round[0][l] / this_round[1][l].max(this_round[2][l]));
        }
    }
    println!("\nmedian of {} rounds:", settings.rounds);
    println!(
        "{:<24} {:>12} {:>10} {:>12} {:>10}",
        "server", "hello req/s", "p99 us", "work req/s", "p99 us"
    );
    let med = |v: &Vec<f64>| median(v.clone());
    for (s, name) in SERVERS.iter().enumerate() {
        println!(
            "{name:<24} {:>12.0} {:>10.0} {:>12.0} {:>10.0}",
            med(&rates[s][0]),
            med(&p99s[s][0]),
            med(&rates[s][1]),
            med(&p99s[s][1])
        );
    }
    let best = |l: usize| {
        if med(&rates[1][l]) >= med(&rates[2][l]) {
            1
        } else {
            2
        }
    };
    let (bh, bw) = (best(0), best(1));
    println!(
        "hello: viaduct / {} = {:.2} (target >= 0.95); round by round median {:.2}",
        SERVERS[bh],
        med(&rates[0][0]) / med(&rates[bh][0]),
        median(ratios[0].clone())
    );
    println!(
        "work:  viaduct / {} = {:.2} (target >= 1.1); round by round median {:.2}; \
         p99 {:.0} us against {:.0} us (target: no higher)",
        SERVERS[bw],
        med(&rates[0][1]) / med(&rates[bw][1]),
        median(ratios[1].clone()),
        med(&p99s[0][1]),
        med(&p99s[bw][1])
    );
}
