//! Concurrency limits across processes, on a real Redis and a real
//! 3-primary Cluster: 64 clients in 3 processes (this test binary run
//! again as workers) taking leases of one identity under a limit of 10
//! never hold more than 10 at once — by the store's own count, each
//! acquisition's `remaining`, and by the clients' overlap, each lease's
//! time held measured inside its hold and the intervals of all processes
//! swept together; and a killed process's leases come back after their
//! ttl.

mod support;

use std::io::{BufRead as _, BufReader};
use std::process::Child;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use slidegate::{ConcurrencyLimit, FailurePolicy, Limiter};
use slidegate_redis::RedisStore;

/// Set in a worker's environment: `<mode>|<url>|<prefix>|<tasks>`.
const WORKER: &str = "SLIDEGATE_LEASE_WORKER";
const LIMIT: u32 = 10;

fn limit(ttl: Duration) -> ConcurrencyLimit {
    ConcurrencyLimit::new("streams", LIMIT, ttl).expect("limit")
}

fn micros() -> u64 {
    u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("time").as_micros()).expect("u64")
}

/// Not a test of its own: the worker the tests below start as another
/// process (it returns at once unless [`WORKER`] is set).
#[test]
fn lease_worker() {
    let Ok(spec) = std::env::var(WORKER) else { return };
    let parts: Vec<&str> = spec.split('|').collect();
    let [mode, url, prefix, tasks] = parts[..] else { panic!("bad {WORKER}: {spec}") };
    let tasks: usize = tasks.parse().expect("tasks");
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    runtime.block_on(async move {
        let store = RedisStore::builder(url).prefix(prefix).connect().await.expect("connect");
        // Exactness is under test, not latency: three processes of busy
        // clients on two cores may keep a call waiting past the default
        // deadline, which `Fail` would turn into a failed test.
        let limiter = Limiter::builder(store)
            .failure_policy(FailurePolicy::Fail)
            .deadline(Duration::from_secs(10))
            .build();
        if mode == "hold" {
            // Takes every lease, says so, and waits to be killed.
            let streams = limit(Duration::from_secs(2));
            let mut held = Vec::new();
            for _ in 0..LIMIT {
                let lease = limiter.acquire(&streams, "tenant").await.expect("acquire");
                assert!(lease.is_held());
                held.push(lease);
            }
            println!("held");
            tokio::time::sleep(Duration::from_secs(60)).await;
            return;
        }
        let streams = limit(Duration::from_secs(30));
        let deadline = Instant::now() + Duration::from_millis(1500);
        let mut clients = Vec::new();
        for _ in 0..tasks {
            let (limiter, streams) = (limiter.clone(), streams.clone());
            clients.push(tokio::spawn(async move {
                let (mut out, mut refused) = (Vec::new(), 0u64);
                while Instant::now() < deadline {
                    let lease = limiter.acquire(&streams, "tenant").await.expect("acquire");
                    let running = LIMIT - lease.decision().remaining;
                    if !lease.is_held() {
                        refused += 1;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    }
                    let start = micros();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let end = micros();
                    out.push(format!("held {start} {end} {running}"));
                    assert!(lease.release().await.expect("release"), "a lease held is given back");
                }
                (out, refused)
            }));
        }
        let mut refused = 0;
        for client in clients {
            let (lines, no) = client.await.expect("client");
            refused += no;
            for line in lines {
                println!("{line}");
            }
        }
        println!("refused {refused}");
    });
}

/// This binary, run as a worker.
fn worker(mode: &str, url: &str, prefix: &str, tasks: usize) -> Child {
    support::worker_process("lease_worker", WORKER, &format!("{mode}|{url}|{prefix}|{tasks}"))
}

/// The most intervals of `held` that overlap at one instant.
fn most_at_once(held: &[(u64, u64)]) -> usize {
    let mut events: Vec<(u64, i32)> = held.iter().flat_map(|&(s, e)| [(s, 1), (e, -1)]).collect();
    // At one instant an end goes before a start: both were measured
    // inside their holds, so they did not overlap there.
    events.sort_unstable();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, change) in events {
        now += change;
        most = most.max(now);
    }
    usize::try_from(most).expect("non-negative")
}

