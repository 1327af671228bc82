//! envoy ratelimit's README examples 1–11, verbatim, loaded by slidegate and
//! decided through `Decider::check` on the memory store under a manual
//! clock; then slidegate's own semantics: exact sliding windows, several
//! limits per descriptor, all-or-nothing requests, weights, check-only
//! descriptors, request overrides and directory loading.

use std::path::{Path, PathBuf};
use std::time::Duration;

use slidegate::{Limiter, ManualClock, MemoryStore};
use slidegate_server::config::{Config, ConfigErrors, Enforcement, Rules, Unit};
use slidegate_server::{
    CheckAnswer, CheckRequest, Code, Decider, DescriptorStatus, LimitOverride, Mode, RequestDescriptor,
    ServiceStore,
};

// ---------------------------------------------------------------------------
// Harness.

struct Harness {
    clock: ManualClock,
    decider: Decider,
}

fn load(yaml: &str) -> Config {
    Config::from_texts(&[(PathBuf::from("example.yaml"), yaml.to_owned())])
        .unwrap_or_else(|e| panic!("the example does not load: {e}\n{yaml}"))
}

fn harness(yaml: &str) -> Harness {
    harness_of(load(yaml))
}

fn harness_of(config: Config) -> Harness {
    let clock = ManualClock::new(1_000_000);
    let store = ServiceStore::Memory(MemoryStore::builder().clock(clock.clone()).build());
    let limiter = Limiter::builder(store).clock(clock.clone()).build();
    Harness { clock, decider: Decider::new(limiter, Rules::new(config)) }
}

fn desc(entries: &[(&str, &str)]) -> RequestDescriptor {
    RequestDescriptor {
        entries: entries.iter().map(|&(k, v)| (k.to_owned(), v.to_owned())).collect(),
        hits_addend: None,
        limit: None,
    }
}

fn weighted(entries: &[(&str, &str)], hits: u64) -> RequestDescriptor {
    RequestDescriptor { hits_addend: Some(hits), ..desc(entries) }
}

impl Harness {
    async fn request(&self, domain: &str, descriptors: Vec<RequestDescriptor>) -> CheckAnswer {
        let request = CheckRequest { domain: domain.to_owned(), descriptors, hits_addend: 0 };
        self.decider.check(&request, Mode::Charge).await.expect("the request is answered")
    }

    /// One descriptor; the answer's code must be the descriptor's.
    async fn one(&self, domain: &str, entries: &[(&str, &str)]) -> DescriptorStatus {
        self.one_of(domain, desc(entries)).await
    }

    async fn one_of(&self, domain: &str, descriptor: RequestDescriptor) -> DescriptorStatus {
        let answer = self.request(domain, vec![descriptor]).await;
        assert_eq!(answer.statuses.len(), 1);
        let status = answer.statuses.into_iter().next().unwrap();
        assert_eq!(answer.code, status.code, "one descriptor: the request's code is its code");
        status
    }

    /// Exactly `n` requests for `entries` are admitted (remaining counting
    /// down to 0), then the next is over the limit.
    async fn admits_exactly(&self, domain: &str, entries: &[(&str, &str)], n: u32) {
        for i in 0..n {
            let status = self.one(domain, entries).await;
            assert_eq!(status.code, Code::Ok, "request {} of {n} for {entries:?}", i + 1);
            assert_eq!(status.remaining, n - 1 - i, "remaining after request {} for {entries:?}", i + 1);
        }
        let status = self.one(domain, entries).await;
        assert_eq!(status.code, Code::OverLimit, "request {} for {entries:?} is over {n}", n + 1);
        assert_eq!(status.remaining, 0);
        assert!(status.retry_after > Duration::ZERO);
    }

    /// What a check-only request (`hits_addend: 0`) sees, charging nothing.
    async fn peek(&self, domain: &str, entries: &[(&str, &str)]) -> DescriptorStatus {
        self.one_of(domain, weighted(entries, 0)).await
    }
}

