//! envoy ratelimit's units, and slidegate's free windows (`window: 5m`).

use std::time::Duration;

/// A `rate_limit`'s `unit`, as envoy ratelimit reads it (case-insensitive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Unit {
    /// One second.
    Second,
    /// 60 seconds.
    Minute,
    /// 3,600 seconds.
    Hour,
    /// 86,400 seconds.
    Day,
    /// 7 days.
    Week,
    /// 30 days (as envoy ratelimit counts a month).
    Month,
    /// 365 days.
    Year,
}

impl Unit {
    /// Every unit, shortest first.
    pub const ALL: [Unit; 7] =
        [Unit::Second, Unit::Minute, Unit::Hour, Unit::Day, Unit::Week, Unit::Month, Unit::Year];

    /// Parses a unit name in any case: `second`, `MINUTE`, `Hour`, …
    pub fn parse(name: &str) -> Option<Unit> {
        Unit::ALL.into_iter().find(|unit| unit.name().eq_ignore_ascii_case(name))
    }

    /// The lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Year => "year",
        }
    }

    /// The unit's length.
    pub fn duration(self) -> Duration {
        const DAY: u64 = 86_400;
        Duration::from_secs(match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => DAY,
            Unit::Week => 7 * DAY,
            Unit::Month => 30 * DAY,
            Unit::Year => 365 * DAY,
        })
    }

    /// The unit whose length is exactly `window`, if any: what an RLS
    /// answer's `current_limit` names for a `window:` limit.
    pub fn of_window(window: Duration) -> Option<Unit> {
        Unit::ALL.into_iter().find(|unit| unit.duration() == window)
    }

    /// The number of `envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit`
    /// (and of `envoy.type.v3.RateLimitUnit`, which numbers them alike).
    pub fn proto(self) -> i32 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 2,
            Unit::Hour => 3,
            Unit::Day => 4,
            Unit::Month => 5,
            Unit::Year => 6,
            Unit::Week => 7,
        }
    }

    /// The unit numbered `number` in the protos (0, UNKNOWN, is none).
    pub fn from_proto(number: i32) -> Option<Unit> {
        Unit::ALL.into_iter().find(|unit| unit.proto() == number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_in_any_case() {
        assert_eq!(Unit::parse("second"), Some(Unit::Second));
        assert_eq!(Unit::parse("MINUTE"), Some(Unit::Minute));
        assert_eq!(Unit::parse("Week"), Some(Unit::Week));
        assert_eq!(Unit::parse("fortnight"), None);
        assert_eq!(Unit::parse(""), None);
        assert_eq!(Unit::Month.duration(), Duration::from_secs(30 * 86_400));
        assert_eq!(Unit::Year.duration(), Duration::from_secs(365 * 86_400));
    }

    #[test]
    fn numbers_match_the_protos() {
        for unit in Unit::ALL {
            assert_eq!(Unit::from_proto(unit.proto()), Some(unit));
        }
        assert_eq!(Unit::from_proto(0), None);
        assert_eq!(Unit::of_window(Duration::from_secs(3600)), Some(Unit::Hour));
        assert_eq!(Unit::of_window(Duration::from_secs(300)), None);
    }
}
