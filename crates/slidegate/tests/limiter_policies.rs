//! The limiter's failure handling, deterministic: the store double in
//! `support` stands in for a remote store, time is a `ManualClock` and
//! paused Tokio time.

mod support;

use std::time::Duration;

use slidegate::{BreakerState, ErrorKind, FailurePolicy, Limiter, ManualClock, MemoryStore, Source, State};
use slidegate_testkit::CapturedLog;
use support::{ANSWER, FAIL, HANG, Remote, rule, setup};

#[tokio::test]
async fn each_policy_answers_a_failed_store_as_degraded() {
    for policy in [FailurePolicy::FailOpen, FailurePolicy::FailClosed, FailurePolicy::Fallback] {
        let (limiter, remote, _) = setup(policy);
        remote.set(FAIL);
        let decision = limiter.check(&rule(2), "k").await.expect("a policy answers");
        assert_eq!(decision.state, State::Degraded, "{policy}");
        assert_eq!(decision.allowed, policy != FailurePolicy::FailClosed, "{policy}");
        if policy == FailurePolicy::FailClosed {
            assert!(decision.retry_after >= Duration::from_secs(1));
        }
    }
}

#[tokio::test]
async fn fallback_enforces_the_rule_locally() {
    let (limiter, remote, clock) = setup(FailurePolicy::Fallback);
    remote.set(FAIL);
    let outcomes: Vec<bool> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(limiter.check(&rule(3), "k").await.expect("degraded").allowed);
        }
        v
    };
    assert_eq!(outcomes, [true, true, true, false], "the local limiter admits exactly the limit");
    clock.advance(Duration::from_secs(1));
    assert!(limiter.check(&rule(3), "k").await.expect("degraded").allowed, "and frees it in time");
}

#[tokio::test]
async fn a_peek_at_a_failed_store_is_the_policy_answer_and_charges_the_fallback_nothing() {
    for policy in [FailurePolicy::FailOpen, FailurePolicy::FailClosed, FailurePolicy::Fallback] {
        let (limiter, remote, _) = setup(policy);
        let r = rule(2);
        remote.set(ANSWER);
        assert!(limiter.peek_all_weighted(&[(&r, "k", 2)]).await.expect("peek").allowed, "{policy}");
        remote.set(FAIL);
        let peeked = limiter.peek_all_weighted(&[(&r, "k", 1)]).await.expect("a policy answers");
        assert_eq!(peeked.decisions[0].state, State::Degraded, "{policy}");
        assert_eq!(peeked.allowed, policy != FailurePolicy::FailClosed, "{policy}");
    }
    // The fallback was peeked, not charged: it still admits the whole limit.
    let (limiter, remote, _) = setup(FailurePolicy::Fallback);
    remote.set(FAIL);
    for _ in 0..3 {
        assert!(limiter.peek_all_weighted(&[(&rule(2), "k", 2)]).await.expect("peek").allowed);
    }
    assert!(limiter.check_n(&rule(2), "k", 2).await.expect("degraded").allowed);
}

#[tokio::test]
async fn invalid_input_is_an_error_whatever_the_store_does() {
    let (limiter, remote, _) = setup(FailurePolicy::FailOpen);
    remote.set(FAIL);
    assert_eq!(limiter.check(&rule(2), "").await.unwrap_err().kind(), ErrorKind::InvalidKey);
    assert_eq!(limiter.check_n(&rule(2), "k", 0).await.unwrap_err().kind(), ErrorKind::InvalidCost);
    assert_eq!(limiter.check_n(&rule(2), "", 3).await.unwrap_err().kind(), ErrorKind::InvalidKey);
    // A cost above the limit is denied, not an error: no wait admits it.
    let never = limiter.check_n(&rule(2), "k", 3).await.expect("a denial");
    assert_eq!((never.allowed, never.state, never.source), (false, State::Limited, Source::CostAboveLimit));
    assert_eq!(remote.calls(), 0, "answered before any store call");
}

#[tokio::test(start_paused = true)]
async fn a_hung_store_is_abandoned_at_the_deadline() {
    let clock = ManualClock::new(0);
    let remote = Remote::new(&clock);
    let limiter = Limiter::builder(remote.clone())
        .deadline(Duration::from_millis(40))
        .failure_policy(FailurePolicy::FailClosed)
        .clock(clock)
        .build();
    remote.set(HANG);
    let started = tokio::time::Instant::now();
    let decision = limiter.check(&rule(5), "k").await.expect("policy");
    assert_eq!(started.elapsed(), Duration::from_millis(40), "exactly the deadline (paused time)");
    assert_eq!((decision.allowed, decision.state), (false, State::Degraded));
}

