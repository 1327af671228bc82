//! The answer to a request, from its decided items: one status per
//! descriptor, reporting the limit that binds it most.

use super::item::Item;
use crate::decide::request::{CheckAnswer, Code, DescriptorStatus, LimitStatus};

/// The answer when no limit applies to any descriptor.
pub(super) fn no_limits(count: usize) -> CheckAnswer {
    CheckAnswer {
        code: Code::Ok,
        statuses: vec![DescriptorStatus::unlimited_by_config(); count],
        degraded: false,
    }
}

/// Builds the answer from the decided items.
/// `charged`: a check, not a peek: each limit's rates count its outcome
/// (admitted when the request was, limited when the limit denied).
pub(super) fn answer(
    count: usize,
    items: Vec<Item>,
    (denied, degraded, charged): (bool, bool, bool),
) -> CheckAnswer {
    let mut statuses = vec![DescriptorStatus::unlimited_by_config(); count];
    let now_s = if charged { crate::decide::stats::now_s() } else { 0 };
    for item in items {
        let Some(decision) = item.outcome else { continue };
        // A shadow limit's denial is reported as a denial, marked shadow.
        let allowed = decision.allowed && !decision.is_shadow_denial();
        if charged && (!allowed || !denied) {
            item.limit.rates.record(now_s, allowed);
        }
        let status = &mut statuses[item.descriptor];
        if decision.is_shadow_denial() {
            status.shadow_over_limit = true;
        } else if !allowed {
            status.code = Code::OverLimit;
        }
        status.limits.push(LimitStatus {
            limit: item.limit,
            allowed,
            state: decision.state,
            remaining: decision.remaining,
            retry_after: decision.retry_after,
            reset_after: decision.reset_after,
            violations: decision.violations,
            debt: decision.debt,
            source: decision.source,
        });
    }
    for status in &mut statuses {
        let binding = status
            .limits
            .iter()
            .filter(|l| !l.allowed)
            .max_by_key(|l| (!l.limit.shadow, l.retry_after))
            .or_else(|| status.limits.iter().min_by_key(|l| l.remaining));
        if let Some(binding) = binding {
            status.limit = Some(binding.limit.clone());
            status.remaining = binding.remaining;
            status.retry_after = binding.retry_after;
            status.reset_after = binding.reset_after;
            status.state = Some(binding.state);
        }
    }
    CheckAnswer { code: if denied { Code::OverLimit } else { Code::Ok }, statuses, degraded }
}
