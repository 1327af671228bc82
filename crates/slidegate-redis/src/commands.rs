//! Turning checks into script calls and script replies into decisions.
//! Shared by single checks, multi-dimension checks and batches, so every
//! path encodes and decodes the same way.

use std::time::Duration;

use redis::{Cmd, Script};
use slidegate::{Algorithm, Decision, Dimension, Error, ErrorKind, Rule, State, encode_identity};

use crate::keys::{key_for, keys_of};
use crate::now::Now;
use crate::scripts::{self, Scripts};

/// A check ready to send: the command and the script it runs (for a
/// reload on `NOSCRIPT`), and how to read its reply.
pub(crate) struct Call<'s> {
    pub(crate) script: &'s Script,
    pub(crate) cmd: Cmd,
    pub(crate) shape: Shape,
}

/// Which reply a [`Call`] gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `{allowed, remaining, retry, reset}` from a fast single script.
    Single,
    /// Seven integers per dimension, then `now`, from the general script.
    General(usize),
}

fn algorithm_code(algorithm: Algorithm) -> u8 {
    match algorithm {
        Algorithm::SlidingCounter { .. } => 2,
        Algorithm::FixedWindow => 3,
        Algorithm::Gcra => 4,
        // `Algorithm` is non-exhaustive; the log is the exact default.
        _ => 1,
    }
}

fn buckets(algorithm: Algorithm) -> u16 {
    match algorithm {
        Algorithm::SlidingCounter { buckets } => buckets.get(),
        _ => 1,
    }
}

/// The call deciding one request: the fast script of the rule's algorithm,
/// or the general script when the rule has a penalty; `field_ttl` says the
/// server has per-field hash TTL (`HPEXPIRE`).
pub(crate) fn single<'s>(
    scripts: &'s Scripts,
    prefix: &str,
    rule: &Rule,
    key: &str,
    cost: u32,
    now: Now,
    field_ttl: bool,
) -> Result<Call<'s>, Error> {
    if rule.penalty().is_some() {
        return general(scripts, prefix, &[(rule, key)], cost, now, field_ttl);
    }
    let check = Check::new(prefix, rule, key, cost)?;
    Ok(check.single(scripts, now, field_ttl))
}

/// One check of a rule without penalty: its state key and the arguments
/// its script needs. Owns them, so it can wait in an auto-batch queue.
#[derive(Debug)]
pub(crate) struct Check {
    pub(crate) state: String,
    algorithm: Algorithm,
    limit: u32,
    window_ms: u64,
    cost: u32,
}

impl Check {
    /// The check of `key` under `rule` (without penalty), `cost` validated.
    pub(crate) fn new(prefix: &str, rule: &Rule, key: &str, cost: u32) -> Result<Check, Error> {
        let identity = encode_identity(key)?;
        Ok(Check {
            state: key_for(prefix, rule, &identity, &rule.state_part()),
            algorithm: rule.algorithm(),
            limit: rule.limit(),
            window_ms: rule.window_ms(),
            cost,
        })
    }

    /// The call of the algorithm's fast single script (single.lua's ARGV):
    /// one argument on the server's clock; the client's time and the TTL
    /// slack as two more otherwise.
    pub(crate) fn single<'s>(&self, scripts: &'s Scripts, now: Now, field_ttl: bool) -> Call<'s> {
        let script = scripts.for_algorithm(self.algorithm);
        let mut cmd = scripts::evalsha(script, &[&self.state]);
        cmd.arg(self.single_argument(field_ttl, now.slack_ms()));
        if let Now::Client { now_ms, slack_ms } = now {
            cmd.arg(now_ms).arg(slack_ms);
        }
        Call { script, cmd, shape: Shape::Single }
    }

    /// single.lua's first argument: the packed check, a flags byte (1: the
    /// server has per-field hash TTL), then, for a sliding log, the key's
    /// TTL (window + `slack_ms`) in decimal, which log_fast.lua hands to
    /// `SET … PX` as it is (other algorithms' scripts read nothing there).
    fn single_argument(&self, field_ttl: bool, slack_ms: u64) -> Vec<u8> {
        let mut out = vec![0; CHECK_LEN + 1];
        self.pack(&mut out[..CHECK_LEN]);
        out[CHECK_LEN] = u8::from(field_ttl);
        if self.algorithm == Algorithm::SlidingLog {
            out.extend_from_slice((self.window_ms + slack_ms).to_string().as_bytes());
        }
        out
    }

    /// The check's numbers as the scripts read them, packed big-endian
    /// (struct `>I4I6I4I2`): limit, window_ms, cost, buckets. Lua reads
    /// them with `struct.unpack`, not with `tonumber` (strtod), which cost
    /// Redis more than anything else the fast paths did (callgrind).
    /// `out` is [`CHECK_LEN`] bytes.
    fn pack(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.limit.to_be_bytes());
        // Windows are at most MAX_WINDOW (a year, < 2^35 ms): 6 bytes hold it.
        out[4..10].copy_from_slice(&self.window_ms.to_be_bytes()[2..]);
        out[10..14].copy_from_slice(&self.cost.to_be_bytes());
        out[14..16].copy_from_slice(&buckets(self.algorithm).to_be_bytes());
    }
}

