//! One rule without a penalty: the algorithm's fast script
//! (`scripts/entry/single.lua`), the hot path.

use std::time::Duration;

use slidegate::store::Request;
use slidegate::{Algorithm, Decision, Error, Rule};

use super::{Call, buckets, count, ms, unexpected};
use crate::keys::key_for;
use crate::now::Now;
use crate::scripts::Scripts;

/// One check of a rule without penalty: its state key and the numbers its
/// script needs. Owns them, so it can wait in an auto-batch queue.
#[derive(Debug)]
pub(crate) struct Check {
    pub(crate) state: String,
    pub(crate) algorithm: Algorithm,
    limit: u32,
    window_ms: u64,
    cost: u32,
    /// A budget's: recorded whatever remains (flag 2).
    pub(crate) charge: bool,
}

/// Bytes of a packed check (see [`Check::pack`]).
pub(crate) const CHECK_LEN: usize = 16;

impl Check {
    /// The check of `request` (whose rule has no penalty).
    pub(crate) fn new(prefix: &str, request: &Request<'_>) -> Check {
        let rule = request.rule();
        debug_assert!(rule.penalty().is_none());
        Check {
            state: key_for(prefix, rule, request.identity().as_str(), &rule.state_part()),
            algorithm: rule.algorithm(),
            limit: rule.limit(),
            window_ms: rule.window_ms(),
            cost: request.cost(),
            charge: rule.is_budget(),
        }
    }

    /// The call of the algorithm's fast single script (entry/single.lua's ARGV):
    /// one argument on the server's clock; the client's time and the TTL
    /// slack as two more otherwise.
    pub(crate) fn call<'s>(&self, scripts: &'s Scripts, now: Now, field_ttl: bool) -> Call<'s> {
        let mut call = Call::new(scripts.for_algorithm(self.algorithm), &[&self.state]);
        call.cmd.arg(self.argument(field_ttl, now.slack_ms()));
        if let Now::Client { now_ms, slack_ms } = now {
            call.cmd.arg(now_ms).arg(slack_ms);
        }
        call
    }

    /// entry/single.lua's first argument: the packed check, a flags byte (1: the
    /// server has per-field hash TTL, 2: a budget's charge), then, for a sliding log, the key's
    /// TTL (window + `slack_ms`) in decimal, which fast/log.lua hands to
    /// `SET … PX` as it is (other algorithms' scripts read nothing there).
    fn argument(&self, field_ttl: bool, slack_ms: u64) -> Vec<u8> {
        let mut out = vec![0; CHECK_LEN + 1];
        self.pack(&mut out[..CHECK_LEN]);
        out[CHECK_LEN] = u8::from(field_ttl) | (u8::from(self.charge) << 1);
        if self.algorithm == Algorithm::SlidingLog {
            out.extend_from_slice((self.window_ms + slack_ms).to_string().as_bytes());
        }
        out
    }

    /// The check's numbers as the scripts read them, packed big-endian
    /// (struct `>I4I6I4I2`): limit, window_ms, cost, buckets. Lua reads
    /// them with `struct.unpack`, not with `tonumber` (strtod), which costs
    /// Redis more than anything else on the fast paths.
    /// `out` is [`CHECK_LEN`] bytes.
    pub(crate) fn pack(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.limit.to_be_bytes());
        // Windows are at most MAX_WINDOW (a year, < 2^35 ms): 6 bytes hold it.
        out[4..10].copy_from_slice(&self.window_ms.to_be_bytes()[2..]);
        out[10..14].copy_from_slice(&self.cost.to_be_bytes());
        out[14..16].copy_from_slice(&buckets(self.algorithm).to_be_bytes());
    }
}

