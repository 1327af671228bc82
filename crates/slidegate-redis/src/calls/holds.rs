//! Lease and reservation ops, owned so they can wait in an auto-batch
//! queue: each as its own script's call (`entry/lease.lua`,
//! `entry/reserve.lua`), or many in one call of `entry/holds.lua`.

use slidegate::Algorithm;
use slidegate::store::{LeaseRequest, ReservationRequest};

use super::{Call, algorithm_code, buckets, lease};
use crate::keys::key_for;
use crate::now::Now;
use crate::scripts::Scripts;

/// A lease op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseOp {
    Acquire,
    Release,
    Renew,
}

impl LeaseOp {
    fn name(self) -> &'static str {
        match self {
            LeaseOp::Acquire => "acquire",
            LeaseOp::Release => "release",
            LeaseOp::Renew => "renew",
        }
    }
}

/// A reservation op: reserve an estimate for a ttl, or settle at a cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReservationOp {
    Reserve { estimate: u32, ttl_ms: u64 },
    Settle { actual: u32 },
}

#[derive(Debug)]
enum Op {
    Lease { op: LeaseOp, id: String, limit: u32, ttl_ms: u64 },
    Reservation { op: ReservationOp, algorithm: Algorithm, limit: u32, window_ms: u64 },
}

/// One op on its keys: a lease op's one (the identity's leases), a
/// reservation op's two (the rule's state, the reservation's own: the
/// state key, `:r:` and the id — in the identity's slot, as its other keys).
#[derive(Debug)]
pub(crate) struct Hold {
    keys: Vec<String>,
    op: Op,
}

/// Bytes of a packed lease op and reservation op, their code included
/// (see `entry/holds.lua`).
const LEASE_LEN: usize = 1 + 32 + 4 + 6;
const RESERVATION_LEN: usize = 1 + 1 + 4 + 6 + 2 + 4 + 6;

impl Hold {
    /// `op` on `lease`.
    pub(crate) fn lease(prefix: &str, lease: &LeaseRequest<'_>, op: LeaseOp) -> Hold {
        let limit = lease.limit();
        Hold {
            keys: vec![lease::key(prefix, lease)],
            op: Op::Lease {
                op,
                id: lease.id().as_str().to_owned(),
                limit: limit.limit(),
                ttl_ms: limit.ttl_ms(),
            },
        }
    }

    /// `op` on `reservation`.
    pub(crate) fn reservation(prefix: &str, reservation: &ReservationRequest<'_>, op: ReservationOp) -> Hold {
        let rule = reservation.rule();
        let state = key_for(prefix, rule, reservation.identity().as_str(), &rule.state_part());
        let held = format!("{state}:r:{}", reservation.id().as_str());
        let op = Op::Reservation {
            op,
            algorithm: rule.algorithm(),
            limit: rule.limit(),
            window_ms: rule.window_ms(),
        };
        Hold { keys: vec![state, held], op }
    }

