//! Reservations across processes on a real Redis: 64 clients in 3
//! processes (this test binary run again as workers) reserving against
//! one budget never hold more than it — the estimates held at once plus
//! what was committed, swept over the intervals measured inside each
//! hold — and committing less gives the rest back exactly: what the store
//! counts at the end is the sum of the real costs. A killed process's
//! reservations are settled from another process by their ids while
//! their ttl lasts, and committed at their estimates once it passes:
//! nothing stays held, and the budget comes back as the window slides.

mod support;

use std::io::{BufRead as _, BufReader};
use std::process::Child;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use slidegate::{FailurePolicy, LeaseId, Limiter, Rule};
use slidegate_redis::RedisStore;

/// Set in a worker's environment: `<mode>|<url>|<prefix>|<tasks>`.
const WORKER: &str = "SLIDEGATE_RESERVE_WORKER";
const BUDGET: u32 = 100_000;

fn tokens(window: Duration) -> Rule {
    Rule::new(BUDGET, window).and_then(|r| r.named("tokens")).expect("rule").budget()
}

fn micros() -> u64 {
    u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("time").as_micros()).expect("u64")
}

/// Not a test of its own: the worker the tests below start as another
/// process (it returns at once unless [`WORKER`] is set).
#[test]
fn reserve_worker() {
    let Ok(spec) = std::env::var(WORKER) else { return };
    let parts: Vec<&str> = spec.split('|').collect();
    let [mode, url, prefix, tasks] = parts[..] else { panic!("bad {WORKER}: {spec}") };
    let tasks: u64 = tasks.parse().expect("tasks");
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    runtime.block_on(async move {
        let store = RedisStore::builder(url).prefix(prefix).connect().await.expect("connect");
        // Exactness is under test, not latency (see leases.rs).
        let limiter = Limiter::builder(store)
            .failure_policy(FailurePolicy::Fail)
            .deadline(Duration::from_secs(10))
            .build();
        if mode == "hold" {
            // Reserves the whole budget, tells the ids, waits to be killed.
            let budget = tokens(Duration::from_secs(3));
            for _ in 0..5 {
                let held = limiter.reserve(&budget, "tenant", BUDGET / 5, Duration::from_millis(1500)).await;
                let held = held.expect("reserve");
                assert!(held.is_held());
                println!("id {}", held.detach().as_str());
            }
            println!("held");
            tokio::time::sleep(Duration::from_secs(60)).await;
            return;
        }
        let budget = tokens(Duration::from_secs(60));
        let deadline = Instant::now() + Duration::from_millis(1500);
        let mut clients = Vec::new();
        for client in 0..tasks {
            let (limiter, budget) = (limiter.clone(), budget.clone());
            clients.push(tokio::spawn(async move {
                let (mut out, mut refused) = (Vec::new(), 0u64);
                let mut seed = client.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                let mut next = |below: u64| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed % below
                };
                while Instant::now() < deadline {
                    let estimate = 10_000 + u32::try_from(next(20_001)).expect("u32");
                    let held = limiter.reserve(&budget, "tenant", estimate, Duration::from_secs(30)).await;
                    let held = held.expect("reserve");
                    if !held.is_held() {
                        refused += 1;
                        tokio::task::yield_now().await;
                        continue;
                    }
                    let start = micros();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let actual = u32::try_from(next(11)).expect("u32");
                    let end = micros();
                    let settled = held.commit(actual).await.expect("commit");
                    assert!(settled.is_some(), "a reservation within its ttl is held");
                    out.push(format!("held {start} {end} {estimate} {actual}"));
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
    support::worker_process("reserve_worker", WORKER, &format!("{mode}|{url}|{prefix}|{tasks}"))
}

/// One reservation as a client saw it: held from `start` to `end` (µs,
/// both measured inside the hold), its estimate, and its real cost.
struct Held {
    start: u64,
    end: u64,
    estimate: u64,
    actual: u64,
}

/// The most the budget was ever held for at one instant, counting what
/// was held then and what had been committed before: each estimate from
/// its start, replaced at its end by its real cost (still charged: the
/// window is longer than the run). Both ends were measured inside the
/// store's hold, so this is at most what the store held.
fn most_in_use(held: &[Held]) -> i64 {
    let mut events: Vec<(u64, i64)> = Vec::with_capacity(held.len() * 2);
    for h in held {
        let (estimate, actual) =
            (i64::try_from(h.estimate).expect("i64"), i64::try_from(h.actual).expect("i64"));
        events.push((h.start, estimate));
        events.push((h.end, actual - estimate));
    }
    // At one instant the ends go first (they give back).
    events.sort_unstable();
    let (mut now, mut most) = (0i64, 0i64);
    for (_, change) in events {
        now += change;
        most = most.max(now);
    }
    most
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_across_processes_never_hold_more_than_the_budget() {
    let server = support::server();
    let url = server.url();
    let prefix = support::unique_prefix("reservations");
    let workers: Vec<Child> = [21, 21, 22].iter().map(|&n| worker("run", &url, &prefix, n)).collect();
    let (mut held, mut refused) = (Vec::new(), 0u64);
    for child in workers {
        let output = child.wait_with_output().expect("a worker's output");
        assert!(output.status.success(), "a worker failed");
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words[..] {
                [.., "held", start, end, estimate, actual] => held.push(Held {
                    start: start.parse().expect("start"),
                    end: end.parse().expect("end"),
                    estimate: estimate.parse().expect("estimate"),
                    actual: actual.parse().expect("actual"),
                }),
                [.., "refused", n] => refused += n.parse::<u64>().expect("refused"),
                _ => {}
            }
        }
    }
    assert!(
        held.len() > 50 && refused > 0,
        "{} reservations held, {refused} refused: no contention",
        held.len()
    );
    let most = most_in_use(&held);
    assert!(most <= i64::from(BUDGET), "{most} held at once across the processes, of {BUDGET}");
    assert!(most > i64::from(BUDGET) / 2, "the clients never filled the budget: {most}");

    // Every commit gave back all but its real cost: the store counts
    // exactly their sum.
    let store = RedisStore::builder(&url).prefix(&prefix).connect().await.expect("connect");
    let limiter = Limiter::builder(store).failure_policy(FailurePolicy::Fail).build();
    let budget = tokens(Duration::from_secs(60));
    let now = limiter.charge(&budget, "tenant", 0).await.expect("peek");
    let actual: u64 = held.iter().map(|h| h.actual).sum();
    assert_eq!(u64::from(BUDGET - now.remaining), actual, "what the store counts is what was committed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_process_s_reservations_are_settled_by_id_or_by_their_ttl() {
    let server = support::server();
    let url = server.url();
    let prefix = support::unique_prefix("reservations-killed");
    let mut holder = worker("hold", &url, &prefix, 0);
    let mut ids = Vec::new();
    for line in BufReader::new(holder.stdout.take().expect("stdout")).lines() {
        let line = line.expect("a line");
        // The harness may print its own words before the worker's on a line.
        if let Some(id) = line.split("id ").nth(1) {
            ids.push(LeaseId::parse(id.trim()).expect("an id"));
        }
        if line.ends_with("held") {
            break;
        }
    }
    assert_eq!(ids.len(), 5, "the holder reserved the whole budget");
    holder.kill().expect("kill the holder");
    holder.wait().expect("reaped");

    let store = RedisStore::builder(&url).prefix(&prefix).connect().await.expect("connect");
    let limiter = Limiter::builder(store).failure_policy(FailurePolicy::Fail).build();
    let budget = tokens(Duration::from_secs(3));
    let refused = limiter.reserve(&budget, "tenant", 1, Duration::from_secs(1)).await.expect("reserve");
    assert!(!refused.is_admitted(), "the dead process holds the whole budget");
    // Within its ttl a reservation is settled from here by its id.
    let cancelled = limiter.cancel(&budget, "tenant", &ids[0]).await.expect("cancel").expect("held");
    assert_eq!(cancelled.remaining, BUDGET / 5, "a fifth given back");
    assert_eq!(
        limiter.commit(&budget, "tenant", &ids[1], 0).await.expect("commit").map(|d| d.remaining),
        Some(BUDGET * 2 / 5)
    );
    // Once the ttl (1.5 s) has passed, the rest are committed at their
    // estimates: nothing is held, the charges stay until the window
    // (3 s) slides past them.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    for id in &ids[2..] {
        assert!(limiter.cancel(&budget, "tenant", id).await.expect("cancel").is_none(), "its ttl passed");
    }
    let waiting = limiter.reserve(&budget, "tenant", BUDGET, Duration::from_secs(1)).await.expect("reserve");
    assert!(!waiting.is_admitted(), "three fifths committed at their estimates");
    let retry = waiting.decision().retry_after;
    assert!(retry <= Duration::from_millis(1500), "{retry:?}");
    tokio::time::sleep(retry).await;
    let whole = limiter.reserve(&budget, "tenant", BUDGET, Duration::from_secs(1)).await.expect("reserve");
    assert!(whole.is_held(), "the window slid past them: {:?}", whole.decision());
    assert!(whole.cancel().await.expect("cancel").is_some());
}
