//! Taking back a cross-slot reservation: `scripts/entry/release.lua` on the
//! state keys one `entry/check.lua` call charged.

use slidegate::store::Request;

use super::{Call, algorithm_code, buckets};
use crate::keys::key_for;
use crate::scripts::Scripts;

/// The call taking back the charges of `requests` made at `now` (ms, the
/// general script's reply) with `receipts`, each of its request's cost.
pub(crate) fn call<'s>(
    scripts: &'s Scripts,
    prefix: &str,
    requests: &[Request<'_>],
    receipts: &[i64],
    now: i64,
) -> Call<'s> {
    let keys: Vec<String> = requests
        .iter()
        .map(|r| key_for(prefix, r.rule(), r.identity().as_str(), &r.rule().state_part()))
        .collect();
    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let mut call = Call::new(scripts.release(), &key_refs);
    // The charge's time is the call's (ARGV[2]); no slack (ARGV[3]).
    call.cmd.arg("").arg(now).arg("").arg(requests.len());
    for (request, receipt) in requests.iter().zip(receipts) {
        let rule = request.rule();
        call.cmd
            .arg(algorithm_code(rule.algorithm()))
            .arg(rule.limit())
            .arg(rule.window_ms())
            .arg(buckets(rule.algorithm()))
            .arg(*receipt)
            .arg(request.cost());
    }
    call
}
