//! Defects an adversarial review found in the Redis store, each pinned by
//! a test named after it, against a real `redis-server`. (The
//! store-independent invariants behind them are in the conformance suite,
//! run on every store.)

mod support;

use std::time::Duration;

use slidegate::store::Request;
use slidegate::{Algorithm, ManualClock, Penalty, Rule, State, Store};
use slidegate_testkit::conformance::{START_MS, algorithms, rule};

async fn admitted<S: Store>(store: &S, rule: &Rule, key: &str, attempts: u32) -> u32 {
    let mut admitted = 0;
    for _ in 0..attempts {
        admitted += u32::from(
            store.check(&Request::new(rule, key, 1).expect("valid request")).await.expect("check").allowed,
        );
    }
    admitted
}

/// A named sliding-log rule whose limit goes across 128 (the packed
/// layout's bound) and back within one window: no charge still in the
/// window may be forgotten. (Converting the list to the packed layout kept
/// only the newest `limit` units: 150 → 120 → 150 admitted 180.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_limit_down_across_128_and_back_keeps_every_charge() {
    let server = support::server();
    let clock = ManualClock::new(START_MS);
    let store = support::client_clock_store(&server, "limit-dance", clock.clone()).await;
    let named = |limit| rule(limit, 60_000, Algorithm::SlidingLog).named("dance").expect("name");
    for (first, low, key) in [(150, 120, "a"), (200, 100, "b"), (129, 128, "c")] {
        clock.set(START_MS + 1000);
        assert_eq!(admitted(&store, &named(first), key, first).await, first, "{first}: all fit");
        clock.set(START_MS + 2000);
        assert_eq!(admitted(&store, &named(low), key, 1).await, 0, "{first} → {low}: full");
        clock.set(START_MS + 3000);
        assert_eq!(admitted(&store, &named(first), key, first).await, 0, "{first} → {low} → {first}");
        // Room comes back exactly when the first charges leave.
        clock.set(START_MS + 1000 + 60_000);
        assert_eq!(admitted(&store, &named(first), key, first + 1).await, first, "a window later");
    }
    support::assert_every_key_has_ttl(&server).await;
}

/// Client-clock mode decides in the client's time, so state must last as
/// long as client time says, however slowly that time moves against the
/// server's: 1.5 s of real time pass (longer than the old TTL slack) while
/// the client's clock moves 1 ms of a 10 ms window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_clock_state_outlives_a_slow_client() {
    let server = support::server();
    let clock = ManualClock::new(START_MS);
    let store = support::client_clock_store(&server, "slow-client", clock.clone()).await;
    let rules: Vec<Rule> = algorithms(2).into_iter().map(|a| rule(1, 10, a)).collect();
    for rule in &rules {
        assert!(
            store
                .check(&Request::new(rule, "victim", 1).expect("valid request"))
                .await
                .expect("check")
                .allowed,
            "{rule}"
        );
    }
    // Real time: the server's TTLs run on its own clock.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    clock.advance(Duration::from_millis(1));
    for rule in &rules {
        let d = store.check(&Request::new(rule, "victim", 1).expect("valid request")).await.expect("check");
        assert!(!d.allowed, "{rule}: 1 ms of client time later the first request still counts");
    }
    support::assert_every_key_has_ttl(&server).await;
}

fn banning() -> Penalty {
    Penalty::new(Duration::from_secs(10))
        .and_then(|p| p.ban_after(2, Duration::from_secs(10)))
        .expect("penalty")
}

/// Two unnamed 1/s rules that differ only in algorithm, with the same
/// penalty: each has its own violations and bans (the penalty keys carried
/// the rule's name only, so one rule's ban banned the other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn penalty_state_is_not_shared_between_algorithms() {
    let server = support::server();
    let clock = ManualClock::new(START_MS);
    let store = support::client_clock_store(&server, "penalty-apart", clock.clone()).await;
    let log = rule(1, 1000, Algorithm::SlidingLog).with_penalty(banning()).expect("rule");
    let fixed = rule(1, 1000, Algorithm::FixedWindow).with_penalty(banning()).expect("rule");
    assert!(store.check(&Request::new(&log, "u", 1).expect("valid request")).await.expect("check").allowed);
    assert_eq!(
        store.check(&Request::new(&log, "u", 1).expect("valid request")).await.expect("check").state,
        State::Limited
    );
    assert_eq!(
        store.check(&Request::new(&log, "u", 1).expect("valid request")).await.expect("check").state,
        State::Banned
    );
    let other = store.check(&Request::new(&fixed, "u", 1).expect("valid request")).await.expect("check");
    assert_eq!((other.allowed, other.state, other.violations), (true, State::Allowed, 0), "{other:?}");
    let [viol_log, ban_log] = slidegate_redis::penalty_keys(store.prefix(), &log, "u").expect("keys");
    let [viol_fixed, ban_fixed] = slidegate_redis::penalty_keys(store.prefix(), &fixed, "u").expect("keys");
    assert!(viol_log != viol_fixed && ban_log != ban_fixed, "{ban_log} / {ban_fixed}");
    support::assert_every_key_has_ttl(&server).await;
}

