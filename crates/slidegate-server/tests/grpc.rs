//! Envoy RLS v3 over gRPC, with a real tonic client, on the embedded store
//! and on real Redis servers (standalone and Cluster).

mod support;

use std::time::Duration;

use envoy_types::pb::google::protobuf::UInt64Value;
use slidegate::FailurePolicy;
use slidegate_redis::RedisStore;
use slidegate_server::{HeaderFamilies, OnStoreFailure, ServiceStore};
use slidegate_testkit::{RedisCluster, RedisServer};
use support::{OK, OVER_LIMIT, rls, should_rate_limit, start, start_with, unique_prefix};

const RULES: &str = r#"
domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 3
  - key: user
    rate_limit:
      name: per_user
      unit: hour
      requests_per_unit: 5
  - key: tenant
    rate_limit:
      name: per_tenant
      requests_per_unit: 100
      window: 90s
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admits_exactly_the_limit_then_answers_over_limit_with_envoys_fields() {
    let service = start(RULES).await;
    let mut client = service.client().await;
    for left in (0..3).rev() {
        let answer = should_rate_limit(&mut client, rls("edge", &[&[("remote_address", "10.0.0.1")]])).await;
        assert_eq!(answer.overall_code, OK);
        let status = &answer.statuses[0];
        assert_eq!((status.code, status.limit_remaining), (OK, left));
        let limit = status.current_limit.as_ref().expect("current_limit");
        assert_eq!((limit.requests_per_unit, limit.unit), (3, 2), "3 per MINUTE");
        assert_eq!(status.duration_until_reset.expect("reset").seconds, 60);
    }
    let denied = should_rate_limit(&mut client, rls("edge", &[&[("remote_address", "10.0.0.1")]])).await;
    assert_eq!(denied.overall_code, OVER_LIMIT);
    assert_eq!((denied.statuses[0].code, denied.statuses[0].limit_remaining), (OVER_LIMIT, 0));
    let wait = denied.statuses[0].duration_until_reset.expect("retry");
    assert!(wait.seconds <= 60 && (wait.seconds > 0 || wait.nanos > 0), "{wait:?}");
    // Another address has its own counter.
    let other = should_rate_limit(&mut client, rls("edge", &[&[("remote_address", "10.0.0.2")]])).await;
    assert_eq!(other.overall_code, OK);
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_status_per_descriptor_in_order_and_unknowns_are_ok() {
    let service = start(RULES).await;
    let mut client = service.client().await;
    let answer = should_rate_limit(
        &mut client,
        rls(
            "edge",
            &[&[("user", "u1")], &[("nothing", "here")], &[("tenant", "t1")], &[("remote_address", "a")]],
        ),
    )
    .await;
    assert_eq!(answer.overall_code, OK);
    assert_eq!(answer.statuses.len(), 4);
    let names: Vec<String> = answer
        .statuses
        .iter()
        .map(|s| s.current_limit.as_ref().map(|l| l.name.clone()).unwrap_or_default())
        .collect();
    assert_eq!(names, ["per_user", "", "per_tenant", "edge.remote_address"], "unnamed: its descriptor");
    assert!(answer.statuses[1].current_limit.is_none(), "an unmatched descriptor has no limit");
    assert_eq!(answer.statuses[2].current_limit.as_ref().unwrap().unit, 0, "90s is no unit: UNKNOWN");
    assert_eq!(answer.statuses[2].limit_remaining, 99);
    let unknown = should_rate_limit(&mut client, rls("no-such-domain", &[&[("user", "u1")]])).await;
    assert_eq!(unknown.overall_code, OK);
    assert_eq!(unknown.statuses.len(), 1);
    assert!(unknown.statuses[0].current_limit.is_none());
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hits_addend_weighs_requests_and_a_weight_above_the_limit_is_over_limit() {
    let service = start(RULES).await;
    let mut client = service.client().await;
    let mut request = rls("edge", &[&[("user", "w")]]);
    request.hits_addend = 4;
    let answer = should_rate_limit(&mut client, request.clone()).await;
    assert_eq!((answer.overall_code, answer.statuses[0].limit_remaining), (OK, 1));
    let denied = should_rate_limit(&mut client, request).await;
    assert_eq!(denied.overall_code, OVER_LIMIT, "4 more do not fit in 1");
    // A descriptor's own hits_addend wins; 0 checks without charging.
    let mut peek = rls("edge", &[&[("user", "w")]]);
    peek.descriptors[0].hits_addend = Some(UInt64Value { value: 0 });
    for _ in 0..3 {
        let answer = should_rate_limit(&mut client, peek.clone()).await;
        assert_eq!((answer.overall_code, answer.statuses[0].limit_remaining), (OK, 1));
    }
    let mut heavy = rls("edge", &[&[("user", "x")]]);
    heavy.descriptors[0].hits_addend = Some(UInt64Value { value: 1_000_000 });
    let answer = should_rate_limit(&mut client, heavy).await;
    assert_eq!(answer.statuses[0].code, OVER_LIMIT, "a weight above the limit is OVER_LIMIT, not an error");
    let fresh = should_rate_limit(&mut client, rls("edge", &[&[("user", "x")]])).await;
    assert_eq!(fresh.statuses[0].limit_remaining, 4, "and charged nothing");
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_are_invalid_argument() {
    let service = start(RULES).await;
    let mut client = service.client().await;
    let status = client.should_rate_limit(rls("", &[&[("user", "u")]])).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("domain"), "{}", status.message());
    let status = client.should_rate_limit(rls("edge", &[])).await.unwrap_err();
    assert!(status.message().contains("descriptors"), "{}", status.message());
    let mut negative = rls("edge", &[&[("user", "u")]]);
    negative.descriptors[0].is_negative_hits = true;
    let status = client.should_rate_limit(negative).await.unwrap_err();
    assert!(status.message().contains("is_negative_hits"), "{}", status.message());
    let many: Vec<&[(&str, &str)]> = vec![&[("user", "u")]; 65];
    let status = client.should_rate_limit(rls("edge", &many)).await.unwrap_err();
    assert!(status.message().contains("at most 64"), "{}", status.message());
    let huge = "v".repeat(100_000);
    let status = client.should_rate_limit(rls("edge", &[&[("user", huge.as_str())]])).await.unwrap_err();
    // tonic refuses it before it is parsed (with OUT_OF_RANGE): answered as
    // every other malformed request, and as the docs say.
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "a message above 64 KiB is refused: {status:?}");
    assert!(status.message().contains("65536"), "{}", status.message());
    // The service still answers.
    assert_eq!(should_rate_limit(&mut client, rls("edge", &[&[("user", "u")]])).await.overall_code, OK);
    service.stop().await;
}

/// One decision takes at most 64 limits together (all or nothing): a
/// request whose descriptors meet more is refused with their count and
/// the cap, and one meeting exactly 64 is decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_meeting_more_limits_than_one_decision_takes_says_how_many() {
    let rules = "domain: many\ndescriptors:\n  - key: k\n    rate_limits:\n      \
                 - { requests_per_unit: 10, unit: minute }\n      - { requests_per_unit: 100, unit: hour }\n";
    let service = start(rules).await;
    let mut client = service.client().await;
    let values: Vec<String> = (0..40).map(|i| format!("v{i}")).collect();
    let entries: Vec<[(&str, &str); 1]> = values.iter().map(|v| [("k", v.as_str())]).collect();
    let descriptors: Vec<&[(&str, &str)]> = entries.iter().map(|e| e.as_slice()).collect();
    let status = client.should_rate_limit(rls("many", &descriptors)).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().contains("meet 80 limits") && status.message().contains("at most 64"),
        "{}",
        status.message()
    );
    let answer = should_rate_limit(&mut client, rls("many", &descriptors[..32])).await;
    assert_eq!((answer.overall_code, answer.statuses.len()), (OK, 32), "64 limits are decided");
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_headers_ride_along_when_asked_for() {
    let service = start_with(RULES, ServiceStore::Memory(slidegate::MemoryStore::new()), |c| {
        c.headers = HeaderFamilies::new(true, true, false);
    })
    .await;
    let mut client = service.client().await;
    let header = |answer: &envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse, name: &str| {
        answer.response_headers_to_add.iter().find(|h| h.key == name).map(|h| h.value.clone())
    };
    let mut last = None;
    for _ in 0..4 {
        last = Some(should_rate_limit(&mut client, rls("edge", &[&[("remote_address", "h")]])).await);
    }
    let denied = last.expect("answers");
    assert_eq!(denied.overall_code, OVER_LIMIT);
    assert_eq!(header(&denied, "x-ratelimit-limit").as_deref(), Some("3"));
    assert_eq!(header(&denied, "x-ratelimit-remaining").as_deref(), Some("0"));
    assert!(header(&denied, "retry-after").is_some());
    assert!(header(&denied, "ratelimit-policy").unwrap().contains("q=3;w=60"));
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_health_says_serving() {
    let service = start(RULES).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", service.grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let answer = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "envoy.service.ratelimit.v3.RateLimitService".into(),
        })
        .await
        .expect("health")
        .into_inner();
    assert_eq!(answer.status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);
    service.stop().await;
}

