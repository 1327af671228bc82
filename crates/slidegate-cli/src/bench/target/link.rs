//! The HTTP/2 connections of `bench --target grpc://…` and `h2c://…`: a
//! few per run, shared by the callers, and opened again when one breaks (a
//! server restarted mid-run).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use h2::RecvStream;
use h2::client::SendRequest;
use http::{Request, Response};
use tokio::net::TcpStream;

use super::Failure;

/// Opens one HTTP/2 connection to `authority`; its driver runs as a task.
///
/// # Errors
///
/// The connection or the HTTP/2 handshake failed.
pub(super) async fn connect(authority: &str) -> anyhow::Result<SendRequest<Bytes>> {
    let stream = TcpStream::connect(authority).await?;
    stream.set_nodelay(true)?;
    let (send, connection) = h2::client::Builder::new()
        // Answers are small; a window this size never stalls them.
        .initial_window_size(1 << 20)
        .initial_connection_window_size(8 << 20)
        .handshake(stream)
        .await?;
    tokio::spawn(async move {
        // Its errors reach the calls on it.
        let _ = connection.await;
    });
    Ok(send)
}

/// One of the run's HTTP/2 connections, shared by several callers, and
/// opened again when it breaks (a server restarted mid-run).
pub(super) struct Link {
    authority: String,
    /// The connection and its generation; `None` once it broke.
    state: tokio::sync::Mutex<Option<(u64, SendRequest<Bytes>)>>,
}

impl Link {
    /// A link over `send`, already open to `authority`.
    pub(super) fn new(authority: &str, send: SendRequest<Bytes>) -> Link {
        Link { authority: authority.to_owned(), state: tokio::sync::Mutex::new(Some((0, send))) }
    }

    /// The connection, opened again if it broke.
    async fn get(&self) -> Result<(u64, SendRequest<Bytes>), Failure> {
        let mut state = self.state.lock().await;
        if let Some((generation, send)) = &*state {
            return Ok((*generation, send.clone()));
        }
        let send = connect(&self.authority).await.map_err(|e| Failure::transport(format!("{e:#}")))?;
        let generation = GENERATIONS.fetch_add(1, Ordering::Relaxed);
        *state = Some((generation, send.clone()));
        Ok((generation, send))
    }

    /// Notes that connection `generation` broke (unless it was replaced already).
    async fn broken(&self, generation: u64) {
        let mut state = self.state.lock().await;
        if matches!(&*state, Some((current, _)) if *current == generation) {
            *state = None;
        }
    }
}

/// Generations of reopened connections (0 is every first one).
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

/// A caller's hold on a [`Link`]: the connection as it last got it.
pub(super) struct Hold {
    link: Arc<Link>,
    send: Option<(u64, SendRequest<Bytes>)>,
}

impl Hold {
    /// A hold on `link`; it takes the connection at its first exchange.
    pub(super) fn new(link: Arc<Link>) -> Hold {
        Hold { link, send: None }
    }

    /// Sends `request` with `body` (ending the stream) and waits for the
    /// answer's head. A broken connection is opened again for the next one.
    pub(super) async fn exchange(
        &mut self,
        request: Request<()>,
        body: Option<Bytes>,
    ) -> Result<Response<RecvStream>, Failure> {
        let (generation, send) = match &self.send {
            Some(send) => send.clone(),
            None => self.send.insert(self.link.get().await?).clone(),
        };
        let sent = async {
            let mut send = send.ready().await?;
            let (response, mut stream) = send.send_request(request, body.is_none())?;
            if let Some(body) = body {
                stream.send_data(body, true)?;
            }
            response.await
        };
        match sent.await {
            Ok(response) => Ok(response),
            Err(error) => {
                if error.is_io() || error.is_go_away() || !error.is_remote() {
                    self.send = None;
                    self.link.broken(generation).await;
                }
                Err(Failure::from(error))
            }
        }
    }
}

/// Reads `body` whole (at most `max` bytes), giving its flow-control
/// window back as it goes.
pub(super) async fn read_body(body: &mut RecvStream, max: usize) -> Result<BytesMut, Failure> {
    let mut out = BytesMut::new();
    receive(body, max, |chunk| out.extend_from_slice(chunk)).await?;
    Ok(out)
}

/// Reads `body` to its end (at most `max` bytes), handing each chunk to
/// `take` and giving its flow-control window back.
pub(super) async fn receive(
    body: &mut RecvStream,
    max: usize,
    mut take: impl FnMut(&[u8]),
) -> Result<(), Failure> {
    let mut received = 0;
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(Failure::from)?;
        let _ = body.flow_control().release_capacity(chunk.len());
        received += chunk.len();
        if received > max {
            return Err(Failure::transport(format!("the answer is larger than {max} bytes")));
        }
        take(&chunk);
    }
    Ok(())
}

impl From<h2::Error> for Failure {
    fn from(error: h2::Error) -> Failure {
        Failure::transport(error.to_string())
    }
}
