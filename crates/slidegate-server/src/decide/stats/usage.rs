//! What a budget or a `max_in_flight` limit holds for the identities that
//! used it last (the status page's): a budget's units counted in its
//! window and its debt, a limit's leases running — each as this
//! instance's latest decision for the identity said, and when.

use std::sync::{Mutex, PoisonError};

use serde::Serialize;
use slidegate::Decision;

use super::{now_ms, top};

/// The most identities a limit shows (the most recently seen).
pub(crate) const RECENT: usize = 20;

/// One identity's use of a limit, as its latest decision said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Used {
    /// The identity as shown (`domain: key=value`).
    pub identity: String,
    /// A budget's units counted in its window (its debt included); a
    /// `max_in_flight` limit's leases running.
    pub used: u64,
    /// The limit's number.
    pub limit: u32,
    /// How far past the limit a budget is.
    pub debt: u32,
    /// When it was said (ms since the UNIX epoch).
    pub at_unix_ms: u64,
}

/// The identities a limit was used by last, newest first.
#[derive(Debug, Default)]
pub(crate) struct Usage(Mutex<Vec<Used>>);

/// Not part of what a limit is: two limits alike are equal whatever they
/// were used by.
impl PartialEq for Usage {
    fn eq(&self, _: &Usage) -> bool {
        true
    }
}

impl Eq for Usage {}

impl Clone for Usage {
    fn clone(&self) -> Usage {
        Usage(Mutex::new(self.snapshot()))
    }
}

impl Usage {
    /// Records what `decision` says `identity` holds: `used` units (or
    /// leases) of the limit's.
    pub(crate) fn record(&self, identity: &str, used: u64, decision: &Decision) {
        let shown = top::shown(identity);
        let mut recent = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        recent.retain(|u| u.identity != shown);
        recent.insert(
            0,
            Used { identity: shown, used, limit: decision.limit, debt: decision.debt, at_unix_ms: now_ms() },
        );
        recent.truncate(RECENT);
    }

    /// A lease of `identity` given back: one fewer running, if it is shown.
    pub(crate) fn released(&self, identity: &str) {
        let shown = top::shown(identity);
        let mut recent = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(used) = recent.iter_mut().find(|u| u.identity == shown) {
            used.used = used.used.saturating_sub(1);
            used.at_unix_ms = now_ms();
        }
    }

    /// Takes over `other`'s identities (a reload's limit that replaces it
    /// unchanged).
    pub(crate) fn adopt(&self, other: &Usage) {
        let taken = other.snapshot();
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = taken;
    }

    /// The identities, newest first.
    pub(crate) fn snapshot(&self) -> Vec<Used> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn keeps_the_latest_of_the_most_recent_identities() {
        let usage = Usage::default();
        let decision = Decision::allowed(10, 3, Duration::ZERO);
        for i in 0..(RECENT + 5) {
            usage.record(&format!("d: user={i}"), i as u64, &decision);
        }
        usage.record("d: user=24", 7, &decision);
        let shown = usage.snapshot();
        assert_eq!(shown.len(), RECENT);
        assert_eq!((shown[0].identity.as_str(), shown[0].used), ("d: user=24", 7), "one row per identity");
        assert_eq!(shown[RECENT - 1].identity, "d: user=5", "the five oldest went");
        usage.released("d: user=24");
        assert_eq!(usage.snapshot()[0].used, 6);
        usage.released("d: nobody");
    }
}
