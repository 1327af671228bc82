//! A real Sentinel setup on free loopback ports: one primary, replicas,
//! and three sentinels (quorum 2, down after 1 s), killed on drop.

use std::io::{self, Write};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::{RedisServer, free_port};

/// The name the sentinels monitor the primary under.
pub const MASTER_NAME: &str = "mymaster";

const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A primary, its replicas and three sentinels.
#[derive(Debug)]
pub struct RedisSentinel {
    servers: Vec<RedisServer>,
    sentinels: Vec<SentinelProcess>,
}

#[derive(Debug)]
struct SentinelProcess {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
        let primary = RedisServer::builder().arg("--repl-diskless-sync-delay").arg("0").start()?;
        let primary_port = primary.port();
        let mut servers = vec![primary];
        for _ in 0..replicas {
            servers.push(
                RedisServer::builder()
                    .arg("--replicaof")
                    .arg("127.0.0.1")
                    .arg(primary_port.to_string())
                    .arg("--repl-diskless-sync-delay")
                    .arg("0")
                    .start()?,
            );
        }
        let mut sentinels = Vec::new();
        for _ in 0..3 {
            sentinels.push(spawn_sentinel(primary_port)?);
        }
        let setup = RedisSentinel { servers, sentinels };
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

    /// The data servers (primary first at start).
    pub fn servers(&self) -> &[RedisServer] {
        &self.servers
    }
}

fn count_entries(port: u16, what: &str) -> usize {
    Command::new("redis-cli")
        .args(["-p", &port.to_string(), "SENTINEL", what, MASTER_NAME])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().filter(|l| *l == "name").count())
        .unwrap_or(0)
}

fn spawn_sentinel(primary_port: u16) -> io::Result<SentinelProcess> {
    let dir = tempfile::tempdir()?;
    let port = free_port()?;
    let config = dir.path().join("sentinel.conf");
    let mut file = std::fs::File::create(&config)?;
    writeln!(file, "port {port}")?;
    writeln!(file, "bind 127.0.0.1")?;
    writeln!(file, "sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} 2")?;
    writeln!(file, "sentinel down-after-milliseconds {MASTER_NAME} 1000")?;
    writeln!(file, "sentinel failover-timeout {MASTER_NAME} 5000")?;
    writeln!(file, "sentinel parallel-syncs {MASTER_NAME} 1")?;
    drop(file);
    let child = Command::new("redis-server")
        .arg(&config)
        .arg("--sentinel")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run redis-server --sentinel ({e})")))?;
    let sentinel = SentinelProcess { child, port, _dir: dir };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let pong = Command::new("redis-cli").args(["-p", &port.to_string(), "PING"]).output();
        if pong.is_ok_and(|o| o.stdout.starts_with(b"PONG")) {
            return Ok(sentinel);
        }
        sleep(Duration::from_millis(20));
    }
    Err(io::Error::other("a sentinel did not answer PING within 10s"))
}
