//! `CLUSTER NODES` lines, parsed.

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// The node's id.
    pub id: String,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Whether it is a primary (else a replica).
    pub primary: bool,
    /// Slot ranges it serves (primaries only), inclusive.
    pub slots: Vec<(u16, u16)>,
    /// Whether other nodes consider it failed.
    pub failed: bool,
}

/// Parses `<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <link> <slot>…`.
pub(crate) fn parse_node(line: &str) -> Option<ClusterNode> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 8 {
        return None;
    }
    let address = fields[1].split('@').next()?;
    let port = address.rsplit(':').next()?.parse().ok()?;
    let flags = fields[2];
    let slots = fields[8..]
        .iter()
        .filter(|s| !s.starts_with('['))
        .filter_map(|s| match s.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => s.parse().ok().map(|x| (x, x)),
        })
        .collect();
    Some(ClusterNode {
        id: fields[0].to_owned(),
        port,
        primary: flags.contains("master"),
        slots,
        failed: flags.contains("fail"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cluster_nodes_lines() {
        let line = "07c37dfeb2352e0b 127.0.0.1:30004@31004 master - 0 1426238317239 4 connected 0-5460 7000 [93->-e7d]";
        let node = parse_node(line).unwrap();
        assert_eq!((node.port, node.primary, node.failed), (30004, true, false));
        assert_eq!(node.slots, [(0, 5460), (7000, 7000)]);
        let replica = "e7d1eecce 127.0.0.1:30002@31002 slave,fail 67ed2db8d 0 1426238316232 2 connected";
        let replica = parse_node(replica).unwrap();
        assert!(!replica.primary && replica.failed && replica.slots.is_empty());
    }
}
