//! The cap on connections per client address: one address cannot hold
//! every socket of the gateway.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use slidegate_tower::InFlight;
use tokio::task::JoinSet;

/// The tasks of a listener's connections (and of their WebSocket
/// tunnels): the drain waits for them, the end of the grace period ends them.
pub(crate) type Tasks = Arc<Mutex<JoinSet<()>>>;

/// Where a connection's protocol switch (a WebSocket) lives on: a task
/// among the connections', holding the connection's place under the
/// per-address cap — and the request's concurrency leases, if its route
/// has `max_in_flight` limits — until the tunnel closes.
#[derive(Clone)]
pub(crate) struct TunnelHome {
    pub(crate) tasks: Tasks,
    pub(crate) slot: Arc<ConnectionSlot>,
    pub(crate) in_flight: Option<InFlight>,
}

impl TunnelHome {
    /// Runs `tunnel` as one of the connections' tasks.
    pub(crate) fn spawn(self, tunnel: impl std::future::Future<Output = ()> + Send + 'static) {
        let TunnelHome { tasks, slot, in_flight } = self;
        tasks.lock().unwrap_or_else(PoisonError::into_inner).spawn(async move {
            let _held = (slot, in_flight);
            tunnel.await;
        });
    }
}

/// Open connections per address. Only addresses with connections open
/// have an entry, so its size follows the connections, not the traffic.
#[derive(Debug, Default)]
pub(crate) struct ConnectionCounts {
    open: Mutex<HashMap<IpAddr, u32>>,
}

impl ConnectionCounts {
    /// Counts a connection from `ip`, or `None` when `ip` already holds
    /// `cap` (0: no cap).
    pub(crate) fn open(self: &Arc<Self>, ip: IpAddr, cap: u32) -> Option<ConnectionSlot> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(ip).or_insert(0);
        if cap > 0 && *count >= cap {
            if *count == 0 {
                open.remove(&ip);
            }
            return None;
        }
        *count += 1;
        Some(ConnectionSlot { counts: Arc::clone(self), ip })
    }

    /// Connections open from `ip`.
    #[cfg(test)]
    fn count(&self, ip: IpAddr) -> u32 {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).get(&ip).copied().unwrap_or(0)
    }
}

/// One open connection; dropped when it closes.
#[derive(Debug)]
pub(crate) struct ConnectionSlot {
    counts: Arc<ConnectionCounts>,
    ip: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = self.counts.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_each_address_and_frees_on_close() {
        let counts = Arc::new(ConnectionCounts::default());
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let first = counts.open(a, 2).unwrap();
        let _second = counts.open(a, 2).unwrap();
        assert!(counts.open(a, 2).is_none());
        assert!(counts.open(b, 2).is_some(), "another address has its own count");
        drop(first);
        assert_eq!(counts.count(a), 1);
        assert!(counts.open(a, 2).is_some());
        let many: Vec<_> = (0..1000).map(|_| counts.open(b, 0).unwrap()).collect();
        drop(many);
        assert_eq!(counts.count(b), 0);
        assert!(counts.open.lock().unwrap().get(&b).is_none(), "closed addresses leave no entry");
    }
}
