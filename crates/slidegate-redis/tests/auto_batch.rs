//! Auto-batching on a real server: concurrent single checks share script
//! calls and are decided exactly as on their own; one failing check does
//! not fail the others; a check whose caller gave up is never charged.

mod support;

use std::time::Duration;

use futures::future::join_all;
use slidegate::store::Request;
use slidegate::{Algorithm, ErrorKind, Rule, Store};
use slidegate_redis::{AUTO_BATCH_DIRECT, AUTO_BATCH_IN_FLIGHT, RedisStore};
use slidegate_testkit::conformance::{algorithms, rule};

/// `EVALSHA` calls since the last `CONFIG RESETSTAT`.
async fn evalsha_calls(server: &slidegate_testkit::RedisServer) -> u64 {
    let mut conn = support::inspect(server).await;
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(&mut conn).await.expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Many tasks checking many (rule, key) pairs at once — every algorithm,
/// both sliding-log layouts, costs 1 and 2 — in a window far longer than
/// the test: each pair admits exactly what fits, and the server saw fewer
/// script calls than checks (they were batched).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_checks_are_decided_exactly() {
    let server = support::server();
    let store = support::server_clock_store(&server, "batched").await;
    let mut rules: Vec<Rule> = Vec::new();
    for algorithm in algorithms(10) {
        for limit in [7, 200] {
            let name = format!("{}-{limit}", algorithm.short_name());
            rules.push(rule(limit, 600_000, algorithm).named(&name).expect("name"));
        }
    }
    assert_eq!(server.command("CONFIG RESETSTAT").expect("resetstat"), "+OK");
    // Per (rule, key, cost): 64 tasks, each sending 6 checks of every pair.
    let pairs: Vec<(usize, String, u32)> = (0..rules.len())
        .flat_map(|r| (0..3).flat_map(move |k| [1u32, 2].map(|cost| (r, format!("user-{k}-c{cost}"), cost))))
        .collect();
    let tasks = (0..64).map(|_| {
        let (store, rules, pairs) = (store.clone(), rules.clone(), pairs.clone());
        tokio::spawn(async move {
            let mut admitted = vec![0u32; pairs.len()];
            for _ in 0..6 {
                for (i, (r, key, cost)) in pairs.iter().enumerate() {
                    let decision = store
                        .check(&Request::new(&rules[*r], key, *cost).expect("valid request"))
                        .await
                        .expect("check");
                    admitted[i] += u32::from(decision.allowed) * cost;
                }
            }
            admitted
        })
    });
    let per_task: Vec<Vec<u32>> = join_all(tasks).await.into_iter().map(|r| r.expect("task")).collect();
    let checks = 64 * 6 * pairs.len() as u64;
    for (i, (r, key, cost)) in pairs.iter().enumerate() {
        let rule = &rules[*r];
        let admitted: u32 = per_task.iter().map(|t| t[i]).sum();
        // 384 requests of `cost` each: all that fits in the limit.
        let fits = (rule.limit() / cost * cost).min(384 * cost);
        assert_eq!(admitted, fits, "{rule} {key} cost {cost}");
    }
    let calls = evalsha_calls(&server).await;
    assert!(calls < checks, "{calls} script calls for {checks} checks: nothing was batched");
    support::assert_every_key_has_ttl(&server).await;
}

/// A check on a key that holds another type fails on its own; the checks
/// that shared its script call are answered normally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_check_does_not_fail_its_batch() {
    let server = support::server();
    let store = support::server_clock_store(&server, "poisoned").await;
    let rule = rule(50, 600_000, Algorithm::SLIDING_COUNTER);
    // The counter keeps a hash; a string there makes HGETALL fail.
    let poisoned = slidegate_redis::state_key(store.prefix(), &rule, "poisoned").expect("key");
    assert_eq!(server.command(&format!("SET {poisoned} x")).expect("SET"), "+OK");
    assert_eq!(server.command("CONFIG RESETSTAT").expect("resetstat"), "+OK");
    let tasks = (0..256).map(|i| {
        let (store, rule) = (store.clone(), rule.clone());
        tokio::spawn(async move {
            let key = if i % 16 == 0 { "poisoned".to_owned() } else { format!("fine-{i}") };
            (key.clone(), store.check(&Request::new(&rule, &key, 1).expect("valid request")).await)
        })
    });
    let mut failed = 0;
    for result in join_all(tasks).await {
        let (key, result) = result.expect("task");
        if key == "poisoned" {
            let error = result.expect_err("a string where the counter's hash belongs");
            assert_eq!(error.kind(), ErrorKind::Backend, "{error}");
            assert!(error.to_string().contains("WRONGTYPE"), "{error}");
            failed += 1;
        } else {
            assert!(result.expect("unaffected by the poisoned key").allowed, "{key}");
        }
    }
    assert_eq!(failed, 16);
    assert!(evalsha_calls(&server).await < 256, "the checks were batched");
}