/// The applying limit as `(requests_per_unit, unit)`.
fn limit_of(status: &DescriptorStatus) -> Option<(u32, Option<Unit>)> {
    status.limit.as_ref().map(|l| (l.requests_per_unit, l.unit))
}

fn assert_no_limit(status: &DescriptorStatus) {
    assert_eq!(status.code, Code::Ok);
    assert!(status.limit.is_none(), "no limit should apply, got {:?}", status.limit);
    assert!(status.limits.is_empty());
    assert!(!status.shadow_over_limit);
}

// ---------------------------------------------------------------------------
// README example 1: exact values.

const EXAMPLE_1: &str = "\
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
    assert_eq!(limit.window, Duration::from_secs(1));
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

const EXAMPLE_2: &str = "\
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

const MARKETING_1: &[(&str, &str)] = &[("message_type", "marketing"), ("to_number", "2061111111")];
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
            assert_eq!(blocked.limit.as_ref().unwrap().enforcement, Enforcement::Block);
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

const EXAMPLE_5: &str = "\
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

// ---------------------------------------------------------------------------
// README example 9: wildcards.

const EXAMPLE_9_TRAILING: &str = "\
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
";

const EXAMPLE_9_MIDDLE: &str = "\
domain: example9
descriptors:
  - key: path
    value: /api/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
";

