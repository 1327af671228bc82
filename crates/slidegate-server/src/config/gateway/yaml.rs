//! The gateway file as written: what serde reads, every value spanned
//! for its line and column.

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::config::yaml::{PenaltyYaml, Scalar};

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GatewayYaml {
    pub(super) trusted_proxies: Option<Vec<Spanned<String>>>,
    pub(super) client_ip_header: Option<Spanned<String>>,
    pub(super) ipv6_prefix: Option<Spanned<Scalar>>,
    pub(super) ban_status: Option<Spanned<Scalar>>,
    pub(super) message: Option<Spanned<String>>,
    pub(super) connect_timeout: Option<Spanned<String>>,
    pub(super) response_timeout: Option<Spanned<String>>,
    pub(super) upstream_down_for: Option<Spanned<String>>,
    pub(super) max_connections_per_ip: Option<Spanned<Scalar>>,
    pub(super) max_header_bytes: Option<Spanned<Scalar>>,
    pub(super) limits: Option<Vec<Spanned<LimitYaml>>>,
    pub(super) routes: Option<Spanned<Vec<Spanned<RouteYaml>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RouteYaml {
    pub(super) name: Option<Spanned<String>>,
    pub(super) host: Option<Spanned<String>>,
    pub(super) path_prefix: Option<Spanned<String>>,
    pub(super) methods: Option<Vec<Spanned<String>>>,
    pub(super) upstreams: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) strip_prefix: Option<bool>,
    pub(super) preserve_host: Option<bool>,
    pub(super) http2: Option<bool>,
    pub(super) limits: Option<Vec<Spanned<LimitYaml>>>,
}

/// A limit as written: the rules' fields (`requests_per_unit` with `unit`
/// or `window`, `algorithm`, `penalty`, `shadow_mode`), a `key` and
/// `on_missing`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitYaml {
    pub(super) key: Option<Spanned<String>>,
    pub(super) on_missing: Option<Spanned<String>>,
    pub(super) name: Option<Spanned<String>>,
    pub(super) unit: Option<Spanned<String>>,
    pub(super) requests_per_unit: Option<Spanned<Scalar>>,
    pub(super) window: Option<Spanned<String>>,
    pub(super) algorithm: Option<Spanned<String>>,
    pub(super) penalty: Option<Spanned<PenaltyYaml>>,
    pub(super) shadow_mode: Option<bool>,
}
