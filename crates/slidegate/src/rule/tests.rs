//! Unit tests of the parent module.

use super::*;
use crate::ErrorKind;

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

#[test]
fn constructors_set_windows() {
    assert_eq!(Rule::per_second(nz(5)).window(), Duration::from_secs(1));
    assert_eq!(Rule::per_minute(nz(5)).window_ms(), 60_000);
    assert_eq!(Rule::per_hour(nz(5)).window_ms(), 3_600_000);
    assert_eq!(Rule::per_day(nz(5)).window_ms(), 86_400_000);
    assert_eq!(Rule::per_day(nz(5)).algorithm(), Algorithm::SlidingLog);
}

#[test]
fn invalid_rules_say_what_is_wrong() {
    let cases = [
        (Rule::new(0, Duration::from_secs(1)), "limit must be at least 1"),
        (Rule::new(1, Duration::ZERO), "at least 1ms"),
        (Rule::new(1, Duration::from_micros(999)), "at least 1ms"),
        (Rule::new(1, Duration::from_micros(1500)), "whole number of milliseconds"),
        (Rule::new(1, Duration::MAX), "at most 366 days"),
    ];
    for (result, needle) in cases {
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidRule);
        assert!(err.to_string().contains(needle), "{err} should contain {needle}");
    }
}

#[test]
fn bucket_bounds() {
    let rule = Rule::new(10, Duration::from_millis(5)).unwrap();
    let six = Algorithm::SlidingCounter { buckets: NonZeroU16::new(6).unwrap() };
    assert!(rule.clone().with_algorithm(six).unwrap_err().to_string().contains("do not fit"));
    let many = Algorithm::SlidingCounter { buckets: NonZeroU16::new(1001).unwrap() };
    let long = Rule::per_hour(nz(1));
    assert!(long.with_algorithm(many).unwrap_err().to_string().contains("at most 1000"));
}

#[test]
fn gcra_product_bound() {
    let rule = Rule::per_day(nz(u32::MAX));
    assert!(rule.with_algorithm(Algorithm::Gcra).is_err());
    assert!(Rule::per_day(nz(1_000_000)).with_algorithm(Algorithm::Gcra).is_ok());
}

#[test]
fn names_are_checked() {
    let rule = Rule::per_second(nz(1));
    assert!(rule.clone().named("api.v1_login-x").is_ok());
    for bad in ["", "a:b", "{x}", "with space", &"x".repeat(65)] {
        assert_eq!(rule.clone().named(bad).unwrap_err().kind(), ErrorKind::InvalidRule);
    }
    assert_eq!(rule.state_name(), "1/1000ms");
    assert_eq!(rule.clone().named("api").unwrap().state_name(), "api");
    // No chosen name can spell a derived one.
    let look_alike = rule.clone().named("1-1000").unwrap();
    assert_ne!(look_alike.state_name(), rule.state_name());
    assert!(rule.named("1/1000ms").is_err());
}

#[test]
fn scaled_rules_keep_the_state_name() {
    let rule = Rule::per_second(nz(100));
    let half = rule.scaled(nz(50));
    assert_eq!(half.limit(), 50);
    assert_eq!(half.state_name(), "100/1000ms");
    assert_eq!(half.scaled(nz(70)).state_name(), "100/1000ms", "scaling a scaled rule keeps the pin");
    assert_eq!(rule.scaled(nz(100)), rule, "scaling to the configured limit is the rule itself");
    assert_ne!(half, Rule::per_second(nz(50)), "a different state than a configured 50/s");
    let named = rule.named("api").unwrap();
    assert_eq!(named.scaled(nz(10)).state_name(), "api");
}

#[test]
fn scaled_gcra_stays_within_its_bound() {
    let rule = Rule::per_day(nz(1_000_000)).with_algorithm(Algorithm::Gcra).unwrap();
    let up = rule.scaled(nz(u32::MAX));
    assert!(u64::from(up.limit()) * up.window_ms() < GCRA_MAX_PRODUCT);
    assert!(up.limit() > rule.limit());
}

#[test]
fn cached_strings_follow_the_rule() {
    let rule = Rule::per_second(nz(7));
    assert_eq!(&*rule.state_label(), "7/1000ms");
    let named = rule.clone().named("api").unwrap();
    assert_eq!(&*named.state_label(), "api", "renaming resets the cached label");
    assert_eq!(&*named.clone().named("web").unwrap().state_label(), "web");
    assert_eq!(&*rule.scaled(nz(3)).state_label(), "7/1000ms", "a scaled rule keeps its state name");
    assert_eq!(rule, Rule::per_second(nz(7)), "the cache takes no part in equality");
    let prefix = |rule: &Rule| rule.state_prefix().to_string();
    assert_eq!(prefix(&rule), "7/1000ms:log:");
    let counter = rule.with_algorithm(Algorithm::SLIDING_COUNTER).unwrap();
    assert_eq!(prefix(&counter), "7/1000ms:c10w1000:", "a new algorithm resets the cached prefix");
    assert_eq!(prefix(&counter.named("api").unwrap()), "api:c10w1000:");
}

#[test]
fn state_names_and_parts_spell_numbers_in_decimal() {
    let rule = Rule::new(u32::MAX, MAX_WINDOW).unwrap();
    assert_eq!(rule.state_name(), format!("{}/{}ms", u32::MAX, MAX_WINDOW.as_millis()));
    let counter = Rule::new(10, Duration::from_millis(1000))
        .unwrap()
        .with_algorithm(Algorithm::SlidingCounter { buckets: std::num::NonZeroU16::new(1000).unwrap() })
        .unwrap();
    assert_eq!(counter.state_part(), "c1000w1000");
    let fixed =
        Rule::new(1, Duration::from_millis(1)).unwrap().with_algorithm(Algorithm::FixedWindow).unwrap();
    assert_eq!(fixed.state_part(), "f1");
    assert_eq!(&***fixed.state_prefix(), "1/1ms:f1:");
}
