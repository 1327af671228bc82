//! Real `redis-server` processes on free ports.

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// How long a server may take to answer its first `PING`.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A free TCP port on 127.0.0.1 (bound and released; a race with another
/// process is possible but retried by [`RedisServer::start`]).
///
/// # Errors
///
/// When no port can be bound.
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A running `redis-server`, killed (and its directory removed) on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    config: RedisServerBuilder,
}

/// Configures a [`RedisServer`].
#[derive(Debug, Clone)]
pub struct RedisServerBuilder {
    binary: PathBuf,
    extra_args: Vec<String>,
    envs: Vec<(String, OsString)>,
}

impl RedisServerBuilder {
    /// The server binary (default `$SLIDEGATE_REDIS_SERVER` or `redis-server`).
    pub fn binary(mut self, binary: impl Into<PathBuf>) -> Self {
        self.binary = binary.into();
        self
    }

    /// Adds a command-line argument, e.g. `"--maxmemory"`, `"10mb"`.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.extra_args.push(arg.into());
        self
    }

    /// Sets an environment variable of the server process (e.g. to run it
    /// under a preloaded library: see [`FakeClock`](crate::FakeClock)).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<OsString>) -> Self {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// Spawns the server and waits until it answers `PING`.
    ///
    /// # Errors
    ///
    /// When the binary is missing or the server does not come up.
    pub fn start(self) -> io::Result<RedisServer> {
        let mut last_err = None;
        // A port found free may be taken before the server binds it: retry.
        for _ in 0..5 {
            let dir = tempfile::tempdir()?;
            let port = free_port()?;
            let child = spawn(&self, port, &dir)?;
            let mut server = RedisServer { child, port, dir, config: self.clone() };
            match server.wait_ready() {
                Ok(()) => return Ok(server),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("redis-server did not start")))
    }
}

fn spawn(config: &RedisServerBuilder, port: u16, dir: &tempfile::TempDir) -> io::Result<Child> {
    let binary = &config.binary;
    Command::new(binary)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir.path())
        .args(&config.extra_args)
        .envs(config.envs.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot run {} ({e}); install it with `apt-get install redis-server`",
                    binary.display()
                ),
            )
        })
}

impl RedisServer {
    /// Starts a default `redis-server`.
    ///
    /// # Errors
    ///
    /// When `redis-server` is missing or does not come up.
    pub fn start() -> io::Result<RedisServer> {
        RedisServer::builder().start()
    }

    /// Starts configuring a server.
    pub fn builder() -> RedisServerBuilder {
        let binary =
            std::env::var_os("SLIDEGATE_REDIS_SERVER").map_or_else(|| "redis-server".into(), PathBuf::from);
        RedisServerBuilder { binary, extra_args: Vec::new(), envs: Vec::new() }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A `redis://` URL for it.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Sends one command (inline protocol) and returns the first reply line.
    ///
    /// # Errors
    ///
    /// When the server cannot be reached.
    pub fn command(&self, command: &str) -> io::Result<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        stream.write_all(format!("{command}\r\n").as_bytes())?;
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line)?;
        Ok(line.trim_end().to_owned())
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!("redis-server exited early: {status}")));
            }
            if self.command("PING").is_ok_and(|reply| reply == "+PONG") {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::other("redis-server did not answer PING within 10s"));
            }
            sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Freezes the server (SIGSTOP): it keeps its connections and port but
    /// answers nothing — a hung server, as seen in a long GC-like stall or a
    /// paused VM. [`resume`](Self::resume) thaws it.
    ///
    /// # Errors
    ///
    /// When the signal cannot be sent.
    pub fn pause(&self) -> io::Result<()> {
        self.signal("-STOP")
    }

    /// Thaws a [`pause`](Self::pause)d server (SIGCONT).
    ///
    /// # Errors
    ///
    /// When the signal cannot be sent.
    pub fn resume(&self) -> io::Result<()> {
        self.signal("-CONT")
    }

    fn signal(&self, signal: &str) -> io::Result<()> {
        let status = Command::new("kill").arg(signal).arg(self.child.id().to_string()).status()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!("kill {signal} failed: {status}")))
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts the server again on the same port (after [`kill`](Self::kill)).
    ///
    /// # Errors
    ///
    /// When it does not come up again.
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill();
        self.child = spawn(&self.config, self.port, &self.dir)?;
        self.wait_ready()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
