//! A real Sentinel setup on free loopback ports: one primary, replicas,
//! and three sentinels (quorum 2, down after 1 s), killed on drop.

use std::io::{self, Write};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use std::path::Path;

use crate::tls::Files;
use crate::{Pki, RedisServer, TcpProxy, free_port};

/// The name the sentinels monitor the primary under.
pub const MASTER_NAME: &str = "mymaster";

const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A primary, its replicas and three sentinels.
#[derive(Debug)]
pub struct RedisSentinel {
    servers: Vec<RedisServer>,
    sentinels: Vec<SentinelProcess>,
    /// The proxy in front of the primary, in a setup from `start_behind_proxy`.
    proxy: Option<TcpProxy>,
}

#[derive(Debug)]
struct SentinelProcess {
    child: Child,
    port: u16,
    /// The TLS port, in a setup from `start_tls`.
    tls_port: Option<u16>,
    /// Its configuration file (which the sentinel rewrites as it learns).
    config: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl SentinelProcess {
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again from its configuration file.
    fn restart(&mut self) -> io::Result<()> {
        self.kill();
        self.child = run_sentinel(&self.config)?;
        wait_pong(self.port)
    }
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

impl RedisSentinel {
    /// Starts a primary with `replicas` replicas and three sentinels, and
    /// waits until the sentinels know the replicas and each other.
    ///
    /// # Errors
    ///
    /// When `redis-server` is missing or the setup does not settle in 30 s.
    pub fn start(replicas: usize) -> io::Result<RedisSentinel> {
        RedisSentinel::start_with(replicas, None, false)
    }

    /// A primary without replicas, behind a [`TcpProxy`] whose address the
    /// sentinels name (and reach it through): the faults of a connection to
    /// the primary, as clients of the sentinels meet them. The proxy is
    /// [`proxy`](Self::proxy).
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_behind_proxy() -> io::Result<RedisSentinel> {
        RedisSentinel::start_with(0, None, true)
    }

    /// [`start`](Self::start) speaking TLS everywhere (clients, replication,
    /// sentinels to servers) with the certificates of `pki`, written into
    /// `dir`; clients connect to [`tls_url`](Self::tls_url) trusting
    /// `dir/ca.pem`. Plain ports stay open for this kit's own checks.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_tls(replicas: usize, dir: &Path, pki: &Pki) -> io::Result<RedisSentinel> {
        RedisSentinel::start_with(replicas, Some(&crate::tls::write_files(dir, pki)?), false)
    }

    fn start_with(replicas: usize, tls: Option<&Files>, behind_proxy: bool) -> io::Result<RedisSentinel> {
        let server = |replica_of: Option<u16>| -> io::Result<(RedisServer, u16)> {
            let mut builder = RedisServer::builder().arg("--repl-diskless-sync-delay").arg("0");
            let mut client_port = None;
            if let Some(files) = tls {
                let tls_port = free_port()?;
                builder = files.server_args(builder, tls_port).arg("--tls-replication").arg("yes");
                client_port = Some(tls_port);
            }
            if let Some(primary) = replica_of {
                builder = builder.arg("--replicaof").arg("127.0.0.1").arg(primary.to_string());
            }
            let server = builder.start()?;
            let port = client_port.unwrap_or(server.port());
            Ok((server, port))
        };
        // In TLS mode, replicas and sentinels reach the primary at its TLS port.
        let (primary, primary_port) = server(None)?;
        let mut servers = vec![primary];
        for _ in 0..replicas {
            servers.push(server(Some(primary_port))?.0);
        }
        let proxy = if behind_proxy { Some(TcpProxy::start(primary_port)?) } else { None };
        let named = proxy.as_ref().map_or(primary_port, TcpProxy::port);
        let mut sentinels = Vec::new();
        for _ in 0..3 {
            sentinels.push(spawn_sentinel(named, tls)?);
        }
        let setup = RedisSentinel { servers, sentinels, proxy };
        setup.wait_settled(replicas)?;
        Ok(setup)
    }

    fn wait_settled(&self, replicas: usize) -> io::Result<()> {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            let known = self.sentinels.iter().all(|s| {
                let replicas_seen = count_entries(s.port, "replicas");
                let others = count_entries(s.port, "sentinels");
                replicas_seen >= replicas && others >= 2
            });
            if known {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::other("sentinels did not discover the setup within 30s"));
            }
            sleep(Duration::from_millis(100));
        }
    }

    /// `redis+sentinel://…/mymaster` naming the three sentinels.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.sentinels.iter().map(|s| format!("127.0.0.1:{}", s.port)).collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// `rediss+sentinel://alice:s3cret@…/mymaster` naming the sentinels' TLS
    /// ports (a setup from [`start_tls`](Self::start_tls)).
    pub fn tls_url(&self) -> String {
        let hosts: Vec<String> =
            self.sentinels.iter().filter_map(|s| s.tls_port).map(|p| format!("127.0.0.1:{p}")).collect();
        format!("rediss+sentinel://alice:s3cret@{}/{MASTER_NAME}", hosts.join(","))
    }

    /// The port of the primary the sentinels name now.
    ///
    /// # Errors
    ///
    /// When no sentinel answers.
    pub fn primary_port(&self) -> io::Result<u16> {
        for s in &self.sentinels {
            let out = Command::new("redis-cli")
                .args(["-p", &s.port.to_string(), "SENTINEL", "get-master-addr-by-name", MASTER_NAME])
                .output()?;
            let text = String::from_utf8_lossy(&out.stdout);
            if let Some(port) = text.lines().nth(1).and_then(|p| p.trim().parse().ok()) {
                return Ok(port);
            }
        }
        Err(io::Error::other("no sentinel names a primary"))
    }

    /// Kills the current primary (SIGKILL); returns its port.
    ///
    /// # Errors
    ///
    /// When the sentinels cannot be asked.
    pub fn kill_primary(&mut self) -> io::Result<u16> {
        let port = self.primary_port()?;
        if let Some(server) = self.servers.iter_mut().find(|s| s.port() == port) {
            server.kill();
        }
        Ok(port)
    }

    /// Waits until the sentinels name a primary other than `old`.
    ///
    /// # Errors
    ///
    /// When no failover happens within 30 s.
    pub fn wait_failover(&self, old: u16) -> io::Result<u16> {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            if let Ok(port) = self.primary_port()
                && port != old
            {
                return Ok(port);
            }
            if Instant::now() > deadline {
                return Err(io::Error::other("no failover within 30s"));
            }
            sleep(Duration::from_millis(100));
        }
    }

    /// Kills (SIGKILL) every server and every sentinel: the whole setup
    /// down, as when it and its clients are restarted together.
    pub fn stop_all(&mut self) {
        for server in &mut self.servers {
            server.kill();
        }
        for sentinel in &mut self.sentinels {
            sentinel.kill();
        }
    }

    /// Starts every server and sentinel again on its port (the sentinels
    /// from their configuration files, as they rewrote them), and waits
    /// until a sentinel names a primary.
    ///
    /// # Errors
    ///
    /// When a process does not come up, or no primary is named in 30 s.
    pub fn restart_all(&mut self) -> io::Result<()> {
        for server in &mut self.servers {
            server.restart()?;
        }
        for sentinel in &mut self.sentinels {
            sentinel.restart()?;
        }
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        while self.primary_port().is_err() {
            if Instant::now() > deadline {
                return Err(io::Error::other("no sentinel names a primary 30 s after the restart"));
            }
            sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// The data servers (primary first at start).
    pub fn servers(&self) -> &[RedisServer] {
        &self.servers
    }

    /// The proxy in front of the primary (a setup from
    /// [`start_behind_proxy`](Self::start_behind_proxy)).
    pub fn proxy(&self) -> Option<&TcpProxy> {
        self.proxy.as_ref()
    }
}

fn count_entries(port: u16, what: &str) -> usize {
    Command::new("redis-cli")
        .args(["-p", &port.to_string(), "SENTINEL", what, MASTER_NAME])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().filter(|l| *l == "name").count())
        .unwrap_or(0)
}