    /// The op as its own script's call.
    pub(crate) fn call<'s>(&self, scripts: &'s Scripts, now: Now, field_ttl: bool) -> Call<'s> {
        let keys: Vec<&str> = self.keys.iter().map(String::as_str).collect();
        match &self.op {
            Op::Lease { op, id, limit, ttl_ms } => {
                let mut call = Call::new(scripts.lease(), &keys);
                call.cmd
                    .arg(op.name())
                    .arg(now.time_arg())
                    .arg(now.slack_arg())
                    .arg(id)
                    .arg(limit)
                    .arg(ttl_ms);
                call
            }
            &Op::Reservation { op, algorithm, limit, window_ms } => {
                let mut call = Call::new(scripts.reserve(algorithm), &keys);
                let (name, cost) = match op {
                    ReservationOp::Reserve { estimate, .. } => ("reserve", estimate),
                    ReservationOp::Settle { actual } => ("settle", actual),
                };
                call.cmd
                    .arg(name)
                    .arg(now.time_arg())
                    .arg(now.slack_arg())
                    .arg(limit)
                    .arg(window_ms)
                    .arg(buckets(algorithm))
                    .arg(if field_ttl { "1" } else { "0" })
                    .arg(cost);
                if let ReservationOp::Reserve { ttl_ms, .. } = op {
                    call.cmd.arg(ttl_ms);
                }
                call
            }
        }
    }

    /// Appends the op as `entry/holds.lua` reads it.
    fn pack(&self, out: &mut Vec<u8>) {
        match &self.op {
            Op::Lease { op, id, limit, ttl_ms } => {
                out.push(match op {
                    LeaseOp::Acquire => 1,
                    LeaseOp::Release => 2,
                    LeaseOp::Renew => 3,
                });
                // A lease id is 32 hex digits (`LeaseId`).
                let mut fixed = [b'0'; 32];
                let bytes = id.as_bytes();
                fixed[..bytes.len().min(32)].copy_from_slice(&bytes[..bytes.len().min(32)]);
                out.extend_from_slice(&fixed);
                out.extend_from_slice(&limit.to_be_bytes());
                out.extend_from_slice(&ttl_ms.to_be_bytes()[2..]);
            }
            &Op::Reservation { op, algorithm, limit, window_ms } => {
                let (code, cost, ttl_ms) = match op {
                    ReservationOp::Reserve { estimate, ttl_ms } => (4, estimate, ttl_ms),
                    ReservationOp::Settle { actual } => (5, actual, 0),
                };
                out.push(code);
                out.push(algorithm_code(algorithm));
                out.extend_from_slice(&limit.to_be_bytes());
                // Windows and ttls are at most MAX_WINDOW (< 2^35 ms): 6 bytes hold them.
                out.extend_from_slice(&window_ms.to_be_bytes()[2..]);
                out.extend_from_slice(&buckets(algorithm).to_be_bytes());
                out.extend_from_slice(&cost.to_be_bytes());
                out.extend_from_slice(&ttl_ms.to_be_bytes()[2..]);
            }
        }
    }
}

/// The call doing `holds`, in order, in one call of `entry/holds.lua` (one
/// server: their keys may be anywhere).
pub(crate) fn call_many<'s>(scripts: &'s Scripts, holds: &[&Hold], now: Now, field_ttl: bool) -> Call<'s> {
    let keys: Vec<&str> = holds.iter().flat_map(|hold| hold.keys.iter().map(String::as_str)).collect();
    let mut call = Call::new(scripts.holds(), &keys);
    let mut packed = Vec::with_capacity(1 + holds.len() * LEASE_LEN.max(RESERVATION_LEN));
    packed.push(u8::from(field_ttl));
    for hold in holds {
        hold.pack(&mut packed);
    }
    call.cmd.arg(packed);
    if let Now::Client { now_ms, slack_ms } = now {
        call.cmd.arg(now_ms).arg(slack_ms);
    }
    call
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use slidegate::store::{LeaseRequest, ReservationRequest};
    use slidegate::{ConcurrencyLimit, LeaseId, Rule};

    use super::*;

    /// Each op packs to the length `entry/holds.lua` steps by.
    #[test]
    fn packed_ops_have_the_lengths_the_script_reads() {
        let id = LeaseId::random().expect("randomness");
        let limit = ConcurrencyLimit::new("streams", 3, Duration::from_secs(9)).expect("limit");
        let lease = LeaseRequest::new(&limit, "a", &id).expect("lease");
        let rule = Rule::new(5, Duration::from_secs(60)).expect("rule");
        let reservation = ReservationRequest::new(&rule, "a", &id).expect("reservation");
        let mut out = Vec::new();
        Hold::lease("sg:", &lease, LeaseOp::Release).pack(&mut out);
        assert_eq!(out.len(), LEASE_LEN);
        assert_eq!((out[0], &out[1..33]), (2, id.as_str().as_bytes()));
        out.clear();
        Hold::reservation("sg:", &reservation, ReservationOp::Reserve { estimate: 2, ttl_ms: 9000 })
            .pack(&mut out);
        assert_eq!(out.len(), RESERVATION_LEN);
        assert_eq!(out[..2], [4, 1]);
    }
}
