//! envoy ratelimit's README examples 9–11: wildcards, value_to_metric, share_threshold.

use super::*;

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
