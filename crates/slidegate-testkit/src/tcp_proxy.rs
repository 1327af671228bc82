//! A TCP proxy between a client and a server, for faults a killed or
//! frozen server cannot show: the connections open now go silent for
//! good (no reset, no close), or receive bytes that are not the
//! protocol, while new connections pass as before — a half-dead NAT
//! entry, a hung middlebox, a corrupted stream.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// How often a blocked pump looks whether the proxy is gone.
const POLL: Duration = Duration::from_millis(100);

/// A proxy on a free loopback port to `127.0.0.1:<target>`; dropping it
/// closes every connection.
#[derive(Debug)]
pub struct TcpProxy {
    port: u16,
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    stopped: AtomicBool,
    accepted: AtomicUsize,
    /// Every connection so far: its client side, and whether it still passes bytes.
    connections: Mutex<Vec<(TcpStream, Arc<AtomicBool>)>>,
}

impl TcpProxy {
    /// Starts a proxy to the server on `target`.
    ///
    /// # Errors
    ///
    /// When no port can be bound.
    pub fn start(target: u16) -> io::Result<TcpProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        listener.set_nonblocking(true)?;
        let shared = Arc::new(Shared::default());
        let accepting = Arc::clone(&shared);
        thread::Builder::new()
            .name("tcp-proxy".into())
            .spawn(move || accept(&listener, target, &accepting))?;
        Ok(TcpProxy { port, shared })
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A `redis://` URL for the server behind it.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// How many connections it has accepted.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Every connection open now stops passing bytes, both ways, and
    /// stays open: its peers wait forever. New connections pass.
    pub fn silence_open_connections(&self) {
        for (_, passing) in lock(&self.shared.connections).iter() {
            passing.store(false, Ordering::SeqCst);
        }
    }

    /// Every connection open now sends its client `bytes` (e.g. a RESP
    /// bulk string header promising a gigabyte), then passes nothing more
    /// and stays open. New connections pass.
    ///
    /// # Errors
    ///
    /// When writing to a client fails.
    pub fn garble_open_connections(&self, bytes: &[u8]) -> io::Result<()> {
        for (client, passing) in lock(&self.shared.connections).iter_mut() {
            if passing.swap(false, Ordering::SeqCst) {
                client.write_all(bytes)?;
            }
        }
        Ok(())
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        for (client, _) in lock(&self.shared.connections).iter() {
            let _ = client.shutdown(Shutdown::Both);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn accept(listener: &TcpListener, target: u16, shared: &Arc<Shared>) {
    while !shared.stopped.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(_) => continue,
        };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
            // Nothing behind it: the client sees its connection closed.
            continue;
        };
        let passing = Arc::new(AtomicBool::new(true));
        let (Ok(client_in), Ok(client_out), Ok(server_in), Ok(server_out), Ok(kept)) = (
            client.try_clone(),
            client.try_clone(),
            server.try_clone(),
            server.try_clone(),
            client.try_clone(),
        ) else {
            continue;
        };
        lock(&shared.connections).push((kept, Arc::clone(&passing)));
        for (from, to, to_client) in [(client_in, server_out, false), (server_in, client_out, true)] {
            let (shared, passing) = (Arc::clone(shared), Arc::clone(&passing));
            let _ = thread::Builder::new()
                .name("tcp-proxy-pump".into())
                .spawn(move || pump(from, (to, to_client), &shared, &passing));
        }
    }
}

/// Copies `from` to `to` while the connection passes bytes; afterwards
/// reads and drops what comes. Ends when `from` closes or the proxy is
/// dropped; a client whose connection no longer passes bytes is never
/// told that the server closed its side.
fn pump(mut from: TcpStream, (mut to, to_client): (TcpStream, bool), shared: &Shared, passing: &AtomicBool) {
    let _ = from.set_read_timeout(Some(POLL));
    let mut buffer = [0u8; 16 * 1024];
    while !shared.stopped.load(Ordering::SeqCst) {
        match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) if passing.load(Ordering::SeqCst) => {
                if to.write_all(&buffer[..n]).is_err() {
                    break;
                }
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    if !to_client || passing.load(Ordering::SeqCst) || shared.stopped.load(Ordering::SeqCst) {
        let _ = to.shutdown(Shutdown::Write);
    }
}