async fn never_more_than_the_limit(url: &str) {
    let prefix = support::unique_prefix("leases");
    let workers: Vec<Child> = [21, 21, 22].iter().map(|&n| worker("run", url, &prefix, n)).collect();
    let (mut held, mut refused, mut most_running) = (Vec::new(), 0u64, 0u32);
    for child in workers {
        let output = child.wait_with_output().expect("a worker's output");
        assert!(output.status.success(), "a worker failed");
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words[..] {
                [.., "held", start, end, running] => {
                    held.push((start.parse().expect("start"), end.parse().expect("end")));
                    most_running = most_running.max(running.parse().expect("running"));
                }
                [.., "refused", n] => refused += n.parse::<u64>().expect("refused"),
                _ => {}
            }
        }
    }
    assert!(held.len() > 100 && refused > 0, "{} leases held, {refused} refused: no contention", held.len());
    assert!(most_running <= LIMIT, "the store counted {most_running} running");
    let overlap = most_at_once(&held);
    assert!(overlap <= LIMIT as usize, "{overlap} leases held at once across the processes");
    assert!(overlap >= 2, "the clients never overlapped: {overlap}");
}

async fn a_killed_process_s_leases_come_back(url: &str) {
    let prefix = support::unique_prefix("leases-killed");
    let mut holder = worker("hold", url, &prefix, 0);
    let mut lines = BufReader::new(holder.stdout.take().expect("stdout")).lines();
    // The harness may print its own words before the worker's on a line.
    assert!(lines.any(|l| l.is_ok_and(|l| l.ends_with("held"))), "the holder took its leases");
    holder.kill().expect("kill the holder");
    holder.wait().expect("reaped");
    let store = RedisStore::builder(url).prefix(&prefix).connect().await.expect("connect");
    let limiter = Limiter::builder(store).failure_policy(FailurePolicy::Fail).build();
    let streams = limit(Duration::from_secs(2));
    let refused = limiter.acquire(&streams, "tenant").await.expect("acquire");
    assert!(!refused.is_held(), "the dead process's 10 leases are still held");
    assert!(refused.decision().retry_after <= Duration::from_secs(2));
    // All ten come back once the newest one's ttl has passed.
    let all_back = refused.decision().reset_after;
    assert!(all_back <= Duration::from_secs(2), "{all_back:?}");
    tokio::time::sleep(all_back).await;
    let mut taken = Vec::new();
    for _ in 0..LIMIT {
        let lease = limiter.acquire(&streams, "tenant").await.expect("acquire");
        assert!(lease.is_held(), "given back by their ttl: {:?}", lease.decision());
        taken.push(lease);
    }
    assert!(!limiter.acquire(&streams, "tenant").await.expect("acquire").is_held(), "and 10 again at most");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_across_processes_on_redis() {
    let server = support::server();
    never_more_than_the_limit(&server.url()).await;
    a_killed_process_s_leases_come_back(&server.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_across_processes_on_a_cluster() {
    let cluster = support::cluster::cluster();
    never_more_than_the_limit(&cluster.url()).await;
    a_killed_process_s_leases_come_back(&cluster.url()).await;
}

/// A lease taken under a shorter ttl (the limit's ttl changed, say on a
/// reload) never shortens the key's life below a longer lease's: those
/// still count until their own expiry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_ttl_never_drops_longer_leases() {
    let server = support::server();
    let store = RedisStore::builder(server.url()).prefix("ttl:").connect().await.expect("connect");
    let limiter = Limiter::builder(store).failure_policy(FailurePolicy::Fail).build();
    let long = ConcurrencyLimit::new("jobs", 2, Duration::from_secs(60)).expect("limit");
    let short = ConcurrencyLimit::new("jobs", 2, Duration::from_millis(200)).expect("limit");
    let held = limiter.acquire(&long, "tenant").await.expect("acquire");
    assert!(held.is_held());
    let brief = limiter.acquire(&short, "tenant").await.expect("acquire");
    assert!(brief.is_held());
    let ttl = server.command("PTTL ttl:lease:jobs:{tenant}").expect("PTTL");
    let ms: i64 = ttl.trim_start_matches(':').parse().expect("a TTL");
    assert!(ms > 55_000, "the key outlives the 60 s lease: {ms} ms");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let next = limiter.acquire(&short, "tenant").await.expect("acquire");
    assert_eq!(next.decision().remaining, 0, "the 60 s lease still counts; the brief one has gone");
    drop((held, brief.detach(), next.detach()));
}