fn spawn_sentinel(primary_port: u16, tls: Option<&Files>) -> io::Result<SentinelProcess> {
    let dir = tempfile::tempdir()?;
    let port = free_port()?;
    let config = dir.path().join("sentinel.conf");
    let mut file = std::fs::File::create(&config)?;
    writeln!(file, "port {port}")?;
    writeln!(file, "bind 127.0.0.1")?;
    let tls_port = match tls {
        Some(files) => {
            let tls_port = free_port()?;
            writeln!(file, "tls-port {tls_port}")?;
            for line in files.config_lines() {
                writeln!(file, "{line}")?;
            }
            // Sentinels speak TLS to the servers, and to each other.
            writeln!(file, "tls-replication yes")?;
            Some(tls_port)
        }
        None => None,
    };
    writeln!(file, "sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} 2")?;
    writeln!(file, "sentinel down-after-milliseconds {MASTER_NAME} 1000")?;
    writeln!(file, "sentinel failover-timeout {MASTER_NAME} 5000")?;
    writeln!(file, "sentinel parallel-syncs {MASTER_NAME} 1")?;
    drop(file);
    let child = run_sentinel(&config)?;
    let sentinel = SentinelProcess { child, port, tls_port, config, _dir: dir };
    wait_pong(port)?;
    Ok(sentinel)
}

fn run_sentinel(config: &Path) -> io::Result<Child> {
    Command::new("redis-server")
        .arg(config)
        .arg("--sentinel")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run redis-server --sentinel ({e})")))
}

fn wait_pong(port: u16) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let pong = Command::new("redis-cli").args(["-p", &port.to_string(), "PING"]).output();
        if pong.is_ok_and(|o| o.stdout.starts_with(b"PONG")) {
            return Ok(());
        }
        sleep(Duration::from_millis(20));
    }
    Err(io::Error::other("a sentinel did not answer PING within 10s"))
}
