//! envoy ratelimit's README examples 1–5: exact values, nested descriptors, key/value before key, the depth a limit applies at, unlimited.

use super::*;

// ---------------------------------------------------------------------------
// README example 1: exact values.

pub(super) const EXAMPLE_1: &str = "\
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
";

#[tokio::test]
async fn example_1_exact_values_each_have_their_limit() {
    let h = harness(EXAMPLE_1);
    let users = h.one("mongo_cps", &[("database", "users")]).await;
    assert_eq!(users.code, Code::Ok);
    assert_eq!(limit_of(&users), Some((500, Some(Unit::Second))));
    assert_eq!(users.remaining, 499);
    let limit = users.limit.as_ref().unwrap();
    assert_eq!(limit.window(), Duration::from_secs(1));
    assert_eq!(limit.stat_key, "mongo_cps.database_users");
    assert_eq!(limit.name, None);
    assert!(!limit.shadow);
    assert_eq!(h.one("mongo_cps", &[("database", "users")]).await.remaining, 498);

    // `default` has its own counter.
    let default = h.one("mongo_cps", &[("database", "default")]).await;
    assert_eq!(limit_of(&default), Some((500, Some(Unit::Second))));
    assert_eq!(default.remaining, 499);
    assert_eq!(default.limit.as_ref().unwrap().stat_key, "mongo_cps.database_default");

    // Another value matches nothing: no key-only descriptor.
    assert_no_limit(&h.one("mongo_cps", &[("database", "other")]).await);
    // Nor does another key, nor an unknown domain.
    assert_no_limit(&h.one("mongo_cps", &[("table", "users")]).await);
    assert_no_limit(&h.one("no_such_domain", &[("database", "users")]).await);
    // Values are case-sensitive.
    assert_no_limit(&h.one("mongo_cps", &[("database", "Users")]).await);
}

#[tokio::test]
async fn example_1_a_full_second_is_denied_then_the_window_slides() {
    let h = harness(EXAMPLE_1);
    h.admits_exactly("mongo_cps", &[("database", "users")], 500).await;
    // The other value is untouched.
    assert_eq!(h.one("mongo_cps", &[("database", "default")]).await.remaining, 499);
    h.clock.advance(Duration::from_secs(1));
    assert_eq!(h.one("mongo_cps", &[("database", "users")]).await.remaining, 499);
}

// ---------------------------------------------------------------------------
// README example 2: nested descriptors, key-only matches.

pub(super) const EXAMPLE_2: &str = "\
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
";

pub(super) const MARKETING_1: &[(&str, &str)] = &[("message_type", "marketing"), ("to_number", "2061111111")];
const MARKETING_2: &[(&str, &str)] = &[("message_type", "marketing"), ("to_number", "2062222222")];

#[tokio::test]
async fn example_2_nested_limit_counts_per_number() {
    let h = harness(EXAMPLE_2);
    let first = h.one("messaging", MARKETING_1).await;
    assert_eq!(limit_of(&first), Some((5, Some(Unit::Day))));
    assert_eq!(first.limit.as_ref().unwrap().stat_key, "messaging.message_type_marketing.to_number");
    assert_eq!(first.remaining, 4);
    for remaining in (0..4).rev() {
        assert_eq!(h.one("messaging", MARKETING_1).await.remaining, remaining);
    }
    let over = h.one("messaging", MARKETING_1).await;
    assert_eq!(over.code, Code::OverLimit);
    assert_eq!(limit_of(&over), Some((5, Some(Unit::Day))));

    // Another number: its own 5 a day.
    h.admits_exactly("messaging", MARKETING_2, 5).await;
}

#[tokio::test]
async fn example_2_placeholder_and_top_level_key_only() {
    let h = harness(EXAMPLE_2);
    // The marketing descriptor alone holds no limit.
    assert_no_limit(&h.one("messaging", &[("message_type", "marketing")]).await);
    // Another message type matches nothing (no key-only `message_type`).
    assert_no_limit(&h.one("messaging", &[("message_type", "transactional"), ("to_number", "1")]).await);

    // to_number alone: 100 a day, per number, a counter apart from the
    // marketing one.
    h.admits_exactly("messaging", MARKETING_1, 5).await;
    let alone = h.one("messaging", &[("to_number", "2061111111")]).await;
    assert_eq!(alone.code, Code::Ok);
    assert_eq!(limit_of(&alone), Some((100, Some(Unit::Day))));
    assert_eq!(alone.remaining, 99);
    assert_eq!(alone.limit.as_ref().unwrap().stat_key, "messaging.to_number");
    assert_eq!(h.one("messaging", &[("to_number", "2062222222")]).await.remaining, 99);
    h.admits_exactly("messaging", &[("to_number", "2063333333")], 100).await;
}

#[tokio::test]
async fn example_2_both_descriptors_in_one_request() {
    let h = harness(EXAMPLE_2);
    let both = || vec![desc(MARKETING_1), desc(&[("to_number", "2061111111")])];
    for i in 0..5u32 {
        let answer = h.request("messaging", both()).await;
        assert_eq!(answer.code, Code::Ok);
        assert_eq!(answer.statuses[0].remaining, 4 - i);
        assert_eq!(answer.statuses[1].remaining, 99 - i);
    }
    let answer = h.request("messaging", both()).await;
    assert_eq!(answer.code, Code::OverLimit, "over if any descriptor is over");
    assert_eq!(answer.statuses[0].code, Code::OverLimit);
    assert_eq!(limit_of(&answer.statuses[0]), Some((5, Some(Unit::Day))));
    assert_eq!(answer.statuses[1].code, Code::Ok);
    assert_eq!(limit_of(&answer.statuses[1]), Some((100, Some(Unit::Day))));
    // All or nothing: the denied request charged nothing to the 100/day
    // counter (5 charged so far: the next leaves 94).
    assert_eq!(h.one("messaging", &[("to_number", "2061111111")]).await.remaining, 94);
}