/// Bytes of a packed check (see [`Check::pack`]).
const CHECK_LEN: usize = 16;

/// The call deciding `checks` with the multi script (multi.lua), in
/// order, on one server.
pub(crate) fn multi<'s>(scripts: &'s Scripts, checks: &[&Check], now: Now, field_ttl: bool) -> Call<'s> {
    let script = scripts.multi();
    let keys: Vec<&str> = checks.iter().map(|check| check.state.as_str()).collect();
    let mut cmd = scripts::evalsha(script, &keys);
    // Each check: its algorithm's code, then its packed numbers.
    let mut packed = vec![0; (1 + CHECK_LEN) * checks.len()];
    for (check, out) in checks.iter().zip(packed.chunks_exact_mut(1 + CHECK_LEN)) {
        out[0] = algorithm_code(check.algorithm);
        check.pack(&mut out[1..]);
    }
    cmd.arg(now.time_arg()).arg(if field_ttl { "1" } else { "0" }).arg(packed);
    if let Now::Client { slack_ms, .. } = now {
        cmd.arg(slack_ms);
    }
    Call { script, cmd, shape: Shape::Single }
}

/// The call deciding a multi-dimension request (dimensions already
/// validated) with the general script.
pub(crate) fn general<'s>(
    scripts: &'s Scripts,
    prefix: &str,
    dimensions: &[Dimension<'_>],
    cost: u32,
    now: Now,
    field_ttl: bool,
) -> Result<Call<'s>, Error> {
    let mut keys = Vec::with_capacity(3 * dimensions.len());
    for (rule, key) in dimensions {
        let identity = encode_identity(key)?;
        let [state, violations, ban] = keys_of(prefix, rule, &identity);
        keys.extend([state, violations, ban]);
    }
    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let script = scripts.check();
    let mut cmd = scripts::evalsha(script, &key_refs);
    cmd.arg(now.time_arg()).arg(now.slack_arg()).arg(cost).arg(dimensions.len()).arg(if field_ttl {
        "1"
    } else {
        "0"
    });
    for (rule, _) in dimensions {
        let penalty = rule.penalty();
        cmd.arg(algorithm_code(rule.algorithm()))
            .arg(rule.limit())
            .arg(rule.window_ms())
            .arg(buckets(rule.algorithm()))
            .arg(penalty.map_or(0, |p| p.window_ms()))
            .arg(penalty.and_then(|p| p.warn_threshold()).unwrap_or(0))
            .arg(penalty.and_then(|p| p.ban_threshold()).unwrap_or(0))
            .arg(penalty.map_or(0, |p| p.ban_for_ms()))
            .arg(penalty.map_or(0, |p| p.violation_cap()));
    }
    Ok(Call { script, cmd, shape: Shape::General(dimensions.len()) })
}

/// A script's reply: its integers. Replies are arrays of integers, except
/// a fast script's admitted common case: one integer (see
/// [`single_decision`]), which Redis answers without building an array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ints(Vec<i64>);

impl redis::FromRedisValue for Ints {
    fn from_redis_value(v: redis::Value) -> Result<Ints, redis::ParsingError> {
        match v {
            redis::Value::Int(n) => Ok(Ints(vec![n])),
            other => Vec::<i64>::from_redis_value(other).map(Ints),
        }
    }
}

