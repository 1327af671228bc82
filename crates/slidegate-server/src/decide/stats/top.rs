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
    /// Its domain and entries, to reset its counters from the page
    /// (`None` when the identity was too long to show whole).
    pub descriptor: Option<Descriptor>,
    /// Its limited requests in the last five minutes (as of the snapshot).
    pub limited_5m: u64,
    /// Its limited requests, at most `error` above the truth.
    pub count: u64,
    /// How much of `count` may belong to identities it displaced.
    pub error: u64,
    /// What its last denial said: what it had left …
    pub remaining: u32,
    /// … and how long until it would be admitted (ms) …
    pub retry_after_ms: u64,
    /// … when it was said (ms since the UNIX epoch): the page counts the
    /// wait down from it …
    pub last_unix_ms: u64,
    /// … the limit that said it (its name) …
    pub limit: String,
    /// … and whether it was a ban (`banned`, lasting `retry_after_ms`) or
    /// a denial (`limited`); `reset` once an operator reset its counters.
    pub state: &'static str,
    #[serde(skip)]
    minutes: Minutes,
}

/// A limited identity's domain and entries.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Descriptor {
    pub domain: String,
    pub entries: Vec<Entry>,
}

/// One entry of a descriptor.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Entry {
    pub key: String,
    pub value: String,
}

/// What an identity's last denial said.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Denial<'a> {
    pub(crate) remaining: u32,
    pub(crate) retry_after: Duration,
    /// The denying limit's name.
    pub(crate) limit: &'a str,
    pub(crate) banned: bool,
}

/// Minutes counted for the five-minute figure.
const MINUTES: usize = 5;

/// Limited requests per minute, the last [`MINUTES`] of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Minutes {
    /// Per slot (`minute % MINUTES`): the minute it counts, and its count.
    slots: [(u64, u32); MINUTES],
}

impl Minutes {
    fn add(&mut self, minute: u64) {
        let slot = &mut self.slots[usize::try_from(minute % MINUTES as u64).unwrap_or(0)];
        if slot.0 != minute {
            *slot = (minute, 0);
        }
        slot.1 = slot.1.saturating_add(1);
    }

    /// The count of the [`MINUTES`] minutes up to `minute`.
    fn total(&self, minute: u64) -> u64 {
        self.slots
            .iter()
            .filter(|(m, _)| *m <= minute && minute - *m < MINUTES as u64)
            .map(|(_, n)| u64::from(*n))
            .sum()
    }
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

    /// Counts one limited request of the identity `key` (the caller's
    /// unambiguous spelling of it, at most a few hundred bytes); `shown`
    /// gives how it is shown and its domain and entries, built only when
    /// it is new to the sketch.
    pub(crate) fn record(
        &mut self,
        key: &str,
        shown: impl FnOnce() -> (String, Descriptor),
        denial: Denial<'_>,
    ) {
        let now_ms = now_ms();
        if let Some(heavy) = self.entries.get_mut(key) {
            heavy.denied(denial, now_ms);
            return;
        }
        let (count, error) = if self.entries.len() < self.capacity {
            (0, 0)
        } else {
            // The least counted gives its place; the newcomer inherits its
            // count as error (it may have been counted there before).
            let Some(least) = self.entries.iter().min_by_key(|(_, h)| h.count).map(|(key, _)| key.clone())
            else {
                return;
            };
            let min = self.entries.remove(&least).map_or(0, |h| h.count);
            (min, min)
        };
        let (full, descriptor) = shown();
        let identity = self::shown(&full);
        let mut heavy = Heavy {
            descriptor: (identity == full).then_some(descriptor),
            identity,
            limited_5m: 0,
            count,
            error,
            remaining: 0,
            retry_after_ms: 0,
            last_unix_ms: 0,
            limit: String::new(),
            state: "",
            minutes: Minutes::default(),
        };
        heavy.denied(denial, now_ms);
        self.entries.insert(key.to_owned(), heavy);
    }

