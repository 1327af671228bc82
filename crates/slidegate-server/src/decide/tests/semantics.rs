//! slidegate's own semantics: wildcard precedence, exact sliding windows, several limits per descriptor, requests decided whole.

use super::*;

// ---------------------------------------------------------------------------
// Wildcard precedence: exact > first wildcard in file order > key only, and
// no backtracking.

const PRECEDENCE: &str = "\
domain: precedence
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 1 }
    descriptors:
      - key: sub
        rate_limit: { unit: minute, requests_per_unit: 11 }
  - key: k
    value: a*
    rate_limit: { unit: minute, requests_per_unit: 2 }
    descriptors:
      - key: sub
        value: x
        rate_limit: { unit: minute, requests_per_unit: 12 }
  - key: k
    value: ab*
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: k
    value: abc
    rate_limit: { unit: minute, requests_per_unit: 4 }
  - key: k
    value: '*z'
    rate_limit: { unit: minute, requests_per_unit: 5 }
";

#[tokio::test]
async fn wildcard_precedence_exact_then_first_wildcard_then_key_only() {
    let h = harness(PRECEDENCE);
    let rpu = |status: DescriptorStatus| status.limit.map(|l| l.requests_per_unit());
    // Exact beats every wildcard.
    assert_eq!(rpu(h.one("precedence", &[("k", "abc")]).await), Some(4));
    // The first matching wildcard in file order, not the longest.
    assert_eq!(rpu(h.one("precedence", &[("k", "abd")]).await), Some(2));
    assert_eq!(rpu(h.one("precedence", &[("k", "a")]).await), Some(2), "`*` matches zero characters");
    assert_eq!(rpu(h.one("precedence", &[("k", "az")]).await), Some(2), "a* is before *z");
    assert_eq!(rpu(h.one("precedence", &[("k", "xyz")]).await), Some(5));
    // No wildcard: the key-only descriptor.
    assert_eq!(rpu(h.one("precedence", &[("k", "q")]).await), Some(1));
    assert_eq!(rpu(h.one("precedence", &[("k", "")]).await), Some(1));
}

#[tokio::test]
async fn no_backtracking_to_a_less_specific_match() {
    let h = harness(PRECEDENCE);
    let rpu = |status: DescriptorStatus| status.limit.map(|l| l.requests_per_unit());
    // `a*` then its child.
    assert_eq!(rpu(h.one("precedence", &[("k", "a1"), ("sub", "x")]).await), Some(12));
    // `a*` has no child for sub=y: nothing, though the key-only `k` has one.
    assert_no_limit(&h.one("precedence", &[("k", "a1"), ("sub", "y")]).await);
    // `abc` (exact) has no children at all: nothing.
    assert_no_limit(&h.one("precedence", &[("k", "abc"), ("sub", "x")]).await);
    // A value no wildcard matches reaches the key-only descriptor's child.
    assert_eq!(rpu(h.one("precedence", &[("k", "q"), ("sub", "y")]).await), Some(11));
}

#[tokio::test]
async fn key_only_match_counts_per_distinct_value() {
    let h = harness(PRECEDENCE);
    h.admits_exactly("precedence", &[("k", "q")], 1).await;
    h.admits_exactly("precedence", &[("k", "r")], 1).await;
    // The nested key-only level too.
    h.admits_exactly("precedence", &[("k", "q"), ("sub", "1")], 11).await;
    assert_eq!(h.one("precedence", &[("k", "q"), ("sub", "2")]).await.remaining, 10);
    assert_eq!(h.one("precedence", &[("k", "r"), ("sub", "1")]).await.remaining, 10);
}

// ---------------------------------------------------------------------------
// slidegate: the window slides exactly.

const SLIDING: &str = "\
domain: sliding
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 3
";