/// All or nothing: a request denied by one descriptor charges none of the
/// others — on one Redis server and across a Cluster's slots.
async fn all_or_nothing_on(store: ServiceStore) {
    let service = start_with(RULES, store, |_| {}).await;
    let mut client = service.client().await;
    for _ in 0..3 {
        let both =
            should_rate_limit(&mut client, rls("edge", &[&[("user", "ann")], &[("remote_address", "r")]]))
                .await;
        assert_eq!(both.overall_code, OK);
    }
    // The address is spent; the user still has 2.
    for _ in 0..5 {
        let denied =
            should_rate_limit(&mut client, rls("edge", &[&[("user", "ann")], &[("remote_address", "r")]]))
                .await;
        assert_eq!(denied.overall_code, OVER_LIMIT);
        // The user's limit had room (its remaining is 0 when the deny cache
        // answered for the address and the store was not asked).
        assert_eq!(denied.statuses[0].code, OK);
        assert_eq!(denied.statuses[1].code, OVER_LIMIT);
    }
    let alone = should_rate_limit(&mut client, rls("edge", &[&[("user", "ann")]])).await;
    assert_eq!(alone.statuses[0].limit_remaining, 1, "the denied requests charged the user nothing");
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_on_redis() {
    let server = RedisServer::start().expect("redis-server");
    let store =
        RedisStore::builder(server.url()).prefix(unique_prefix("aon")).connect().await.expect("connect");
    all_or_nothing_on(ServiceStore::Redis(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0).expect("cluster");
    let store =
        RedisStore::builder(cluster.url()).prefix(unique_prefix("aon-c")).connect().await.expect("connect");
    all_or_nothing_on(ServiceStore::Redis(store)).await;
}

/// A dead store: the failure policy answers (degraded) — or, configured so,
/// `UNAVAILABLE` for Envoy's `failure_mode_deny` — and never a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_store_is_answered_by_the_policy_or_unavailable() {
    let mut server = RedisServer::start().expect("redis-server");
    let connect = || async {
        let store =
            RedisStore::builder(server.url()).prefix(unique_prefix("dead")).connect().await.expect("connect");
        ServiceStore::Redis(store)
    };
    let policy = start_with(RULES, connect().await, |c| c.policy = FailurePolicy::FailOpen).await;
    let unavailable =
        start_with(RULES, connect().await, |c| c.on_store_failure = OnStoreFailure::Unavailable).await;
    server.kill();
    let mut client = policy.client().await;
    for _ in 0..5 {
        let call = should_rate_limit(&mut client, rls("edge", &[&[("remote_address", "d")]]));
        let answer = tokio::time::timeout(Duration::from_secs(10), call).await.expect("no hang");
        assert_eq!(answer.overall_code, OK, "fail-open admits");
    }
    let mut client = unavailable.client().await;
    let call = client.should_rate_limit(rls("edge", &[&[("remote_address", "d")]]));
    let status = tokio::time::timeout(Duration::from_secs(10), call).await.expect("no hang").unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable);
    policy.stop().await;
    unavailable.stop().await;
}