/// While the server is frozen, the checks sent on their own and then every
/// batch call slot fill up; a check made then waits in the queue, and when
/// its caller gives up (its deadline) it is dropped: after the server
/// thaws, its key was never written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_whose_caller_gave_up_is_never_charged() {
    let server = support::server();
    let store = RedisStore::builder(server.url())
        .prefix(support::unique_prefix("gave-up"))
        .response_timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("connect");
    let rule = rule(10, 600_000, Algorithm::SlidingLog);
    server.pause().expect("SIGSTOP");
    let mut stuck = Vec::new();
    for i in 0..AUTO_BATCH_DIRECT + AUTO_BATCH_IN_FLIGHT {
        let (store, rule) = (store.clone(), rule.clone());
        stuck.push(tokio::spawn(async move {
            store.check(&Request::new(&rule, &format!("stuck-{i}"), 1).expect("valid request")).await
        }));
        // Each goes out alone: first from its caller, then from the driver.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let gave_up = tokio::time::timeout(
        Duration::from_millis(200),
        store.check(&Request::new(&rule, "gave-up", 1).expect("valid request")),
    )
    .await;
    assert!(gave_up.is_err(), "no call slot was free, so the check waited: {gave_up:?}");
    server.resume().expect("SIGCONT");
    for task in stuck {
        assert!(task.await.expect("task").expect("answered after SIGCONT").allowed);
    }
    // A later check goes through the same queue, after the dropped one.
    assert!(
        store.check(&Request::new(&rule, "after", 1).expect("valid request")).await.expect("check").allowed
    );
    let mut conn = support::inspect(&server).await;
    for (key, expected) in [("stuck-0", 1), ("after", 1), ("gave-up", 0)] {
        let state = slidegate_redis::state_key(store.prefix(), &rule, key).expect("key");
        assert_eq!(support::log_entries(&mut conn, &state).await, expected, "{key}");
    }
    support::assert_every_key_has_ttl(&server).await;
}

/// With auto-batching off every check is its own script call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_batch_off_sends_every_check_alone() {
    let server = support::server();
    let store = RedisStore::builder(server.url())
        .prefix(support::unique_prefix("unbatched"))
        .auto_batch(0)
        .connect()
        .await
        .expect("connect");
    let rule = rule(1000, 600_000, Algorithm::SlidingLog);
    assert_eq!(server.command("CONFIG RESETSTAT").expect("resetstat"), "+OK");
    let tasks = (0..64).map(|i| {
        let (store, rule) = (store.clone(), rule.clone());
        tokio::spawn(async move {
            store.check(&Request::new(&rule, &format!("k{}", i % 8), 1).expect("valid request")).await
        })
    });
    for result in join_all(tasks).await {
        assert!(result.expect("task").expect("check").allowed);
    }
    assert_eq!(evalsha_calls(&server).await, 64);
    support::assert_every_key_has_ttl(&server).await;
}