impl std::ops::Deref for Ints {
    type Target = [i64];

    fn deref(&self) -> &[i64] {
        &self.0
    }
}

fn unexpected(reply: &[i64]) -> Error {
    let shown: Vec<i64> = reply.iter().copied().take(16).collect();
    Error::new(ErrorKind::Backend, format!("unexpected script reply {shown:?}"))
}

fn ms(v: i64) -> Duration {
    Duration::from_millis(u64::try_from(v).unwrap_or(0))
}

fn count(v: i64) -> u32 {
    u32::try_from(v.max(0)).unwrap_or(u32::MAX)
}

/// Decodes a [`Shape::Single`] reply: `{allowed, remaining, retry, reset}`,
/// or a fast path's admitted request as one integer,
/// `remaining * (2 * window + 2) + reset` (see `scripts/single.lua`).
pub(crate) fn single_decision(rule: &Rule, reply: &[i64]) -> Result<Decision, Error> {
    if let &[packed] = reply {
        let span = rule.window_ms().checked_mul(2).and_then(|w| w.checked_add(2));
        let (Some(span), Ok(packed)) = (span, u64::try_from(packed)) else { return Err(unexpected(reply)) };
        let remaining = u32::try_from(packed / span).map_err(|_| unexpected(reply))?;
        return Ok(Decision::allowed(rule.limit(), remaining, Duration::from_millis(packed % span)));
    }
    let &[allowed, remaining, retry_ms, reset_ms] = reply else { return Err(unexpected(reply)) };
    Ok(if allowed == 1 {
        Decision::allowed(rule.limit(), count(remaining), ms(reset_ms))
    } else {
        Decision::limited(rule.limit(), count(remaining), ms(retry_ms), ms(reset_ms))
    })
}

/// A decoded general-script reply.
#[derive(Debug, Clone)]
pub(crate) struct GeneralReply {
    /// One decision per dimension, in order.
    pub(crate) decisions: Vec<Decision>,
    /// Per dimension, what release.lua needs to take its charge back.
    pub(crate) receipts: Vec<i64>,
    /// The time (ms) the script decided at.
    pub(crate) now: i64,
}

/// Decodes a [`Shape::General`] reply for `rules`.
pub(crate) fn general_reply(rules: &[&Rule], reply: &[i64]) -> Result<GeneralReply, Error> {
    let Some((&now, per_dimension)) = reply.split_last() else { return Err(unexpected(reply)) };
    if per_dimension.len() != 7 * rules.len() {
        return Err(unexpected(reply));
    }
    let mut decisions = Vec::with_capacity(rules.len());
    let mut receipts = Vec::with_capacity(rules.len());
    for (rule, d) in rules.iter().zip(per_dimension.chunks_exact(7)) {
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
        decisions.push(decision);
        receipts.push(d[6]);
    }
    Ok(GeneralReply { decisions, receipts, now })
}

/// Decodes a [`Shape::General`] reply of one dimension.
pub(crate) fn general_single(rule: &Rule, reply: &[i64]) -> Result<Decision, Error> {
    general_reply(&[rule], reply)?
        .decisions
        .pop()
        .ok_or_else(|| Error::new(ErrorKind::Backend, "empty script reply"))
}

/// Decodes the reply of a [`single`] call.
pub(crate) fn single_reply(rule: &Rule, shape: Shape, reply: &[i64]) -> Result<Decision, Error> {
    match shape {
        Shape::Single => single_decision(rule, reply),
        Shape::General(_) => general_single(rule, reply),
    }
}

