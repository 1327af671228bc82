//! Concurrency limits in the layer ([`RateLimitLayer::concurrency`](crate::RateLimitLayer::concurrency)):
//! a lease per limit taken before the inner service is called, held —
//! renewed while it lasts — until the response body ends or is dropped.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::{Response, StatusCode};
use slidegate::{Decision, Lease, Store};

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

/// Holds `leases` until `response`'s body ends or is dropped, renewing
/// them every third of the shortest ttl meanwhile (a long stream keeps
/// counting).
pub(crate) fn hold_until_done<S: Store, B: LimitedBody>(
    response: Response<B>,
    leases: Vec<Lease<S>>,
) -> Response<B> {
    if leases.is_empty() {
        return response;
    }
    let leases = Arc::new(leases);
    let period = shortest_ttl(&leases) / 3;
    let renewer = tokio::runtime::Handle::try_current().ok().map(|runtime| {
        let held = Arc::clone(&leases);
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                for lease in held.iter() {
                    match lease.renew().await {
                        Ok(true) => {}
                        Ok(false) => tracing::warn!(
                            target: "slidegate",
                            limit = lease.limit().name(),
                            "a concurrency lease's ttl passed before its renewal: the request runs uncounted"
                        ),
                        Err(error) => {
                            tracing::warn!(target: "slidegate", %error, "a concurrency lease could not be renewed")
                        }
                    }
                }
            }
        })
    });
    let end = BodyEnd::new(move |_| {
        if let Some(renewer) = renewer {
            renewer.abort();
        }
        // The last holder: dropping the leases gives them back.
        drop(leases);
    });
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
