//! envoy ratelimit's README examples 6–8: shadow mode, replaces, detailed_metric.

use super::*;

// ---------------------------------------------------------------------------
// README example 6: shadow mode.

const EXAMPLE_6: &str = "\
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
";

#[tokio::test]
async fn example_6_shadow_mode_counts_but_never_denies() {
    let h = harness(EXAMPLE_6);
    let user_a = &[("service", "auth-service"), ("user", "user-a")];
    for i in 0..10u32 {
        let status = h.one("example6", user_a).await;
        assert_eq!(status.code, Code::Ok);
        assert!(!status.shadow_over_limit, "request {} is within the limit", i + 1);
        assert_eq!(status.remaining, 9 - i);
        assert_eq!(limit_of(&status), Some((10, Some(Unit::Second))));
        assert!(status.limit.as_ref().unwrap().shadow);
    }
    for _ in 0..5 {
        let status = h.one("example6", user_a).await;
        assert_eq!(status.code, Code::Ok, "a shadow limit never denies");
        assert!(status.shadow_over_limit, "but the breach is recorded");
        assert_eq!(status.remaining, 0);
        assert_eq!(limit_of(&status), Some((10, Some(Unit::Second))));
    }
    // Key-only `service`: another service has its own counter.
    let other = h.one("example6", &[("service", "billing"), ("user", "user-a")]).await;
    assert!(!other.shadow_over_limit);
    assert_eq!(other.remaining, 9);
    // The window slides for shadow limits too.
    h.clock.advance(Duration::from_secs(1));
    let again = h.one("example6", user_a).await;
    assert!(!again.shadow_over_limit);
    assert_eq!(again.remaining, 9);
}

#[tokio::test]
async fn example_6_enforced_sibling_and_unmatched_value() {
    let h = harness(EXAMPLE_6);
    h.admits_exactly("example6", &[("service", "x"), ("user", "user-b")], 20).await;
    let b = h.one("example6", &[("service", "x"), ("user", "user-b")]).await;
    assert!(!b.shadow_over_limit);
    assert!(!b.limit.as_ref().unwrap().shadow);
    assert_no_limit(&h.one("example6", &[("service", "x"), ("user", "user-c")]).await);
    assert_no_limit(&h.one("example6", &[("service", "x")]).await);
}

#[tokio::test]
async fn example_6_a_shadow_breach_does_not_spare_the_enforced_descriptor() {
    let h = harness(EXAMPLE_6);
    let user_a = &[("service", "s"), ("user", "user-a")];
    let user_b = &[("service", "s"), ("user", "user-b")];
    for _ in 0..10 {
        h.one("example6", user_a).await;
    }
    for i in 0..3u32 {
        let answer = h.request("example6", vec![desc(user_a), desc(user_b)]).await;
        assert_eq!(answer.code, Code::Ok);
        assert!(answer.statuses[0].shadow_over_limit);
        assert_eq!(answer.statuses[0].code, Code::Ok);
        assert_eq!(answer.statuses[1].code, Code::Ok);
        assert!(!answer.statuses[1].shadow_over_limit);
        assert_eq!(answer.statuses[1].remaining, 19 - i, "the enforced limit is charged");
    }
    assert_eq!(h.peek("example6", user_b).await.remaining, 17);
}

/// One limit of a descriptor in shadow mode (slidegate: `shadow_mode` on
/// the limit, as a gateway limit writes it): the others are enforced.
#[tokio::test]
async fn a_limit_of_its_own_in_shadow_mode() {
    let h = harness(
        "\
domain: trial
descriptors:
  - key: user
    rate_limits:
      - { name: trial, requests_per_unit: 1, unit: minute, shadow_mode: true }
      - { name: enforced, requests_per_unit: 3, unit: minute }
",
    );
    let mut seen = Vec::new();
    for _ in 0..4 {
        let status = h.one("trial", &[("user", "u")]).await;
        seen.push((status.code, status.shadow_over_limit));
    }
    let (ok, over) = (Code::Ok, Code::OverLimit);
    assert_eq!(seen, [(ok, false), (ok, true), (ok, true), (over, true)]);
}