// ---------------------------------------------------------------------------
// README example 3: key/value before key; a block list entry.

const EXAMPLE_3: &str = "\
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
";

/// Example 3 with its two descriptors in the other order.
const EXAMPLE_3_REVERSED: &str = "\
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10
";

#[tokio::test]
async fn example_3_per_ip_limit_and_blocked_ip() {
    for yaml in [EXAMPLE_3, EXAMPLE_3_REVERSED] {
        let h = harness(yaml);
        let first = h.one("edge_proxy_per_ip", &[("remote_address", "50.0.0.1")]).await;
        assert_eq!(limit_of(&first), Some((10, Some(Unit::Second))));
        assert_eq!(first.remaining, 9);
        for remaining in (0..9).rev() {
            assert_eq!(
                h.one("edge_proxy_per_ip", &[("remote_address", "50.0.0.1")]).await.remaining,
                remaining
            );
        }
        assert_eq!(h.one("edge_proxy_per_ip", &[("remote_address", "50.0.0.1")]).await.code, Code::OverLimit);
        // A counter per address.
        h.admits_exactly("edge_proxy_per_ip", &[("remote_address", "50.0.0.2")], 10).await;

        // The blocked address: every request, the very first included.
        for _ in 0..3 {
            let blocked = h.one("edge_proxy_per_ip", &[("remote_address", "50.0.0.5")]).await;
            assert_eq!(blocked.code, Code::OverLimit);
            assert_eq!(limit_of(&blocked), Some((0, Some(Unit::Second))));
            assert_eq!(blocked.remaining, 0);
            assert!(matches!(blocked.limit.as_ref().unwrap().enforcement, Enforcement::Block(_)));
        }
        // Time does not unblock it.
        h.clock.advance(Duration::from_secs(3600));
        assert_eq!(h.one("edge_proxy_per_ip", &[("remote_address", "50.0.0.5")]).await.code, Code::OverLimit);
        // ... but lets the others through again.
        assert_eq!(h.one("edge_proxy_per_ip", &[("remote_address", "50.0.0.1")]).await.remaining, 9);
    }
}

// ---------------------------------------------------------------------------
// README example 4: a limit applies at the depth the request ends.

const EXAMPLE_4_SHALLOW: &str = "\
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
";

const EXAMPLE_4_DEEP: &str = "\
domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
";

const EXAMPLE_4_REQUEST: &[(&str, &str)] = &[("key", "value"), ("subkey", "subvalue")];

#[tokio::test]
async fn example_4_request_deeper_than_the_config_matches_nothing() {
    let h = harness(EXAMPLE_4_SHALLOW);
    assert_no_limit(&h.one("example4", EXAMPLE_4_REQUEST).await);
    // The shallow request gets the limit.
    let shallow = h.one("example4", &[("key", "value")]).await;
    assert_eq!(limit_of(&shallow), Some((300, Some(Unit::Second))));
    assert_eq!(shallow.remaining, 299);
    // The deeper request charged nothing.
    assert_eq!(h.one("example4", &[("key", "value")]).await.remaining, 298);
}

#[tokio::test]
async fn example_4_request_at_the_config_depth_matches() {
    let h = harness(EXAMPLE_4_DEEP);
    let status = h.one("example4", EXAMPLE_4_REQUEST).await;
    assert_eq!(status.code, Code::Ok);
    assert_eq!(limit_of(&status), Some((300, Some(Unit::Second))));
    assert_eq!(status.remaining, 299);
    assert_eq!(status.limit.as_ref().unwrap().stat_key, "example4.key_value.subkey");
    // Any subvalue (key-only), each its own counter.
    assert_eq!(h.one("example4", &[("key", "value"), ("subkey", "other")]).await.remaining, 299);
    assert_eq!(h.one("example4", EXAMPLE_4_REQUEST).await.remaining, 298);
    // Stopping above the limit, or another value at the first level: none.
    assert_no_limit(&h.one("example4", &[("key", "value")]).await);
    assert_no_limit(&h.one("example4", &[("key", "other"), ("subkey", "subvalue")]).await);
    // Deeper than the tree: none.
    assert_no_limit(&h.one("example4", &[("key", "value"), ("subkey", "subvalue"), ("x", "y")]).await);
}

// ---------------------------------------------------------------------------
// README example 5: unlimited.

pub(super) const EXAMPLE_5: &str = "\
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
";

#[tokio::test]
async fn example_5_unlimited_and_per_minute() {
    let h = harness(EXAMPLE_5);
    for value in ["anything", "other", ""] {
        for _ in 0..200 {
            let status = h.one("internal", &[("ldap", value)]).await;
            assert_eq!(status.code, Code::Ok);
            assert_eq!(status.remaining, u32::MAX);
            assert!(!status.shadow_over_limit);
            if let Some(limit) = &status.limit {
                assert!(limit.is_unlimited());
                assert_eq!(limit.enforcement, Enforcement::Unlimited);
            }
        }
    }
    h.admits_exactly("internal", &[("azure", "x")], 100).await;
    let azure = h.one("internal", &[("azure", "y")]).await;
    assert_eq!(limit_of(&azure), Some((100, Some(Unit::Minute))));
    assert_eq!(azure.remaining, 99);
}
