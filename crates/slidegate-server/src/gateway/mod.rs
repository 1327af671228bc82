//! Gateway mode: a rate-limiting reverse proxy. Requests are matched to a
//! route (host, path prefix, method), checked against the route's limits
//! by slidegate-tower's layer — its key extractors, its all-or-nothing
//! check and its 429 answers — and streamed to one of the route's
//! upstreams.
//!
//! * [`routing`]: the compiled routes and the service each connection runs;
//! * [`path`]: the one form of a request's path that is matched, keyed
//!   and forwarded; [`head`]: what else of a request head is refused;
//! * [`proxy`]: forwarding and upstream choice; [`response`]: waiting
//!   for an upstream's answer and passing it on, WebSocket tunnels;
//!   [`body`]: the bodies passed both ways;
//! * [`forward`]: hop-by-hop and forwarding headers;
//! * [`upstream_conns`]: the HTTP/1.1 connections kept to each upstream;
//! * [`conn`]: the cap on connections per client address;
//! * [`counter`]: the counter a limit charges, spelled as the service
//!   spells it for the same limit.
//!
//! The configuration ([`GatewayConfig`](crate::config::GatewayConfig)) is
//! reloaded with the rules; a bad file keeps the routes in force.

mod body;
mod conn;
mod counter;
mod decided;
mod forward;
mod head;
mod health;
mod path;
mod proxy;
mod redirect;
mod response;
mod routing;
mod tls;

pub(crate) use redirect::ToHttps;
mod upstream_conns;
mod upstream_io;
mod usage;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use slidegate::Limiter;
use slidegate_tower::headers::Families;

pub(crate) use conn::{ConnectionCounts, ConnectionSlot, Tasks};
pub(crate) use counter::DOMAIN;
pub(crate) use path::normalize as normalize_path;
pub(crate) use routing::{GatewayService, Table};

use crate::ServiceStore;
use crate::config::{ConfigErrors, GatewayConfig};
use crate::decide::stats::ServiceStats;

/// The gateway: its routes in force, shared by every connection; clones
/// share them.
#[derive(Clone)]
pub(crate) struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    table: ArcSwap<Table>,
    limiter: Limiter<ServiceStore>,
    families: Families,
    connections: Arc<ConnectionCounts>,
    /// The service's statistics: the gateway's decisions join the page's
    /// store latency, degraded answers and most limited identities.
    stats: Arc<ServiceStats>,
    /// How long a client may take to send a request's head.
    header_timeout: Duration,
}

impl Gateway {
    /// The gateway of `config`, deciding with `limiter`; a client must
    /// send a request's head within `header_timeout`.
    pub(crate) fn new(
        config: GatewayConfig,
        limiter: Limiter<ServiceStore>,
        families: Families,
        stats: Arc<ServiceStats>,
        header_timeout: Duration,
    ) -> Result<Gateway, ConfigErrors> {
        let table = Table::build(config, &limiter, families, &stats, None)?;
        Ok(Gateway {
            inner: Arc::new(Inner {
                table: ArcSwap::from_pointee(table),
                limiter,
                families,
                connections: Arc::default(),
                stats,
                header_timeout,
            }),
        })
    }

    /// The routes in force.
    pub(crate) fn current(&self) -> Arc<Table> {
        self.inner.table.load_full()
    }

    /// The statistics the gateway's decisions are counted in.
    pub(crate) fn stats(&self) -> &ServiceStats {
        &self.inner.stats
    }

    /// Compiles `config` to replace the routes in force (routes keeping
    /// their names keep their rates).
    pub(crate) fn build(&self, config: GatewayConfig) -> Result<Table, ConfigErrors> {
        let inner = &self.inner;
        // The listener speaks TLS or not from its start.
        if config.tls.is_some() != self.current().config.tls.is_some() {
            let now = if config.tls.is_some() { "adds" } else { "removes" };
            let message =
                format!("the file {now} `tls`: the listener turns HTTPS on or off only at a restart");
            return Err(ConfigErrors(vec![crate::config::ConfigError::whole(&config.file, message)]));
        }
        Table::build(config, &inner.limiter, inner.families, &inner.stats, Some(&self.current()))
    }

