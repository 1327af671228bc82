//! One key's state in the memory store: the algorithm's state and, for
//! rules with a penalty, the identity's violations and ban. Deciding is
//! split in two steps so multi-dimension checks can look at every
//! dimension before charging any.

use crate::algorithm::{Receipt, State as AlgorithmState};
use crate::store::PenaltyState;
use crate::{Decision, Rule, State};

pub(super) struct Entry {
    state: AlgorithmState,
    /// Boxed: rare, and the map's slots stay small (fewer cache lines per check).
    penalty: Option<Box<PenaltyState>>,
    /// Time (ms) from which the entry holds nothing and may be dropped.
    pub(super) expires_at: u64,
}

impl Entry {
    pub(super) fn new(rule: &Rule) -> Entry {
        Entry { state: AlgorithmState::new(rule), penalty: None, expires_at: 0 }
    }

    /// One dimension without a penalty: decides and charges in one step
    /// (what `peek` then `finish` do, without evaluating twice).
    pub(super) fn check(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        debug_assert!(rule.penalty().is_none());
        let (decision, expires_at) = self.state.check_expiring(rule, now, cost);
        self.expires_at = expires_at;
        decision
    }

    /// A reservation of `cost` (a rule without a penalty): see
    /// [`State::reserve`](AlgorithmState::reserve).
    pub(super) fn reserve(&mut self, rule: &Rule, now: u64, cost: u32) -> (Decision, Option<Receipt>) {
        let reserved = self.state.reserve(rule, now, cost);
        self.expires_at = self.state.expires_at(rule);
        reserved
    }

    /// A reservation settled at `actual`: see
    /// [`State::settle`](AlgorithmState::settle).
    pub(super) fn settle(&mut self, rule: &Rule, now: u64, receipt: &Receipt, actual: u32) -> Decision {
        let decision = self.state.settle(rule, now, receipt, actual);
        self.expires_at = self.state.expires_at(rule);
        decision
    }

    /// Step 1: the ban, if the identity is banned; otherwise the algorithm's
    /// verdict without charging.
    pub(super) fn peek(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        if let Some(penalty) = rule.penalty()
            && let Some(ban) = self.penalty.get_or_insert_default().banned(penalty, rule.limit(), now)
        {
            return ban;
        }
        self.state.peek(rule, now, cost)
    }

    /// A verdict that changes nothing the store keeps: the ban, or the
    /// algorithm's verdict, with the violations counted so far and the
    /// warning they give (see [`Store::peek_all`](crate::Store::peek_all)).
    pub(super) fn peek_only(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        let mut decision = self.peek(rule, now, cost);
        if decision.state != State::Banned
            && let (Some(penalty), Some(state)) = (rule.penalty(), self.penalty.as_deref())
        {
            state.observe(penalty, now, &mut decision);
        }
        decision
    }

    /// Step 2: charges an admitting `peeked` decision when `charge` (every
    /// dimension admitted) — a budget whatever was peeked, unless banned —
    /// and accounts the outcome to the penalty: a denial is a violation, an
    /// admission may carry a warning.
    pub(super) fn finish(
        &mut self,
        rule: &Rule,
        now: u64,
        cost: u32,
        peeked: Decision,
        charge: bool,
    ) -> Decision {
        if peeked.state == State::Banned {
            return peeked;
        }
        let mut decision = if (peeked.allowed && charge) || rule.is_budget() {
            self.state.check(rule, now, cost)
        } else {
            peeked
        };
        let mut expires_at = self.state.expires_at(rule);
        if let Some(penalty) = rule.penalty() {
            let state = self.penalty.get_or_insert_default();
            if decision.allowed {
                state.on_admit(penalty, now, &mut decision);
            } else {
                state.on_deny(penalty, now, &mut decision);
            }
            expires_at = expires_at.max(state.expires_at(penalty));
        }
        self.expires_at = expires_at;
        decision
    }
}