#[tokio::test]
async fn global_shadow_mode_answers_ok_and_flags_breaches() {
    let clock = ManualClock::new(1_000_000);
    let store = ServiceStore::Memory(MemoryStore::builder().clock(clock.clone()).build());
    // Shadow mode is the limiter's, as `slidegate serve --shadow` builds it.
    let limiter = Limiter::builder(store).clock(clock.clone()).shadow(true).build();
    let h = Harness { clock, decider: Decider::new(limiter, Rules::new(load(EXAMPLE_6))) };
    for _ in 0..20 {
        let status = h.one("example6", &[("service", "x"), ("user", "user-b")]).await;
        assert_eq!(status.code, Code::Ok);
        assert!(!status.shadow_over_limit);
    }
    let over = h.one("example6", &[("service", "x"), ("user", "user-b")]).await;
    assert_eq!(over.code, Code::Ok);
    assert!(over.shadow_over_limit);
    assert_eq!(over.remaining, 0);
}

// ---------------------------------------------------------------------------
// README example 7: replaces.

const EXAMPLE_7: &str = "\
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
";

const KEY_1_USER: &[(&str, &str)] = &[("key_1", "value_1"), ("user", "bkthomps")];
const KEY_2_USER: &[(&str, &str)] = &[("key_2", "value_2"), ("user", "bkthomps")];

#[tokio::test]
async fn example_7_each_descriptor_alone() {
    let h = harness(EXAMPLE_7);
    let specific = h.one("example7", KEY_1_USER).await;
    assert_eq!(limit_of(&specific), Some((5, Some(Unit::Second))));
    assert_eq!(specific.limit.as_ref().unwrap().name.as_deref(), Some("specific_limit"));
    let replacing = h.one("example7", KEY_2_USER).await;
    assert_eq!(limit_of(&replacing), Some((10, Some(Unit::Second))));
    assert_eq!(replacing.limit.as_ref().unwrap().replaces, vec!["specific_limit".to_owned()]);
    // Alone, the named limit is enforced (one used above).
    for remaining in (0..4).rev() {
        assert_eq!(h.one("example7", KEY_1_USER).await.remaining, remaining);
    }
    assert_eq!(h.one("example7", KEY_1_USER).await.code, Code::OverLimit);
    // A single descriptor of the three entries matches nothing.
    assert_no_limit(
        &h.one("example7", &[("key_1", "value_1"), ("key_2", "value_2"), ("user", "bkthomps")]).await,
    );
}

#[tokio::test]
async fn example_7_one_request_with_both_descriptors_drops_the_replaced_limit() {
    let h = harness(EXAMPLE_7);
    let both = || vec![desc(KEY_1_USER), desc(KEY_2_USER)];
    for i in 0..10u32 {
        let answer = h.request("example7", both()).await;
        assert_eq!(answer.code, Code::Ok, "request {}: 10/s applies, not 5/s", i + 1);
        assert_no_limit(&answer.statuses[0]);
        assert_eq!(limit_of(&answer.statuses[1]), Some((10, Some(Unit::Second))));
        assert_eq!(answer.statuses[1].remaining, 9 - i);
    }
    let answer = h.request("example7", both()).await;
    assert_eq!(answer.code, Code::OverLimit);
    assert_no_limit(&answer.statuses[0]);
    assert_eq!(answer.statuses[1].code, Code::OverLimit);
    // The replaced 5/s counter was never charged: alone it still admits 5.
    h.admits_exactly("example7", KEY_1_USER, 5).await;
}

// ---------------------------------------------------------------------------
// README example 8: detailed_metric (a key-only limit and an exact one).

const EXAMPLE_8: &str = "\
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
";

#[tokio::test]
async fn example_8_key_only_per_value_and_exact_value() {
    let h = harness(EXAMPLE_8);
    let first = h.one("example8", &[("key1", "unspecified_value")]).await;
    assert_eq!(limit_of(&first), Some((10, Some(Unit::Minute))));
    assert_eq!(first.limit.as_ref().unwrap().stat_key, "example8.key1");
    assert_eq!(first.remaining, 9);
    // Another value: its own counter.
    assert_eq!(h.one("example8", &[("key1", "unspecified_value2")]).await.remaining, 9);
    h.admits_exactly("example8", &[("key1", "unspecified_value3")], 10).await;
    let exact = h.one("example8", &[("key1", "value1")]).await;
    assert_eq!(limit_of(&exact), Some((20, Some(Unit::Minute))));
    assert_eq!(exact.limit.as_ref().unwrap().stat_key, "example8.key1_value1");
    assert_eq!(exact.remaining, 19);
}