#[tokio::test]
async fn breaker_opens_probes_and_closes_by_itself() {
    let (limiter, remote, clock) = setup(FailurePolicy::FailOpen);
    remote.set(FAIL);
    for _ in 0..3 {
        limiter.check(&rule(100), "k").await.expect("degraded");
    }
    assert_eq!(limiter.breaker_state(), BreakerState::Open);
    assert_eq!(remote.calls(), 3);
    for _ in 0..100 {
        assert_eq!(limiter.check(&rule(100), "k").await.expect("degraded").state, State::Degraded);
    }
    assert_eq!(remote.calls(), 3, "an open breaker keeps calls off the store");

    clock.advance(Duration::from_millis(100));
    limiter.check(&rule(100), "k").await.expect("probe");
    assert_eq!(remote.calls(), 4, "one probe after the open period");
    assert_eq!(limiter.breaker_state(), BreakerState::Open, "the probe failed");
    clock.advance(Duration::from_millis(150));
    limiter.check(&rule(100), "k").await.expect("degraded");
    assert_eq!(remote.calls(), 4, "the next open period is twice as long");

    remote.set(ANSWER);
    clock.advance(Duration::from_millis(50));
    let decision = limiter.check(&rule(100), "k").await.expect("probe");
    assert_eq!(decision.state, State::Allowed, "the successful probe is a real decision");
    assert_eq!(limiter.breaker_state(), BreakerState::Closed);
    limiter.check(&rule(100), "k").await.expect("closed");
    assert_eq!(remote.calls(), 6);
}

/// With no traffic left to probe with (a service taken out of its load
/// balancer), `probe_store` lets the breaker's probe go: nothing is asked
/// while the breaker is closed or its probe is not due, a failed probe
/// keeps it open, an answer closes it — and the probe charges nothing.
#[tokio::test]
async fn a_probe_without_traffic_finds_the_store_back() {
    let (limiter, remote, clock) = setup(FailurePolicy::FailClosed);
    assert_eq!(limiter.probe_store().await, BreakerState::Closed);
    assert_eq!(remote.calls(), 0, "nothing asked while closed");
    remote.set(FAIL);
    for _ in 0..3 {
        limiter.check(&rule(100), "k").await.expect("degraded");
    }
    assert_eq!(limiter.probe_store().await, BreakerState::Open);
    assert_eq!(remote.calls(), 3, "nothing asked before the probe is due");
    clock.advance(Duration::from_millis(100));
    assert_eq!(limiter.probe_store().await, BreakerState::Open, "the store still fails");
    assert_eq!(remote.calls(), 4);
    remote.set(ANSWER);
    clock.advance(Duration::from_millis(200));
    assert_eq!(limiter.probe_store().await, BreakerState::Closed, "the store is back");
    assert_eq!(remote.calls(), 5);
    let probe_rule = rule(1).named("slidegate.probe").expect("name");
    let decision = limiter.check(&probe_rule, "probe").await.expect("check");
    assert!(decision.allowed, "the probes charged nothing: {decision:?}");
}

#[tokio::test]
async fn switched_off_admits_without_the_store_and_charges_nothing() {
    let (limiter, remote, _) = setup(FailurePolicy::FailClosed);
    let clone = limiter.clone();
    clone.set_enabled(false);
    assert!(!limiter.is_enabled(), "clones share the switch");
    for _ in 0..10 {
        let decision = limiter.check(&rule(1), "k").await.expect("disabled");
        assert_eq!((decision.allowed, decision.state), (true, State::Disabled));
    }
    assert_eq!(remote.calls(), 0);
    limiter.set_enabled(true);
    assert!(limiter.check(&rule(1), "k").await.expect("on").allowed, "nothing was charged while off");
    assert!(!limiter.check(&rule(1), "k").await.expect("on").allowed);
}

#[tokio::test]
async fn a_memory_store_is_called_directly() {
    let clock = ManualClock::new(0);
    let limiter = Limiter::builder(MemoryStore::builder().clock(clock.clone()).max_keys(1).build())
        .failure_policy(FailurePolicy::FailClosed)
        .clock(clock)
        .build();
    assert!(limiter.check(&rule(1), "a").await.expect("first key").allowed);
    assert!(!limiter.check(&rule(1), "a").await.expect("limited").allowed);
    let full = limiter.check(&rule(1), "b").await.expect("policy answers a full store");
    assert_eq!((full.allowed, full.state), (false, State::Degraded));
}