/// Lease and reservation ops batched as checks are: many tasks taking
/// leases of one limit and reserving under every algorithm at once hold
/// exactly what fits, settle exactly, and share script calls; an op on a
/// key of another type fails on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_leases_and_reservations_hold_exactly() {
    use slidegate::store::{LeaseRequest, ReservationRequest};
    use slidegate::{ConcurrencyLimit, LeaseId};

    let server = support::server();
    let store = support::server_clock_store(&server, "holds").await;
    let streams = ConcurrencyLimit::new("streams", 10, Duration::from_secs(600)).expect("limit");
    let rules: Vec<Rule> = algorithms(10)
        .into_iter()
        // 300 days: no fixed window ends and nothing drains meanwhile.
        .map(|a| rule(50, 25_920_000_000, a).named(&format!("tokens-{}", a.short_name())).expect("name"))
        .collect();
    assert_eq!(server.command("CONFIG RESETSTAT").expect("resetstat"), "+OK");
    let tasks = (0..64).map(|_| {
        let (store, streams, rules) = (store.clone(), streams.clone(), rules.clone());
        tokio::spawn(async move {
            let id = LeaseId::random().expect("id");
            let lease = LeaseRequest::new(&streams, "tenant", &id).expect("lease");
            let held = store.acquire(&lease).await.expect("acquire").allowed;
            let mut reserved = Vec::new();
            for rule in &rules {
                let reservation = ReservationRequest::new(rule, "tenant", &id).expect("reservation");
                reserved.push(store.reserve(&reservation, 3, 600_000).await.expect("reserve").allowed);
            }
            (id, held, reserved)
        })
    });
    let outcomes: Vec<_> = join_all(tasks).await.into_iter().map(|r| r.expect("task")).collect();
    let ops = 64 * (1 + rules.len()) as u64;
    assert!(evalsha_calls(&server).await < ops, "nothing was batched");
    assert_eq!(outcomes.iter().filter(|(_, held, _)| *held).count(), 10, "ten leases at most");
    for (r, rule) in rules.iter().enumerate() {
        let admitted = outcomes.iter().filter(|(_, _, reserved)| reserved[r]).count();
        assert_eq!(admitted, 16, "{rule}: 16 reservations of 3 fit in 50");
    }
    // Every one settled at once: leases given back, reservations
    // committed at 1 (2 of each 3 given back; GCRA keeps what others
    // charged since).
    let settles = outcomes.iter().map(|(id, held, reserved)| {
        let (store, streams, rules, id, held, reserved) =
            (store.clone(), streams.clone(), rules.clone(), id.clone(), *held, reserved.clone());
        tokio::spawn(async move {
            let lease = LeaseRequest::new(&streams, "tenant", &id).expect("lease");
            assert_eq!(store.release(&lease).await.expect("release"), held);
            for (rule, was) in rules.iter().zip(reserved) {
                let reservation = ReservationRequest::new(rule, "tenant", &id).expect("reservation");
                assert_eq!(store.settle(&reservation, 1).await.expect("settle").is_some(), was, "{rule}");
            }
        })
    });
    for settled in join_all(settles).await {
        settled.expect("settled");
    }
    for rule in &rules {
        let used = rule.limit()
            - store.check(&Request::new(rule, "tenant", 1).expect("request")).await.expect("check").remaining;
        if rule.algorithm() == Algorithm::Gcra {
            assert!((17..=49).contains(&used), "{rule}: {used}");
        } else {
            assert_eq!(used, 16 + 1, "{rule}: 16 commits of 1, and this check");
        }
    }
    // A lease op on a key of another type fails alone, among many.
    server.command("SET hf:lease:streams:{x} text").expect("set");
    let foreign_store = RedisStore::builder(server.url()).prefix("hf:").connect().await.expect("connect");
    let ops = (0..32).map(|i| {
        let (store, streams) = (foreign_store.clone(), streams.clone());
        tokio::spawn(async move {
            let id = LeaseId::random().expect("id");
            let key = if i == 7 { "x".to_owned() } else { format!("y{i}") };
            store.acquire(&LeaseRequest::new(&streams, &key, &id).expect("lease")).await
        })
    });
    for (i, answer) in join_all(ops).await.into_iter().enumerate() {
        let answer = answer.expect("task");
        if i == 7 {
            let error = answer.expect_err("a string is no set of leases");
            assert!(error.to_string().contains("WRONGTYPE"), "{error}");
        } else {
            assert!(answer.expect("the other ops").allowed);
        }
    }
}