/// The call taking back the charges of `dimensions` made at `now` with
/// `receipts` (see release.lua).
pub(crate) fn release<'s>(
    scripts: &'s Scripts,
    prefix: &str,
    dimensions: &[Dimension<'_>],
    receipts: &[i64],
    cost: u32,
    now: i64,
) -> Result<Call<'s>, Error> {
    let mut keys = Vec::with_capacity(dimensions.len());
    for (rule, key) in dimensions {
        keys.push(key_for(prefix, rule, &encode_identity(key)?, &rule.state_part()));
    }
    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let script = scripts.release();
    let mut cmd = scripts::evalsha(script, &key_refs);
    cmd.arg(now).arg(cost).arg(dimensions.len());
    for ((rule, _), receipt) in dimensions.iter().zip(receipts) {
        cmd.arg(algorithm_code(rule.algorithm()))
            .arg(rule.limit())
            .arg(rule.window_ms())
            .arg(buckets(rule.algorithm()))
            .arg(*receipt);
    }
    Ok(Call { script, cmd, shape: Shape::General(dimensions.len()) })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use slidegate::{Algorithm, MAX_WINDOW, Rule};

    use super::{CHECK_LEN, Check, single_decision};
    use crate::now::SLACK_MS;

    /// The bytes the scripts unpack with struct '>I4I6I4I2' (multi.lua
    /// adds the algorithm's code in front): limit, window, cost, buckets.
    #[test]
    fn checks_are_packed_as_the_scripts_unpack_them() {
        let counter = Rule::new(100, Duration::from_secs(60))
            .and_then(|rule| rule.with_algorithm(Algorithm::SLIDING_COUNTER))
            .expect("rule");
        let check = Check::new("sg:", &counter, "alice", 3).expect("check");
        let mut out = [0; CHECK_LEN];
        check.pack(&mut out);
        assert_eq!(out, [0, 0, 0, 100, 0, 0, 0, 0, 0xea, 0x60, 0, 0, 0, 3, 0, 10]);
        // The longest window still fits its 6 bytes; a log has 1 bucket.
        let longest = Rule::new(u32::MAX, MAX_WINDOW).expect("rule");
        Check::new("sg:", &longest, "bob", 1).expect("check").pack(&mut out);
        let window = MAX_WINDOW.as_millis().to_be_bytes();
        assert_eq!(out[0..4], [0xff; 4]);
        assert_eq!(out[4..10], window[10..16]);
        assert_eq!(window[..10], [0; 10], "the window fits in 6 bytes");
        assert_eq!(out[10..16], [0, 0, 0, 1, 0, 1]);
    }

    /// single.lua's one argument: the packed check, the flags byte, the
    /// log's TTL as text.
    #[test]
    fn the_single_argument_carries_flags_and_the_ttl_text() {
        let rule = Rule::new(100, Duration::from_secs(60)).expect("rule");
        let check = Check::new("sg:", &rule, "alice", 1).expect("check");
        let plain = check.single_argument(false, SLACK_MS);
        assert_eq!(plain[..CHECK_LEN], [0, 0, 0, 100, 0, 0, 0, 0, 0xea, 0x60, 0, 0, 0, 1, 0, 1]);
        assert_eq!(plain[CHECK_LEN..], *b"\x0061000");
        assert_eq!(check.single_argument(true, SLACK_MS)[CHECK_LEN], 1);
        // Client-clock mode's longer slack (1 s + a skew of 60 s).
        assert_eq!(check.single_argument(false, 61_000)[CHECK_LEN..], *b"\x00121000");
        let gcra = Check::new("sg:", &rule.with_algorithm(Algorithm::Gcra).expect("rule"), "alice", 1);
        assert_eq!(gcra.expect("check").single_argument(false, SLACK_MS).len(), CHECK_LEN + 1, "no TTL text");
    }

    #[test]
    fn one_integer_reply_is_remaining_and_reset() {
        let rule = Rule::new(100, Duration::from_secs(1)).expect("rule");
        // span = 2 * 1000 + 2
        let d = single_decision(&rule, &[5 * 2002 + 1500]).expect("decision");
        assert!(d.allowed);
        assert_eq!((d.limit, d.remaining, d.reset_after), (100, 5, Duration::from_millis(1500)));
        assert_eq!(
            single_decision(&rule, &[2001]).expect("decision").reset_after,
            Duration::from_millis(2001)
        );
        assert!(single_decision(&rule, &[-1]).is_err(), "negative");
        assert!(single_decision(&rule, &[i64::MAX]).is_err(), "remaining beyond u32");
        let full = single_decision(&rule, &[0, 3, 40, 900]).expect("array");
        assert!(!full.allowed);
        assert_eq!(full.retry_after, Duration::from_millis(40));
    }
}
