//! Asking the store about a request's items: what needs no store first,
//! then peeks, budgets' records and the one all-or-nothing charge (the
//! order the [module](super) docs give).

use std::time::Duration;

use slidegate::{Decision, Source, WeightedDimension};

use super::item::{self, Item, dimensions, merge};
use super::request::{CheckError, Mode};
use super::{Decider, check_error, too_many};
use crate::config::Enforcement;

impl Decider {
    /// Fills every item's outcome; returns whether an enforced limit denied.
    pub(super) async fn decide(&self, items: &mut [Item], mode: Mode) -> Result<bool, CheckError> {
        // Answers without the store.
        let mut charge = Vec::new();
        let mut peek = Vec::new();
        for (i, item) in items.iter_mut().enumerate() {
            match &item.limit.enforcement {
                // Checks do not meet them (`Decider::items`); admitted.
                Enforcement::Unlimited | Enforcement::InFlight(_) => {
                    item.outcome = Some(Decision::allowed(u32::MAX, u32::MAX, Duration::ZERO));
                }
                &Enforcement::Block(window) => {
                    let mut blocked = Decision::limited(0, 0, window, window);
                    if item.shadow {
                        blocked.allowed = true;
                        blocked.source = Source::Shadow;
                    }
                    item.outcome = Some(blocked);
                }
                Enforcement::Rule(_) if item.cost == 0 || mode == Mode::Peek => peek.push(i),
                Enforcement::Rule(_) => charge.push(i),
            }
        }
        if mode == Mode::Record {
            // A charge of 0 too: it records nothing, and reports the debt.
            charge.append(&mut peek);
            self.record(items, &charge).await?;
            return Ok(items.iter().any(|i| i.outcome.is_some_and(|d| !d.allowed)));
        }
        let denied = |items: &[Item]| items.iter().any(|i| i.outcome.is_some_and(|d| !d.allowed));
        if !denied(items) {
            self.peek(items, &peek).await?;
            peek.clear();
        }
        if denied(items) {
            peek.extend(charge);
            self.settle_denied(items, &peek).await?;
            return Ok(true);
        }
        // The rest together, all or nothing (repeated descriptors sum
        // their weights into one dimension).
        let Some(allowed) = self.ask(items, &charge, Mode::Charge).await? else { return Ok(false) };
        if allowed {
            return Ok(false);
        }
        // A weight above a limit denied without asking about the others:
        // their answers say what they hold.
        let unasked: Vec<usize> = charge
            .iter()
            .copied()
            .filter(|&i| items[i].outcome.is_some_and(|d| d.allowed && d.source == Source::CostAboveLimit))
            .collect();
        self.settle_denied(items, &unasked).await?;
        Ok(true)
    }

    /// The items `which` of a request denied without the store's verdict
    /// on them: budgets record their weight whatever the others decide;
    /// the others are peeked.
    async fn settle_denied(&self, items: &mut [Item], which: &[usize]) -> Result<(), CheckError> {
        let (budgets, others): (Vec<usize>, Vec<usize>) = which
            .iter()
            .partition(|&&i| items[i].cost > 0 && items[i].rule().is_some_and(slidegate::Rule::is_budget));
        self.peek(items, &others).await?;
        if !budgets.is_empty() {
            self.ask(items, &budgets, Mode::Charge).await?;
        }
        Ok(())
    }

    /// Records the weights of the items `which` whatever remains, each
    /// limit as a budget ([`Limiter::charge`](slidegate::Limiter::charge)).
    async fn record(&self, items: &mut [Item], which: &[usize]) -> Result<(), CheckError> {
        let groups = merge(items, which);
        let budgets: Vec<(slidegate::Rule, usize)> = groups
            .iter()
            .filter_map(|g| Some((items[g.members[0]].rule()?.clone().budget(), g.members[0])))
            .collect();
        // Each group's own weight, 0 too (`merge` asks about 1 at least).
        let weight = |group: &item::Group| {
            let sum = group.members.iter().fold(0u64, |sum, &i| sum.saturating_add(items[i].cost));
            u32::try_from(sum).unwrap_or(u32::MAX)
        };
        let dims: Vec<WeightedDimension<'_>> = budgets
            .iter()
            .zip(&groups)
            .map(|((rule, first), group)| (rule, items[*first].identity.as_str(), weight(group)))
            .collect();
        if dims.is_empty() {
            return Ok(());
        }
        too_many(dims.len())?;
        let started = std::time::Instant::now();
        let multi = self.limiter.check_all_weighted(&dims).await.map_err(|e| check_error(&e))?;
        self.stats.store_call(started.elapsed());
        for (group, decision) in groups.iter().zip(&multi.decisions) {
            for &i in &group.members {
                items[i].outcome = Some(*decision);
            }
        }
        Ok(())
    }

    /// Peeks the items `which` (nothing is charged).
    async fn peek(&self, items: &mut [Item], which: &[usize]) -> Result<(), CheckError> {
        if !which.is_empty() {
            self.ask(items, which, Mode::Peek).await?;
        }
        Ok(())
    }

    /// Decides the items `which` together in one limiter call — charged
    /// (all or nothing) or peeked, by `mode` — and fills their outcomes.
    /// Whether the call admitted them; `None` when none decides through
    /// the store.
    async fn ask(&self, items: &mut [Item], which: &[usize], mode: Mode) -> Result<Option<bool>, CheckError> {
        let groups = merge(items, which);
        let dims = dimensions(items, &groups);
        if dims.is_empty() {
            return Ok(None);
        }
        too_many(dims.len())?;
        let started = std::time::Instant::now();
        let multi = match mode {
            Mode::Peek => self.limiter.peek_all_weighted(&dims).await,
            Mode::Charge | Mode::Record => self.limiter.check_all_weighted(&dims).await,
        }
        .map_err(|e| check_error(&e))?;
        self.stats.store_call(started.elapsed());
        for (group, decision) in groups.iter().zip(&multi.decisions) {
            for &i in &group.members {
                items[i].outcome = Some(*decision);
            }
        }
        Ok(Some(multi.allowed))
    }
}
