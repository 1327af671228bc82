//! An upstream's answer on its way back: waiting for its head within the
//! response timeout (or while an upload makes progress), then passing it
//! on — hop-by-hop headers removed, a protocol switch joined into a tunnel.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::time::Duration;

use http::{Response, StatusCode, Version};
use http_body_util::BodyExt as _;
use hyper_util::rt::TokioIo;

use super::body::{BoxError, GatewayBody, Sending};
use super::conn::TunnelHome;
use super::forward::remove_hop_by_hop;
use super::upstream_conns::{Answer, Failure};

/// What came too late.
pub(super) enum Late {
    /// The response head, after the request was sent.
    Response,
    /// The next piece of the request body (client or upstream stalled).
    Upload,
}

/// The upstream's response head (`call`). While the client is still
/// sending its body, the wait lasts as long as the body makes progress (an
/// upload takes as long as it takes; a stalled one ends after the response
/// timeout); once it is all sent, for at most the response timeout. An
/// upstream that answers before the body is all sent is answered at once,
/// and its connection is not used again.
pub(super) async fn answer(
    response_timeout: Duration,
    mut call: Pin<&mut impl Future<Output = Result<Answer, Failure>>>,
    sending: Option<Sending>,
) -> Result<Result<Answer, Failure>, Late> {
    if let Some(sending) = sending
        // Boxed: only uploads wait this way, and their wait's state is large.
        && let Some(early) = Box::pin(while_uploading(response_timeout, call.as_mut(), sending)).await
    {
        return early;
    }
    tokio::time::timeout(response_timeout, call).await.map_err(|_| Late::Response)
}

/// Waits for `call` while the request body is being sent: `None` once it
/// is all sent; else what ended the wait early — the answer (the
/// connection is not used again: its request is still being sent), or a
/// stalled upload.
async fn while_uploading<F: Future<Output = Result<Answer, Failure>>>(
    response_timeout: Duration,
    mut call: Pin<&mut F>,
    Sending { mut sent, progress }: Sending,
) -> Option<Result<Result<Answer, Failure>, Late>> {
    let mut seen = progress.load(Ordering::Relaxed);
    loop {
        tokio::select! {
            biased;
            answer = call.as_mut() => {
                return Some(Ok(answer.map(|answer| Answer { lease: None, ..answer })));
            }
            // Sent, or the body was dropped (the call then ends soon).
            _ = &mut sent => return None,
            () = tokio::time::sleep(response_timeout) => {
                let now = progress.load(Ordering::Relaxed);
                if now == seen {
                    return Some(Err(Late::Upload));
                }
                seen = now;
            }
        }
    }
}

/// The upstream's response, passed on: hop-by-hop headers removed; a
/// protocol switch (`101`) joins the two upgraded connections. The kept
/// connection goes back once the body has been read, unless the request
/// asked to switch protocols (the connection is the tunnel's then, or in
/// a state not worth reusing).
pub(super) fn respond(
    Answer { mut response, lease }: Answer,
    client_upgrade: Option<(hyper::upgrade::OnUpgrade, TunnelHome)>,
) -> Response<GatewayBody> {
    let switching = response.status() == StatusCode::SWITCHING_PROTOCOLS;
    let lease = if client_upgrade.is_some() { None } else { lease };
    match client_upgrade {
        Some((client, home)) if switching => {
            let upstream = hyper::upgrade::on(&mut response);
            home.spawn(tunnel(client, upstream));
        }
        _ => {}
    }
    remove_hop_by_hop(response.headers_mut(), switching);
    // The client's connection has its own version (an HTTP/1.0 upstream
    // does not make the client's connection HTTP/1.0).
    *response.version_mut() = Version::default();
    match lease {
        Some(lease) => response.map(|body| lease.returning(body).map_err(BoxError::from).boxed_unsync()),
        None => response.map(|body| body.map_err(BoxError::from).boxed_unsync()),
    }
}

/// Copies bytes both ways between the two sides of an upgraded
/// connection (a WebSocket) until either closes.
async fn tunnel(client: hyper::upgrade::OnUpgrade, upstream: hyper::upgrade::OnUpgrade) {
    let (client, upstream) = tokio::join!(client, upstream);
    let (Ok(client), Ok(upstream)) = (client, upstream) else {
        tracing::debug!(target: "slidegate", "protocol switch failed on one side");
        return;
    };
    let (mut client, mut upstream) = (TokioIo::new(client), TokioIo::new(upstream));
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// An error and its causes, for logs.
pub(super) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
