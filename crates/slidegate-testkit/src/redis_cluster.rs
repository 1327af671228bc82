//! A real Redis Cluster on free loopback ports: primaries and replicas,
//! created with `redis-cli --cluster create`, killed on drop.

use std::io;
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use std::path::Path;

use crate::cluster_nodes::{ClusterNode, parse_node};
use crate::{Pki, RedisServer, TcpProxy, free_port};

/// How long a cluster may take to agree on its slots.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A running cluster. Node timeout is 1 s, so a killed primary's replica
/// takes over within a few seconds.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    /// The nodes' TLS ports, when the cluster speaks TLS (`start_tls`).
    tls_ports: Vec<u16>,
    /// The proxy in front of each node, in a cluster from `start_behind_proxies`.
    proxies: Vec<TcpProxy>,
}

impl RedisCluster {
    /// Starts `primaries` primaries with `replicas` replicas each and waits
    /// until every node reports `cluster_state:ok`.
    ///
    /// # Errors
    ///
    /// When `redis-server` or `redis-cli` is missing or the cluster does not form.
    pub fn start(primaries: usize, replicas: usize) -> io::Result<RedisCluster> {
        RedisCluster::start_with(primaries, replicas, None, false)
    }

    /// `primaries` primaries without replicas, each behind a [`TcpProxy`]
    /// whose port it announces: clients reach every node through a proxy
    /// ([`proxies`](Self::proxies)), the nodes each other directly.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_behind_proxies(primaries: usize) -> io::Result<RedisCluster> {
        RedisCluster::start_with(primaries, 0, None, true)
    }

    /// The proxies in front of the nodes (a cluster from
    /// [`start_behind_proxies`](Self::start_behind_proxies)).
    pub fn proxies(&self) -> &[TcpProxy] {
        &self.proxies
    }

    /// [`start`](Self::start) for a cluster speaking TLS to clients and
    /// between nodes, with the certificates of `pki` (written into `dir`):
    /// clients connect to [`tls_url`](Self::tls_url) trusting `dir/ca.pem`.
    /// Each node keeps a plain port too, for this kit's own checks.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_tls(primaries: usize, replicas: usize, dir: &Path, pki: &Pki) -> io::Result<RedisCluster> {
        RedisCluster::start_with(primaries, replicas, Some((dir, pki)), false)
    }

    fn start_with(
        primaries: usize,
        replicas: usize,
        tls: Option<(&Path, &Pki)>,
        behind_proxies: bool,
    ) -> io::Result<RedisCluster> {
        let files = match tls {
            Some((dir, pki)) => Some(crate::tls::write_files(dir, pki)?),
            None => None,
        };
        let mut nodes = Vec::new();
        let mut tls_ports = Vec::new();
        let mut proxies = Vec::new();
        for _ in 0..primaries * (1 + replicas) {
            let mut builder = RedisServer::builder()
                .arg("--cluster-enabled")
                .arg("yes")
                .arg("--cluster-node-timeout")
                .arg("1000")
                .arg("--cluster-config-file")
                .arg("nodes.conf")
                // Replicas sync at once (the default waits 5 s), so a
                // primary killed early still has a replica to promote.
                .arg("--repl-diskless-sync-delay")
                .arg("0");
            if let Some(files) = &files {
                let tls_port = free_port()?;
                tls_ports.push(tls_port);
                builder = files.server_args(builder, tls_port);
                // The bus port, named: the TLS port + 10000 may pass 65535.
                for arg in ["--tls-cluster", "yes", "--tls-replication", "yes", "--cluster-port"] {
                    builder = builder.arg(arg);
                }
                builder = builder.arg(free_port()?.to_string());
            }
            if behind_proxies {
                // The node announces the proxy's port to clients; the bus
                // stays direct (its port named, as it is announced too).
                let bus = free_port()?.to_string();
                builder = builder
                    .arg("--cluster-port")
                    .arg(bus.clone())
                    .arg("--cluster-announce-bus-port")
                    .arg(bus);
                let node = builder.start()?;
                let proxy = TcpProxy::start(node.port())?;
                let announced = proxy.port().to_string();
                cli(node.port(), &["CONFIG", "SET", "cluster-announce-port", &announced])?;
                proxies.push(proxy);
                nodes.push(node);
                continue;
            }
            nodes.push(builder.start()?);
        }
        let mut create = Command::new("redis-cli");
        if let Some(files) = &files {
            create.arg("--tls").arg("--cacert").arg(&files.ca);
        }
        create.arg("--cluster").arg("create");
        if !proxies.is_empty() {
            for proxy in &proxies {
                create.arg(format!("127.0.0.1:{}", proxy.port()));
            }
        } else if tls_ports.is_empty() {
            for node in &nodes {
                create.arg(format!("127.0.0.1:{}", node.port()));
            }
        } else {
            for port in &tls_ports {
                create.arg(format!("127.0.0.1:{port}"));
            }
        }
        create.args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"]);
        let output = create.output().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot run redis-cli ({e}); install it with `apt-get install redis-tools`"),
            )
        })?;
        if !output.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        let cluster = RedisCluster { nodes, tls_ports, proxies };
        cluster.wait_ok()?;
        Ok(cluster)
    }

    /// Waits until every live node says `cluster_state:ok`, all agree on
    /// the same primaries, and every replica is in sync with its primary.
    ///
    /// # Errors
    ///
    /// When the cluster does not settle within 30 s.
    pub fn wait_ok(&self) -> io::Result<()> {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            if self.settled() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::other("the cluster did not reach cluster_state:ok within 30s"));
            }
            sleep(Duration::from_millis(100));
        }
    }

    fn settled(&self) -> bool {
        self.slots_agreed() && self.replicas_linked()
    }

    /// Every live replica has a working link to its primary.
    fn replicas_linked(&self) -> bool {
        self.nodes.iter().all(|node| match cli(node.port(), &["INFO", "replication"]) {
            Ok(info) => !info.contains("role:slave") || info.contains("master_link_status:up"),
            Err(_) => true,
        })
    }

    fn slots_agreed(&self) -> bool {
        let mut views = Vec::new();
        for node in &self.nodes {
            let Ok(info) = cli(node.port(), &["CLUSTER", "INFO"]) else { continue };
            if !info.contains("cluster_state:ok") {
                return false;
            }
            let Ok(nodes) = self.nodes_seen_by(node.port()) else { return false };
            let mut primaries: Vec<(u16, Vec<(u16, u16)>)> = nodes
                .into_iter()
                .filter(|n| n.primary && !n.failed && !n.slots.is_empty())
                .map(|n| (n.port, n.slots))
                .collect();
            primaries.sort();
            views.push(primaries);
        }
        !views.is_empty() && views.windows(2).all(|w| w[0] == w[1])
    }

    /// `redis+cluster://` URL naming every node (the store needs only one),
    /// through their proxies in a cluster from
    /// [`start_behind_proxies`](Self::start_behind_proxies).
    pub fn url(&self) -> String {
        let ports: Vec<u16> = if self.proxies.is_empty() {
            self.nodes.iter().map(RedisServer::port).collect()
        } else {
            self.proxies.iter().map(TcpProxy::port).collect()
        };
        let hosts: Vec<String> = ports.iter().map(|port| format!("127.0.0.1:{port}")).collect();
        format!("redis+cluster://{}/", hosts.join(","))
    }

    /// `rediss+cluster://` URL naming every node's TLS port, as the ACL user
    /// `alice` (a cluster from [`start_tls`](Self::start_tls)).
    pub fn tls_url(&self) -> String {
        let hosts: Vec<String> = self.tls_ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        format!("rediss+cluster://alice:s3cret@{}/", hosts.join(","))
    }

    /// `redis://` URLs of every node.
    pub fn node_urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The cluster as one live node sees it.
    ///
    /// # Errors
    ///
    /// When no node answers.
    pub fn cluster_nodes(&self) -> io::Result<Vec<ClusterNode>> {
        let mut last = io::Error::other("no node is running");
        for node in &self.nodes {
            match self.nodes_seen_by(node.port()) {
                Ok(nodes) => return Ok(nodes),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn nodes_seen_by(&self, port: u16) -> io::Result<Vec<ClusterNode>> {
        let text = cli(port, &["CLUSTER", "NODES"])?;
        Ok(text.lines().filter_map(parse_node).collect())
    }

    /// Kills (SIGKILL) the primary serving `slot`; returns its port.
    ///
    /// # Errors
    ///
    /// When the cluster cannot be asked.
    pub fn kill_primary_of(&mut self, slot: u16) -> io::Result<u16> {
        let nodes = self.cluster_nodes()?;
        let port = nodes
            .iter()
            .find(|n| n.primary && n.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
            .map(|n| n.port)
            .ok_or_else(|| io::Error::other(format!("no primary serves slot {slot}")))?;
        if let Some(node) = self.nodes.iter_mut().find(|n| n.port() == port) {
            node.kill();
        }
        Ok(port)
    }

    /// Moves `count` slots from the primary serving `slot` to another
    /// primary, live, with `redis-cli --cluster reshard`.
    ///
    /// # Errors
    ///
    /// When redis-cli fails.
    pub fn reshard_from(&self, slot: u16, count: u16) -> io::Result<()> {
        let nodes = self.cluster_nodes()?;
        let from = nodes
            .iter()
            .find(|n| n.primary && n.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
            .ok_or_else(|| io::Error::other(format!("no primary serves slot {slot}")))?;
        let to = nodes
            .iter()
            .find(|n| n.primary && !n.failed && n.id != from.id)
            .ok_or_else(|| io::Error::other("no other primary"))?;
        let output = Command::new("redis-cli")
            .args(["--cluster", "reshard", &format!("127.0.0.1:{}", from.port)])
            .args(["--cluster-from", &from.id, "--cluster-to", &to.id])
            .args(["--cluster-slots", &count.to_string(), "--cluster-yes"])
            .output()?;
        if !output.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster reshard failed: {}",
                String::from_utf8_lossy(&output.stdout)
            )));
        }
        Ok(())
    }

    /// Sends `args` to every live node (e.g. `SCRIPT FLUSH`); returns how
    /// many answered.
    pub fn on_every_node(&self, args: &[&str]) -> usize {
        self.nodes.iter().filter(|n| cli(n.port(), args).is_ok()).count()
    }

    /// Kills (SIGKILL) every node: the whole cluster down, as when it and
    /// its clients are restarted together.
    pub fn stop_all(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
    }

    /// Starts every node again on its port, with its cluster state (its
    /// `nodes.conf`; the data is gone), and waits until the cluster is ok.
    ///
    /// # Errors
    ///
    /// When a node does not come up, or the cluster does not settle.
    pub fn restart_all(&mut self) -> io::Result<()> {
        for node in &mut self.nodes {
            node.restart()?;
        }
        self.wait_ok()
    }

    /// The nodes, for anything else a test needs.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }
}

/// Runs `redis-cli -p port args…` and returns its output.
fn cli(port: u16, args: &[&str]) -> io::Result<String> {
    let output = Command::new("redis-cli").args(["-p", &port.to_string()]).args(args).output()?;
    if !output.status.success() {
        return Err(io::Error::other(String::from_utf8_lossy(&output.stderr).into_owned()));
    }
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if text.starts_with("Could not connect") || text.starts_with("ERR") {
        return Err(io::Error::other(text));
    }
    Ok(text)
}
