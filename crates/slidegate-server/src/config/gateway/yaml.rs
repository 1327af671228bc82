//! The gateway file as written: what serde reads, every value spanned
//! for its line and column.

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::config::yaml::{LimitYaml, Scalar};

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
    pub(super) tls: Option<Spanned<TlsYaml>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TlsYaml {
    pub(super) certificates: Option<Vec<Spanned<CertificateYaml>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CertificateYaml {
    pub(super) cert_file: Option<Spanned<String>>,
    pub(super) key_file: Option<Spanned<String>>,
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
    pub(super) upstream_tls: Option<Spanned<UpstreamTlsYaml>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UpstreamTlsYaml {
    pub(super) ca_file: Option<Spanned<String>>,
    pub(super) cert_file: Option<Spanned<String>>,
    pub(super) key_file: Option<Spanned<String>>,
    pub(super) server_name: Option<Spanned<String>>,
}
