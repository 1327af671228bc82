//! Penalties and multi-dimension requests: `scripts/entry/check.lua`, every dimension's
//! state, violations and ban keys in one call (one slot).

use slidegate::store::Request;
use slidegate::{Decision, Error, ErrorKind, Rule, State};

use super::{Call, algorithm_code, buckets, count, ms, unexpected};
use crate::keys::keys_of;
use crate::now::Now;
use crate::scripts::Scripts;

/// Whether a call charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Decide, and charge if every dimension admits.
    Check,
    /// The verdict only: nothing charged, no violation counted.
    Peek,
}

/// The call deciding `requests` (a request's dimensions, or one request
/// with a penalty) together, each charged its own cost (`Mode::Check`).
pub(crate) fn call<'s>(
    scripts: &'s Scripts,
    prefix: &str,
    requests: &[&Request<'_>],
    now: Now,
    field_ttl: bool,
    mode: Mode,
) -> Call<'s> {
    let mut keys = Vec::with_capacity(3 * requests.len());
    for request in requests {
        keys.extend(keys_of(prefix, request.rule(), request.identity().as_str()));
    }
    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let mut call = Call::new(scripts.check(), &key_refs);
    let cmd = &mut call.cmd;
    cmd.arg(if mode == Mode::Peek { "peek" } else { "" })
        .arg(now.time_arg())
        .arg(now.slack_arg())
        .arg(requests.len());
    cmd.arg(if field_ttl { "1" } else { "0" });
    for request in requests {
        let rule = request.rule();
        let penalty = rule.penalty();
        cmd.arg(request.cost())
            .arg(algorithm_code(rule.algorithm()))
            .arg(rule.limit())
            .arg(rule.window_ms())
            .arg(buckets(rule.algorithm()))
            .arg(penalty.map_or(0, |p| p.window_ms()))
            .arg(penalty.and_then(|p| p.warn_threshold()).unwrap_or(0))
            .arg(penalty.and_then(|p| p.ban_threshold()).unwrap_or(0))
            .arg(penalty.map_or(0, |p| p.ban_for_ms()))
            .arg(penalty.map_or(0, |p| p.violation_cap()))
            .arg(u8::from(rule.is_budget()));
    }
    call
}

/// A decoded reply.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    /// One decision per request, in order.
    pub(crate) decisions: Vec<Decision>,
    /// Per request, what entry/release.lua needs to take its charge back.
    pub(crate) receipts: Vec<i64>,
    /// The time (ms) the script decided at.
    pub(crate) now: i64,
}

/// Decodes the reply of a call for requests under `rules`.
pub(crate) fn decode(rules: &[&Rule], reply: &[i64]) -> Result<Reply, Error> {
    let Some((&now, per_dimension)) = reply.split_last() else { return Err(unexpected(reply)) };
    if per_dimension.len() != 8 * rules.len() {
        return Err(unexpected(reply));
    }
    let mut decisions = Vec::with_capacity(rules.len());
    let mut receipts = Vec::with_capacity(rules.len());
    for (rule, d) in rules.iter().zip(per_dimension.chunks_exact(8)) {
        let mut decision = if d[0] == 1 {
            Decision::allowed(rule.limit(), count(d[1]), ms(d[3]))
        } else {
            Decision::limited(rule.limit(), count(d[1]), ms(d[2]), ms(d[3]))
        };
        decision.state = match d[4] {
            0 => State::Allowed,
            1 => State::Warned,
            2 => State::Limited,
            3 => State::Banned,
            _ => return Err(unexpected(reply)),
        };
        decision.violations = count(d[5]);
        if rule.is_budget() {
            // A charge: admitted into debt keeps its time to wait.
            decision.retry_after = ms(d[2]);
            decision.debt = count(d[7]);
        }
        decisions.push(decision);
        receipts.push(d[6]);
    }
    Ok(Reply { decisions, receipts, now })
}

/// Decodes the reply of a call for one request under `rule`.
pub(crate) fn decode_one(rule: &Rule, reply: &[i64]) -> Result<Decision, Error> {
    decode(&[rule], reply)?
        .decisions
        .pop()
        .ok_or_else(|| Error::new(ErrorKind::Backend, "empty script reply"))
}
