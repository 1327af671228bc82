//! Concurrency limits in the layer ([`RateLimitLayer::concurrency`](crate::RateLimitLayer::concurrency)):
//! a lease per limit taken before the inner service is called, held —
//! renewed while it lasts — until the response body ends or is dropped,
//! or, for a protocol switch, until the service lets go of its [`InFlight`].

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::{Method, Response, StatusCode, header};
use slidegate::{ConcurrencyLimit, Decision, Lease, Store};
use tokio::task::AbortHandle;

use crate::Observer;
use crate::body_end::BodyEnd;
use crate::config::{Config, MissingKey};
use crate::response::{LimitedBody, internal_error, limited, unavailable, unidentified};

/// The keys of a request's concurrency limits (index and key), or the
/// answer when one is missing and rejected.
pub(crate) fn lease_keys<'a, S, B: LimitedBody>(
    config: &'a Config<S>,
    parts: &'a Parts,
) -> Result<Vec<(usize, String)>, Response<B>> {
    let mut keys = Vec::with_capacity(config.leases.len());
    for (i, keyed) in config.leases.iter().enumerate() {
        match keyed.key.extract(parts) {
            Some(key) if !key.is_empty() => keys.push((i, key.into_owned())),
            _ => match &keyed.missing {
                MissingKey::Shared(shared) => keys.push((i, Cow::into_owned(shared.clone()))),
                MissingKey::Skip => {}
                MissingKey::Reject => {
                    let why = match keyed.key.missing() {
                        Some(what) => format!("cannot identify the client: the request has no {what}"),
                        None => "cannot identify the client".to_owned(),
                    };
                    return Err(unidentified(config.grpc, &why));
                }
            },
        }
    }
    Ok(keys)
}

/// Takes a lease of each limit for its key, or answers: 429 when one is
/// refused (the leases taken are given back), 503 or 500 when the store
/// failed under the `fail` policy.
pub(crate) async fn acquire_all<S: Store, B: LimitedBody>(
    config: &Config<S>,
    keys: &[(usize, String)],
    json: bool,
) -> Result<Vec<Lease<S>>, Response<B>> {
    let mut leases = Vec::with_capacity(keys.len());
    for (i, key) in keys {
        let lease = match config.limiter.acquire(&config.leases[*i].limit, key).await {
            Ok(lease) => lease,
            Err(error) if error.is_store_failure() => return Err(unavailable(config.grpc)),
            Err(error) => {
                tracing::error!(target: "slidegate", %error, "a concurrency lease could not be taken");
                return Err(internal_error(config.grpc));
            }
        };
        if !lease.is_admitted() {
            return Err(refused(config, lease.decision(), json));
        }
        leases.push(lease);
    }
    Ok(leases)
}

/// The answer to a request over a concurrency limit: 429 with
/// `Retry-After` (until the oldest lease's ttl passes, at the latest).
fn refused<S, B: LimitedBody>(config: &Config<S>, denial: &Decision, json: bool) -> Response<B> {
    #[cfg(feature = "tonic")]
    if config.grpc {
        return crate::response::limited_grpc(denial, config.message.text(), StatusCode::TOO_MANY_REQUESTS);
    }
    limited(denial, &config.message, StatusCode::TOO_MANY_REQUESTS, json)
}

/// The concurrency leases a request holds, held — and renewed every third
/// of the shortest ttl — while any clone of it lives.
pub(crate) type Holding = Arc<dyn Any + Send + Sync>;

/// Holds `leases` (of `keys`, in order) from now on (`None` when there
/// are none).
pub(crate) fn hold<S: Store>(
    leases: Vec<Lease<S>>,
    config: &Config<S>,
    keys: &[(usize, String)],
) -> Option<Holding> {
    if leases.is_empty() {
        return None;
    }
    // Told here, with the leases' return in the same `Held`: every lease
    // told taken is told given back.
    let told = config.observer.clone().map(|observer| {
        let held: Vec<_> = leases.iter().zip(keys).filter(|(lease, _)| lease.is_held()).collect();
        for (lease, (_, key)) in &held {
            observer.acquired(lease.limit(), key, lease.decision());
        }
        (observer, held.into_iter().map(|(lease, (_, key))| (lease.limit().clone(), key.clone())).collect())
    });
    let leases = Arc::new(leases);
    let period = shortest_ttl(&leases) / 3;
    let renewer = tokio::runtime::Handle::try_current().ok().map(|runtime| {
        let held = Arc::downgrade(&leases);
        runtime
            .spawn(async move {
                loop {
                    tokio::time::sleep(period).await;
                    let Some(held) = held.upgrade() else { return };
                    for lease in held.iter() {
                        renew(lease).await;
                    }
                }
            })
            .abort_handle()
    });
    Some(Arc::new(Held { _leases: leases, renewer, told }))
}

async fn renew<S: Store>(lease: &Lease<S>) {
    match lease.renew().await {
        Ok(true) => {}
        Ok(false) => tracing::warn!(
            target: "slidegate",
            limit = lease.limit().name(),
            "a concurrency lease's ttl passed before its renewal: the request runs uncounted"
        ),
        Err(error) => tracing::warn!(target: "slidegate", %error, "a concurrency lease could not be renewed"),
    }
}

/// Leases and the task renewing them; dropped, the leases are given back.
struct Held<S: Store> {
    /// Held for its drop: the leases go back when the last holder goes.
    _leases: Arc<Vec<Lease<S>>>,
    renewer: Option<AbortHandle>,
    /// The observer told when the leases go back.
    told: Option<Told>,
}

/// An observer, and the leases (limit and key) to tell it of.
type Told = (Arc<dyn Observer>, Vec<(ConcurrencyLimit, String)>);

impl<S: Store> Drop for Held<S> {
    fn drop(&mut self) {
        if let Some(renewer) = &self.renewer {
            renewer.abort();
        }
        if let Some((observer, held)) = &self.told {
            for (limit, key) in held {
                observer.released(limit, key);
            }
        }
    }
}

/// A request's concurrency leases, in the extensions of a request asking
/// to switch protocols (an `Upgrade` header or `CONNECT`) when the layer
/// has [`concurrency`](crate::RateLimitLayer::concurrency) limits. The
/// leases are held while the response body lasts and while any clone of
/// this lives: a service that goes on serving the request after its
/// response — a WebSocket tunnel after its `101` — takes it out of the
/// request's extensions and keeps it until the tunnel closes, so the
/// tunnel counts as running until then.
#[derive(Clone)]
pub struct InFlight {
    /// Held for its drop (see [`Holding`]).
    pub(crate) _held: Holding,
}

impl fmt::Debug for InFlight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("InFlight")
    }
}

/// Whether a request asks to go on after its response: a protocol switch
/// (HTTP/1.1 `Upgrade`) or a tunnel (`CONNECT`, also HTTP/2's extended one).
pub(crate) fn goes_on(parts: &Parts) -> bool {
    parts.method == Method::CONNECT || parts.headers.contains_key(header::UPGRADE)
}

/// Holds `held` until `response`'s body ends or is dropped.
pub(crate) fn hold_until_done<B: LimitedBody>(response: Response<B>, held: Option<Holding>) -> Response<B> {
    let Some(held) = held else { return response };
    // The last holder: dropping it gives the leases back.
    let end = BodyEnd::new(move |_| drop(held));
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, body.on_end(end))
}

fn shortest_ttl<S: Store>(leases: &[Lease<S>]) -> Duration {
    leases
        .iter()
        .map(|l| l.limit().ttl())
        .min()
        .unwrap_or(Duration::from_secs(60))
        .max(Duration::from_millis(3))
}