#[tokio::test]
async fn multi_dimension_checks_degrade_all_or_nothing() {
    let (limiter, remote, _) = setup(FailurePolicy::Fallback);
    let (global, user) = (rule(3).named("g").unwrap(), rule(1).named("u").unwrap());
    let healthy = limiter.check_all(&[(&global, "api"), (&user, "alice")]).await.expect("check");
    assert!(healthy.allowed && healthy.decisions.iter().all(|d| d.state == State::Allowed));
    remote.set(FAIL);
    let first = limiter.check_all(&[(&global, "api"), (&user, "bob")]).await.expect("degraded");
    assert!(first.allowed && first.decisions.iter().all(|d| d.state == State::Degraded));
    let second = limiter.check_all(&[(&global, "api"), (&user, "bob")]).await.expect("degraded");
    assert_eq!(second.denied_by(), Some(1), "the local fallback is all-or-nothing too");
    assert_eq!(second.decisions[0].remaining, 2, "and charges nothing on a denial");
    let err = limiter.check_all(&[(&user, "x"), (&user, "x")]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidKey, "bad input stays an error during an outage");
}

#[tokio::test]
async fn batches_use_the_deny_cache_and_degrade_item_by_item() {
    let (limiter, remote, _) = setup(FailurePolicy::FailClosed);
    let r = rule(1);
    assert!(limiter.check(&r, "hot").await.expect("admit").allowed);
    assert!(!limiter.check(&r, "hot").await.expect("deny").allowed);
    let calls = remote.calls();
    let results = limiter.check_batch(&[(&r, "hot", 1), (&r, "cold", 1), (&r, "", 1), (&r, "hot", 2)]).await;
    assert_eq!(remote.calls(), calls + 1, "one store call for the whole batch");
    assert!(matches!(&results[0], Ok(d) if !d.allowed && d.state == State::Limited), "{:?}", results[0]);
    assert!(matches!(&results[1], Ok(d) if d.allowed));
    assert_eq!(results[2].as_ref().unwrap_err().kind(), ErrorKind::InvalidKey);
    assert!(
        matches!(&results[3], Ok(d) if d.source == Source::CostAboveLimit && !d.allowed),
        "{:?}",
        results[3]
    );

    remote.set(FAIL);
    let results = limiter.check_batch(&[(&r, "a", 1), (&r, "b", 1)]).await;
    for result in results {
        let decision = result.expect("a policy answers");
        assert_eq!((decision.allowed, decision.state), (false, State::Degraded));
    }
}

/// Batches count for the breaker like checks: a batch whose every item the
/// store failed is a failure, so batch-only traffic opens it, keeps off a
/// dead store, and closes it again when a probe batch is answered.
#[tokio::test]
async fn batch_only_traffic_opens_and_closes_the_breaker() {
    let (limiter, remote, clock) = setup(FailurePolicy::FailOpen);
    let r = rule(100);
    let batch = [(&r, "a", 1), (&r, "b", 1)];
    remote.set(FAIL);
    for _ in 0..3 {
        limiter.check_batch(&batch).await;
    }
    assert_eq!(limiter.breaker_state(), BreakerState::Open);
    let calls = remote.calls();
    for result in limiter.check_batch(&batch).await {
        assert_eq!(result.expect("policy").state, State::Degraded);
    }
    assert_eq!(remote.calls(), calls, "an open breaker keeps batches off the store");

    remote.set(ANSWER);
    clock.advance(Duration::from_millis(100));
    for result in limiter.check_batch(&batch).await {
        assert_eq!(result.expect("probe").state, State::Allowed);
    }
    assert_eq!(limiter.breaker_state(), BreakerState::Closed);
}

