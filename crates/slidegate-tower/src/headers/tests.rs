//! The headers written for decisions, checked field by field.

use std::num::NonZeroU32;

use slidegate::Decision;

use super::*;

#[test]
fn rounds_up() {
    assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
    assert_eq!(ceil_secs(Duration::from_secs(3)), 3);
    assert_eq!(ceil_secs(Duration::from_millis(3001)), 4);
    assert_eq!(retry_after(Duration::ZERO), HeaderValue::from(1u64));
}

#[test]
fn a_scaled_limit_is_the_policy_written() {
    let rule = Rule::per_minute(NonZeroU32::new(100).unwrap()).named("api").unwrap();
    let policy = policy_value(&[&rule]);
    assert_eq!(policy.as_ref().unwrap(), r#""api";q=100;w=60"#);
    let families = Families { ietf: true, legacy: true, degraded: false };
    // Adaptive limits enforce 40 of the configured 100: the prebuilt
    // value is not the one written.
    let scaled = MultiDecision::from_decisions(vec![Decision::allowed(40, 39, Duration::from_secs(60))]);
    let mut headers = HeaderMap::new();
    add_quota_headers(&mut headers, &[&rule].into_iter(), policy.as_ref(), &scaled, families, Headers::Own);
    assert_eq!(headers[RATELIMIT_POLICY], r#""api";q=40;w=60"#);
    assert_eq!(headers[RATELIMIT], r#""api";r=39;t=60"#);
    assert_eq!(headers[X_RATELIMIT_LIMIT], "40");
}

#[test]
fn the_text_writer_hands_on_what_the_map_holds() {
    let a = Rule::per_minute(NonZeroU32::new(100).unwrap()).named("api").unwrap();
    let b = Rule::per_second(NonZeroU32::new(5).unwrap());
    let mut warned = Decision::allowed(5, 1, Duration::from_millis(200));
    warned.state = State::Warned;
    warned.violations = 3;
    let mut degraded = Decision::allowed(100, 100, Duration::ZERO);
    degraded.state = State::Degraded;
    let cases = [
        vec![Decision::allowed(100, 42, Duration::from_millis(59_500)), warned],
        vec![
            Decision::allowed(100, 7, Duration::from_secs(60)),
            Decision::limited(5, 0, Duration::from_millis(1500), Duration::from_secs(1)),
        ],
        vec![degraded, Decision::allowed(5, 4, Duration::from_secs(1))],
    ];
    let all_families = (0..8).map(|bits| Families::new(bits & 1 != 0, bits & 2 != 0, bits & 4 != 0));
    for families in all_families {
        for decisions in &cases {
            let multi = MultiDecision::from_decisions(decisions.clone());
            let map = quota_headers(&[&a, &b], &multi, families);
            let from_map: Vec<(String, String)> = map
                .iter()
                .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap().to_owned()))
                .collect();
            let mut texts = Vec::new();
            for_each_quota_header(&[&a, &b], &multi, families, |name, value| {
                texts.push((name.to_owned(), value.to_owned()));
            });
            let sorted = |mut pairs: Vec<(String, String)>| {
                pairs.sort();
                pairs
            };
            assert_eq!(sorted(texts), sorted(from_map), "{families:?} {decisions:?}");
        }
    }
    let denied = MultiDecision::from_decisions(cases[1].clone());
    let mut texts = Vec::new();
    for_each_quota_header(&[&a, &b], &denied, Families::new(true, true, false), |name, value| {
        texts.push(format!("{name}: {value}"));
    });
    assert_eq!(
        texts,
        [
            r#"ratelimit-policy: "api";q=100;w=60, "5/1000ms";q=5;w=1"#,
            r#"ratelimit: "api";r=7;t=60, "5/1000ms";r=0;t=1"#,
            "x-ratelimit-limit: 5",
            "x-ratelimit-remaining: 0",
            "x-ratelimit-reset: 1",
            "retry-after: 2",
        ]
    );
}

#[test]
fn writes_every_family() {
    let a = Rule::per_minute(NonZeroU32::new(100).unwrap()).named("api").unwrap();
    let b = Rule::per_second(NonZeroU32::new(5).unwrap());
    let multi = MultiDecision::from_decisions(vec![
        Decision::allowed(100, 42, Duration::from_millis(59_500)),
        Decision::allowed(5, 1, Duration::from_millis(200)),
    ]);
    let mut headers = HeaderMap::new();
    let families = Families { ietf: true, legacy: true, degraded: true };
    let policy = policy_value(&[&a, &b]);
    add_quota_headers(&mut headers, &[&a, &b].into_iter(), policy.as_ref(), &multi, families, Headers::Inner);
    assert_eq!(headers[RATELIMIT_POLICY], r#""api";q=100;w=60, "5/1000ms";q=5;w=1"#);
    assert_eq!(headers[RATELIMIT], r#""api";r=42;t=60, "5/1000ms";r=1;t=1"#);
    assert_eq!(headers[X_RATELIMIT_LIMIT], "5", "the binding (least remaining) rule");
    assert_eq!(headers[X_RATELIMIT_REMAINING], "1");
    assert_eq!(headers[X_RATELIMIT_RESET], "1");
    assert!(!headers.contains_key(X_RATELIMIT_DEGRADED));

    // An outer layer adds its policies and keeps the most binding
    // legacy values: its rule (20 left) binds less than the inner's.
    let outer = Rule::per_minute(NonZeroU32::new(1000).unwrap()).named("global").unwrap();
    let outer_multi =
        MultiDecision::from_decisions(vec![Decision::allowed(1000, 20, Duration::from_secs(30))]);
    add_quota_headers(&mut headers, &[&outer].into_iter(), None, &outer_multi, families, Headers::Inner);
    let all: Vec<&str> = headers.get_all(RATELIMIT).iter().map(|v| v.to_str().unwrap()).collect();
    assert_eq!(all, [r#""api";r=42;t=60, "5/1000ms";r=1;t=1"#, r#""global";r=20;t=30"#]);
    assert_eq!(headers.get_all(RATELIMIT_POLICY).iter().count(), 2);
    assert_eq!(headers[X_RATELIMIT_REMAINING], "1", "the inner rule still binds most");
    let tighter = MultiDecision::from_decisions(vec![Decision::allowed(1000, 0, Duration::from_secs(30))]);
    add_quota_headers(&mut headers, &[&outer].into_iter(), None, &tighter, families, Headers::Inner);
    assert_eq!(
        (&headers[X_RATELIMIT_LIMIT], &headers[X_RATELIMIT_REMAINING]),
        (&"1000".parse::<HeaderValue>().unwrap(), &"0".parse::<HeaderValue>().unwrap())
    );

    let mut none = HeaderMap::new();
    add_quota_headers(
        &mut none,
        &[&a, &b].into_iter(),
        None,
        &multi,
        Families { ietf: false, legacy: false, degraded: false },
        Headers::Inner,
    );
    assert!(none.is_empty());
}
