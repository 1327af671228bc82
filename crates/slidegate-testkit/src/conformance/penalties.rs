//! Penalty escalation: warnings, bans, and violations that expire — the
//! same in every store.

use std::time::Duration;

use slidegate::{Algorithm, ManualClock, Penalty, Rule, State, Store};

use super::helpers::{algorithms, ok, rule};

/// 2 per second; violations over 10 s; warn after 2, ban for 5 s after 4.
pub fn escalating(algorithm: Algorithm) -> Rule {
    let penalty = Penalty::new(Duration::from_secs(10))
        .and_then(|p| p.warn_after(2))
        .and_then(|p| p.ban_after(4, Duration::from_secs(5)))
        .unwrap_or_else(|e| panic!("penalty: {e}"));
    rule(2, 1000, algorithm)
        .named(&format!("pen-{}", algorithm.short_name()))
        .and_then(|r| r.with_penalty(penalty))
        .unwrap_or_else(|e| panic!("rule: {e}"))
}

/// Denials count as violations; at 2 admissions are warned, at 4 the
/// identity is banned for 5 s with the remaining ban as `retry_after`;
/// requests during the ban are not violations; after it, the count starts
/// over. Other identities are untouched.
pub async fn warns_then_bans<S: Store>(store: &S, clock: &ManualClock) {
    for algorithm in algorithms(10) {
        let rule = escalating(algorithm);
        // On a window boundary, so the fixed window sees one window per second.
        use slidegate::Clock;
        clock.set((clock.now_ms() / 1000 + 1) * 1000);
        for _ in 0..2 {
            let d = ok(store, &rule, "mallory", 1).await;
            assert_eq!((d.allowed, d.state, d.violations), (true, State::Allowed, 0), "{rule}");
        }
        for violations in 1..=2 {
            let d = ok(store, &rule, "mallory", 1).await;
            assert_eq!((d.allowed, d.state, d.violations), (false, State::Limited, violations), "{rule}");
        }
        clock.advance(Duration::from_secs(2));
        let warned = ok(store, &rule, "mallory", 1).await;
        assert_eq!((warned.allowed, warned.state, warned.violations), (true, State::Warned, 2), "{rule}");
        let _ = ok(store, &rule, "mallory", 1).await;
        // GCRA refills continuously: keep asking until the next denials.
        let mut last = ok(store, &rule, "mallory", 1).await;
        while last.allowed {
            last = ok(store, &rule, "mallory", 1).await;
        }
        assert_eq!((last.state, last.violations), (State::Limited, 3), "{rule}");
        let banned = ok(store, &rule, "mallory", 1).await;
        assert_eq!((banned.allowed, banned.state), (false, State::Banned), "{rule}");
        assert_eq!(banned.retry_after, Duration::from_secs(5), "{rule}: the whole ban");

        assert!(ok(store, &rule, "alice", 1).await.allowed, "{rule}: others are not banned");
        clock.advance(Duration::from_millis(4999));
        for _ in 0..10 {
            let d = ok(store, &rule, "mallory", 1).await;
            assert_eq!((d.state, d.retry_after), (State::Banned, Duration::from_millis(1)), "{rule}");
        }
        clock.advance(Duration::from_millis(1));
        let free = ok(store, &rule, "mallory", 1).await;
        assert_eq!(
            (free.allowed, free.state, free.violations),
            (true, State::Allowed, 0),
            "{rule}: count starts over"
        );
        clock.advance(Duration::from_secs(30));
    }
}

/// Violations older than the violation window no longer count.
pub async fn violations_expire<S: Store>(store: &S, clock: &ManualClock) {
    let rule = escalating(Algorithm::SlidingLog);
    for _ in 0..2 {
        ok(store, &rule, "v", 1).await;
    }
    for _ in 0..3 {
        assert!(!ok(store, &rule, "v", 1).await.allowed);
    }
    clock.advance(Duration::from_secs(10));
    let d = ok(store, &rule, "v", 1).await;
    assert_eq!((d.state, d.violations), (State::Allowed, 0), "10 s later the violations have left");
    ok(store, &rule, "v", 1).await;
    let d = ok(store, &rule, "v", 1).await;
    assert_eq!((d.state, d.violations), (State::Limited, 1), "counting starts again from one");
    clock.advance(Duration::from_secs(30));
}

/// A warn-only penalty over an hour and a long flood of denials at
/// distinct milliseconds: every store keeps only what a decision can need
/// (the newest `warn_after` violations), so the count a decision reports
/// stops at the threshold, and the warning holds as long as that many
/// stay in the window. (How little a store keeps is checked by its own
/// tests; here, that every store counts alike.)
pub async fn a_flood_is_counted_up_to_the_cap<S: Store>(store: &S, clock: &ManualClock) {
    let penalty = Penalty::new(Duration::from_secs(3600))
        .and_then(|p| p.warn_after(3))
        .unwrap_or_else(|e| panic!("penalty: {e}"));
    for algorithm in algorithms(10) {
        // 1 per 10 s, so the whole flood is denied and the rule is free
        // again long before the violations leave.
        let rule = rule(1, 10_000, algorithm).with_penalty(penalty).unwrap_or_else(|e| panic!("rule: {e}"));
        let key = format!("flood-{}", algorithm.short_name());
        use slidegate::Clock;
        // On a fixed window's boundary.
        clock.set((clock.now_ms() / 10_000 + 1) * 10_000);
        assert!(ok(store, &rule, &key, 1).await.allowed, "{rule}");
        let flood_start = clock.now_ms();
        for i in 0..1500u32 {
            clock.advance(Duration::from_millis(1));
            let d = ok(store, &rule, &key, 1).await;
            assert_eq!((d.allowed, d.violations), (false, (i + 1).min(3)), "{rule}: denial {i}");
        }
        // The newest three are the flood's last; an hour after the flood's
        // first violation the count is still 3, and it falls once they go.
        clock.set(flood_start + 3_600_000 + 1);
        let d = ok(store, &rule, &key, 1).await;
        assert_eq!((d.allowed, d.state, d.violations), (true, State::Warned, 3), "{rule}");
        clock.set(flood_start + 1500 + 3_600_000 + 20_000);
        let d = ok(store, &rule, &key, 1).await;
        assert_eq!(
            (d.allowed, d.state, d.violations),
            (true, State::Allowed, 0),
            "{rule}: the flood has left"
        );
        clock.advance(Duration::from_secs(7200));
    }
}