    /// Forgets the counters of the gateway's limits that count the
    /// descriptor `entries` of the domain `gateway` — `route=<route>,
    /// <key>=<value>`, or `<key>=<value>` for a gateway-wide limit — as an
    /// operator's reset. Returns how many limits it met and how many of
    /// their counters held something.
    ///
    /// # Errors
    ///
    /// The store's, when it failed.
    pub(crate) async fn reset(
        &self,
        entries: &[(String, String)],
    ) -> Result<(usize, usize), slidegate::Error> {
        let table = self.current();
        let (route, (key, value)) = match entries {
            [(route_key, route), key_value] if route_key == "route" => (Some(route.as_str()), key_value),
            [key_value] => (None, key_value),
            _ => return Ok((0, 0)),
        };
        let mut seen: Vec<&Arc<crate::config::Limit>> = Vec::new();
        let (mut matched, mut reset) = (0, 0);
        for configured in &table.config.routes {
            if route.is_some_and(|route| route != configured.name) {
                continue;
            }
            for limit in &configured.limits {
                let wanted = limit.gateway_wide == route.is_none() && limit.key.name() == *key;
                if !wanted || seen.iter().any(|s| Arc::ptr_eq(s, &limit.limit)) {
                    continue;
                }
                seen.push(&limit.limit);
                let Some(rule) = limit.rule() else { continue };
                matched += 1;
                let identity = counter::identity(limit, &configured.name, value);
                reset += usize::from(self.inner.limiter.reset(rule, &identity).await?);
            }
        }
        Ok((matched, reset))
    }

    /// Puts `table` in force; requests in flight finish on the routes
    /// they started on.
    pub(crate) fn install(&self, table: Table) {
        self.inner.table.store(Arc::new(table));
    }

    /// The routes in force as `/v1/gateway` shows them; with the rates of
    /// the last five minutes up to `now_s` for `/v1/stats`.
    pub(crate) fn view(&self, rates_until: Option<u64>) -> serde_json::Value {
        let table = self.current();
        let mut view = table.config.view();
        if let (Some(now), Some(routes)) = (rates_until, view["routes"].as_array_mut()) {
            for ((route, compiled), config) in routes.iter_mut().zip(&table.routes).zip(&table.config.routes)
            {
                let (admitted, limited) = compiled.rates.series(now);
                route["admitted"] = admitted.into();
                route["limited"] = limited.into();
                route["upstream"] = compiled.health.view(now);
                // What the budgets and `max_in_flight` limits hold.
                for (view, limit) in route["limits"].as_array_mut().into_iter().flatten().zip(&config.limits)
                {
                    view["usage"] = serde_json::json!(limit.limit.usage.snapshot());
                }
                let in_flight = route["max_in_flight"].as_array_mut().into_iter().flatten();
                for (view, limit) in in_flight.zip(&config.in_flight) {
                    view["usage"] = serde_json::json!(limit.usage.snapshot());
                }
            }
        }
        view
    }

    /// A new connection from `peer`: the service and server settings to
    /// run it with, and its slot under the per-address cap (`None` when
    /// `peer` already holds as many connections as it may). Its WebSocket
    /// tunnels run among `tasks`; `https`: it came over TLS.
    pub(crate) fn connection(
        &self,
        peer: SocketAddr,
        tasks: &Tasks,
        https: bool,
    ) -> Option<(GatewayService, auto::Builder<TokioExecutor>, Arc<ConnectionSlot>)> {
        let table = self.current();
        let settings = &table.config.settings;
        // Trusted proxies carry many clients' connections: no cap.
        let cap = if table.trust.trusts(peer.ip()) { 0 } else { settings.max_connections_per_ip };
        let slot = Arc::new(self.inner.connections.open(peer.ip(), cap)?);
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.inner.header_timeout)
            .max_buf_size(settings.max_header_bytes);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(settings.max_header_bytes).unwrap_or(u32::MAX));
        let home = conn::TunnelHome { tasks: Arc::clone(tasks), slot: Arc::clone(&slot), in_flight: None };
        Some((GatewayService::new(self.clone(), peer, home, https), builder, slot))
    }
}