/// Decodes a single script's reply: `{allowed, remaining, retry, reset}`
/// (a charge's with its `debt` fifth), or a fast path's admitted request as one integer,
/// `remaining * (2 * window + 2) + reset` (see `scripts/entry/single.lua`).
pub(crate) fn decode(rule: &Rule, reply: &[i64]) -> Result<Decision, Error> {
    if let &[packed] = reply {
        let span = rule.window_ms().checked_mul(2).and_then(|w| w.checked_add(2));
        let (Some(span), Ok(packed)) = (span, u64::try_from(packed)) else { return Err(unexpected(reply)) };
        let remaining = u32::try_from(packed / span).map_err(|_| unexpected(reply))?;
        return Ok(Decision::allowed(rule.limit(), remaining, Duration::from_millis(packed % span)));
    }
    let (&[allowed, remaining, retry_ms, reset_ms] | &[allowed, remaining, retry_ms, reset_ms, _]) = reply
    else {
        return Err(unexpected(reply));
    };
    let mut decision = if allowed == 1 {
        Decision::allowed(rule.limit(), count(remaining), ms(reset_ms))
    } else {
        Decision::limited(rule.limit(), count(remaining), ms(retry_ms), ms(reset_ms))
    };
    if let &[.., debt] = reply
        && reply.len() == 5
    {
        // A charge: admitted into debt keeps its time to wait.
        decision.retry_after = ms(retry_ms);
        decision.debt = count(debt);
    }
    Ok(decision)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use slidegate::limits::MAX_WINDOW;
    use slidegate::store::Request;
    use slidegate::{Algorithm, Rule};

    use super::{CHECK_LEN, Check, decode};
    use crate::now::SLACK_MS;

    fn check(rule: &Rule, key: &str, cost: u32) -> Check {
        Check::new("sg:", &Request::new(rule, key, cost).expect("valid request"))
    }

    /// The bytes the scripts unpack with struct '>I4I6I4I2' (entry/multi.lua
    /// adds the algorithm's code in front): limit, window, cost, buckets.
    #[test]
    fn checks_are_packed_as_the_scripts_unpack_them() {
        let counter = Rule::new(100, Duration::from_secs(60))
            .and_then(|rule| rule.with_algorithm(Algorithm::SLIDING_COUNTER))
            .expect("rule");
        let mut out = [0; CHECK_LEN];
        check(&counter, "alice", 3).pack(&mut out);
        assert_eq!(out, [0, 0, 0, 100, 0, 0, 0, 0, 0xea, 0x60, 0, 0, 0, 3, 0, 10]);
        // The longest window still fits its 6 bytes; a log has 1 bucket.
        let longest = Rule::new(u32::MAX, MAX_WINDOW).expect("rule");
        check(&longest, "bob", 1).pack(&mut out);
        let window = MAX_WINDOW.as_millis().to_be_bytes();
        assert_eq!(out[0..4], [0xff; 4]);
        assert_eq!(out[4..10], window[10..16]);
        assert_eq!(window[..10], [0; 10], "the window fits in 6 bytes");
        assert_eq!(out[10..16], [0, 0, 0, 1, 0, 1]);
    }

    /// entry/single.lua's one argument: the packed check, the flags byte, the
    /// log's TTL as text.
    #[test]
    fn the_argument_carries_flags_and_the_ttl_text() {
        let rule = Rule::new(100, Duration::from_secs(60)).expect("rule");
        let log = check(&rule, "alice", 1);
        let plain = log.argument(false, SLACK_MS);
        assert_eq!(plain[..CHECK_LEN], [0, 0, 0, 100, 0, 0, 0, 0, 0xea, 0x60, 0, 0, 0, 1, 0, 1]);
        assert_eq!(plain[CHECK_LEN..], *b"\x0061000");
        assert_eq!(log.argument(true, SLACK_MS)[CHECK_LEN], 1);
        // Client-clock mode's longer slack (1 s + a skew of 60 s).
        assert_eq!(log.argument(false, 61_000)[CHECK_LEN..], *b"\x00121000");
        let gcra = rule.with_algorithm(Algorithm::Gcra).expect("rule");
        assert_eq!(check(&gcra, "alice", 1).argument(false, SLACK_MS).len(), CHECK_LEN + 1, "no TTL text");
    }

    #[test]
    fn one_integer_reply_is_remaining_and_reset() {
        let rule = Rule::new(100, Duration::from_secs(1)).expect("rule");
        // span = 2 * 1000 + 2
        let d = decode(&rule, &[5 * 2002 + 1500]).expect("decision");
        assert!(d.allowed);
        assert_eq!((d.limit, d.remaining, d.reset_after), (100, 5, Duration::from_millis(1500)));
        assert_eq!(decode(&rule, &[2001]).expect("decision").reset_after, Duration::from_millis(2001));
        assert!(decode(&rule, &[-1]).is_err(), "negative");
        assert!(decode(&rule, &[i64::MAX]).is_err(), "remaining beyond u32");
        let full = decode(&rule, &[0, 3, 40, 900]).expect("array");
        assert!(!full.allowed);
        assert_eq!(full.retry_after, Duration::from_millis(40));
    }
}