const EXAMPLE_9_SEVERAL: &str = "\
domain: example9
descriptors:
  - key: route
    value: /api/*/resource/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
";

#[tokio::test]
async fn example_9_trailing_wildcard_with_a_counter_per_value() {
    let h = harness(EXAMPLE_9_TRAILING);
    for value in ["value1", "value2", "valueXYZ", "value"] {
        let status = h.one("example9", &[("key1", value)]).await;
        assert_eq!(limit_of(&status), Some((20, Some(Unit::Minute))), "{value}");
        assert_eq!(status.remaining, 19, "{value} has its own counter");
        assert_eq!(status.limit.as_ref().unwrap().stat_key, "example9.key1_value*");
    }
    for value in ["other", "xvalue1", "valu", "Value1"] {
        assert_no_limit(&h.one("example9", &[("key1", value)]).await);
    }
    h.admits_exactly("example9", &[("key1", "value42")], 20).await;
    assert_eq!(h.one("example9", &[("key1", "value43")]).await.remaining, 19);
}

#[tokio::test]
async fn example_9_wildcard_in_the_middle() {
    let h = harness(EXAMPLE_9_MIDDLE);
    for value in ["/api/123/action", "/api/user-id/action", "/api//action"] {
        let status = h.one("example9", &[("path", value)]).await;
        assert_eq!(limit_of(&status), Some((20, Some(Unit::Minute))), "{value}");
        assert_eq!(status.remaining, 19);
    }
    for value in ["/api/123/other", "/v1/api/123/action", "/api/123/action/x", "/api/action"] {
        assert_no_limit(&h.one("example9", &[("path", value)]).await);
    }
}

#[tokio::test]
async fn example_9_several_wildcards() {
    let h = harness(EXAMPLE_9_SEVERAL);
    for value in ["/api/v1/resource/123/action", "/api/v2/resource/456/action"] {
        let status = h.one("example9", &[("route", value)]).await;
        assert_eq!(limit_of(&status), Some((20, Some(Unit::Minute))), "{value}");
        assert_eq!(status.remaining, 19);
    }
    for value in ["/api/v1/resource/123/other", "/api/v1/123/action", "/web/v1/resource/1/action"] {
        assert_no_limit(&h.one("example9", &[("route", value)]).await);
    }
}

// ---------------------------------------------------------------------------
// README example 10: value_to_metric (matching unchanged).

const EXAMPLE_10: &str = "\
domain: example10
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit:
              unit: minute
              requests_per_unit: 60
";

const EXAMPLE_10_WILDCARD: &str = "\
domain: example10_wildcard
descriptors:
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit:
              unit: minute
              requests_per_unit: 100
";

#[tokio::test]
async fn example_10_value_to_metric_key_only_levels() {
    let h = harness(EXAMPLE_10);
    let api = &[("route", "api"), ("http_method", "GET"), ("subject_id", "123")];
    let status = h.one("example10", api).await;
    assert_eq!(limit_of(&status), Some((60, Some(Unit::Minute))));
    assert_eq!(status.limit.as_ref().unwrap().stat_key, "example10.route.http_method.subject_id");
    assert_eq!(status.remaining, 59);
    let web = h.one("example10", &[("route", "web"), ("http_method", "POST"), ("subject_id", "456")]).await;
    assert_eq!(limit_of(&web), Some((60, Some(Unit::Minute))));
    assert_eq!(web.remaining, 59, "a counter per distinct value at every key-only level");
    assert_eq!(h.one("example10", api).await.remaining, 58);
    assert_no_limit(&h.one("example10", &[("route", "api"), ("http_method", "GET")]).await);
}

#[tokio::test]
async fn example_10_value_to_metric_with_a_wildcard() {
    let h = harness(EXAMPLE_10_WILDCARD);
    let request = &[("user", "alice"), ("action", "readfile"), ("resource", "documents")];
    let status = h.one("example10_wildcard", request).await;
    assert_eq!(limit_of(&status), Some((100, Some(Unit::Minute))));
    assert_eq!(status.remaining, 99);
    assert_eq!(status.limit.as_ref().unwrap().stat_key, "example10_wildcard.user.action_read*.resource");
    assert_no_limit(
        &h.one(
            "example10_wildcard",
            &[("user", "alice"), ("action", "writefile"), ("resource", "documents")],
        )
        .await,
    );
}

// ---------------------------------------------------------------------------
// README example 11: share_threshold.

const EXAMPLE_11: &str = "\
domain: example11
descriptors:
  # With share_threshold: true, all files/* matches share the same threshold
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10

  # Without share_threshold, each files_no_share/* match has its own isolated threshold
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit:
      unit: hour
      requests_per_unit: 10
";

const EXAMPLE_11_METRICS: &str = "\
domain: example11_metrics
descriptors:
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit:
          unit: minute
          requests_per_unit: 60
";

#[tokio::test]
async fn example_11_shared_threshold_is_one_counter() {
    let h = harness(EXAMPLE_11);
    let mut remaining = 10;
    for file in ["files/a.pdf", "files/b.csv"] {
        for _ in 0..5 {
            remaining -= 1;
            let status = h.one("example11", &[("files", file)]).await;
            assert_eq!(status.code, Code::Ok);
            assert_eq!(limit_of(&status), Some((10, Some(Unit::Hour))));
            assert_eq!(status.remaining, remaining, "{file}: one counter for every files/*");
        }
    }
    let over = h.one("example11", &[("files", "files/c.txt")]).await;
    assert_eq!(over.code, Code::OverLimit);
    assert_eq!(limit_of(&over), Some((10, Some(Unit::Hour))));
}

#[tokio::test]
async fn example_11_unshared_threshold_is_a_counter_per_value() {
    let h = harness(EXAMPLE_11);
    h.admits_exactly("example11", &[("files_no_share", "files_no_share/a.pdf")], 10).await;
    h.admits_exactly("example11", &[("files_no_share", "files_no_share/b.csv")], 10).await;
}

#[tokio::test]
async fn example_11_shared_threshold_on_an_intermediate_level() {
    let h = harness(EXAMPLE_11_METRICS);
    let status = h.one("example11_metrics", &[("route", "api/v1"), ("method", "GET")]).await;
    assert_eq!(limit_of(&status), Some((60, Some(Unit::Minute))));
    assert_eq!(status.remaining, 59);
    for _ in 0..29 {
        assert_eq!(
            h.one("example11_metrics", &[("route", "api/v1"), ("method", "GET")]).await.code,
            Code::Ok
        );
    }
    for i in 0..30u32 {
        let status = h.one("example11_metrics", &[("route", "api/v2"), ("method", "GET")]).await;
        assert_eq!(status.code, Code::Ok);
        assert_eq!(status.remaining, 29 - i, "api/v1 and api/v2 share one counter");
    }
    let over = h.one("example11_metrics", &[("route", "api/v3"), ("method", "GET")]).await;
    assert_eq!(over.code, Code::OverLimit);
    // The key-only `method` level still counts per value.
    assert_eq!(h.one("example11_metrics", &[("route", "api/v3"), ("method", "POST")]).await.remaining, 59);
    assert_no_limit(&h.one("example11_metrics", &[("route", "web/v1"), ("method", "GET")]).await);
}

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
    let rpu = |status: DescriptorStatus| status.limit.map(|l| l.requests_per_unit);
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
    let rpu = |status: DescriptorStatus| status.limit.map(|l| l.requests_per_unit);
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
    assert_eq!((limit.requests_per_unit, limit.window, limit.unit), (2, Duration::from_secs(300), None));
    let hour = h.one("ext", &[("one_hour", "a")]).await;
    assert_eq!(limit_of(&hour), Some((2, Some(Unit::Hour))));
    assert_eq!(hour.limit.as_ref().unwrap().window, Duration::from_secs(3600));
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

const TWO_KEYS: &str = "\
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

// ---------------------------------------------------------------------------
// A request's own limit.

#[tokio::test]
async fn a_request_limit_override_replaces_the_configured_one() {
    let h = harness(TWO_KEYS);
    let two_per_minute = LimitOverride { requests_per_unit: 2, unit: Unit::Minute };
    let overridden =
        |entries: &[(&str, &str)]| RequestDescriptor { limit: Some(two_per_minute), ..desc(entries) };
    let b = &[("b", "o")];
    for remaining in [1, 0] {
        let status = h.one_of("two", overridden(b)).await;
        assert_eq!(status.code, Code::Ok);
        assert_eq!(limit_of(&status), Some((2, Some(Unit::Minute))));
        assert_eq!(status.remaining, remaining);
    }
    assert_eq!(h.one_of("two", overridden(b)).await.code, Code::OverLimit);
    // The configured 5/min counter is apart and untouched.
    assert_eq!(h.one("two", b).await.remaining, 4);

    // It applies even where no configured descriptor matches...
    let unmatched = &[("nothing", "configured")];
    assert_no_limit(&h.one("two", unmatched).await);
    assert_eq!(limit_of(&h.one_of("two", overridden(unmatched)).await), Some((2, Some(Unit::Minute))));
    // ...but not in an unknown domain.
    assert_no_limit(&h.one_of("unknown", overridden(unmatched)).await);

    // An override of 0 blocks.
    let blocked = RequestDescriptor {
        limit: Some(LimitOverride { requests_per_unit: 0, unit: Unit::Second }),
        ..desc(&[("a", "z")])
    };
    assert_eq!(h.one_of("two", blocked).await.code, Code::OverLimit);
}

// ---------------------------------------------------------------------------
// Loading files and directories.

fn write(path: &Path, text: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn a_directory_loads_every_rules_file() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("alpha.yaml"), EXAMPLE_1.as_bytes());
    write(&dir.path().join("nested/beta.yml"), EXAMPLE_5.as_bytes());
    // Skipped: dot files, dot directories, other extensions.
    write(&dir.path().join(".hidden.yaml"), b"domain: hidden\nnot: [valid");
    write(&dir.path().join("..2024_01_01/gamma.yaml"), b"domain: gamma\ndescriptors: []\n");
    write(&dir.path().join("README.txt"), b"not yaml at all: [");

    let config = Config::load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let mut names: Vec<&str> = config.domains().map(|d| d.name()).collect();
    names.sort_unstable();
    assert_eq!(names, ["internal", "mongo_cps"]);
    assert_eq!(config.files().len(), 2);
    assert_eq!(config.domain("mongo_cps").unwrap().file(), dir.path().join("alpha.yaml"));
    assert_eq!(config.domain("internal").unwrap().file(), dir.path().join("nested/beta.yml"));
    assert_eq!(config.hash().len(), 16);

    let h = harness_of(config);
    assert_eq!(
        limit_of(&h.one("mongo_cps", &[("database", "users")]).await),
        Some((500, Some(Unit::Second)))
    );
    assert_eq!(limit_of(&h.one("internal", &[("azure", "x")]).await), Some((100, Some(Unit::Minute))));
    assert_no_limit(&h.one("gamma", &[("a", "b")]).await);

    // The same directory loaded again: the same hash.
    assert_eq!(Config::load(dir.path()).unwrap().hash(), h.decider.rules().current().hash());
}

#[tokio::test]
async fn a_single_file_loads() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yaml");
    write(&file, EXAMPLE_2.as_bytes());
    let config = Config::load(&file).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.files(), std::slice::from_ref(&file));
    let h = harness_of(config);
    h.admits_exactly("messaging", MARKETING_1, 5).await;
}

#[tokio::test]
async fn a_domain_defined_twice_names_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("a.yaml");
    let second = dir.path().join("b.yaml");
    write(&first, b"domain: same\ndescriptors:\n  - key: k\n");
    write(&second, b"# the second\ndomain: same\ndescriptors:\n  - key: j\n");
    let ConfigErrors(errors) = Config::load(dir.path()).expect_err("a domain in two files");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    let error = &errors[0];
    assert_eq!(error.file, second);
    assert_eq!(error.line, 2, "{error}");
    assert!(error.message.contains("same"), "{error}");
    assert!(error.message.contains(&first.display().to_string()), "names the first file: {error}");
    let shown = error.to_string();
    assert!(shown.starts_with(&format!("{}:2:", second.display())), "{shown}");
}

#[tokio::test]
async fn rules_can_be_replaced_in_flight() {
    let h = harness(TWO_KEYS);
    assert_eq!(limit_of(&h.one("two", &[("a", "x")]).await), Some((2, Some(Unit::Minute))));
    h.decider.rules().replace(load(EXAMPLE_1));
    assert_no_limit(&h.one("two", &[("a", "x")]).await);
    assert_eq!(
        limit_of(&h.one("mongo_cps", &[("database", "users")]).await),
        Some((500, Some(Unit::Second)))
    );
}

/// Limits alike (the same limit, window, algorithm and penalty) share one
/// rule and the strings derived from it; counters stay apart all the
/// same, each keyed by its own descriptor.
#[tokio::test]
async fn limits_alike_share_one_rule_and_keep_their_own_counters() {
    let config = load(
        "domain: d\ndescriptors:\n\
         - {key: a, rate_limit: {unit: minute, requests_per_unit: 1}}\n\
         - {key: b, rate_limit: {unit: minute, requests_per_unit: 1}}\n\
         - {key: c, rate_limit: {unit: minute, requests_per_unit: 2}}\n",
    );
    let rules: Vec<(slidegate::Rule, *const u8)> = config
        .limits()
        .into_iter()
        .map(|(_, limit)| {
            let rule = limit.rule().expect("a rule");
            (rule.clone(), rule.state_name().as_ptr())
        })
        .collect();
    assert_eq!(rules.len(), 3);
    assert_eq!(rules[0], rules[1], "a and b share one rule");
    assert_ne!(rules[0].0, rules[2].0, "c's limit is another rule");
    let h = harness_of(config);
    assert_eq!(h.one("d", &[("a", "x")]).await.code, Code::Ok);
    assert_eq!(h.one("d", &[("b", "x")]).await.code, Code::Ok, "b counts apart from a");
    assert_eq!(h.one("d", &[("a", "x")]).await.code, Code::OverLimit);
}
