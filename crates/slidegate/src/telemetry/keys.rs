//! The metric keys of one rule, built once per rule: a check records its
//! decision (and a deny-cache hit) without building labels, and a
//! recorder finds the key's hash already computed.

use std::sync::Arc;

use metrics::{Key, Label, Level, Metadata, SharedString};

use crate::{Decision, Source, State};

/// The metadata of every metric the core records (what the `metrics`
/// macros would give them).
pub(super) static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// Every [`State`], in the order of [`RuleKeys`]'s decision keys.
const STATES: [State; 6] =
    [State::Allowed, State::Warned, State::Limited, State::Banned, State::Degraded, State::Disabled];

/// The label of a decision's outcome.
pub(super) fn outcome(state: State) -> &'static str {
    match state {
        State::Allowed => "allowed",
        State::Warned => "warned",
        State::Limited => "limited",
        State::Banned => "banned",
        State::Degraded => "degraded",
        State::Disabled => "disabled",
    }
}

/// The keys of `slidegate_decisions_total` (one per outcome) and
/// `slidegate_deny_cache_hits_total` for the rule labelled `rule`.
#[derive(Debug)]
pub(crate) struct RuleKeys {
    decisions: [Key; STATES.len()],
    /// Denials of a shadow rule, overruled.
    shadow: Key,
    deny_cache_hits: Key,
}

impl RuleKeys {
    pub(crate) fn new(rule: &Arc<str>) -> RuleKeys {
        let label = || Label::new("rule", SharedString::from_shared(Arc::clone(rule)));
        let decision = |state: State| {
            let labels = vec![label(), Label::new("outcome", outcome(state))];
            Key::from_parts("slidegate_decisions_total", labels)
        };
        let shadow =
            Key::from_parts("slidegate_decisions_total", vec![label(), Label::new("outcome", "shadow")]);
        RuleKeys {
            decisions: STATES.map(decision),
            shadow,
            deny_cache_hits: Key::from_parts("slidegate_deny_cache_hits_total", vec![label()]),
        }
    }

    /// The key of `decision`'s outcome: its state's, or `shadow`.
    pub(super) fn decision(&self, decision: &Decision) -> &Key {
        if decision.source == Source::Shadow {
            return &self.shadow;
        }
        self.state(decision.state)
    }

    fn state(&self, state: State) -> &Key {
        let index = match state {
            State::Allowed => 0,
            State::Warned => 1,
            State::Limited => 2,
            State::Banned => 3,
            State::Degraded => 4,
            State::Disabled => 5,
        };
        &self.decisions[index]
    }

    pub(super) fn deny_cache_hits(&self) -> &Key {
        &self.deny_cache_hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_has_its_own_key() {
        let keys = RuleKeys::new(&Arc::from("api"));
        for state in STATES {
            let labels: Vec<_> = keys.state(state).labels().map(|l| (l.key(), l.value())).collect();
            assert_eq!(labels, [("rule", "api"), ("outcome", outcome(state))]);
        }
    }
}