#[tokio::test]
async fn the_window_slides_exactly_when_the_oldest_request_leaves() {
    let h = harness(SLIDING);
    let alice = &[("user", "alice")];
    // Requests at t, t+10s, t+20s.
    for remaining in [2, 1, 0] {
        let status = h.one("sliding", alice).await;
        assert_eq!(status.code, Code::Ok);
        assert_eq!(status.remaining, remaining);
        h.clock.advance(Duration::from_secs(10));
    }
    // t+30s: full.
    let denied = h.one("sliding", alice).await;
    assert_eq!(denied.code, Code::OverLimit);
    assert_eq!(denied.retry_after, Duration::from_secs(30), "the oldest leaves at t+60s");
    // One millisecond before the oldest leaves: still denied (a fixed
    // window would have reset at some point in between).
    h.clock.advance(Duration::from_millis(29_999));
    let still = h.one("sliding", alice).await;
    assert_eq!(still.code, Code::OverLimit);
    assert_eq!(still.retry_after, Duration::from_millis(1));
    // At t+60s exactly: one admitted, no more.
    h.clock.advance(Duration::from_millis(1));
    let admitted = h.one("sliding", alice).await;
    assert_eq!(admitted.code, Code::Ok);
    assert_eq!(admitted.remaining, 0);
    let next = h.one("sliding", alice).await;
    assert_eq!(next.code, Code::OverLimit);
    assert_eq!(next.retry_after, Duration::from_secs(10), "the second leaves at t+70s");
    // Denied requests were not charged: at t+70s one more.
    h.clock.advance(Duration::from_secs(10));
    assert_eq!(h.one("sliding", alice).await.code, Code::Ok);
    assert_eq!(h.one("sliding", alice).await.code, Code::OverLimit);
    // Another user was never affected.
    assert_eq!(h.one("sliding", &[("user", "bob")]).await.remaining, 2);
}

#[tokio::test]
async fn window_and_algorithm_extensions() {
    let h = harness(
        "\
domain: ext
descriptors:
  - key: five_minutes
    rate_limit: { window: 5m, requests_per_unit: 2 }
  - key: one_hour
    rate_limit: { window: 1h, requests_per_unit: 2, algorithm: counter }
  - key: fixed
    rate_limit: { unit: minute, requests_per_unit: 2, algorithm: fixed }
  - key: gcra
    rate_limit: { unit: minute, requests_per_unit: 2, algorithm: gcra }
  - key: log
    rate_limit: { unit: MINUTE, requests_per_unit: 2, algorithm: log }
",
    );
    let five = h.one("ext", &[("five_minutes", "a")]).await;
    let limit = five.limit.as_ref().unwrap();
    assert_eq!((limit.requests_per_unit(), limit.window(), limit.unit), (2, Duration::from_secs(300), None));
    let hour = h.one("ext", &[("one_hour", "a")]).await;
    assert_eq!(limit_of(&hour), Some((2, Some(Unit::Hour))));
    assert_eq!(hour.limit.as_ref().unwrap().window(), Duration::from_secs(3600));
    for key in ["five_minutes", "one_hour", "fixed", "gcra", "log"] {
        // Five used one of each of the first two.
        let n = if matches!(key, "five_minutes" | "one_hour") { 1 } else { 2 };
        for _ in 0..n {
            assert_eq!(h.one("ext", &[(key, "a")]).await.code, Code::Ok, "{key}");
        }
        assert_eq!(h.one("ext", &[(key, "a")]).await.code, Code::OverLimit, "{key}");
    }
    // Four minutes later the five-minute window still holds both.
    h.clock.advance(Duration::from_secs(240));
    assert_eq!(h.one("ext", &[("five_minutes", "a")]).await.code, Code::OverLimit);
    h.clock.advance(Duration::from_secs(60));
    assert_eq!(h.one("ext", &[("five_minutes", "a")]).await.code, Code::Ok);
}

#[tokio::test]
async fn a_penalty_loads_and_decides() {
    let h = harness(
        "\
domain: penalized
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: 1
      penalty: { window: 1m, warn_after: 1, ban_after: 3, ban_for: 10m }
",
    );
    let status = h.one("penalized", &[("user", "x")]).await;
    assert_eq!(status.code, Code::Ok);
    let rule = status.limit.as_ref().unwrap().rule().expect("enforced through a rule").clone();
    assert!(rule.penalty().is_some());
    assert_eq!(h.one("penalized", &[("user", "x")]).await.code, Code::OverLimit);
}

// ---------------------------------------------------------------------------
// slidegate: several limits on one descriptor, all or nothing.

