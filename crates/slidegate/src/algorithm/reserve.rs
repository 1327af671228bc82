//! Reservations on the algorithms' state: an estimate charged as a check
//! would charge it, and later all or part of it given back.

use super::{Gcra, State};
use crate::{Decision, Rule};

/// What a reservation's charge left: when it was made, what it charged,
/// and for GCRA the bucket it left (see [`Gcra`]'s give-back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    at: u64,
    cost: u32,
    gcra: Option<Gcra>,
}

impl Receipt {
    /// When the estimate was charged (ms).
    pub fn at(&self) -> u64 {
        self.at
    }

    /// The estimate charged.
    pub fn cost(&self) -> u32 {
        self.cost
    }
}

impl State {
    /// Decides a request of `cost` at `now` as an ordinary rule does —
    /// admitted only if the whole cost fits, also under a
    /// [budget](Rule::budget) — and charges it if admitted: the receipt
    /// then tells [`settle`](Self::settle) what was charged.
    pub fn reserve(&mut self, rule: &Rule, now: u64, cost: u32) -> (Decision, Option<Receipt>) {
        self.matching(rule);
        let decision = match self {
            State::Log(s) => s.check(rule, now, cost),
            State::Counter(s) => s.check(rule, now, cost),
            State::Fixed(s) => s.check(rule, now, cost),
            State::Gcra(s) => s.check(rule, now, cost),
        };
        let gcra = match self {
            State::Gcra(s) => Some(*s),
            _ => None,
        };
        let receipt = decision.allowed.then_some(Receipt { at: now, cost, gcra });
        (decision, receipt)
    }

    /// Replaces a reservation's charge by `actual` at `now`: what it
    /// charged beyond `actual` is given back (exactly for the sliding log,
    /// the counter while its bucket counts, and the fixed window while
    /// its window lasts; for GCRA only while the bucket is as the
    /// reservation's charge left it, see [`Gcra`]); what `actual` asks beyond it is recorded now,
    /// whatever remains (as [`charge`](Self::charge) records). Returns the
    /// state after, as a charge reports it (with its debt).
    pub fn settle(&mut self, rule: &Rule, now: u64, receipt: &Receipt, actual: u32) -> Decision {
        self.matching(rule);
        if let Some(back) = receipt.cost.checked_sub(actual).filter(|&back| back > 0) {
            match self {
                State::Log(s) => s.give_back(rule, now, receipt.at, back),
                State::Counter(s) => s.give_back(rule, now, receipt.at, back),
                State::Fixed(s) => s.give_back(rule, receipt.at, back),
                State::Gcra(s) => {
                    if let Some(left) = receipt.gcra {
                        s.give_back(rule, receipt.at, back, left);
                    }
                }
            }
        }
        self.charge(rule, now, actual.saturating_sub(receipt.cost))
    }
}
