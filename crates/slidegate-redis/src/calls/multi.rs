//! Many single checks (rules without a penalty) in one call of
//! `scripts/entry/multi.lua`: auto-batching's calls, and an explicit batch's, one per
//! server or Cluster slot. Each check is decided as its single script
//! would, in order, at one `now`.

use redis::{FromRedisValue, Value};
use slidegate::{Error, ErrorKind};

use super::single::{CHECK_LEN, Check};
use super::{Call, Ints, algorithm_code};
use crate::errors::from_script_message;
use crate::now::Now;
use crate::scripts::Scripts;

/// The call deciding `checks`, in order. Their keys must share a slot on
/// a Cluster (any keys on one server).
pub(crate) fn call<'s>(scripts: &'s Scripts, checks: &[&Check], now: Now, field_ttl: bool) -> Call<'s> {
    let keys: Vec<&str> = checks.iter().map(|check| check.state.as_str()).collect();
    let mut call = Call::new(scripts.multi(), &keys);
    // A flags byte (1: per-field hash TTL), then each check: its
    // algorithm's code (plus 8 for a budget's charge) and its packed numbers.
    let mut packed = vec![0; 1 + (1 + CHECK_LEN) * checks.len()];
    packed[0] = u8::from(field_ttl);
    for (check, out) in checks.iter().zip(packed[1..].chunks_exact_mut(1 + CHECK_LEN)) {
        out[0] = algorithm_code(check.algorithm) + if check.charge { 8 } else { 0 };
        check.pack(&mut out[1..]);
    }
    call.cmd.arg(packed);
    if let Now::Client { now_ms, slack_ms } = now {
        call.cmd.arg(now_ms).arg(slack_ms);
    }
    call
}

/// Splits the reply of a call of `count` checks into each check's single
/// script reply (decode those with [`single::decode`](super::single::decode)),
/// or the error its check met. A reply of another shape fails every check.
pub(crate) fn decode(reply: Value, count: usize) -> Vec<Result<Ints, Error>> {
    match reply {
        Value::Array(items) if items.len() == count => items.into_iter().map(one).collect(),
        other => {
            let message = format!("unexpected multi-script reply {other:?}");
            (0..count).map(|_| Err(Error::new(ErrorKind::Backend, message.as_str()))).collect()
        }
    }
}

/// One check's part of a reply: its single script's reply, or the message
/// of the error its check met (a string, see entry/multi.lua).
fn one(item: Value) -> Result<Ints, Error> {
    match item {
        Value::BulkString(bytes) => {
            Err(from_script_message("running the limiter script", &String::from_utf8_lossy(&bytes)))
        }
        item => Ints::from_redis_value(item)
            .map_err(|e| Error::new(ErrorKind::Backend, format!("unexpected multi-script reply: {e}"))),
    }
}