#[tokio::test]
async fn rate_limits_enforces_both_limits_all_or_nothing() {
    let h = harness(
        "\
domain: multi
descriptors:
  - key: user
    rate_limits:
      - { requests_per_unit: 3, unit: second }
      - { requests_per_unit: 5, window: 1m, name: per_minute }
",
    );
    let alice = &[("user", "alice")];
    for i in 0..3u32 {
        let status = h.one("multi", alice).await;
        assert_eq!(status.code, Code::Ok);
        assert_eq!(status.limits.len(), 2, "both limits apply");
        assert!(status.limits.iter().all(|l| l.allowed));
        assert_eq!(status.limits[0].remaining, 2 - i);
        assert_eq!(status.limits[1].remaining, 4 - i);
        // The binding limit is the one with least left.
        assert_eq!(limit_of(&status), Some((3, Some(Unit::Second))));
    }
    // The 3/s limit denies the fourth; the 5/min one is not charged.
    let fourth = h.one("multi", alice).await;
    assert_eq!(fourth.code, Code::OverLimit);
    assert_eq!(limit_of(&fourth), Some((3, Some(Unit::Second))));
    assert!(!fourth.limits[0].allowed);
    h.clock.advance(Duration::from_secs(1));
    // Two more fit the 5/min (3 + 2): the denied fourth charged nothing.
    for remaining in [1, 0] {
        let status = h.one("multi", alice).await;
        assert_eq!(status.code, Code::Ok);
        assert_eq!(status.limits[1].remaining, remaining);
    }
    let sixth = h.one("multi", alice).await;
    assert_eq!(sixth.code, Code::OverLimit);
    assert_eq!(limit_of(&sixth), Some((5, Some(Unit::Minute))));
    assert_eq!(sixth.limit.as_ref().unwrap().name.as_deref(), Some("per_minute"));
    assert!(sixth.limits[0].allowed && !sixth.limits[1].allowed);
    // ... and the 5/min denial charged nothing to the 3/s limit.
    assert_eq!(h.peek("multi", alice).await.limits[0].remaining, 1);
}

// ---------------------------------------------------------------------------
// slidegate: a request is decided whole.

pub(super) const TWO_KEYS: &str = "\
domain: two
descriptors:
  - key: a
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: b
    rate_limit: { unit: minute, requests_per_unit: 5 }
";

#[tokio::test]
async fn a_request_denied_by_one_descriptor_charges_no_other() {
    let h = harness(TWO_KEYS);
    let both = || vec![desc(&[("a", "x")]), desc(&[("b", "y")])];
    for _ in 0..2 {
        assert_eq!(h.request("two", both()).await.code, Code::Ok);
    }
    for _ in 0..3 {
        let answer = h.request("two", both()).await;
        assert_eq!(answer.code, Code::OverLimit);
        assert_eq!(answer.statuses[0].code, Code::OverLimit);
        assert_eq!(answer.statuses[1].code, Code::Ok);
        assert_eq!(limit_of(&answer.statuses[1]), Some((5, Some(Unit::Minute))));
    }
    // `b` was charged by the two admitted requests only.
    let b = h.peek("two", &[("b", "y")]).await;
    assert_eq!(b.code, Code::Ok);
    assert_eq!(b.remaining, 3);
    assert_eq!(h.one("two", &[("b", "y")]).await.remaining, 2);
}

#[tokio::test]
async fn descriptor_weights() {
    let h = harness(TWO_KEYS);
    let b = &[("b", "w")];
    let status = h.one_of("two", weighted(b, 3)).await;
    assert_eq!(status.code, Code::Ok);
    assert_eq!(status.remaining, 2);
    // 3 more do not fit; nothing is charged.
    let status = h.one_of("two", weighted(b, 3)).await;
    assert_eq!(status.code, Code::OverLimit);
    // 2 fit exactly.
    let status = h.one_of("two", weighted(b, 2)).await;
    assert_eq!(status.code, Code::Ok);
    assert_eq!(status.remaining, 0);

    // More than the limit is never admitted, and charges nothing.
    let other = &[("b", "v")];
    assert_eq!(h.one_of("two", weighted(other, 6)).await.code, Code::OverLimit);
    assert_eq!(h.one("two", other).await.remaining, 4);

    // The request's hits_addend weighs descriptors without their own;
    // a descriptor's own wins.
    let request = CheckRequest {
        domain: "two".into(),
        descriptors: vec![desc(&[("b", "r")]), weighted(&[("a", "r")], 1)],
        hits_addend: 2,
    };
    let answer = h.decider.check(&request, Mode::Charge).await.unwrap();
    assert_eq!(answer.code, Code::Ok);
    assert_eq!(answer.statuses[0].remaining, 3);
    assert_eq!(answer.statuses[1].remaining, 1);
}

#[tokio::test]
async fn the_same_descriptor_twice_in_one_request_counts_twice() {
    let h = harness(TWO_KEYS);
    let answer = h.request("two", vec![desc(&[("a", "twice")]), desc(&[("a", "twice")])]).await;
    assert_eq!(answer.code, Code::Ok);
    assert!(answer.statuses.iter().all(|s| s.code == Code::Ok && s.remaining == 0), "{:?}", answer.statuses);
    let answer = h.request("two", vec![desc(&[("a", "twice")]), desc(&[("a", "twice")])]).await;
    assert_eq!(answer.code, Code::OverLimit);
}