/// A warn-only penalty over an hour and a long flood of denials at
/// distinct milliseconds: the violation log keeps only what a decision can
/// need (the warning threshold), not one item per denial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn violation_log_stays_bounded_under_a_flood() {
    let server = support::server();
    let clock = ManualClock::new(START_MS);
    let store = support::client_clock_store(&server, "flood", clock.clone()).await;
    let penalty = Penalty::new(Duration::from_secs(3600)).and_then(|p| p.warn_after(3)).expect("penalty");
    let rule = rule(1, 3_600_000, Algorithm::SlidingLog).with_penalty(penalty).expect("rule");
    assert!(
        store.check(&Request::new(&rule, "flood", 1).expect("valid request")).await.expect("check").allowed
    );
    for i in 0..5000 {
        clock.advance(Duration::from_millis(1));
        let d = store.check(&Request::new(&rule, "flood", 1).expect("valid request")).await.expect("check");
        assert_eq!((d.allowed, d.violations), (false, (i + 1).min(3)), "denial {i}");
    }
    let [viol, _] = slidegate_redis::penalty_keys(store.prefix(), &rule, "flood").expect("keys");
    let mut conn = support::inspect(&server).await;
    let items: u64 = redis::cmd("LLEN").arg(&viol).query_async(&mut conn).await.expect("LLEN");
    assert!(items <= 3, "{items} violation items kept for a threshold of 3");
    let bytes: u64 =
        redis::cmd("MEMORY").arg("USAGE").arg(&viol).query_async(&mut conn).await.expect("MEMORY");
    assert!(bytes < 512, "{bytes} bytes of violations");
    support::assert_every_key_has_ttl(&server).await;
}

/// Values slidegate did not write are errors, never read as state: a
/// string of text where a log, a GCRA bucket or a ban lives, a hash of
/// other fields where a counter or a fixed window lives, a list of text
/// where a large log lives. The foreign value is left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_values_are_errors_not_decisions() {
    let server = support::server();
    let store = support::server_clock_store(&server, "foreign").await;
    let mut conn = support::inspect(&server).await;
    let counter = Algorithm::SLIDING_COUNTER;
    let cases: [(Rule, &[&str]); 6] = [
        (rule(5, 60_000, Algorithm::SlidingLog), &["SET", "garbage"]),
        (rule(500, 60_000, Algorithm::SlidingLog), &["RPUSH", "garbage", "more"]),
        (rule(5, 60_000, Algorithm::Gcra), &["SET", "garbage"]),
        (rule(5, 60_000, Algorithm::Gcra), &["SET", "12:34:x"]),
        (rule(5, 60_000, counter), &["HSET", "bucket", "many"]),
        (rule(5, 60_000, Algorithm::FixedWindow), &["HSET", "w", "yesterday"]),
    ];
    for (i, (rule, write)) in cases.iter().enumerate() {
        let identity = format!("victim-{i}");
        let key = slidegate_redis::state_key(store.prefix(), rule, &identity).expect("key");
        let () = redis::cmd(write[0]).arg(&key).arg(&write[1..]).query_async(&mut conn).await.expect("write");
        let before: Vec<u8> = redis::cmd("DUMP").arg(&key).query_async(&mut conn).await.expect("DUMP");
        let got = store.check(&Request::new(rule, &identity, 1).expect("valid request")).await;
        let err = got.expect_err(&format!("{rule} over {write:?} must be an error"));
        assert!(err.to_string().contains("WRONGTYPE"), "{rule} over {write:?}: {err}");
        let after: Vec<u8> = redis::cmd("DUMP").arg(&key).query_async(&mut conn).await.expect("DUMP");
        assert_eq!(before, after, "{rule}: the foreign value is untouched");
    }
    // A ban key holding text is no ban and no decision either.
    let rule = rule(5, 60_000, Algorithm::SlidingLog).with_penalty(banning()).expect("rule");
    let [_, ban] = slidegate_redis::penalty_keys(store.prefix(), &rule, "banned").expect("keys");
    let () = redis::cmd("SET").arg(&ban).arg("forever").query_async(&mut conn).await.expect("SET");
    let err = store
        .check(&Request::new(&rule, "banned", 1).expect("valid request"))
        .await
        .expect_err("a ban of text");
    assert!(err.to_string().contains("WRONGTYPE"), "{err}");
}

/// A rule *named* like an unnamed rule's derived name does not share its
/// state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chosen_names_never_meet_derived_names() {
    let server = support::server();
    let store = support::server_clock_store(&server, "look-alike").await;
    let unnamed = rule(2, 60_000, Algorithm::SlidingLog);
    let named = unnamed.clone().named("2-60000").expect("name");
    assert_eq!(admitted(&store, &unnamed, "u", 3).await, 2);
    assert_eq!(admitted(&store, &named, "u", 3).await, 2, "its own budget");
    let a = slidegate_redis::state_key(store.prefix(), &unnamed, "u").expect("key");
    let b = slidegate_redis::state_key(store.prefix(), &named, "u").expect("key");
    assert_ne!(a, b);
}
