//! The most limited identities: a space-saving sketch (Metwally et al.)
//! of k counters. Memory is k entries whatever the traffic; every identity
//! limited more than `total / k` times is in it, and each count is at most
//! its `error` above the truth.

use std::collections::HashMap;
use std::time::Duration;

use super::now_ms;

/// The longest identity kept, in bytes (longer ones are cut, marked `…`):
/// the sketch's memory is bounded by k × this, whatever clients send.
pub(crate) const MAX_SHOWN_BYTES: usize = 256;

/// One counted identity.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Heavy {
    /// The identity as shown (`domain` and the descriptor's entries).
    pub identity: String,
    /// Its limited requests, at most `error` above the truth.
    pub count: u64,
    /// How much of `count` may belong to identities it displaced.
    pub error: u64,
    /// What its last denial said: what it had left …
    pub remaining: u32,
    /// … and how long until it would be admitted (ms) …
    pub retry_after_ms: u64,
    /// … when it was said (ms since the UNIX epoch): the page counts the
    /// wait down from it.
    pub last_unix_ms: u64,
}

/// A space-saving sketch of the `capacity` most limited identities.
#[derive(Debug)]
pub(crate) struct TopLimited {
    capacity: usize,
    entries: HashMap<String, Heavy>,
}

impl TopLimited {
    /// An empty sketch of `capacity` counters (at least 1).
    pub(crate) fn new(capacity: usize) -> TopLimited {
        TopLimited { capacity: capacity.max(1), entries: HashMap::with_capacity(capacity.max(1)) }
    }

    /// Counts one limited request of `identity`.
    pub(crate) fn record(&mut self, identity: &str, remaining: u32, retry_after: Duration) {
        let retry_after_ms = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
        let now_ms = now_ms();
        if let Some(heavy) = self.entries.get_mut(identity) {
            heavy.count += 1;
            (heavy.remaining, heavy.retry_after_ms, heavy.last_unix_ms) = (remaining, retry_after_ms, now_ms);
            return;
        }
        let shown = shown(identity);
        if let Some(heavy) = self.entries.get_mut(&shown) {
            heavy.count += 1;
            (heavy.remaining, heavy.retry_after_ms, heavy.last_unix_ms) = (remaining, retry_after_ms, now_ms);
            return;
        }
        let (count, error) = if self.entries.len() < self.capacity {
            (1, 0)
        } else {
            // The least counted gives its place; the newcomer inherits its
            // count as error (it may have been counted there before).
            let Some(least) = self.entries.values().min_by_key(|h| h.count).map(|h| h.identity.clone())
            else {
                return;
            };
            let min = self.entries.remove(&least).map_or(0, |h| h.count);
            (min + 1, min)
        };
        let heavy =
            Heavy { identity: shown.clone(), count, error, remaining, retry_after_ms, last_unix_ms: now_ms };
        self.entries.insert(shown, heavy);
    }

    /// The counted identities, most limited first.
    pub(crate) fn top(&self) -> Vec<Heavy> {
        let mut top: Vec<Heavy> = self.entries.values().cloned().collect();
        top.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.identity.cmp(&b.identity)));
        top
    }
}

/// `identity` cut to [`MAX_SHOWN_BYTES`] at a character boundary.
pub(super) fn shown(identity: &str) -> String {
    if identity.len() <= MAX_SHOWN_BYTES {
        return identity.to_owned();
    }
    let mut end = MAX_SHOWN_BYTES - '…'.len_utf8();
    while !identity.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &identity[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_heavy_hitters_in_bounded_memory() {
        let mut top = TopLimited::new(10);
        // Three attackers among 2,000 one-off identities: 3,900 in all, and
        // each attacker above 3,900 / k, which the sketch guarantees to keep.
        for i in 0..2_000u32 {
            top.record(&format!("noise-{i}"), 0, Duration::ZERO);
            if i % 2 == 0 {
                top.record("attacker-a", 0, Duration::from_millis(500));
            }
            if i % 4 == 0 {
                top.record("attacker-b", 1, Duration::ZERO);
            }
            if i % 5 == 0 {
                top.record("attacker-c", 2, Duration::ZERO);
            }
        }
        let heavy = top.top();
        assert_eq!(heavy.len(), 10, "never more than k");
        let names: Vec<&str> = heavy.iter().take(3).map(|h| h.identity.as_str()).collect();
        assert_eq!(names, ["attacker-a", "attacker-b", "attacker-c"]);
        // Counts over-estimate by at most their error.
        let a = &heavy[0];
        assert!(a.count >= 1000 && a.count - a.error <= 1000, "{a:?}");
        assert_eq!(a.retry_after_ms, 500);
        assert!(a.last_unix_ms > 1_700_000_000_000, "when it was last limited: {}", a.last_unix_ms);
    }

    #[test]
    fn cuts_hostile_identities() {
        let mut top = TopLimited::new(2);
        let long = "é".repeat(1000);
        top.record(&long, 0, Duration::ZERO);
        top.record(&long, 0, Duration::ZERO);
        let heavy = top.top();
        assert_eq!(heavy.len(), 1);
        assert_eq!(heavy[0].count, 2, "a cut identity is still one identity");
        assert!(heavy[0].identity.len() <= MAX_SHOWN_BYTES && heavy[0].identity.ends_with('…'));
    }
}