    /// Marks the counters of the identity `key` as reset by an operator:
    /// nothing of its last denial stands.
    pub(crate) fn forgot(&mut self, key: &str) {
        if let Some(heavy) = self.entries.get_mut(key) {
            (heavy.remaining, heavy.retry_after_ms, heavy.state) = (0, 0, "reset");
        }
    }

    /// The counted identities as of `now_ms`, those limited most in the
    /// last five minutes first, then most since start.
    pub(crate) fn top(&self, now_ms: u64) -> Vec<Heavy> {
        let minute = now_ms / 60_000;
        let mut top: Vec<Heavy> = self
            .entries
            .values()
            .map(|heavy| Heavy { limited_5m: heavy.minutes.total(minute), ..heavy.clone() })
            .collect();
        top.sort_by(|a, b| {
            (b.limited_5m, b.count).cmp(&(a.limited_5m, a.count)).then_with(|| a.identity.cmp(&b.identity))
        });
        top
    }
}

impl Heavy {
    /// Counts one more denial, said at `now_ms`.
    fn denied(&mut self, denial: Denial<'_>, now_ms: u64) {
        self.count += 1;
        self.minutes.add(now_ms / 60_000);
        self.remaining = denial.remaining;
        self.retry_after_ms = u64::try_from(denial.retry_after.as_millis()).unwrap_or(u64::MAX);
        self.last_unix_ms = now_ms;
        if self.limit != denial.limit {
            denial.limit.clone_into(&mut self.limit);
        }
        self.state = if denial.banned { "banned" } else { "limited" };
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

    fn denial(remaining: u32, retry_after: Duration) -> Denial<'static> {
        Denial { remaining, retry_after, limit: "l", banned: false }
    }

    /// An identity shown as its key, of no entries.
    fn record(top: &mut TopLimited, key: &str, denial: Denial<'_>) {
        top.record(key, || (key.to_owned(), Descriptor { domain: "d".into(), entries: Vec::new() }), denial);
    }

    #[test]
    fn keeps_the_heavy_hitters_in_bounded_memory() {
        let mut top = TopLimited::new(10);
        // Three attackers among 2,000 one-off identities: 3,900 in all, and
        // each attacker above 3,900 / k, which the sketch guarantees to keep.
        for i in 0..2_000u32 {
            record(&mut top, &format!("noise-{i}"), denial(0, Duration::ZERO));
            if i % 2 == 0 {
                record(&mut top, "attacker-a", denial(0, Duration::from_millis(500)));
            }
            if i % 4 == 0 {
                record(&mut top, "attacker-b", denial(1, Duration::ZERO));
            }
            if i % 5 == 0 {
                record(&mut top, "attacker-c", denial(2, Duration::ZERO));
            }
        }
        let heavy = top.top(now_ms());
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
        record(&mut top, &long, denial(0, Duration::ZERO));
        record(&mut top, &long, denial(0, Duration::ZERO));
        let heavy = top.top(now_ms());
        assert_eq!(heavy.len(), 1);
        assert_eq!(heavy[0].count, 2, "a cut identity is still one identity");
        assert!(heavy[0].identity.len() <= MAX_SHOWN_BYTES && heavy[0].identity.ends_with('…'));
        assert_eq!(heavy[0].descriptor, None, "a cut identity cannot be reset from the page");
    }

    #[test]
    fn the_last_five_minutes_are_counted_apart() {
        let mut minutes = Minutes::default();
        for minute in [100, 100, 101, 103, 104, 104] {
            minutes.add(minute);
        }
        assert_eq!(minutes.total(104), 6);
        assert_eq!(minutes.total(105), 4, "minute 100 is over");
        assert_eq!(minutes.total(109), 0);
        minutes.add(110);
        assert_eq!(minutes.total(110), 1, "a slot reused for a later minute starts afresh");
    }
}