#[tokio::test]
async fn repeated_descriptors_heavier_than_the_limit_are_denied_not_an_error() {
    let h = harness(TWO_KEYS);
    let a = || desc(&[("a", "thrice")]);
    // Three of a 2/min limit, together: over the limit (the request is fine).
    let request = CheckRequest { domain: "two".into(), descriptors: vec![a(), a(), a()], hits_addend: 0 };
    let answer = h.decider.check(&request, Mode::Charge).await;
    let answer = answer.expect("a request heavier than a limit is answered OverLimit, not refused");
    assert_eq!(answer.code, Code::OverLimit);
    assert!(answer.statuses.iter().all(|s| s.code == Code::OverLimit));
    assert_eq!(h.peek("two", &[("a", "thrice")]).await.remaining, 2, "nothing charged");
}

#[tokio::test]
async fn repeated_descriptors_heavier_than_the_limit_charge_no_other_descriptor() {
    let h = harness(TWO_KEYS);
    let a = || desc(&[("a", "x")]);
    let request = CheckRequest {
        domain: "two".into(),
        descriptors: vec![a(), a(), a(), desc(&[("b", "y")])],
        hits_addend: 0,
    };
    let answer = h.decider.check(&request, Mode::Charge).await;
    let codes = answer.map(|a| (a.code, a.statuses.iter().map(|s| s.code).collect::<Vec<_>>()));
    let b_remaining = h.peek("two", &[("b", "y")]).await.remaining;
    // Denied as a whole, and nothing charged to `b` (all or nothing).
    let expected = (Code::OverLimit, vec![Code::OverLimit, Code::OverLimit, Code::OverLimit, Code::Ok]);
    assert!(
        codes.as_ref() == Ok(&expected) && b_remaining == 5,
        "answer {codes:?} (expected {expected:?}), `b` remaining {b_remaining} (expected 5)"
    );
}

#[tokio::test]
async fn a_peek_heavier_than_the_limit_is_answered() {
    let h = harness(TWO_KEYS);
    let request =
        CheckRequest { domain: "two".into(), descriptors: vec![weighted(&[("b", "p")], 6)], hits_addend: 0 };
    let answer = h.decider.check(&request, Mode::Peek).await.expect("a peek of weight 6 is answered");
    assert_eq!(answer.code, Code::OverLimit);
    assert_eq!(limit_of(&answer.statuses[0]), Some((5, Some(Unit::Minute))));
    // As a charge of weight 6 is.
    let answer = h.decider.check(&request, Mode::Charge).await.unwrap();
    assert_eq!(answer.code, Code::OverLimit);
}

#[tokio::test]
async fn check_only_descriptors_charge_nothing() {
    let h = harness(TWO_KEYS);
    let a = &[("a", "p")];
    let peeked = h.peek("two", a).await;
    assert_eq!(peeked.code, Code::Ok);
    assert_eq!(limit_of(&peeked), Some((2, Some(Unit::Minute))));
    assert_eq!(peeked.remaining, 2);
    for _ in 0..5 {
        assert_eq!(h.peek("two", a).await.remaining, 2);
    }
    assert_eq!(h.one("two", a).await.remaining, 1);
    assert_eq!(h.peek("two", a).await.remaining, 1);
    assert_eq!(h.one("two", a).await.remaining, 0);
    // Full: a check-only request answers as a request of weight 1 would.
    let full = h.peek("two", a).await;
    assert_eq!(full.code, Code::OverLimit);
    assert_eq!(full.remaining, 0);
    assert_eq!(full.retry_after, Duration::from_secs(60));

    // Beside a charged descriptor: only the charged one is charged.
    let answer = h.request("two", vec![weighted(&[("b", "q")], 0), desc(&[("a", "q")])]).await;
    assert_eq!(answer.code, Code::Ok);
    assert_eq!(answer.statuses[0].remaining, 5);
    assert_eq!(answer.statuses[1].remaining, 1);
    assert_eq!(h.peek("two", &[("b", "q")]).await.remaining, 5);

    // Mode::Peek charges nothing either.
    let request =
        CheckRequest { domain: "two".into(), descriptors: vec![desc(&[("b", "q")])], hits_addend: 0 };
    for _ in 0..3 {
        let answer = h.decider.check(&request, Mode::Peek).await.unwrap();
        assert_eq!(answer.statuses[0].remaining, 5);
    }
}