/// Every degraded decision, breaker transition and deny-cache hit is
/// recorded through the `metrics` facade.
#[test]
fn degraded_decisions_and_transitions_are_counted() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let (limiter, remote, _) = setup(FailurePolicy::Fallback);
            let r = rule(1);
            assert!(limiter.check(&r, "k").await.expect("admit").allowed);
            assert!(!limiter.check(&r, "k").await.expect("deny").allowed);
            assert!(!limiter.check(&r, "k").await.expect("cached").allowed);
            remote.set(FAIL);
            for i in 0..10 {
                limiter.check(&r, &format!("other-{i}")).await.expect("degraded");
            }
        });
    });
    // One snapshot, read for every assertion.
    let snapshot: Vec<_> = snapshotter.snapshot().into_vec();
    let sum = |name: &str, labels: &[(&str, &str)]| -> u64 {
        snapshot
            .iter()
            .filter(|(key, ..)| key.key().name() == name)
            .filter(|(key, ..)| {
                labels.iter().all(|(k, v)| key.key().labels().any(|l| l.key() == *k && l.value() == *v))
            })
            .map(|(.., value)| match value {
                DebugValue::Counter(n) => *n,
                _ => 0,
            })
            .sum()
    };
    assert_eq!(sum("slidegate_degraded_total", &[("policy", "fallback")]), 10);
    assert_eq!(sum("slidegate_degraded_total", &[("reason", "unavailable")]), 3, "until the breaker opened");
    assert_eq!(sum("slidegate_degraded_total", &[("reason", "breaker_open")]), 7);
    assert_eq!(sum("slidegate_decisions_total", &[("outcome", "degraded")]), 10);
    assert_eq!(sum("slidegate_decisions_total", &[("outcome", "limited")]), 2);
    assert_eq!(sum("slidegate_deny_cache_hits_total", &[]), 1);
    assert_eq!(sum("slidegate_breaker_transitions_total", &[("to", "open")]), 1);
    assert!(snapshot.iter().any(|(key, ..)| key.key().name() == "slidegate_store_duration_seconds"));
}

/// Runs `body` on a current-thread runtime with a subscriber writing to
/// the returned log.
fn logged<T>(body: impl std::future::Future<Output = T>) -> (T, CapturedLog) {
    let log = CapturedLog::default();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    (tracing::subscriber::with_default(log.subscriber(), || runtime.block_on(body)), log)
}

/// A flood of new identities into a full store with a full fallback: the
/// policy admits every request (degraded), and the warning is logged once
/// per interval with the count held back, not once per request.
#[test]
fn a_full_fallback_warns_once_per_interval_not_once_per_request() {
    let clock = ManualClock::new(1_000_000);
    let full = || MemoryStore::builder().max_keys(1).shards(1).clock(clock.clone()).build();
    let limiter = Limiter::builder(full())
        .failure_policy(FailurePolicy::Fallback)
        .fallback_store(full())
        .clock(clock.clone())
        .build();
    let hour = slidegate::Rule::new(100, Duration::from_secs(3600)).expect("a rule");
    let (states, log) = logged(async {
        let mut states = Vec::new();
        for i in 0..1_000 {
            let decision = limiter.check(&hour, &format!("id{i}")).await.expect("the policy answers");
            assert!(decision.allowed, "request {i}");
            states.push(decision.state);
        }
        clock.advance(Duration::from_secs(10));
        states.push(limiter.check(&hour, "one more").await.expect("the policy answers").state);
        states
    });
    assert_eq!(states[..2], [State::Allowed, State::Degraded], "one key in the store, one in the fallback");
    assert!(states[2..].iter().all(|s| *s == State::Degraded));
    let fallback = log.lines("fallback store failed");
    assert_eq!(fallback.len(), 2, "{fallback:?}");
    assert!(fallback[0].contains("held_back=0") && fallback[1].contains("held_back=997"), "{fallback:?}");
    assert!(fallback[0].contains("memory store holds its maximum of 1 keys"), "{fallback:?}");
}

/// A remote store failing every call, without a breaker to stop the calls:
/// one warning per interval too.
#[test]
fn a_failing_store_warns_once_per_interval_not_once_per_call() {
    let clock = ManualClock::new(1_000_000);
    let remote = support::Remote::new(&clock);
    let limiter = Limiter::builder(remote.clone())
        .failure_policy(FailurePolicy::FailClosed)
        .no_breaker()
        .clock(clock.clone())
        .build();
    remote.set(FAIL);
    let ((), log) = logged(async {
        for _ in 0..500 {
            assert!(!limiter.check(&rule(5), "k").await.expect("the policy answers").allowed);
        }
        clock.advance(Duration::from_secs(10));
        assert!(!limiter.check(&rule(5), "k").await.expect("the policy answers").allowed);
    });
    assert_eq!(remote.calls(), 501, "every call was made");
    let warned = log.lines("store failed; answering by failure policy");
    assert_eq!(warned.len(), 2, "{warned:?}");
    assert!(warned[0].contains("held_back=0") && warned[1].contains("held_back=499"), "{warned:?}");
    assert!(warned[0].contains("policy=fail_closed"), "{warned:?}");
}
