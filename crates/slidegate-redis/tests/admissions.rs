//! `Limiter::admit` under concurrency on a real Redis: 64 clients each
//! needing a lease (at most 5 at once), a reservation against a budget and
//! a rate slot, all or nothing. Never more than 5 run at once (the
//! clients' own overlap), and a refused admission leaves nothing behind: at the end the rate rule has
//! counted exactly the admitted requests, the budget exactly what they
//! committed, and every lease is back.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use slidegate::{ConcurrencyLimit, FailurePolicy, Limiter, Need, Needs, Rule};
use slidegate_redis::RedisStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admissions_are_all_or_nothing_under_concurrency() {
    let server = support::server();
    let prefix = support::unique_prefix("admit");
    let store = RedisStore::builder(server.url()).prefix(&prefix).connect().await.expect("connect");
    let limiter = Limiter::builder(store).failure_policy(FailurePolicy::Fail).no_deny_cache().build();
    let streams = ConcurrencyLimit::new("streams", 5, Duration::from_secs(30)).expect("limit");
    let tokens =
        Rule::new(4_000, Duration::from_secs(60)).and_then(|r| r.named("tokens")).expect("rule").budget();
    let requests = Rule::new(150, Duration::from_secs(60)).and_then(|r| r.named("requests")).expect("rule");

    let running = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let admitted = Arc::new(AtomicU64::new(0));
    let committed = Arc::new(AtomicU64::new(0));
    let refused_by = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let deadline = Instant::now() + Duration::from_millis(2500);
    let mut clients = Vec::new();
    for client in 0..64u64 {
        let (limiter, streams, tokens, requests) =
            (limiter.clone(), streams.clone(), tokens.clone(), requests.clone());
        let (running, most, admitted, committed, refused_by) =
            (running.clone(), most.clone(), admitted.clone(), committed.clone(), refused_by.clone());
        clients.push(tokio::spawn(async move {
            let mut n = client;
            while Instant::now() < deadline {
                n += 7;
                let estimate = 20 + u32::try_from(n % 40).expect("small");
                let needs = Needs::new()
                    .lease(&streams, "acme")
                    .reserve(&tokens, "acme", estimate, Duration::from_secs(30))
                    .check(&requests, "acme", 1);
                let admission = limiter.admit(&needs).await.expect("admit");
                if let Some((need, _)) = admission.refused_by() {
                    let i = match need {
                        Need::Lease(_) => 0,
                        Need::Reservation(_) => 1,
                        Need::Check(_) => 2,
                    };
                    refused_by[i].fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                admitted.fetch_add(1, Ordering::Relaxed);
                let actual = estimate / 2;
                for reservation in admission.reservations {
                    reservation.commit(actual).await.expect("commit").expect("held");
                }
                committed.fetch_add(u64::from(actual), Ordering::Relaxed);
                for lease in admission.leases {
                    assert!(lease.release().await.expect("release"), "held until released");
                }
            }
        }));
    }
    for client in clients {
        client.await.expect("client");
    }
    let admitted = admitted.load(Ordering::Relaxed);
    let refusals: Vec<u64> = refused_by.iter().map(|r| r.load(Ordering::Relaxed)).collect();
    assert!(most.load(Ordering::SeqCst) <= 5, "at most 5 at once, saw {}", most.load(Ordering::SeqCst));
    assert!(admitted > 0 && refusals[0] > 0, "admitted {admitted}, refused {refusals:?}");
    assert!(
        refusals[2] > 0 || admitted == 150,
        "the rate rule ends the run: {admitted} admitted, {refusals:?}"
    );

    // What the store counts: exactly what the admitted requests took.
    let peeked =
        limiter.peek_all_weighted(&[(&requests, "acme", 1), (&tokens, "acme", 1)]).await.expect("peek");
    assert_eq!(u64::from(150 - peeked.decisions[0].remaining), admitted, "refusals {refusals:?}");
    let committed = committed.load(Ordering::Relaxed);
    assert_eq!(u64::from(4_000 - peeked.decisions[1].remaining), committed, "the budget counts the commits");
    let lease = limiter.acquire(&streams, "acme").await.expect("acquire");
    assert_eq!(lease.decision().remaining, 4, "every lease back");
}
