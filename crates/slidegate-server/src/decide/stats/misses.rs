//! Requests that meet no limit because the configuration does not know
//! them: a domain no rules file defines (Envoy's `domain:` and the rules'
//! disagree), or a descriptor no limit matches. Each is admitted, as envoy
//! ratelimit does; here it is also logged (at most once per interval per
//! kind), counted by name in the metrics, and kept for the status page —
//! a typo that switches limiting off shows.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use slidegate::telemetry::{LogThrottle, THROTTLED_NOTE};

use super::now_ms;
use super::top::shown;

/// The most names kept per kind; past it the rest count as `_other`.
pub(crate) const MAX_MISSED_NAMES: usize = 100;

/// Misses by name, bounded.
#[derive(Debug, Default)]
struct Counts(HashMap<String, u64>);

impl Counts {
    /// Counts one miss of `name`; returns the name it is counted under
    /// (`_other` past the bound), which the metrics label it with too:
    /// names clients choose take none of the stats keys' own budget.
    /// A name longer than [`MAX_SHOWN_BYTES`](super::top::MAX_SHOWN_BYTES)
    /// is cut (marked `…`).
    fn add(&mut self, name: &str) -> String {
        let name = shown(name);
        if let Some(count) = self.0.get_mut(&name) {
            *count += 1;
            return name;
        }
        let name = if self.0.len() < MAX_MISSED_NAMES { name } else { "_other".to_owned() };
        *self.0.entry(name.clone()).or_default() += 1;
        name
    }

    /// Most first, then by name.
    fn sorted(&self) -> Vec<Missed> {
        let mut all: Vec<Missed> =
            self.0.iter().map(|(name, &count)| Missed { name: name.clone(), count }).collect();
        all.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
        all
    }
}

/// One name the configuration did not know, and how often it was asked for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Missed {
    /// The domain, or `domain: key, key` for a descriptor.
    pub name: String,
    pub count: u64,
}

/// Both kinds of miss.
#[derive(Debug, Default)]
pub(crate) struct Misses {
    domains: Mutex<Counts>,
    descriptors: Mutex<Counts>,
}

static UNKNOWN_DOMAIN: LogThrottle = LogThrottle::new();
static UNMATCHED: LogThrottle = LogThrottle::new();

impl Misses {
    /// A request for `domain`, which no rules file defines; `known` lists
    /// the domains that are (asked only when the warning is written).
    pub(crate) fn unknown_domain(&self, domain: &str, known: impl FnOnce() -> String) {
        let label = self.domains.lock().unwrap_or_else(PoisonError::into_inner).add(domain);
        metrics::counter!("slidegate_service_unknown_domain_total", "domain" => label).increment(1);
        if let Some(held_back) = UNKNOWN_DOMAIN.pass(now_ms(), LogThrottle::EVERY_MS) {
            tracing::warn!(
                target: "slidegate",
                domain,
                held_back,
                "a request for domain `{domain}`, which no rules file defines, meets no limit \
                 (the caller's domain must be a rules file's `domain:`; defined: {}){THROTTLED_NOTE}",
                known()
            );
        }
    }

    /// A descriptor of `domain` with `keys` that matches no limit.
    pub(crate) fn unmatched(&self, domain: &str, keys: &[&str]) {
        let name = format!("{domain}: {}", keys.join(", "));
        let label = self.descriptors.lock().unwrap_or_else(PoisonError::into_inner).add(&name);
        metrics::counter!("slidegate_service_unmatched_total", "descriptor" => label).increment(1);
        if let Some(held_back) = UNMATCHED.pass(now_ms(), LogThrottle::EVERY_MS) {
            tracing::warn!(
                target: "slidegate",
                descriptor = %name,
                held_back,
                "a descriptor ({name}) matches no limit of its domain: it is not limited{THROTTLED_NOTE}"
            );
        }
    }

    /// The unknown domains asked for, most first.
    pub(crate) fn domains(&self) -> Vec<Missed> {
        self.domains.lock().unwrap_or_else(PoisonError::into_inner).sorted()
    }

    /// The descriptors that matched no limit, most first.
    pub(crate) fn descriptors(&self) -> Vec<Missed> {
        self.descriptors.lock().unwrap_or_else(PoisonError::into_inner).sorted()
    }
}

#[cfg(test)]
mod tests {
    use super::super::top::MAX_SHOWN_BYTES;
    use super::*;

    #[test]
    fn misses_are_counted_by_name_and_bounded() {
        let misses = Misses::default();
        misses.unknown_domain("nope", || "api".into());
        misses.unknown_domain("nope", || "api".into());
        misses.unmatched("api", &["user", "path"]);
        assert_eq!(misses.domains(), [Missed { name: "nope".into(), count: 2 }]);
        assert_eq!(misses.descriptors(), [Missed { name: "api: user, path".into(), count: 1 }]);
        for i in 0..MAX_MISSED_NAMES + 5 {
            misses.unknown_domain(&format!("d{i}"), String::new);
        }
        let domains = misses.domains();
        assert_eq!(domains.len(), MAX_MISSED_NAMES + 1, "the bound and `_other`");
        assert_eq!(domains[0], Missed { name: "_other".into(), count: 6 });

        // Names clients choose are cut to a bounded length.
        let huge = Misses::default();
        huge.unknown_domain(&"x".repeat(4096), String::new);
        let name = &huge.domains()[0].name;
        assert!(name.len() <= MAX_SHOWN_BYTES && name.ends_with('…'), "{}", name.len());
    }
}
